package api

import (
	"encoding/hex"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/payreq/payreq/gen/models"
	"github.com/payreq/payreq/internal/jsonnum"
)

// The invoice answers of the hot operations (a read, a list page, a
// create) are encoded here by hand rather than by the generated handlers'
// encoding/json, which walked each invoice by reflection and took an
// eighth of a list page's CPU time. The bytes are exactly encoding/json's
// (TestInvoiceJSONIsEncodingJSONs holds them to it, for every field of
// models.Invoice), so every answer still validates as before.

// invoiceAnswer is an invoice answered with status and its version as
// its ETag; replayed adds Idempotent-Replayed: true (a create, or a
// recorded payment, repeated with its key). Every operation answering
// one invoice answers it so.
type invoiceAnswer struct {
	status   int
	body     models.Invoice
	replayed bool
}

func (a invoiceAnswer) VisitGetPaymentRequestResponse(w http.ResponseWriter) error { return a.write(w) }

func (a invoiceAnswer) VisitCreatePaymentRequestResponse(w http.ResponseWriter) error {
	return a.write(w)
}

func (a invoiceAnswer) VisitUpdatePaymentRequestResponse(w http.ResponseWriter) error {
	return a.write(w)
}

func (a invoiceAnswer) VisitFinalizePaymentRequestResponse(w http.ResponseWriter) error {
	return a.write(w)
}

func (a invoiceAnswer) VisitSendPaymentRequestResponse(w http.ResponseWriter) error {
	return a.write(w)
}

func (a invoiceAnswer) VisitCancelPaymentRequestResponse(w http.ResponseWriter) error {
	return a.write(w)
}

func (a invoiceAnswer) VisitRecordPaymentResponse(w http.ResponseWriter) error { return a.write(w) }

func (a invoiceAnswer) VisitRemoveRecordedPaymentResponse(w http.ResponseWriter) error {
	return a.write(w)
}

// etag is the entity tag of an invoice at version: "3".
func etag(version int) string { return `"` + strconv.Itoa(version) + `"` }

func (a invoiceAnswer) write(w http.ResponseWriter) error {
	buf := answerBuffers.Get().(*[]byte)
	defer putAnswerBuffer(buf)
	b, err := appendInvoice((*buf)[:0], &a.body)
	if err != nil {
		return err
	}
	*buf = append(b, '\n') // as json.Encoder ends a value
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("ETag", etag(int(a.body.Version)))
	if a.replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	return writeAnswer(w, a.status, *buf)
}

// invoicePage is a list page of invoices with its Link header (nil: the
// last page).
type invoicePage struct {
	items []models.Invoice
	link  *string
}

func (p invoicePage) VisitListPaymentRequestsResponse(w http.ResponseWriter) error {
	buf := answerBuffers.Get().(*[]byte)
	defer putAnswerBuffer(buf)
	b := append((*buf)[:0], '[')
	for i := range p.items {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendInvoice(b, &p.items[i]); err != nil {
			return err
		}
	}
	*buf = append(b, ']', '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if p.link != nil {
		h.Set("Link", *p.link)
	}
	return writeAnswer(w, http.StatusOK, *buf)
}

// writeAnswer sends a whole answer with its length: net/http would send
// one over 2 kB in chunks, a list page in three writes to the socket
// rather than two.
func writeAnswer(w http.ResponseWriter, status int, body []byte) error {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, err := w.Write(body)
	return err
}

// answerBuffers keep the answers' bytes from one request to the next; one
// grown past maxAnswerBuffer (a page of 100 long invoices) is let go.
var answerBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

const maxAnswerBuffer = 256 << 10

func putAnswerBuffer(b *[]byte) {
	if cap(*b) <= maxAnswerBuffer {
		answerBuffers.Put(b)
	}
}

// appendInvoice appends inv as encoding/json writes a models.Invoice:
// members in the order of its fields, lineItems, payments and savedCards
// left out when nil.
func appendInvoice(b []byte, inv *models.Invoice) ([]byte, error) {
	var err error
	b = append(b, `{"amount":`...)
	b = appendDecimal(b, &inv.Amount)
	b = append(b, `,"amountPaid":`...)
	b = appendDecimal(b, &inv.AmountPaid)
	b = append(b, `,"amountRefunded":`...)
	b = appendDecimal(b, &inv.AmountRefunded)
	b = append(b, `,"balance":`...)
	b = appendDecimal(b, &inv.Balance)
	b = append(b, `,"cancelledAt":`...)
	if b, err = appendTimeOrNull(b, inv.CancelledAt); err != nil {
		return nil, err
	}
	b = append(b, `,"cancelledByName":`...)
	b = appendStringOrNull(b, inv.CancelledByName)
	b = append(b, `,"createdAt":`...)
	if b, err = appendTime(b, inv.CreatedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"createdByName":`...)
	b = appendString(b, inv.CreatedByName)
	b = append(b, `,"customerCompany":`...)
	b = appendStringOrNull(b, inv.CustomerCompany)
	b = append(b, `,"customerEmail":`...)
	b = appendStringOrNull(b, inv.CustomerEmail)
	b = append(b, `,"customerId":`...)
	b = appendUUID(b, inv.CustomerId)
	b = append(b, `,"customerName":`...)
	b = appendStringOrNull(b, inv.CustomerName)
	b = append(b, `,"customerPhone":`...)
	b = appendStringOrNull(b, inv.CustomerPhone)
	b = append(b, `,"customerPrefers":`...)
	b = appendStringOrNull(b, (*string)(inv.CustomerPrefers))
	b = append(b, `,"delivery":`...)
	b = appendString(b, string(inv.Delivery))
	b = append(b, `,"dueDate":`...)
	if b, err = appendTimeOrNull(b, inv.DueDate); err != nil {
		return nil, err
	}
	b = append(b, `,"failedAttempts":`...)
	b = strconv.AppendInt(b, int64(inv.FailedAttempts), 10)
	b = append(b, `,"id":`...)
	b = appendUUID(b, inv.Id)
	b = append(b, `,"invoiceNumber":`...)
	b = appendString(b, inv.InvoiceNumber)
	b = append(b, `,"lastRemindedAt":`...)
	if b, err = appendTimeOrNull(b, inv.LastRemindedAt); err != nil {
		return nil, err
	}
	b = append(b, `,"level3Sent":`...)
	b = strconv.AppendBool(b, inv.Level3Sent)
	if inv.LineItems != nil {
		b = append(b, `,"lineItems":`...)
		b = appendLines(b, *inv.LineItems)
	}
	b = append(b, `,"lines":`...)
	b = strconv.AppendInt(b, int64(inv.Lines), 10)
	b = append(b, `,"link":`...)
	b = appendStringOrNull(b, inv.Link)
	b = append(b, `,"locationName":`...)
	b = appendStringOrNull(b, inv.LocationName)
	b = append(b, `,"memo":`...)
	b = appendStringOrNull(b, inv.Memo)
	b = append(b, `,"merchantAccountId":`...)
	b = appendUUID(b, inv.MerchantAccountId)
	b = append(b, `,"mid":`...)
	b = appendString(b, inv.Mid)
	b = append(b, `,"paidAt":`...)
	if b, err = appendTimeOrNull(b, inv.PaidAt); err != nil {
		return nil, err
	}
	if inv.Payments != nil {
		b = append(b, `,"payments":`...)
		if b, err = appendPayments(b, *inv.Payments); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"poNumber":`...)
	b = appendStringOrNull(b, inv.PoNumber)
	b = append(b, `,"problem":`...)
	b = appendStringOrNull(b, inv.Problem)
	b = append(b, `,"reminders":`...)
	if inv.Reminders == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendBool(b, *inv.Reminders)
	}
	b = append(b, `,"remindersSent":`...)
	b = strconv.AppendInt(b, int64(inv.RemindersSent), 10)
	if inv.SavedCards != nil {
		b = append(b, `,"savedCards":`...)
		if b, err = appendSavedCards(b, *inv.SavedCards); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"scheduledSendAt":`...)
	if b, err = appendTimeOrNull(b, inv.ScheduledSendAt); err != nil {
		return nil, err
	}
	b = append(b, `,"sendProblem":`...)
	b = appendStringOrNull(b, inv.SendProblem)
	b = append(b, `,"sentAt":`...)
	if b, err = appendTimeOrNull(b, inv.SentAt); err != nil {
		return nil, err
	}
	b = append(b, `,"sentVia":`...)
	b = appendStringOrNull(b, (*string)(inv.SentVia))
	b = append(b, `,"status":`...)
	b = appendString(b, string(inv.Status))
	b = append(b, `,"subtotal":`...)
	b = appendDecimal(b, &inv.Subtotal)
	b = append(b, `,"taxAmount":`...)
	b = appendDecimal(b, &inv.TaxAmount)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, int64(inv.Version), 10)
	return append(b, '}'), nil
}

func appendLines(b []byte, lines []models.InvoiceLine) []byte {
	if lines == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range lines {
		l := &lines[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"amount":`...)
		b = appendDecimal(b, &l.Amount)
		b = append(b, `,"commodityCode":`...)
		b = appendStringOrNull(b, l.CommodityCode)
		b = append(b, `,"description":`...)
		b = appendString(b, l.Description)
		b = append(b, `,"quantity":`...)
		b = appendDecimal(b, &l.Quantity)
		b = append(b, `,"taxAmount":`...)
		b = appendDecimal(b, &l.TaxAmount)
		b = append(b, `,"taxRate":`...)
		if l.TaxRate == nil {
			b = append(b, "null"...)
		} else {
			b = appendDecimal(b, l.TaxRate)
		}
		b = append(b, `,"unitCost":`...)
		b = appendDecimal(b, &l.UnitCost)
		b = append(b, `,"uom":`...)
		b = appendStringOrNull(b, l.Uom)
		b = append(b, `,"upc":`...)
		b = appendStringOrNull(b, l.Upc)
		b = append(b, '}')
	}
	return append(b, ']')
}

func appendPayments(b []byte, payments []models.Payment) ([]byte, error) {
	if payments == nil {
		return append(b, "null"...), nil
	}
	var err error
	b = append(b, '[')
	for i := range payments {
		p := &payments[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"amount":`...)
		b = appendDecimal(b, &p.Amount)
		b = append(b, `,"amountRefunded":`...)
		b = appendDecimal(b, &p.AmountRefunded)
		b = append(b, `,"id":`...)
		b = appendUUID(b, p.Id)
		b = append(b, `,"lastFour":`...)
		b = appendStringOrNull(b, p.LastFour)
		b = append(b, `,"level3Sent":`...)
		b = strconv.AppendBool(b, p.Level3Sent)
		b = append(b, `,"method":`...)
		b = appendString(b, string(p.Method))
		b = append(b, `,"paidAt":`...)
		if b, err = appendTime(b, p.PaidAt); err != nil {
			return nil, err
		}
		b = append(b, `,"payerName":`...)
		b = appendStringOrNull(b, p.PayerName)
		b = append(b, `,"reference":`...)
		b = appendStringOrNull(b, p.Reference)
		b = append(b, `,"retRef":`...)
		b = appendStringOrNull(b, p.RetRef)
		b = append(b, `,"savedCard":`...)
		b = strconv.AppendBool(b, p.SavedCard)
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

func appendSavedCards(b []byte, cards []models.SavedCard) ([]byte, error) {
	if cards == nil {
		return append(b, "null"...), nil
	}
	var err error
	b = append(b, '[')
	for i := range cards {
		c := &cards[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"cardBrand":`...)
		b = appendStringOrNull(b, c.CardBrand)
		if c.ChargeConsentAt != nil { // left out when null, as encoding/json leaves it
			b = append(b, `,"chargeConsentAt":`...)
			if b, err = appendTime(b, *c.ChargeConsentAt); err != nil {
				return nil, err
			}
		}
		b = append(b, `,"expiry":`...)
		b = appendStringOrNull(b, c.Expiry)
		b = append(b, `,"id":`...)
		b = appendUUID(b, c.Id)
		b = append(b, `,"lastFour":`...)
		b = appendStringOrNull(b, c.LastFour)
		b = append(b, `,"savedAt":`...)
		if b, err = appendTime(b, c.SavedAt); err != nil {
			return nil, err
		}
		b = append(b, `,"savedByName":`...)
		b = appendString(b, c.SavedByName)
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

// appendDecimal writes d as its MarshalText does, as a JSON string (its
// characters need no escaping).
func appendDecimal(b []byte, d *jsonnum.Decimal) []byte {
	b = append(b, '"')
	b = d.Append(b, 'f')
	return append(b, '"')
}

// appendUUID writes id as its MarshalText does: 8-4-4-4-12 lowercase hex.
func appendUUID(b []byte, id uuid.UUID) []byte {
	var text [38]byte
	text[0], text[9], text[14], text[19], text[24], text[37] = '"', '-', '-', '-', '-', '"'
	hex.Encode(text[1:9], id[:4])
	hex.Encode(text[10:14], id[4:6])
	hex.Encode(text[15:19], id[6:8])
	hex.Encode(text[20:24], id[8:10])
	hex.Encode(text[25:37], id[10:])
	return append(b, text[:]...)
}

// appendTime writes t as its MarshalJSON does: RFC 3339 with the
// nanoseconds it has, refused outside the years 0–9999.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		return nil, err
	}
	return append(b, '"'), nil
}

func appendTimeOrNull(b []byte, t *time.Time) ([]byte, error) {
	if t == nil {
		return append(b, "null"...), nil
	}
	return appendTime(b, *t)
}

func appendStringOrNull(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendString(b, *s)
}

// appendString writes s as encoding/json writes a string (its
// appendString with escapeHTML, as json.Marshal and json.Encoder do):
// ", \ and control characters escaped, <, > and & as \u003c, \u003e and
// \u0026, U+2028 and U+2029 escaped, invalid UTF-8 as \ufffd.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
