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
	// FromName is the billing location's name, shown as the email sender's
	// name; ReplyTo is the location's email address, if it has one.
	FromName string
	ReplyTo  string
	// Date is when the message was rendered.
	Date time.Time
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
	Biller        directory.Biller
	PayLink       string
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
	// Overdue: the due date has passed in the location's time zone.
	Overdue bool
	PayLink string
}

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
	if bill.Cancelled {
		return Rendered{}, errInvoiceCancelled
	}
	reminder := c.Kind == KindReminder
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
		PayLink:       bill.PayLink,
	}
	if bill.DueDate != nil {
		v.DueDate = bill.DueDate.Format("January 2, 2006")
		today := w.now().In(bill.Biller.Zone()).Format(time.DateOnly)
		v.Overdue = bill.DueDate.Format(time.DateOnly) < today
	}
	texts, html, sms, subject := emailText, emailHTML, smsText, "Invoice "+v.InvoiceNumber+" from "+v.Name
	if reminder {
		texts, html, sms, subject = reminderText, reminderHTML, reminderSMS, "Reminder: invoice "+v.InvoiceNumber+" from "+v.Name
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
	var buf bytes.Buffer
	switch c.Channel {
	case ChannelEmail:
		// Headers get one line, whatever the names hold.
		r.Subject = oneLine(subject)
		if err := texts.Execute(&buf, v); err != nil {
			return Rendered{}, fmt.Errorf("delivery: unable to render email: %w", err)
		}
		r.Text = buf.String()
		buf.Reset()
		if err := html.Execute(&buf, v); err != nil {
			return Rendered{}, fmt.Errorf("delivery: unable to render email: %w", err)
		}
		r.HTML = buf.String()
	case ChannelText:
		if err := sms.Execute(&buf, v); err != nil {
			return Rendered{}, fmt.Errorf("delivery: unable to render text message: %w", err)
		}
		r.Text = strings.TrimSpace(buf.String())
	default:
		return Rendered{}, fmt.Errorf("delivery: unknown channel %q", c.Channel)
	}
	return r, nil
}

// The signature every message ends with: who bills, its legal name,
// address, phone and email where set, one a line.
const (
	textSignature = `{{define "signature"}}{{.Name}}
{{- with .LegalName}}
{{.}}{{end}}
{{- range .Address}}
{{.}}{{end}}
{{- with .Phone}}
{{.}}{{end}}
{{- with .Email}}
{{.}}{{end}}{{end}}`
	htmlSignature = `{{define "signature"}}{{.Name}}{{with .LegalName}}<br>{{.}}{{end}}{{range .Address}}<br>{{.}}{{end}}` +
		`{{with .Phone}}<br>{{.}}{{end}}{{with .Email}}<br>{{.}}{{end}}{{end}}`
)

var emailText = texttemplate.Must(texttemplate.New("text").Parse(
	`Hello{{with .CustomerName}} {{.}}{{end}},

{{.Name}}{{with .LegalName}} ({{.}}){{end}} has sent you invoice {{.InvoiceNumber}} for {{.Amount}}.
{{- with .DueDate}}
It is due on {{.}}.{{end}}

Pay it here:
{{.PayLink}}

Thank you,
{{template "signature" .}}
` + textSignature))

var emailHTML = htmltemplate.Must(htmltemplate.New("html").Parse(`<!DOCTYPE html>
<html>
<head><meta charset="utf-8"><title>Invoice {{.InvoiceNumber}}</title></head>
<body style="font-family: sans-serif; line-height: 1.5">
<p>Hello{{with .CustomerName}} {{.}}{{end}},</p>
<p><strong>{{.Name}}</strong>{{with .LegalName}} ({{.}}){{end}} has sent you invoice <strong>{{.InvoiceNumber}}</strong> for <strong>{{.Amount}}</strong>.
{{- with .DueDate}} It is due on {{.}}.{{end}}</p>
<p><a href="{{.PayLink}}">Pay invoice {{.InvoiceNumber}}</a></p>
<p>Or copy this link into your browser:<br>{{.PayLink}}</p>
<p>Thank you,<br>{{template "signature" .}}</p>
</body>
</html>
` + htmlSignature))

var smsText = texttemplate.Must(texttemplate.New("sms").Parse(
	`{{.Name}}: invoice {{.InvoiceNumber}} for {{.Amount}}
{{- with .DueDate}}, due {{.}}{{end}}. Pay here: {{.PayLink}}`))

// The reminder: it says it is one, the balance and the due date (passed
// or to come), and the pay link.

var reminderText = texttemplate.Must(texttemplate.New("reminder").Parse(
	`Hello{{with .CustomerName}} {{.}}{{end}},

This is a reminder from {{.Name}}{{with .LegalName}} ({{.}}){{end}} about invoice {{.InvoiceNumber}} for {{.Amount}}.
The balance of {{.Balance}} {{if .Overdue}}was due on{{else}}is due on{{end}} {{.DueDate}}.

Pay it here:
{{.PayLink}}

If you have paid it already, thank you, and please disregard this reminder.

{{template "signature" .}}
` + textSignature))

var reminderHTML = htmltemplate.Must(htmltemplate.New("reminder-html").Parse(`<!DOCTYPE html>
<html>
<head><meta charset="utf-8"><title>Reminder: invoice {{.InvoiceNumber}}</title></head>
<body style="font-family: sans-serif; line-height: 1.5">
<p>Hello{{with .CustomerName}} {{.}}{{end}},</p>
<p>This is a reminder from <strong>{{.Name}}</strong>{{with .LegalName}} ({{.}}){{end}} about invoice <strong>{{.InvoiceNumber}}</strong> for {{.Amount}}.</p>
<p>The balance of <strong>{{.Balance}}</strong> {{if .Overdue}}was due on{{else}}is due on{{end}} <strong>{{.DueDate}}</strong>.</p>
<p><a href="{{.PayLink}}">Pay invoice {{.InvoiceNumber}}</a></p>
<p>Or copy this link into your browser:<br>{{.PayLink}}</p>
<p>If you have paid it already, thank you, and please disregard this reminder.</p>
<p>{{template "signature" .}}</p>
</body>
</html>
` + htmlSignature))

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
