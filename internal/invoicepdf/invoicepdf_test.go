package invoicepdf_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"

	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/invoicepdf"
	"github.com/payreq/payreq/internal/invoicepdf/pdftest"
)

func dec(s string) apd.Decimal {
	d, _, err := apd.NewFromString(s)
	if err != nil {
		panic(err)
	}
	return *d
}

func ptr[T any](v T) *T { return &v }

// sample is a part-paid invoice of n lines, each 1 × 1.00, with one card
// payment and one recorded payment.
func sample(n int) invoice.Invoice {
	due := time.Date(2026, 3, 31, 0, 0, 0, 0, time.UTC)
	inv := invoice.Invoice{
		ID: uuid.New(), InvoiceNumber: "INV-PDF-7", Amount: dec(fmt.Sprintf("%d.00", n)),
		AmountPaid: dec("1.50"), AmountRefunded: dec("0.00"), CustomerName: ptr("Zoë Whitfield"),
		CustomerCompany: ptr("Whitfield Catering"), CustomerEmail: "zoe@example.com", DueDate: &due,
		Status: invoice.PartPaid, CreatedAt: time.Date(2026, 3, 1, 15, 0, 0, 0, time.UTC),
		Memo: ptr("Thank you for your business.\tSee you soon."),
		Biller: directory.Biller{Organization: "Bluebonnet Bakery LLC", Location: "Downtown", ReceiptName: "Bluebonnet Bakery",
			Address: []string{"12 Main St", "Austin, TX 78701"}, Phone: "(512) 555-0100", TimeZone: "America/Chicago"},
	}
	for i := range n {
		inv.Lines = append(inv.Lines, invoice.Line{Description: fmt.Sprintf("Line item number %d with a description long enough to wrap once it is set in a column of the table", i+1),
			Quantity: dec("1"), UnitCost: dec("1.00")})
	}
	inv.Payments = []invoice.Payment{
		{ID: uuid.New(), Amount: dec("1.00"), Method: invoice.MethodCard, CardBrand: ptr("Visa"), LastFour: ptr("1111"),
			RetRef: ptr("343005123105"), PaidAt: inv.CreatedAt.Add(time.Hour)},
		{ID: uuid.New(), Amount: dec("0.50"), Method: invoice.MethodCheck, Reference: ptr("Check 1042"),
			PaidAt: inv.CreatedAt.Add(48 * time.Hour)},
	}
	return inv
}

// The invoice reads back as text: who bills, the customer, the number,
// every line, the totals, the payments and the due date; its QR code,
// decoded from the squares drawn, is the pay link.
func TestInvoiceReadsBack(t *testing.T) {
	inv := sample(3)
	link := "http://127.0.0.1:8080/pay/q1V7cX9mB3nZ5kL8wR2tY6pD4hF0jS"
	var buf bytes.Buffer
	if err := invoicepdf.Invoice(context.Background(), &buf, inv, link); err != nil {
		t.Fatal(err)
	}
	doc := pdftest.Read(t, buf.Bytes())
	for _, want := range []string{"Bluebonnet Bakery", "Bluebonnet Bakery LLC", "12 Main St", "(512) 555-0100",
		"INVOICE", "INV-PDF-7", "Zoë Whitfield", "Whitfield Catering", "zoe@example.com",
		"Line item number 1", "Line item number 3", "$3.00", "Balance due", "$1.50", "March 31, 2026",
		"Visa ending in 1111", "Check, reference Check 1042", "Thank you for your business. See you soon.", link} {
		if !strings.Contains(doc.Text, want) {
			t.Errorf("the PDF's text lacks %q:\n%s", want, doc.Text)
		}
	}
	if got := doc.QR(t); got != link {
		t.Errorf("QR code %q, want the pay link %q", got, link)
	}
}

// The QR code reads back wherever the page puts it, whatever the link:
// every count of lines from 1 to 7 and memos from none to 600 characters
// move it down the page (each decode takes about a second under the race
// detector, so eight places rather than forty).
func TestQRCodeOfManyLinks(t *testing.T) {
	for i := range 8 {
		inv := sample(1 + i%7)
		inv.Memo = ptr(strings.Repeat("memo ", i*17))
		link := "http://127.0.0.1:8080/pay/" + strings.ReplaceAll(uuid.NewString(), "-", "")[:22]
		var buf bytes.Buffer
		if err := invoicepdf.Invoice(context.Background(), &buf, inv, link); err != nil {
			t.Fatal(err)
		}
		if got := pdftest.Read(t, buf.Bytes()).QR(t); got != link {
			t.Fatalf("QR code %q, want %q", got, link)
		}
	}
}

// A paid invoice says so and has no pay link or QR code.
func TestPaidInvoiceHasNoPayLink(t *testing.T) {
	inv := sample(2)
	paid := inv.CreatedAt.Add(72 * time.Hour)
	inv.Status, inv.AmountPaid, inv.PaidAt = invoice.Paid, inv.Amount, &paid
	var buf bytes.Buffer
	if err := invoicepdf.Invoice(context.Background(), &buf, inv, "http://x.test/pay/abc"); err != nil {
		t.Fatal(err)
	}
	doc := pdftest.Read(t, buf.Bytes())
	if !strings.Contains(doc.Text, "Paid in full on March 4, 2026") || strings.Contains(doc.Text, "/pay/abc") {
		t.Errorf("paid invoice text:\n%s", doc.Text)
	}
	if len(doc.Rects) != 0 {
		t.Errorf("a paid invoice has %d squares of a QR code", len(doc.Rects))
	}
}

// 500 lines (the most an invoice has) go onto several pages, every line
// there once, the table's header on each page.
func TestFiveHundredLines(t *testing.T) {
	inv := sample(500)
	var buf bytes.Buffer
	if err := invoicepdf.Invoice(context.Background(), &buf, inv, "http://x.test/pay/abc"); err != nil {
		t.Fatal(err)
	}
	doc := pdftest.Read(t, buf.Bytes())
	if doc.Pages < 10 {
		t.Errorf("%d pages for 500 lines", doc.Pages)
	}
	for _, n := range []int{1, 250, 500} {
		if c := strings.Count(doc.Text, fmt.Sprintf("Line item number %d with", n)); c != 1 {
			t.Errorf("line %d appears %d times", n, c)
		}
	}
	if c := strings.Count(doc.Text, "Unit cost"); c != doc.Pages-1 && c != doc.Pages {
		t.Errorf("table header on %d of %d pages", c, doc.Pages)
	}
}

// A receipt says what was paid, how, and the balance after it.
func TestReceipt(t *testing.T) {
	inv := sample(2)
	var buf bytes.Buffer
	if err := invoicepdf.Receipt(context.Background(), &buf, inv, inv.Payments[0], dec("1.00")); err != nil {
		t.Fatal(err)
	}
	doc := pdftest.Read(t, buf.Bytes())
	for _, want := range []string{"RECEIPT", "INV-PDF-7", "Bluebonnet Bakery", "$1.00", "Visa ending in 1111", "343005123105",
		"Balance after this payment", "March 1, 2026, 10:00 AM CST"} {
		if !strings.Contains(doc.Text, want) {
			t.Errorf("the receipt's text lacks %q:\n%s", want, doc.Text)
		}
	}
}

// Text the fonts cannot draw (emoji, control characters) does not stop a
// document.
func TestUnusualText(t *testing.T) {
	inv := sample(1)
	inv.CustomerName = ptr("Dana 🍰 \x01\x7f\u202e Whitfield")
	inv.Lines[0].Description = strings.Repeat("x", 500)
	var buf bytes.Buffer
	if err := invoicepdf.Invoice(context.Background(), &buf, inv, "http://x.test/pay/abc"); err != nil {
		t.Fatal(err)
	}
	doc := pdftest.Read(t, buf.Bytes())
	if !strings.Contains(doc.Text, "Whitfield") {
		t.Errorf("text:\n%s", doc.Text)
	}
}

func BenchmarkInvoice500Lines(b *testing.B) {
	inv := sample(500)
	for b.Loop() {
		var buf bytes.Buffer
		if err := invoicepdf.Invoice(context.Background(), &buf, inv, "http://x.test/pay/abc"); err != nil {
			b.Fatal(err)
		}
	}
}

// Taxed lines show their rate; the totals read subtotal, tax and total.
func TestInvoiceShowsSubtotalTaxAndTotal(t *testing.T) {
	inv := sample(0)
	rate := dec("8.25")
	inv.Lines = []invoice.Line{
		{Description: "Catering, per guest", Quantity: dec("40"), UnitCost: dec("18.75"), TaxRate: &rate},
		{Description: "Delivery", Quantity: dec("1"), UnitCost: dec("25")},
	}
	inv.Amount, inv.TaxAmount, inv.AmountPaid, inv.Payments = dec("836.88"), dec("61.88"), dec("0.00"), nil
	var buf bytes.Buffer
	if err := invoicepdf.Invoice(context.Background(), &buf, inv, "http://127.0.0.1:8080/pay/x"); err != nil {
		t.Fatal(err)
	}
	doc := pdftest.Read(t, buf.Bytes())
	for _, want := range []string{"Tax", "8.25%", "$750.00", "$25.00", "Subtotal", "$775.00", "$61.88", "Total", "$836.88"} {
		if !strings.Contains(doc.Text, want) {
			t.Errorf("the PDF's text lacks %q:\n%s", want, doc.Text)
		}
	}
	if i, j, k := strings.Index(doc.Text, "Subtotal"), strings.Index(doc.Text, "$61.88"), strings.Index(doc.Text, "$836.88"); !(i < j && j < k) {
		t.Errorf("subtotal, tax and total not in that order:\n%s", doc.Text)
	}
}
