package delivery

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/signintech/gopdf"
	"golang.org/x/image/font/gofont/goregular"

	"github.com/payreq/payreq/internal/directory"
	"github.com/payreq/payreq/internal/invoicepdf/pdftest"
	"github.com/payreq/payreq/internal/postgres"
)

// testDocuments stands for internal/invoicepdf (which imports this package
// through invoice): a one-line PDF per document.
type testDocuments struct{ db *sqlx.DB }

func (d testDocuments) Invoice(ctx context.Context, org, id uuid.UUID) (Attachment, error) {
	var number string
	if err := d.db.GetContext(ctx, &number, `SELECT invoice_number FROM invoices WHERE id = $1`, id); err != nil {
		return Attachment{}, err
	}
	pdf, err := onePagePDF("Invoice " + number)
	return Attachment{Name: number, PDF: pdf}, err
}

func (d testDocuments) Receipt(ctx context.Context, org, invoiceID, paymentID uuid.UUID) (Receipt, error) {
	var number string
	if err := d.db.GetContext(ctx, &number, `SELECT invoice_number FROM invoices WHERE id = $1`, invoiceID); err != nil {
		return Receipt{}, err
	}
	pdf, err := onePagePDF("Receipt for invoice " + number)
	return Receipt{Amount: "$30.00", Method: "Visa ending in 1111", At: time.Date(2026, 3, 5, 20, 4, 0, 0, time.UTC),
		Reference: "REF-123", Balance: "$1,204.50", Document: Attachment{Name: "receipt-" + number, PDF: pdf}}, err
}

func onePagePDF(text string) ([]byte, error) {
	var pdf gopdf.GoPdf
	pdf.Start(gopdf.Config{PageSize: *gopdf.PageSizeLetter})
	pdf.AddPage()
	if err := pdf.AddTTFFontData("go", goregular.TTF); err != nil {
		return nil, err
	}
	if err := pdf.SetFont("go", "", 12); err != nil {
		return nil, err
	}
	pdf.SetXY(50, 50)
	if err := pdf.Cell(nil, text); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	_, err := pdf.WriteTo(&buf)
	return buf.Bytes(), err
}

// Pay link, reminder and receipt emails are text and HTML inside
// multipart/mixed with the PDF attached: the business's name, the lines
// and the total in both parts, a "Pay $X" button (not on a receipt),
// HTML of inline styles only; the pay link whole in the raw message and
// in both parts as decoded; the attachment a PDF that reads back. A text
// message stays one short line with the link.
func TestMessageShapes(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	cfg := testConfig(t)
	cfg.Documents = testDocuments{db}
	inv := newInvoice(t, db)
	if _, err := db.Exec(`INSERT INTO invoice_lines (invoice_id, position, description, quantity, unit_cost)
		VALUES ($1, 1, 'Sourdough loaves', 2, 600), ($1, 2, 'Wedding cake', 1, 34.50)`, inv.ID); err != nil {
		t.Fatal(err)
	}
	ids := map[string]uuid.UUID{KindPayLink: uuid.New(), KindReminder: uuid.New(), KindReceipt: uuid.New(), "text": uuid.New()}
	deliverAll(t, db, cfg, inv, []Message{
		{ID: ids[KindPayLink], Kind: KindPayLink, Channel: ChannelEmail, Recipient: testCustomer},
		{ID: ids[KindReminder], Kind: KindReminder, Channel: ChannelEmail, Recipient: testCustomer},
		{ID: ids[KindReceipt], Kind: KindReceipt, PaymentID: uuid.New(), Channel: ChannelEmail, Recipient: testCustomer},
		{ID: ids["text"], Channel: ChannelText, Recipient: testPhone},
	})
	dir := filepath.Join(cfg.DataDir, "outbox")
	link := inv.payLink()
	for _, kind := range []string{KindPayLink, KindReminder, KindReceipt} {
		t.Run(kind, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, ids[kind].String()+".eml"))
			if err != nil {
				t.Fatal(err)
			}
			e := parseEmail(t, raw)
			if !e.Mixed {
				t.Error("the alternatives are not inside multipart/mixed")
			}
			// Until the business sets its branding: the name alone, and
			// payreq's blue.
			if len(e.Inline) != 0 || strings.Contains(e.HTML, "<img") || !strings.Contains(e.HTML, accent) {
				t.Errorf("an email of a business without branding has inline images %v or an <img>, or lacks %s", keys(e.Inline), accent)
			}
			for _, want := range []string{testLocation, "Sourdough loaves", "Wedding cake", "2 x $600.00", "$1,200.00", "Total: " + testAmountShown} {
				if !strings.Contains(e.Plain, want) {
					t.Errorf("plain part lacks %q:\n%s", want, e.Plain)
				}
			}
			for _, want := range []string{"Dana&#39;s Bakery &amp; Café", "Sourdough loaves", "$1,200.00", testAmountShown} {
				if !strings.Contains(e.HTML, want) {
					t.Errorf("HTML part lacks %q", want)
				}
			}
			// What mail clients take: no script, no stylesheet, no image
			// or font from elsewhere; every style inline.
			for _, bad := range []string{"<script", "<style", "<link", "src=\"http", "url(", "javascript:"} {
				if strings.Contains(strings.ToLower(e.HTML), bad) {
					t.Errorf("HTML part has %q", bad)
				}
			}
			pdfName, pdfText := inv.Number+".pdf", "Invoice "+inv.Number
			if kind == KindReceipt {
				pdfName, pdfText = "receipt-"+inv.Number+".pdf", "Receipt for invoice "+inv.Number
				for _, want := range []string{"Thank you for your payment of $30.00", "Card: Visa ending in 1111", "Reference: REF-123",
					"Balance after this payment: $1,204.50", "March 5, 2026, 2:04 PM CST"} {
					if !strings.Contains(e.Plain, want) {
						t.Errorf("receipt's plain part lacks %q:\n%s", want, e.Plain)
					}
				}
				if want := "Receipt for invoice " + inv.Number + " from " + testLocation; e.Subject != want {
					t.Errorf("Subject = %q, want %q", e.Subject, want)
				}
				if strings.Contains(e.Plain, link) || strings.Contains(e.HTML, "Pay $") {
					t.Error("a receipt asks to pay")
				}
			} else {
				// The link whole in the raw message, as a person grepping the
				// file finds it, and in both parts as decoded.
				if !bytes.Contains(raw, []byte(link)) {
					t.Errorf("the raw message lacks the whole link %s", link)
				}
				if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(link) + "\r?$").MatchString(e.Plain) {
					t.Errorf("plain part lacks the link on a line of its own:\n%s", e.Plain)
				}
				if n := strings.Count(e.HTML, `href="`+link+`"`); n != 2 {
					t.Errorf("HTML part has the link as href %d times, want 2 (the button and the copy)", n)
				}
				if !strings.Contains(e.HTML, ">Pay "+testAmountShown+"</a>") {
					t.Errorf("HTML part lacks the Pay %s button", testAmountShown)
				}
			}
			doc, ok := e.Attachments[pdfName]
			if !ok || len(e.Attachments) != 1 {
				t.Fatalf("attachments %v, want %s alone", keys(e.Attachments), pdfName)
			}
			if got := pdftest.Read(t, doc); !strings.Contains(got.Text, pdfText) {
				t.Errorf("the attached PDF reads %q, want %q", got.Text, pdfText)
			}
		})
	}
	txt, err := os.ReadFile(filepath.Join(dir, ids["text"].String()+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(txt), "\n\n")
	body = strings.TrimSuffix(body, "\n")
	if strings.Contains(body, "\n") || !strings.HasSuffix(body, link) || len(body) > 200 {
		t.Errorf("text message %q: want one short line ending with the link", body)
	}
}

// A business's logo is inside its pay link, reminder and receipt emails
// (multipart/related, shown by the HTML part as cid:), and its accent
// colour colours the button and the rule under its name; the links stay
// whole in both parts and the PDF stays attached.
func TestEmailBranding(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	cfg := testConfig(t)
	cfg.Documents = testDocuments{db}
	cfg.Logos = (&directory.Store{DB: db}).LogoPNG
	inv := newInvoice(t, db)
	// A 600×150 logo, shown at 200×50.
	img := image.NewRGBA(image.Rect(0, 0, 600, 150))
	for i := range img.Pix {
		img.Pix[i] = 0x80
	}
	var logo bytes.Buffer
	if err := png.Encode(&logo, img); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(logo.Bytes())
	hash := hex.EncodeToString(sum[:])
	const teal = "#0f766e"
	if _, err := db.Exec(`INSERT INTO logos (sha256, organization_id, png, width, height, created_at)
		VALUES ($1, $2, $3, 600, 150, now())`, hash, inv.OrganizationID, logo.Bytes()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE organizations SET logo_sha256 = $2, accent_color = $3 WHERE id = $1`,
		inv.OrganizationID, hash, teal); err != nil {
		t.Fatal(err)
	}
	ids := map[string]uuid.UUID{KindPayLink: uuid.New(), KindReminder: uuid.New(), KindReceipt: uuid.New()}
	deliverAll(t, db, cfg, inv, []Message{
		{ID: ids[KindPayLink], Kind: KindPayLink, Channel: ChannelEmail, Recipient: testCustomer},
		{ID: ids[KindReminder], Kind: KindReminder, Channel: ChannelEmail, Recipient: testCustomer},
		{ID: ids[KindReceipt], Kind: KindReceipt, PaymentID: uuid.New(), Channel: ChannelEmail, Recipient: testCustomer},
	})
	link := inv.payLink()
	for kind, id := range ids {
		t.Run(kind, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(cfg.DataDir, "outbox", id.String()+".eml"))
			if err != nil {
				t.Fatal(err)
			}
			e := parseEmail(t, raw)
			if len(e.Inline) != 1 {
				t.Fatalf("inline images %v, want the logo alone", keys(e.Inline))
			}
			for cid, b := range e.Inline {
				if !bytes.Equal(b, logo.Bytes()) || e.InlineTypes[cid] != "image/png" {
					t.Errorf("inline image %s (%s) is not the logo", cid, e.InlineTypes[cid])
				}
				if want := `<img src="cid:` + cid + `" width="200" height="50"`; !strings.Contains(e.HTML, want) {
					t.Errorf("HTML part lacks %s:\n%s", want, e.HTML)
				}
			}
			if !strings.Contains(e.HTML, "border-bottom:4px solid "+teal) || strings.Contains(e.HTML, accent) {
				t.Errorf("HTML part does not rule the name in %s, or has payreq's %s", teal, accent)
			}
			if kind == KindReceipt {
				if strings.Contains(e.HTML, "Pay $") {
					t.Error("a receipt asks to pay")
				}
			} else {
				if !strings.Contains(e.HTML, `background-color:`+teal+`">`+"\n"+`<a href="`+link+`"`) {
					t.Errorf("HTML part lacks the Pay button in %s linking %s:\n%s", teal, link, e.HTML)
				}
				if n := strings.Count(e.HTML, `href="`+link+`"`); n != 2 || !bytes.Contains(raw, []byte(link)) {
					t.Errorf("HTML part has the link as href %d times, want 2; or the raw message lacks it whole", n)
				}
				if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(link) + "\r?$").MatchString(e.Plain) {
					t.Errorf("plain part lacks the link on a line of its own:\n%s", e.Plain)
				}
			}
			if len(e.Attachments) != 1 {
				t.Errorf("attachments %v, want the PDF alone", keys(e.Attachments))
			}
		})
	}
}

// deliverAll commits the messages of the invoice, runs a worker of cfg
// and waits until each is delivered.
func deliverAll(t *testing.T, db *sqlx.DB, cfg Config, inv invoice, msgs []Message) {
	t.Helper()
	ctx := context.Background()
	err := postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
		for _, m := range msgs {
			m.OrganizationID, m.InvoiceID, m.At = inv.OrganizationID, inv.ID, time.Now()
			if err := Enqueue(ctx, tx, m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	run(t, newWorker(t, db, cfg))
	for _, m := range msgs {
		eventually(t, m.Channel+" "+m.Kind+" is delivered", delivered(t, db, m.ID))
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A taxed invoice's email says its subtotal and tax beside the total, in
// both parts; an untaxed one says neither.
func TestEmailShowsTax(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	w := newWorker(t, db, testConfig(t))
	inv := newInvoice(t, db)
	c := claimed{ID: uuid.New(), OrganizationID: inv.OrganizationID, InvoiceID: inv.ID, Channel: ChannelEmail, Recipient: testCustomer}
	r, err := w.render(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(r.Text, "Tax:") || strings.Contains(r.HTML, ">Tax<") {
		t.Errorf("an untaxed invoice's email names a tax:\n%s", r.Text)
	}
	if _, err := db.Exec(`UPDATE invoices SET tax_amount = 34.50 WHERE id = $1`, inv.ID); err != nil {
		t.Fatal(err)
	}
	if r, err = w.render(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Subtotal: $1,200.00\nTax: $34.50\nTotal: " + testAmountShown} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("plain part lacks %q:\n%s", want, r.Text)
		}
	}
	for _, want := range []string{">Subtotal</td>", ">$1,200.00</td>", ">Tax</td>", ">$34.50</td>"} {
		if !strings.Contains(r.HTML, want) {
			t.Errorf("HTML part lacks %q", want)
		}
	}
}
