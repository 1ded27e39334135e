// Package invoicepdf renders an invoice, and the receipt of a payment
// toward it, as a PDF document: who bills, the customer, the lines, the
// totals, the payments, the balance and due date, and, while the invoice
// can be paid, its pay link with the link's QR code. The API (GET
// /payment-requests/{id} with Accept: application/pdf) and the pay page
// serve the same documents.
//
// Documents are drawn with signintech/gopdf in the Go fonts (embedded, so
// no font is read from the host, and subset into each document); the QR
// code (yeqown/go-qrcode) is drawn as vector squares, sharp at any zoom.
// Nothing runs outside the process (no browser, no converter).
//
// The cost of a document is bounded: an invoice has at most 500 lines and
// each text is wrapped in one pass, so a document takes a few milliseconds
// of CPU; at most GOMAXPROCS documents are drawn at once, and a request
// waits for a turn no longer than its context allows.
package invoicepdf

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"time"
	"unicode"

	"github.com/cockroachdb/apd/v3"
	"github.com/signintech/gopdf"
	qrcode "github.com/yeqown/go-qrcode/v2"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"

	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/optional"
)

// ContentType is the media type of the documents.
const ContentType = "application/pdf"

// turns bounds the documents drawn at once: drawing is all CPU.
var turns = make(chan struct{}, runtime.GOMAXPROCS(0))

// take waits for a turn to draw, as long as ctx allows.
func take(ctx context.Context) (release func(), err error) {
	select {
	case turns <- struct{}{}:
		return func() { <-turns }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("invoicepdf: no turn to draw a document: %w", ctx.Err())
	}
}

// Invoice writes the invoice as a PDF to w. link is its pay link, shown
// with its QR code while the invoice is open or part-paid. inv must be
// read in full with who bills (invoice.Store.Document, ByPayToken).
func Invoice(ctx context.Context, w io.Writer, inv invoice.Invoice, link string) error {
	release, err := take(ctx)
	if err != nil {
		return err
	}
	defer release()
	d, err := newDoc("Invoice " + inv.InvoiceNumber + " from " + billerName(inv))
	if err != nil {
		return err
	}
	zone := inv.Biller.Zone()
	err = d.header(inv, "Invoice", [][2]string{
		{"Invoice", inv.InvoiceNumber},
		{"Date", day(inv.CreatedAt.In(zone))},
		{"Due", dueDate(inv)},
		{"PO number", optional.Value(inv.PONumber)},
		{"Status", inv.Status.Label()},
	})
	if err != nil {
		return err
	}
	d.billTo(inv)
	d.lines(inv)
	d.totals(inv)
	d.payments(inv, zone)
	if m := optional.Value(inv.Memo); m != "" {
		d.gap(8)
		d.paragraph(m, regular, 10)
	}
	switch {
	case inv.Status.Payable() && !inv.Biller.Suspended:
		if err := d.payLink(link); err != nil {
			return err
		}
	case inv.Status == invoice.Paid && inv.PaidAt != nil:
		d.gap(12)
		d.paragraph("Paid in full on "+day(inv.PaidAt.In(zone))+". Nothing more is due. Thank you.", bold, 11)
	case inv.Status == invoice.Cancelled && inv.CancelledAt != nil:
		d.gap(12)
		d.paragraph("This invoice was cancelled on "+day(inv.CancelledAt.In(zone))+". No payment is due.", bold, 11)
	}
	d.footer(inv)
	return d.write(w)
}

// Receipt writes the receipt of payment p toward inv as a PDF to w:
// balanceAfter is the balance right after it.
func Receipt(ctx context.Context, w io.Writer, inv invoice.Invoice, p invoice.Payment, balanceAfter apd.Decimal) error {
	return receipt(ctx, w, inv, "Receipt", p.PaidAt, [][2]string{
		{"Amount paid", invoice.Money(p.Amount)},
		{"Paid by", MethodText(p)},
		{"Name on card", optional.Value(p.PayerName)},
		{"Reference", reference(p)},
		{"Balance after this payment", invoice.Money(balanceAfter)},
	}, "Payment received. Thank you.")
}

// RefundReceipt writes the receipt of a refund of amount, approved at
// `at` with the processor's reference retRef, of the card sale toward
// inv, as a PDF to w.
func RefundReceipt(ctx context.Context, w io.Writer, inv invoice.Invoice, sale invoice.Payment, amount apd.Decimal, at time.Time, retRef string) error {
	return receipt(ctx, w, inv, "Refund receipt", at, [][2]string{
		{"Amount refunded", invoice.Money(amount)},
		{"Refunded to", MethodText(sale)},
		{"Name on card", optional.Value(sale.PayerName)},
		{"Reference", retRef},
		{"Of the payment of", invoice.Money(sale.Amount) + " on " + sale.PaidAt.In(inv.Biller.Zone()).Format("January 2, 2006")},
	}, "Refund made. It may take a few days to reach the card.")
}

// receipt draws a receipt: who bills, the customer, its facts (those
// without a value left out) and a closing line.
func receipt(ctx context.Context, w io.Writer, inv invoice.Invoice, title string, at time.Time, facts [][2]string, closing string) error {
	release, err := take(ctx)
	if err != nil {
		return err
	}
	defer release()
	d, err := newDoc(title + " for invoice " + inv.InvoiceNumber + " from " + billerName(inv))
	if err != nil {
		return err
	}
	zone := inv.Biller.Zone()
	if err := d.header(inv, title, [][2]string{
		{"Invoice", inv.InvoiceNumber},
		{"Date", at.In(zone).Format("January 2, 2006, 3:04 PM MST")},
	}); err != nil {
		return err
	}
	d.billTo(inv)
	d.gap(6)
	for _, f := range facts {
		if f[1] == "" {
			continue
		}
		d.need(lineHeight(11))
		d.text(margin, d.y, f[0], regular, 11)
		d.textRight(pageW-margin, d.y, f[1], bold, 11)
		d.y += lineHeight(11)
	}
	d.gap(12)
	d.paragraph(closing, bold, 11)
	d.footer(inv)
	return d.write(w)
}

// Disposition is the Content-Disposition of a document named name (an
// invoice number, say): an attachment, its file name of letters, digits,
// dots, dashes and underscores only, whatever the name holds.
func Disposition(name string) string {
	safe := strings.Map(func(r rune) rune {
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '-' || r == '_') {
			return r
		}
		return '_'
	}, name)
	return `attachment; filename="` + safe + `.pdf"`
}

// MethodText says how a payment was made: "Visa ending in 1111", "Check".
func MethodText(p invoice.Payment) string {
	switch p.Method {
	case invoice.MethodCard, "":
		card := "Card"
		if b := optional.Value(p.CardBrand); b != "" {
			card = b
		}
		if l := optional.Value(p.LastFour); l != "" {
			card += " ending in " + l
		}
		return card
	case invoice.MethodCash:
		return "Cash"
	case invoice.MethodCheck:
		return "Check"
	case invoice.MethodBankTransfer:
		return "Bank transfer"
	}
	return "Other"
}

func reference(p invoice.Payment) string {
	if p.Reference != nil {
		return *p.Reference
	}
	return optional.Value(p.RetRef)
}

// Page geometry, in points: US Letter with margins of 54 (3/4 inch).
const (
	pageW, pageH = 612.0, 792.0
	margin       = 54.0
	bottom       = pageH - margin
)

const (
	regular = "regular"
	bold    = "bold"
)

type doc struct {
	pdf *gopdf.GoPdf
	y   float64
	// widths caches each rune's width per font and size: wrapping
	// measures every rune once.
	widths map[widthKey]float64
	font   string
	size   float64
}

type widthKey struct {
	font string
	size float64
	r    rune
}

func newDoc(title string) (*doc, error) {
	pdf := &gopdf.GoPdf{}
	pdf.Start(gopdf.Config{PageSize: *gopdf.PageSizeLetter, Unit: gopdf.UnitPT})
	pdf.SetInfo(gopdf.PdfInfo{Title: clean(title), Producer: "payreq", Creator: "payreq"})
	if err := pdf.AddTTFFontData(regular, goregular.TTF); err != nil {
		return nil, fmt.Errorf("invoicepdf: font: %w", err)
	}
	if err := pdf.AddTTFFontData(bold, gobold.TTF); err != nil {
		return nil, fmt.Errorf("invoicepdf: font: %w", err)
	}
	d := &doc{pdf: pdf, widths: map[widthKey]float64{}}
	d.newPage()
	return d, nil
}

func (d *doc) newPage() {
	d.pdf.AddPage()
	d.y = margin
}

// need starts a new page unless h more points fit on this one.
func (d *doc) need(h float64) {
	if d.y+h > bottom {
		d.newPage()
	}
}

func (d *doc) gap(h float64) { d.y += h }

func lineHeight(size float64) float64 { return size * 1.35 }

func (d *doc) setFont(font string, size float64) {
	if d.font == font && d.size == size {
		return
	}
	// Both fonts are added in newDoc: setting one cannot fail.
	_ = d.pdf.SetFont(font, "", size)
	d.font, d.size = font, size
}

// width is the width of s in the current font, each rune measured once.
func (d *doc) width(s string) float64 {
	w := 0.0
	for _, r := range s {
		k := widthKey{d.font, d.size, r}
		rw, ok := d.widths[k]
		if !ok {
			rw, _ = d.pdf.MeasureTextWidth(string(r))
			d.widths[k] = rw
		}
		w += rw
	}
	return w
}

// text draws s with its top left at x, y.
func (d *doc) text(x, y float64, s, font string, size float64) {
	s = clean(s)
	if s == "" {
		return
	}
	d.setFont(font, size)
	d.pdf.SetXY(x, y)
	_ = d.pdf.Cell(nil, s) // the fonts are set: drawing text cannot fail
}

// textRight draws s ending at x.
func (d *doc) textRight(x, y float64, s, font string, size float64) {
	s = clean(s)
	d.setFont(font, size)
	d.text(x-d.width(s), y, s, font, size)
}

// wrap breaks s into lines at most w wide, at spaces where it can, inside
// words where a word alone is wider; each rune is measured once.
func (d *doc) wrap(s string, w float64, font string, size float64) []string {
	d.setFont(font, size)
	var lines []string
	for _, para := range strings.Split(s, "\n") {
		para = clean(para)
		var line []rune
		lineW := 0.0
		lastSpace := -1
		for _, r := range para {
			rw := d.width(string(r))
			if lineW+rw > w && len(line) > 0 {
				cut := len(line)
				if lastSpace > 0 {
					cut = lastSpace
				}
				lines = append(lines, strings.TrimRight(string(line[:cut]), " "))
				rest := line[cut:]
				if lastSpace > 0 {
					rest = rest[1:] // the space itself
				}
				line = append([]rune(nil), rest...)
				lineW = d.width(string(line))
				lastSpace = -1
			}
			if r == ' ' {
				lastSpace = len(line)
			}
			line = append(line, r)
			lineW += rw
		}
		lines = append(lines, string(line))
	}
	return lines
}

// paragraph draws s wrapped across the page's width.
func (d *doc) paragraph(s, font string, size float64) {
	for _, l := range d.wrap(s, pageW-2*margin, font, size) {
		d.need(lineHeight(size))
		d.text(margin, d.y, l, font, size)
		d.y += lineHeight(size)
	}
}

// rule draws a horizontal line across the page at y.
func (d *doc) rule(y float64) {
	d.pdf.SetLineWidth(0.5)
	d.pdf.SetStrokeColor(160, 160, 160)
	d.pdf.Line(margin, y, pageW-margin, y)
}

// header draws who bills on the left, the document's title and facts on
// the right.
// logoHeight and logoWidth bound the logo drawn above the business's name.
const logoHeight, logoWidth = 48.0, 200.0

func (d *doc) header(inv invoice.Invoice, title string, facts [][2]string) error {
	b := inv.Biller
	top := d.y
	if l := b.Branding.Logo; l != nil && len(l.PNG) > 0 && l.Width > 0 && l.Height > 0 {
		h := logoHeight
		w := h * float64(l.Width) / float64(l.Height)
		if w > logoWidth {
			w, h = logoWidth, logoWidth*float64(l.Height)/float64(l.Width)
		}
		img, err := gopdf.ImageHolderByBytes(l.PNG)
		if err != nil {
			return fmt.Errorf("invoicepdf: logo: %w", err)
		}
		if err := d.pdf.ImageByHolder(img, margin, d.y, &gopdf.Rect{W: w, H: h}); err != nil {
			return fmt.Errorf("invoicepdf: logo: %w", err)
		}
		d.y += h + 8
	}
	d.text(margin, d.y, billerName(inv), bold, 16)
	d.y += lineHeight(16)
	var lines []string
	if l := b.LegalName(); l != "" {
		lines = append(lines, l)
	}
	lines = append(lines, b.Address...)
	if b.Phone != "" {
		lines = append(lines, "Phone: "+b.Phone)
	}
	if b.Email != "" {
		lines = append(lines, "Email: "+b.Email)
	}
	for _, l := range lines {
		for _, part := range d.wrap(l, 280, regular, 10) {
			d.text(margin, d.y, part, regular, 10)
			d.y += lineHeight(10)
		}
	}
	left := d.y
	d.y = top
	d.textRight(pageW-margin, d.y, strings.ToUpper(title), bold, 20)
	d.y += lineHeight(20)
	for _, f := range facts {
		if f[1] == "" {
			continue
		}
		d.text(pageW-margin-220, d.y, f[0], regular, 10)
		d.textRight(pageW-margin, d.y, f[1], bold, 10)
		d.y += lineHeight(10)
	}
	d.y = max(d.y, left) + 12
	d.rule(d.y)
	d.y += 10
	return nil
}

// footer draws the business's invoice footer, when it has one.
func (d *doc) footer(inv invoice.Invoice) {
	f := inv.Biller.Branding.InvoiceFooter
	if f == "" {
		return
	}
	d.gap(16)
	d.need(lineHeight(9) + 10)
	d.rule(d.y)
	d.y += 10
	for _, line := range strings.Split(f, "\n") {
		d.paragraph(line, regular, 9)
	}
}

// billTo draws the customer.
func (d *doc) billTo(inv invoice.Invoice) {
	d.text(margin, d.y, "Bill to", bold, 10)
	d.y += lineHeight(10)
	for _, l := range []string{optional.Value(inv.CustomerName), optional.Value(inv.CustomerCompany), inv.CustomerEmail, optional.Value(inv.CustomerPhone)} {
		if strings.TrimSpace(l) == "" {
			continue
		}
		for _, part := range d.wrap(l, pageW-2*margin, regular, 10) {
			d.need(lineHeight(10))
			d.text(margin, d.y, part, regular, 10)
			d.y += lineHeight(10)
		}
	}
	d.y += 8
}

// The lines table's columns: description, then the right edges of
// quantity, unit cost, tax rate and total.
const (
	descW   = 230.0
	qtyEnd  = margin + descW + 50
	unitEnd = qtyEnd + 80
	taxEnd  = unitEnd + 60
	totEnd  = pageW - margin
)

func (d *doc) linesHeader() {
	d.text(margin, d.y, "Description", bold, 10)
	d.textRight(qtyEnd, d.y, "Qty", bold, 10)
	d.textRight(unitEnd, d.y, "Unit cost", bold, 10)
	d.textRight(taxEnd, d.y, "Tax", bold, 10)
	d.textRight(totEnd, d.y, "Total", bold, 10)
	d.y += lineHeight(10) + 2
	d.rule(d.y - 1)
	d.y += 3
}

func (d *doc) lines(inv invoice.Invoice) {
	if len(inv.Lines) == 0 {
		return
	}
	d.need(3 * lineHeight(10))
	d.linesHeader()
	for _, l := range inv.Lines {
		desc := d.wrap(l.Description, descW-8, regular, 10)
		h := float64(len(desc)) * lineHeight(10)
		if d.y+h > bottom {
			d.newPage()
			d.linesHeader()
		}
		top := d.y
		for _, part := range desc {
			d.text(margin, d.y, part, regular, 10)
			d.y += lineHeight(10)
		}
		q := invoice.Plain(l.Quantity)
		d.textRight(qtyEnd, top, q.Text('f'), regular, 10)
		d.textRight(unitEnd, top, invoice.UnitMoney(l.UnitCost), regular, 10)
		if l.TaxRate != nil {
			d.textRight(taxEnd, top, invoice.Percent(*l.TaxRate), regular, 10)
		}
		d.textRight(totEnd, top, invoice.Money(invoice.LineTotal(l)), regular, 10)
		d.y += 3
	}
	d.rule(d.y)
	d.y += 6
}

func (d *doc) totals(inv invoice.Invoice) {
	var rows [][3]string
	if len(inv.Lines) > 0 {
		rows = append(rows, [3]string{"Subtotal", invoice.Money(inv.Subtotal()), regular}, [3]string{"Tax", invoice.Money(inv.TaxAmount), regular})
	}
	rows = append(rows, [3]string{"Total", invoice.Money(inv.Amount), regular}, [3]string{"Paid", invoice.Money(inv.AmountPaid), regular})
	if inv.AmountRefunded.Sign() > 0 {
		rows = append(rows, [3]string{"Refunded", invoice.Money(inv.AmountRefunded), regular})
	}
	if inv.Status != invoice.Cancelled {
		rows = append(rows, [3]string{"Balance due", invoice.Money(inv.Balance()), bold})
	}
	for _, r := range rows {
		d.need(lineHeight(11))
		d.text(unitEnd-150, d.y, r[0], r[2], 11)
		d.textRight(totEnd, d.y, r[1], r[2], 11)
		d.y += lineHeight(11)
	}
	if due := dueDate(inv); due != "" && inv.Status.Payable() {
		d.need(lineHeight(10))
		d.textRight(totEnd, d.y, "Due "+due, regular, 10)
		d.y += lineHeight(10)
	}
}

func (d *doc) payments(inv invoice.Invoice, zone *time.Location) {
	if len(inv.Payments) == 0 {
		return
	}
	d.gap(10)
	d.need(3 * lineHeight(10))
	d.text(margin, d.y, "Payments", bold, 11)
	d.y += lineHeight(11) + 2
	for _, p := range inv.Payments {
		d.need(lineHeight(10))
		d.text(margin, d.y, day(p.PaidAt.In(zone)), regular, 10)
		what := MethodText(p)
		if ref := reference(p); ref != "" {
			what += ", reference " + ref
		}
		parts := d.wrap(what, 300, regular, 10)
		d.textRight(totEnd, d.y, invoice.Money(p.Amount), regular, 10)
		for _, part := range parts {
			d.need(lineHeight(10))
			d.text(margin+120, d.y, part, regular, 10)
			d.y += lineHeight(10)
		}
	}
}

// qrModule is the side of one module of the QR code, in points.
const qrModule = 2.5

// payLink draws the pay link and its QR code.
func (d *doc) payLink(link string) error {
	q, err := qrcode.NewWith(link, qrcode.WithErrorCorrectionLevel(qrcode.ErrorCorrectionMedium))
	if err != nil {
		return fmt.Errorf("invoicepdf: QR code of the pay link: %w", err)
	}
	var m matrix
	if err := q.Save(&m); err != nil {
		return fmt.Errorf("invoicepdf: QR code of the pay link: %w", err)
	}
	side := float64(len(m.bits)) * qrModule
	d.gap(16)
	d.need(side + 4*qrModule + 4*lineHeight(11))
	d.text(margin, d.y, "Pay online", bold, 12)
	d.y += lineHeight(12)
	d.paragraph("Scan the code, or open this address:", regular, 10)
	d.paragraph(link, regular, 10)
	// A quiet zone of four modules above the code, and its corner on a
	// whole point, so that every module's edges are exact in the document.
	d.y = math.Ceil(d.y + 4*qrModule)
	// Dark modules, a run of them in a row drawn as one rectangle.
	d.pdf.SetFillColor(0, 0, 0)
	for row, bits := range m.bits {
		for col := 0; col < len(bits); {
			if !bits[col] {
				col++
				continue
			}
			start := col
			for col < len(bits) && bits[col] {
				col++
			}
			d.pdf.RectFromUpperLeftWithStyle(margin+float64(start)*qrModule, d.y+float64(row)*qrModule,
				float64(col-start)*qrModule, qrModule, "F")
		}
	}
	d.y += side
	return nil
}

// matrix receives the QR code's modules (a qrcode.Writer).
type matrix struct{ bits [][]bool }

func (m *matrix) Write(mat qrcode.Matrix) error {
	m.bits = mat.Bitmap()
	return nil
}

func (m *matrix) Close() error { return nil }

func (d *doc) write(w io.Writer) error {
	if _, err := d.pdf.WriteTo(w); err != nil {
		return fmt.Errorf("invoicepdf: write: %w", err)
	}
	return nil
}

func billerName(inv invoice.Invoice) string {
	if n := strings.TrimSpace(inv.Biller.Name()); n != "" {
		return n
	}
	return "Your merchant"
}

func dueDate(inv invoice.Invoice) string {
	if inv.DueDate == nil {
		return ""
	}
	return inv.DueDate.Format("January 2, 2006")
}

func day(t time.Time) string { return t.Format("January 2, 2006") }

// clean makes text drawable: control characters (a tab, a line break
// inside a one-line field) become spaces; text is otherwise drawn as
// stored, a rune the fonts lack as a space.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\uFFFD' {
			return ' '
		}
		return r
	}, s)
}
