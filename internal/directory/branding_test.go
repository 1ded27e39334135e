package directory_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"runtime"
	"strings"
	"testing"

	"github.com/payreq/payreq/internal/directory"
)

func encodePNG(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A PNG whose header claims 20,000 × 20,000 pixels is refused from its
// header: refusing it allocates far less than its pixels would take
// (1.6 GB as RGBA).
func TestLogoBombRefusedBeforeDecoding(t *testing.T) {
	p := encodePNG(t, 1, 1)
	ihdr := append([]byte{}, p[16:29]...)
	binary.BigEndian.PutUint32(ihdr[0:], 20000)
	binary.BigEndian.PutUint32(ihdr[4:], 20000)
	chunk := binary.BigEndian.AppendUint32(nil, 13)
	chunk = append(append(chunk, "IHDR"...), ihdr...)
	chunk = binary.BigEndian.AppendUint32(chunk, crc32.ChecksumIEEE(append([]byte("IHDR"), ihdr...)))
	bomb := append(append(append([]byte{}, p[:8]...), chunk...), p[33:]...)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := directory.ReencodeLogo(context.Background(), bomb)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "20000 × 20000") {
		t.Fatalf("the bomb: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("refusing the bomb allocated %d bytes", n)
	}
}

// A JPEG is taken and kept as a PNG; one narrow enough keeps its size.
func TestLogoJPEGKeptAsPNG(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 300, 150))
	for x := 0; x < 300; x++ {
		img.Set(x, x%150, color.RGBA{200, 10, 10, 255})
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	l, err := directory.ReencodeLogo(context.Background(), b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(l.PNG))
	if err != nil || format != "png" || cfg.Width != 300 || cfg.Height != 150 || l.Width != 300 {
		t.Errorf("kept %s %dx%d (%v)", format, cfg.Width, cfg.Height, err)
	}
}

// The contrast with white, as WCAG 2 computes it, decides the accent
// colour; the ratio named is never rounded up to the minimum.
func TestAccentColor(t *testing.T) {
	for _, c := range []struct {
		in, kept, refusal string
	}{
		{"#1F5FBF", "#1f5fbf", ""},
		{"#000000", "#000000", ""},
		{"", "", ""},
		{"#ffffff", "", "1.0:1"},
		{"#949494", "", "3.0:1"},
		{"#777777", "", "4.4:1"},   // 4.48: not shown as 4.5
		{"#767676", "#767676", ""}, // 4.54
		{"1f5fbf", "", "six hexadecimal digits"},
	} {
		got, problem := directory.AccentColor(c.in)
		if c.refusal == "" && (problem != "" || got != c.kept) {
			t.Errorf("%q: %q, %q; want %q", c.in, got, problem, c.kept)
		}
		if c.refusal != "" && !strings.Contains(problem, c.refusal) {
			t.Errorf("%q: %q, want a refusal naming %q", c.in, problem, c.refusal)
		}
	}
}
