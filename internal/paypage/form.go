package paypage

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cockroachdb/apd/v3"

	"github.com/payreq/payreq/internal/invoice"
	"github.com/payreq/payreq/internal/payment"
	"github.com/payreq/payreq/internal/processor"
	"github.com/payreq/payreq/internal/web"
)

// form is the pay form as posted. CardNumber and CVV live only in this
// request's memory: they are never rendered back, stored or logged.
type form struct {
	CardNumber     string
	Expiry         string
	CVV            string
	CardholderName string
	Amount         string
	SaveCard       bool
	// ChargeConsent: the second box, consent to future charges of the
	// card saved (offered for invoices of a recurring series).
	ChargeConsent bool
	Prefers       string
	// Cleared: the form is shown again and its card number and security
	// code were emptied, which the page says.
	Cleared bool
}

// fieldOrder is the order of the fields on the page, for the error summary.
var fieldOrder = []string{"cardholderName", "cardNumber", "expiry", "cvv", "amount", "chargeConsent", "prefers"}

func readForm(v url.Values) form {
	return form{
		CardNumber:     v.Get("cardNumber"),
		Expiry:         strings.TrimSpace(v.Get("expiry")),
		CVV:            strings.TrimSpace(v.Get("cvv")),
		CardholderName: strings.TrimSpace(v.Get("cardholderName")),
		Amount:         strings.TrimSpace(v.Get("amount")),
		SaveCard:       v.Get("saveCard") == "on",
		ChargeConsent:  v.Get("chargeConsent") == "on",
		Prefers:        v.Get("prefers"),
	}
}

// redisplay is what the form shows again after an error: never the card
// number or the security code.
func (f form) redisplay() form {
	f.CardNumber, f.CVV, f.Cleared = "", "", true
	return f
}

var digitsPattern = regexp.MustCompile(`^\d+$`)

// validate checks the form against the balance and the clock, and returns
// the payment request, or messages keyed by field.
func (f form) validate(balance apd.Decimal, now time.Time) (payment.Request, map[string]string) {
	errs := map[string]string{}

	name := f.CardholderName
	switch {
	case name == "":
		errs["cardholderName"] = "Enter the name on the card."
	case !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0:
		errs["cardholderName"] = "Enter the name on the card using letters, spaces and punctuation only."
	case utf8.RuneCountInString(name) > 200:
		errs["cardholderName"] = "The name on the card must be at most 200 characters."
	}

	number := strings.NewReplacer(" ", "", "-", "").Replace(f.CardNumber)
	switch {
	case number == "":
		errs["cardNumber"] = "Enter the card number."
	case !digitsPattern.MatchString(number) || len(number) < 12 || len(number) > 19:
		errs["cardNumber"] = "Enter the card number as 12 to 19 digits, as on the card."
	case !processor.LuhnValid(number):
		errs["cardNumber"] = "This card number is not valid. Check it and enter it again."
	}

	expiry, msg := parseExpiry(f.Expiry, now)
	if msg != "" {
		errs["expiry"] = msg
	}

	switch {
	case f.CVV == "":
		errs["cvv"] = "Enter the security code."
	case !digitsPattern.MatchString(f.CVV) || len(f.CVV) < 3 || len(f.CVV) > 4:
		errs["cvv"] = "The security code is 3 or 4 digits."
	}

	amount, msg := parseAmount(f.Amount, balance)
	if msg != "" {
		errs["amount"] = msg
	}

	if f.ChargeConsent && !f.SaveCard {
		errs["chargeConsent"] = "To allow future charges, also tick the box to save this card, or leave both empty."
	}

	if f.Prefers != "" && f.Prefers != invoice.Email && f.Prefers != invoice.Text {
		errs["prefers"] = "Choose email, text message, or no change."
	}

	if len(errs) > 0 {
		return payment.Request{}, errs
	}
	return payment.Request{
		Card:     processor.Card{Number: number, Expiry: expiry, CVV: f.CVV, Name: name},
		Amount:   amount,
		SaveCard: f.SaveCard,
		Prefers:  f.Prefers,
	}, nil
}

// parseExpiry reads MMYY (also MM/YY and MM/YYYY) and returns it as MMYY.
// A card is good through the last day of its expiry month.
func parseExpiry(s string, now time.Time) (string, string) {
	if s == "" {
		return "", "Enter the expiry date as MMYY, for example 0830."
	}
	s = strings.ReplaceAll(s, " ", "")
	month, year := "", ""
	if m, y, ok := strings.Cut(s, "/"); ok {
		month, year = m, y
		if len(month) == 1 {
			month = "0" + month
		}
		if len(year) == 4 && strings.HasPrefix(year, "20") {
			year = year[2:]
		}
	} else if len(s) == 4 {
		month, year = s[:2], s[2:]
	}
	if len(month) != 2 || len(year) != 2 || !digitsPattern.MatchString(month+year) {
		return "", "Enter the expiry date as MMYY, for example 0830."
	}
	m, _ := strconv.Atoi(month)
	y, _ := strconv.Atoi(year)
	if m < 1 || m > 12 {
		return "", "The expiry month must be 01 to 12."
	}
	now = now.UTC()
	y += 2000
	if y < now.Year() || y == now.Year() && time.Month(m) < now.Month() {
		return "", "This card has expired. Use a card whose expiry date is in the future."
	}
	if y > now.Year()+20 {
		return "", "This expiry date is too far in the future. Check it and enter it again."
	}
	return month + year, ""
}

// parseAmount reads a dollar amount as every form does (web.ReadMoney:
// 12.30, 1,234.5 or $7, never through float): more than 0, at most two
// decimal places, at most the balance. Empty means the whole balance.
func parseAmount(s string, balance apd.Decimal) (apd.Decimal, string) {
	if s == "" {
		return balance, ""
	}
	const otherwise = "Enter the amount in dollars and cents, for example 12.30."
	d, msg := web.ReadMoney(s, otherwise)
	if msg != "" {
		return apd.Decimal{}, msg
	}
	var reduced apd.Decimal
	reduced.Reduce(&d)
	switch {
	case d.Sign() <= 0:
		return apd.Decimal{}, "The amount must be more than $0.00."
	case reduced.Exponent < -2:
		return apd.Decimal{}, "The amount can have at most two decimal places (cents)."
	case d.Cmp(&balance) > 0:
		return apd.Decimal{}, "The amount can be at most the balance of " + invoice.Money(balance) + "."
	}
	var amount apd.Decimal
	if _, err := apd.BaseContext.WithPrecision(34).Quantize(&amount, &d, -2); err != nil {
		return apd.Decimal{}, otherwise
	}
	return amount, ""
}
