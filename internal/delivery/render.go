package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/payreq/payreq/internal/directory"
)

// Rendered is a message ready for a Sender: the words are filled in from the
// invoice as it is when the message is delivered.
type Rendered struct {
	// ID is the outbox id, the message id the provider sees.
	ID        uuid.UUID
	InvoiceID uuid.UUID
	Channel   string
	// To is the email address or the phone number.
	To string
	// Subject and HTML are set for email only. Text is the plain-text part of
	// an email, or the whole of a text message.
	Subject string
	Text    string
	HTML    string
	// Attachment is the PDF an email carries (the invoice, or the
	// receipt), if any.
	Attachment *Attachment
	// Logo is the business's logo, if it has one, carried inside the
	// email and shown by the HTML part as cid:ContentID (mail clients
	// show such an image without fetching anything).
	Logo *InlineImage
	// FromName is the billing location's name, shown as the email sender's
	// name; ReplyTo is the location's email address, if it has one.
	FromName string
	ReplyTo  string
	// Date is when the message was rendered.
	Date time.Time
}

// Attachment is a PDF document attached to an email.
type Attachment struct {
	// Name is the file name, without ".pdf": "INV-1843", "receipt-INV-1843".
	Name string
	PDF  []byte
}

// InlineImage is a PNG inside an email, named by its Content-ID (without
// the angle brackets).
type InlineImage struct {
	ContentID string
	PNG       []byte
}

// MessageID is the email Message-ID header's value for the outbox id. It does
// not depend on configuration, so every delivery of one message carries the
// same one.
func MessageID(id uuid.UUID) string { return "<" + id.String() + "@payreq>" }

// Bill is what a message says of its invoice, read from the invoice
// package when the message is delivered.
type Bill struct {
	Cancelled bool
	// Payable: open or part-paid; a reminder of an invoice that is not
	// is not sent.
	Payable       bool
	InvoiceNumber string
	Amount        string // as people read it (invoice.Money): "$1,234.50"
	Balance       string // likewise
	DueDate       *time.Time
	CustomerName  string
	Lines         []BillLine
	// Subtotal and Tax: the lines' amounts and their taxes; both empty
	// when no line is taxed (the total says it all).
	Subtotal, Tax string
	Biller        directory.Biller
	PayLink       string
}

// BillLine is one line of the invoice as a message lists it.
type BillLine struct {
	Description string `db:"description"`
	Quantity    string `db:"quantity"`  // "2", "1.5"
	UnitCost    string `db:"unit_cost"` // "$12.00"
	Amount      string `db:"amount"`    // "$24.00"
	TaxRate     string // "8.25%", or empty without tax
}

// Receipt is what a receipt says of its card payment, and its PDF.
type Receipt struct {
	// Refund: the payment is a refund of a sale, not a sale.
	Refund bool
	Amount string // "$30.00"
	// Method says how: "Visa ending in 1111" (never more of the card).
	Method    string
	At        time.Time
	Reference string // the processor's, or ""
	// Balance is the invoice's balance right after a sale; "" for a refund.
	Balance  string
	Document Attachment
}

// Invoices is what delivery needs of the invoice package, which owns the
// invoices table (and imports this package to queue messages in its own
// transactions, so it is handed in when a worker is made).
type Invoices interface {
	// Bill reads the invoice as a message shows it.
	Bill(ctx context.Context, org, id uuid.UUID) (Bill, error)
	// SendFailed records on the invoice, inside tx, why its latest message
	// could not be delivered.
	SendFailed(ctx context.Context, tx *sqlx.Tx, org, id uuid.UUID, problem string) error
}

// Documents draws the PDFs emails carry (internal/invoicepdf, which
// imports the invoice package and so is handed in too).
type Documents interface {
	// Invoice is the invoice's document, attached to its pay links and
	// reminders.
	Invoice(ctx context.Context, org, id uuid.UUID) (Attachment, error)
	// Receipt is the receipt of the invoice's card payment (a sale or a
	// refund).
	Receipt(ctx context.Context, org, invoiceID, paymentID uuid.UUID) (Receipt, error)
}

// invoiceView is what a message says about its invoice: who bills (the
// name the customer knows, the organization's when it differs, the
// location's address, phone and email) and what.
type invoiceView struct {
	Name          string
	LegalName     string
	Address       []string
	Phone         string
	Email         string
	CustomerName  string
	InvoiceNumber string
	Amount        string // "$1,234.50"
	Balance       string // likewise
	DueDate       string // "March 5, 2026", or empty
	Lines         []BillLine
	Subtotal, Tax string
	// Overdue: the due date has passed in the location's time zone.
	Overdue bool
	PayLink string
	// Reminder: the message reminds of the balance; Receipt, when set,
	// is a receipt's payment.
	Reminder bool
	Receipt  *receiptView
	// Accent is the colour of the button and the rules: the business's
	// own, payreq's blue until it sets one.
	Accent string
	// Logo is the business's logo, shown above its name; nil until it
	// sets one (the name alone).
	Logo *logoView
}

// logoView is where the HTML part finds the logo, and the size it is
// shown at.
type logoView struct {
	ContentID     string
	Width, Height int
}

type receiptView struct {
	Refund    bool
	Amount    string
	Method    string
	At        string // "March 5, 2026, 2:04 PM CST"
	Reference string
	Balance   string
}

// accent is the button's colour until the business sets its own: its
// contrast with white text is 8.6:1.
const accent = "#1d4ed8"

// The logo is shown at most this wide and this high, its proportions
// kept.
const logoMaxWidth, logoMaxHeight = 200, 80

// errInvoiceCancelled says that the message's invoice was cancelled after the
// message was claimed; the message is then cancelled instead of sent.
var errInvoiceCancelled = errors.New("invoice cancelled")

// errNothingDue says that a reminder's invoice was paid (or cancelled)
// after the reminder was queued: nothing is left to remind of.
var errNothingDue = errors.New("invoice paid or cancelled: no reminder")

// errNoSignIn says that a password reset was asked for an email without
// a sign-in: nobody to send it to.
var errNoSignIn = errors.New("no sign-in has this email: no password reset")

func (w *Worker) render(ctx context.Context, c claimed) (Rendered, error) {
	if c.isNotice() {
		return w.renderNotice(ctx, c)
	}
	bill, err := w.cfg.Invoices.Bill(ctx, c.OrganizationID, c.InvoiceID)
	if err != nil {
		return Rendered{}, fmt.Errorf("delivery: unable to read invoice for message: %w", err)
	}
	reminder, receipt := c.Kind == KindReminder, c.Kind == KindReceipt
	// A receipt tells of money that moved, whatever became of the
	// invoice since (a refund of a cancelled invoice has its receipt too).
	if bill.Cancelled && !receipt {
		return Rendered{}, errInvoiceCancelled
	}
	if reminder && !bill.Payable {
		return Rendered{}, errNothingDue
	}
	v := invoiceView{
		Name:          bill.Biller.Name(),
		LegalName:     bill.Biller.LegalName(),
		Address:       bill.Biller.Address,
		Phone:         bill.Biller.Phone,
		Email:         bill.Biller.Email,
		CustomerName:  bill.CustomerName,
		InvoiceNumber: bill.InvoiceNumber,
		Amount:        bill.Amount,
		Balance:       bill.Balance,
		Lines:         bill.Lines,
		Subtotal:      bill.Subtotal,
		Tax:           bill.Tax,
		PayLink:       bill.PayLink,
		Reminder:      reminder,
		Accent:        accent,
	}
	if c := bill.Biller.Branding.AccentColor; c != "" {
		v.Accent = c
	}
	if bill.DueDate != nil {
		v.DueDate = bill.DueDate.Format("January 2, 2006")
		today := w.now().In(bill.Biller.Zone()).Format(time.DateOnly)
		v.Overdue = bill.DueDate.Format(time.DateOnly) < today
	}
	r := Rendered{
		ID:        c.ID,
		InvoiceID: c.InvoiceID,
		Channel:   c.Channel,
		To:        c.Recipient,
		FromName:  oneLine(v.Name),
		ReplyTo:   v.Email,
		Date:      w.now(),
	}
	subject := "Invoice " + v.InvoiceNumber + " from " + v.Name
	switch {
	case receipt:
		if w.cfg.Documents == nil || c.Channel != ChannelEmail {
			return Rendered{}, &ProviderError{Permanent: true, Reason: "receipts cannot be drawn"}
		}
		rc, err := w.cfg.Documents.Receipt(ctx, c.OrganizationID, c.InvoiceID, c.PaymentID)
		if err != nil {
			return Rendered{}, fmt.Errorf("delivery: unable to draw the receipt: %w", err)
		}
		v.Receipt = &receiptView{Refund: rc.Refund, Amount: rc.Amount, Method: rc.Method,
			At: rc.At.In(bill.Biller.Zone()).Format("January 2, 2006, 3:04 PM MST"), Reference: rc.Reference, Balance: rc.Balance}
		r.Attachment = &rc.Document
		subject = "Receipt for invoice " + v.InvoiceNumber + " from " + v.Name
		if rc.Refund {
			subject = "Refund receipt for invoice " + v.InvoiceNumber + " from " + v.Name
		}
	case reminder:
		subject = "Reminder: invoice " + v.InvoiceNumber + " from " + v.Name
	}
	var buf bytes.Buffer
	switch c.Channel {
	case ChannelEmail:
		if r.Attachment == nil && w.cfg.Documents != nil {
			doc, err := w.cfg.Documents.Invoice(ctx, c.OrganizationID, c.InvoiceID)
			if err != nil {
				return Rendered{}, fmt.Errorf("delivery: unable to draw the invoice: %w", err)
			}
			r.Attachment = &doc
		}
		if r.Logo, v.Logo, err = w.logo(ctx, bill.Biller.Branding.Logo); err != nil {
			return Rendered{}, err
		}
		// Headers get one line, whatever the names hold.
		r.Subject = oneLine(subject)
		if err := emailText.Execute(&buf, v); err != nil {
			return Rendered{}, fmt.Errorf("delivery: unable to render email: %w", err)
		}
		r.Text = buf.String()
		buf.Reset()
		if err := emailHTML.Execute(&buf, v); err != nil {
			return Rendered{}, fmt.Errorf("delivery: unable to render email: %w", err)
		}
		r.HTML = buf.String()
	case ChannelText:
		sms := smsText
		if reminder {
			sms = reminderSMS
		}
		if err := sms.Execute(&buf, v); err != nil {
			return Rendered{}, fmt.Errorf("delivery: unable to render text message: %w", err)
		}
		r.Text = strings.TrimSpace(buf.String())
	default:
		return Rendered{}, fmt.Errorf("delivery: unknown channel %q", c.Channel)
	}
	return r, nil
}

// logo reads the business's logo l (nil: none) for an email, and says
// how its HTML part shows it; nil, nil without one or without a reader.
func (w *Worker) logo(ctx context.Context, l *directory.Logo) (*InlineImage, *logoView, error) {
	if l == nil || w.cfg.Logos == nil || l.Width <= 0 || l.Height <= 0 {
		return nil, nil, nil
	}
	png, err := w.cfg.Logos(ctx, l.SHA256)
	if err != nil {
		return nil, nil, fmt.Errorf("delivery: unable to read the logo: %w", err)
	}
	width, height := l.Width, l.Height
	if width > logoMaxWidth {
		width, height = logoMaxWidth, max(1, height*logoMaxWidth/l.Width)
	}
	if height > logoMaxHeight {
		width, height = max(1, width*logoMaxHeight/height), logoMaxHeight
	}
	cid := "logo-" + l.SHA256[:min(16, len(l.SHA256))] + "@payreq"
	return &InlineImage{ContentID: cid, PNG: png}, &logoView{ContentID: cid, Width: width, Height: height}, nil
}

// The text part: every link alone on its line, and short lines, so that
// quoted-printable never breaks a link (a person copying it from the raw
// message copies it whole).
var emailText = texttemplate.Must(texttemplate.New("text").Parse(
	`Hello{{with .CustomerName}} {{.}}{{end}},
{{if .Receipt}}{{with .Receipt}}
{{if .Refund}}{{$.Name}} has refunded {{.Amount}} to your {{.Method}}
for invoice {{$.InvoiceNumber}}.{{else}}Thank you for your payment of {{.Amount}} to {{$.Name}}
for invoice {{$.InvoiceNumber}}.{{end}}

{{if .Refund}}Refunded{{else}}Paid{{end}}: {{.Amount}}
Date: {{.At}}
Card: {{.Method}}
{{- with .Reference}}
Reference: {{.}}{{end}}
{{- with .Balance}}
Balance after this payment: {{.}}{{end}}

The receipt is attached as a PDF.{{end}}
{{else if .Reminder}}
This is a reminder from {{.Name}}{{with .LegalName}} ({{.}}){{end}}
about invoice {{.InvoiceNumber}} for {{.Amount}}.
The balance of {{.Balance}} {{if .Overdue}}was due on{{else}}is due on{{end}} {{.DueDate}}.
{{else}}
{{.Name}}{{with .LegalName}} ({{.}}){{end}} has sent you invoice {{.InvoiceNumber}} for {{.Amount}}.
{{- with .DueDate}}
It is due on {{.}}.{{end}}
{{end}}
{{- if .Lines}}{{range .Lines}}
{{.Description}}
  {{.Quantity}} x {{.UnitCost}} = {{.Amount}}{{with .TaxRate}} (tax {{.}}){{end}}{{end}}
{{end}}
{{- with .Tax}}
Subtotal: {{$.Subtotal}}
Tax: {{.}}{{end}}
Total: {{.Amount}}
{{- if not .Receipt}}
Balance due: {{.Balance}}

Pay {{.Balance}} here:
{{.PayLink}}
{{- if .Reminder}}

If you have paid it already, thank you, and please disregard this reminder.{{end}}{{end}}

Thank you,
{{template "signature" .}}
{{define "signature"}}{{.Name}}
{{- with .LegalName}}
{{.}}{{end}}
{{- range .Address}}
{{.}}{{end}}
{{- with .Phone}}
{{.}}{{end}}
{{- with .Email}}
{{.}}{{end}}{{end}}`))

// The HTML part: tables and inline styles only (no stylesheet, no
// script, no image from elsewhere), as mail clients take them; the
// business's name at the top; the lines and totals; a button to pay.
var emailHTML = htmltemplate.Must(htmltemplate.New("html").Parse(`<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>{{if .Receipt}}Receipt for invoice{{else if .Reminder}}Reminder: invoice{{else}}Invoice{{end}} {{.InvoiceNumber}}</title></head>
<body style="margin:0;padding:0;background-color:#f4f4f5;color:#18181b;font-family:Helvetica,Arial,sans-serif;font-size:16px;line-height:1.5">
<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" style="background-color:#f4f4f5">
<tr><td align="center" style="padding:24px 12px">
<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" style="max-width:600px;background-color:#ffffff;border:1px solid #e4e4e7;border-radius:8px">
<tr><td style="padding:24px 24px 8px 24px;border-bottom:4px solid {{.Accent}}">{{with .Logo}}
<img src="cid:{{.ContentID}}" width="{{.Width}}" height="{{.Height}}" alt="" style="display:block;border:0;margin:0 0 8px 0;width:{{.Width}}px;height:{{.Height}}px">{{end}}
<div style="font-size:22px;font-weight:bold">{{.Name}}</div>{{with .LegalName}}
<div style="font-size:14px;color:#52525b">{{.}}</div>{{end}}
</td></tr>
<tr><td style="padding:24px">
<p style="margin:0 0 16px 0">Hello{{with .CustomerName}} {{.}}{{end}},</p>
{{- if .Receipt}}{{with .Receipt}}
<p style="margin:0 0 16px 0">{{if .Refund}}<strong>{{$.Name}}</strong> has refunded <strong>{{.Amount}}</strong> to your {{.Method}} for invoice <strong>{{$.InvoiceNumber}}</strong>.{{else}}Thank you for your payment of <strong>{{.Amount}}</strong> to <strong>{{$.Name}}</strong> for invoice <strong>{{$.InvoiceNumber}}</strong>.{{end}}</p>
<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" style="margin:0 0 16px 0;font-size:15px">
<tr><td style="padding:4px 0;color:#52525b">{{if .Refund}}Refunded{{else}}Paid{{end}}</td><td align="right" style="padding:4px 0;font-weight:bold">{{.Amount}}</td></tr>
<tr><td style="padding:4px 0;color:#52525b">Date</td><td align="right" style="padding:4px 0">{{.At}}</td></tr>
<tr><td style="padding:4px 0;color:#52525b">Card</td><td align="right" style="padding:4px 0">{{.Method}}</td></tr>
{{- with .Reference}}
<tr><td style="padding:4px 0;color:#52525b">Reference</td><td align="right" style="padding:4px 0">{{.}}</td></tr>{{end}}
{{- with .Balance}}
<tr><td style="padding:4px 0;color:#52525b">Balance after this payment</td><td align="right" style="padding:4px 0">{{.}}</td></tr>{{end}}
</table>
<p style="margin:0 0 16px 0">The receipt is attached as a PDF.</p>{{end}}
{{- else if .Reminder}}
<p style="margin:0 0 16px 0">This is a reminder from <strong>{{.Name}}</strong>{{with .LegalName}} ({{.}}){{end}} about invoice <strong>{{.InvoiceNumber}}</strong> for {{.Amount}}.</p>
<p style="margin:0 0 16px 0">The balance of <strong>{{.Balance}}</strong> {{if .Overdue}}was due on{{else}}is due on{{end}} <strong>{{.DueDate}}</strong>.</p>
{{- else}}
<p style="margin:0 0 16px 0"><strong>{{.Name}}</strong>{{with .LegalName}} ({{.}}){{end}} has sent you invoice <strong>{{.InvoiceNumber}}</strong> for <strong>{{.Amount}}</strong>.{{with .DueDate}} It is due on {{.}}.{{end}}</p>
{{- end}}
<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" style="margin:0 0 16px 0;font-size:15px;border-collapse:collapse">
{{- range .Lines}}
<tr><td style="padding:8px 0;border-bottom:1px solid #e4e4e7">{{.Description}}<br><span style="color:#52525b;font-size:13px">{{.Quantity}} &times; {{.UnitCost}}{{with .TaxRate}}, tax {{.}}{{end}}</span></td><td align="right" valign="top" style="padding:8px 0;border-bottom:1px solid #e4e4e7;white-space:nowrap">{{.Amount}}</td></tr>
{{- end}}
{{- with .Tax}}
<tr><td style="padding:4px 0">Subtotal</td><td align="right" style="padding:4px 0;white-space:nowrap">{{$.Subtotal}}</td></tr>
<tr><td style="padding:4px 0">Tax</td><td align="right" style="padding:4px 0;white-space:nowrap">{{.}}</td></tr>
{{- end}}
<tr><td style="padding:8px 0;font-weight:bold">Total</td><td align="right" style="padding:8px 0;font-weight:bold;white-space:nowrap">{{.Amount}}</td></tr>
{{- if not .Receipt}}
<tr><td style="padding:4px 0">Balance due</td><td align="right" style="padding:4px 0;white-space:nowrap">{{.Balance}}</td></tr>
{{- end}}
</table>
{{- if not .Receipt}}
<table role="presentation" cellpadding="0" cellspacing="0" border="0" style="margin:8px 0 16px 0"><tr>
<td style="border-radius:6px;background-color:{{.Accent}}">
<a href="{{.PayLink}}" style="display:inline-block;padding:12px 24px;color:#ffffff;font-weight:bold;text-decoration:none;border-radius:6px">Pay {{.Balance}}</a>
</td></tr></table>
<p style="margin:0 0 16px 0;font-size:14px;color:#52525b">Or copy this link into your browser:<br><a href="{{.PayLink}}" style="color:{{.Accent}};word-break:break-all">{{.PayLink}}</a></p>
{{- if .Reminder}}
<p style="margin:0 0 16px 0">If you have paid it already, thank you, and please disregard this reminder.</p>{{end}}
{{- end}}
<p style="margin:0">Thank you,<br>{{.Name}}{{with .LegalName}}<br>{{.}}{{end}}{{range .Address}}<br>{{.}}{{end}}{{with .Phone}}<br>{{.}}{{end}}{{with .Email}}<br>{{.}}{{end}}</p>
</td></tr>
</table>
</td></tr>
</table>
</body>
</html>
`))

// A text message: one short line with the pay link.
var smsText = texttemplate.Must(texttemplate.New("sms").Parse(
	`{{.Name}}: invoice {{.InvoiceNumber}} for {{.Amount}}
{{- with .DueDate}}, due {{.}}{{end}}. Pay here: {{.PayLink}}`))

var reminderSMS = texttemplate.Must(texttemplate.New("reminder-sms").Parse(
	`Reminder from {{.Name}}: invoice {{.InvoiceNumber}}, balance {{.Balance}} {{if .Overdue}}was due{{else}}due{{end}} {{.DueDate}}. Pay here: {{.PayLink}}`))

// renderNotice opens a notice: its words were written when it was
// queued, or for a password reset request are written now.
func (w *Worker) renderNotice(ctx context.Context, c claimed) (Rendered, error) {
	if w.cfg.Open == nil || c.Notice == nil {
		return Rendered{}, &ProviderError{Permanent: true, Reason: "the notice cannot be opened"}
	}
	raw, err := w.cfg.Open(c.Notice, *c.NoticeKeyID, noticeAAD(c.ID))
	if err != nil {
		return Rendered{}, &ProviderError{Permanent: true, Reason: "the notice cannot be opened", Err: err}
	}
	var n Notice
	if err := json.Unmarshal([]byte(raw), &n); err != nil {
		return Rendered{}, &ProviderError{Permanent: true, Reason: "the notice cannot be read", Err: err}
	}
	if n.PasswordReset {
		if w.cfg.PasswordResets == nil {
			return Rendered{}, &ProviderError{Permanent: true, Reason: "password resets cannot be written"}
		}
		reset, ok, err := w.cfg.PasswordResets(ctx, n.To)
		if err != nil {
			return Rendered{}, fmt.Errorf("delivery: unable to write password reset: %w", err)
		}
		if !ok {
			return Rendered{}, errNoSignIn
		}
		n = reset
	}
	var html bytes.Buffer
	if err := noticeHTML.Execute(&html, n); err != nil {
		return Rendered{}, fmt.Errorf("delivery: unable to render notice: %w", err)
	}
	return Rendered{ID: c.ID, Channel: ChannelEmail, To: n.To, Subject: oneLine(n.Subject), Text: n.Text,
		HTML: html.String(), FromName: "payreq", Date: w.now()}, nil
}

var noticeHTML = htmltemplate.Must(htmltemplate.New("notice").Parse(`<!DOCTYPE html>
<html>
<head><meta charset="utf-8"><title>{{.Subject}}</title></head>
<body style="font-family: sans-serif; line-height: 1.5; white-space: pre-line">{{.Text}}</body>
</html>
`))
