package delivery

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	htmltemplate "html/template"
	"net/url"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/google/uuid"
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

// invoiceView is what a message says about its invoice.
type invoiceView struct {
	Status        string
	LocationName  string
	LocationEmail string
	CustomerName  string
	InvoiceNumber string
	Amount        string // "$1,234.50"
	DueDate       string // "March 5, 2026", or empty
	PayLink       string
}

// errInvoiceCancelled says that the message's invoice was cancelled after the
// message was claimed; the message is then cancelled instead of sent.
var errInvoiceCancelled = errors.New("invoice cancelled")

func (w *Worker) render(ctx context.Context, c claimed) (Rendered, error) {
	var row struct {
		Status        string         `db:"status"`
		InvoiceNumber string         `db:"invoice_number"`
		Amount        string         `db:"amount"`
		DueDate       sql.NullString `db:"due_date"`
		PayToken      string         `db:"pay_token"`
		CustomerName  sql.NullString `db:"customer_name"`
		LocationName  string         `db:"location_name"`
		LocationEmail sql.NullString `db:"location_email"`
	}
	err := w.db.GetContext(ctx, &row, `SELECT i.status, i.invoice_number, i.amount::text AS amount,
			to_char(i.due_date, 'YYYY-MM-DD') AS due_date, i.pay_token, i.customer_name,
			l.name AS location_name, l.email AS location_email
		FROM invoices i
		JOIN merchant_accounts m ON m.id = i.merchant_account_id
		JOIN locations l ON l.id = m.location_id
		WHERE i.id = $1 AND i.organization_id = $2`, c.InvoiceID, c.OrganizationID)
	if err != nil {
		return Rendered{}, fmt.Errorf("delivery: unable to read invoice for message: %w", err)
	}
	if row.Status == "cancelled" {
		return Rendered{}, errInvoiceCancelled
	}
	v := invoiceView{
		Status:        row.Status,
		LocationName:  row.LocationName,
		LocationEmail: row.LocationEmail.String,
		CustomerName:  row.CustomerName.String,
		InvoiceNumber: row.InvoiceNumber,
		Amount:        formatAmount(row.Amount),
		PayLink:       strings.TrimRight(w.cfg.PublicURL, "/") + "/pay/" + url.PathEscape(row.PayToken),
	}
	if row.DueDate.Valid {
		d, err := time.Parse(time.DateOnly, row.DueDate.String)
		if err != nil {
			return Rendered{}, fmt.Errorf("delivery: unable to read due date %q: %w", row.DueDate.String, err)
		}
		v.DueDate = d.Format("January 2, 2006")
	}

	r := Rendered{
		ID:        c.ID,
		InvoiceID: c.InvoiceID,
		Channel:   c.Channel,
		To:        c.Recipient,
		FromName:  oneLine(v.LocationName),
		ReplyTo:   v.LocationEmail,
		Date:      w.now(),
	}
	var buf bytes.Buffer
	switch c.Channel {
	case ChannelEmail:
		// Headers get one line, whatever the names hold.
		r.Subject = oneLine("Invoice " + v.InvoiceNumber + " from " + v.LocationName)
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
		if err := smsText.Execute(&buf, v); err != nil {
			return Rendered{}, fmt.Errorf("delivery: unable to render text message: %w", err)
		}
		r.Text = strings.TrimSpace(buf.String())
	default:
		return Rendered{}, fmt.Errorf("delivery: unknown channel %q", c.Channel)
	}
	return r, nil
}

// formatAmount writes a NUMERIC(11,2) as read from PostgreSQL ("1234.50") with
// a dollar sign and thousands separators, never through a float.
func formatAmount(s string) string {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	whole, frac, _ := strings.Cut(s, ".")
	frac = (frac + "00")[:2]
	var b strings.Builder
	for i, d := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return sign + "$" + b.String() + "." + frac
}

var emailText = texttemplate.Must(texttemplate.New("text").Parse(
	`Hello{{with .CustomerName}} {{.}}{{end}},

{{.LocationName}} has sent you invoice {{.InvoiceNumber}} for {{.Amount}}.
{{- with .DueDate}}
It is due on {{.}}.{{end}}

Pay it here:
{{.PayLink}}

Thank you,
{{.LocationName}}
`))

var emailHTML = htmltemplate.Must(htmltemplate.New("html").Parse(`<!DOCTYPE html>
<html>
<head><meta charset="utf-8"><title>Invoice {{.InvoiceNumber}}</title></head>
<body style="font-family: sans-serif; line-height: 1.5">
<p>Hello{{with .CustomerName}} {{.}}{{end}},</p>
<p><strong>{{.LocationName}}</strong> has sent you invoice <strong>{{.InvoiceNumber}}</strong> for <strong>{{.Amount}}</strong>.
{{- with .DueDate}} It is due on {{.}}.{{end}}</p>
<p><a href="{{.PayLink}}">Pay invoice {{.InvoiceNumber}}</a></p>
<p>Or copy this link into your browser:<br>{{.PayLink}}</p>
<p>Thank you,<br>{{.LocationName}}</p>
</body>
</html>
`))

var smsText = texttemplate.Must(texttemplate.New("sms").Parse(
	`{{.LocationName}}: invoice {{.InvoiceNumber}} for {{.Amount}}
{{- with .DueDate}}, due {{.}}{{end}}. Pay here: {{.PayLink}}`))
