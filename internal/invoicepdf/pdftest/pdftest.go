// Package pdftest reads payreq's PDF documents back in tests: their text
// (ledongthuc/pdf), and the QR code drawn on them, decoded from the
// squares on the page (gozxing).
package pdftest

import (
	"bytes"
	"image"
	"image/color"
	"math"
	"strings"
	"testing"

	"github.com/ledongthuc/pdf"
	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"
)

// Doc is a PDF as read back.
type Doc struct {
	// Text is the text of every page, a line per piece of text drawn.
	Text  string
	Pages int
	// Rects are the filled rectangles drawn, in points from the page's
	// lower left corner (payreq's documents draw only the QR code so).
	Rects []pdf.Rect
	// PageSize is the first page's size in points.
	PageSize [2]float64
}

// Read parses a PDF and fails the test unless it is one.
func Read(t testing.TB, b []byte) Doc {
	t.Helper()
	if !bytes.HasPrefix(b, []byte("%PDF-")) {
		t.Fatalf("not a PDF: %.40q", b)
	}
	r, err := pdf.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("read PDF: %v", err)
	}
	d := Doc{Pages: r.NumPage()}
	var text strings.Builder
	for i := 1; i <= d.Pages; i++ {
		p := r.Page(i)
		if i == 1 {
			box := p.V.Key("MediaBox")
			if box.IsNull() {
				box = p.V.Key("Parent").Key("MediaBox")
			}
			d.PageSize = [2]float64{box.Index(2).Float64(), box.Index(3).Float64()}
		}
		s, err := p.GetPlainText(nil)
		if err != nil {
			t.Fatalf("text of page %d: %v", i, err)
		}
		text.WriteString(s)
		text.WriteString("\n")
		d.Rects = append(d.Rects, p.Content().Rect...)
	}
	d.Text = text.String()
	return d
}

// QR decodes the QR code drawn on the document's pages (its rectangles,
// painted black on white at 4 pixels a point) and fails the test when
// there is none. It reads the modules as drawn (gozxing's pure-barcode
// mode): gozxing's finder-pattern search misses about one valid code in
// fifty (of 33-module codes of pay links, yeqown's and boombuler's
// encodings of the same link alike), which made tests fail by chance.
func (d Doc) QR(t testing.TB) string {
	t.Helper()
	const scale = 4
	w, h := int(d.PageSize[0]*scale), int(d.PageSize[1]*scale)
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	for _, r := range d.Rects {
		x0, x1 := math.Min(r.Min.X, r.Max.X), math.Max(r.Min.X, r.Max.X)
		y0, y1 := math.Min(r.Min.Y, r.Max.Y), math.Max(r.Min.Y, r.Max.Y)
		for y := int(math.Round(y0 * scale)); y < int(math.Round(y1*scale)); y++ {
			for x := int(math.Round(x0 * scale)); x < int(math.Round(x1*scale)); x++ {
				if x >= 0 && x < w && y >= 0 && y < h {
					img.SetGray(x, h-1-y, color.Gray{}) // PDF's y grows upward
				}
			}
		}
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := qrcode.NewQRCodeReader().Decode(bmp, map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_PURE_BARCODE: true})
	if err != nil {
		t.Fatalf("no QR code on the page: %v", err)
	}
	return res.GetText()
}
