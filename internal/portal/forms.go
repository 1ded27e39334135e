package portal

import (
	"crypto/rand"
	"encoding/base64"
	"errors"

	"github.com/payreq/payreq/internal/idempotency"
	"github.com/payreq/payreq/internal/rule"
)

// The portal's forms share three things: the one-time key of a form that
// makes something or moves money, the answer to that key sent again with
// other values, and the reading of amounts (web.ReadMoney, the pay page's
// too).

// idempotencyField is the hidden field of a form that makes something or
// moves money: a key made when the form is shown, so that the form sent
// twice makes it once. (The refund form names it "key".)
const idempotencyField = "idempotencyKey"

// newFormKey is a one-time idempotency key for a form about to be shown.
func newFormKey() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// keyRefusal is what a form answers when the domain refused its one-time
// key, in the portal's words, with a new key set in field of form so that
// the form sent again is a new request: a key missing or too long
// (idempotency.ErrKeyLength: the form is incomplete), or one that did
// something before with other values (did says what: "made an invoice").
// Any other err is err.
func keyRefusal(err error, form *formPage, field, did string) error {
	switch {
	case errors.Is(err, idempotency.ErrKeyLength):
		form.page.Form.Set(field, newFormKey())
		return rule.New(rule.Invalid, "", "Form incomplete", "This form is incomplete. Check its values and send it again.")
	case rule.Is(err, rule.KeyReused):
		// Sent before with other values (back, edited, sent again):
		// nothing was done now.
		form.page.Form.Set(field, newFormKey())
		return rule.Newf(rule.KeyReused, "", "Form sent before", "This form already %s with other values, so nothing was done now. "+
			"Check the values and send the form again to do it once more.", did)
	}
	return err
}
