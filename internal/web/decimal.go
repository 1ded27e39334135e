package web

import (
	"regexp"
	"strings"

	"github.com/cockroachdb/apd/v3"
)

// Decimal reads a number as people type it into a form, never through
// float: "12", "1,234.50", "12." and, with money, "$12.30" and "-$5"
// too. A comma only separates thousands, in groups of three: "5,00" is
// refused rather than read as 500 (a comma for cents, as much of the
// world writes). The one reader of every form's numbers (the portal's and
// the pay page's); the domain judges places and range.
func Decimal(s string, money bool) (apd.Decimal, bool) {
	s = strings.TrimSpace(s)
	if money {
		if rest, ok := strings.CutPrefix(s, "-$"); ok {
			s = "-" + rest
		} else {
			s = strings.TrimPrefix(s, "$")
		}
	}
	if strings.Contains(s, ",") {
		if !thousands.MatchString(s) {
			return apd.Decimal{}, false
		}
		s = strings.ReplaceAll(s, ",", "")
	}
	if !typedNumber.MatchString(s) || len(s) > 40 {
		return apd.Decimal{}, false
	}
	d, _, err := apd.NewFromString(strings.TrimSuffix(s, "."))
	if err != nil {
		return apd.Decimal{}, false
	}
	return *d, true
}

var (
	// thousands is a number whose commas separate groups of three digits.
	thousands = regexp.MustCompile(`^-?[0-9]{1,3}(,[0-9]{3})+(\.[0-9]*)?$`)
	// typedNumber is digits, perhaps signed, with perhaps a decimal point
	// and more digits: no exponent, no NaN or Infinity, no hex.
	typedNumber = regexp.MustCompile(`^-?[0-9]+(\.[0-9]*)?$`)
)

// ReadMoney is an amount typed into a money field, read by Decimal, or
// the message to show beside the field: a comma where the dot belongs
// says so, anything else gets otherwise.
func ReadMoney(typed, otherwise string) (apd.Decimal, string) {
	if d, ok := Decimal(typed, true); ok {
		return d, ""
	}
	if strings.Contains(typed, ",") {
		return apd.Decimal{}, "Use a dot for cents, as in 5.00."
	}
	return apd.Decimal{}, otherwise
}
