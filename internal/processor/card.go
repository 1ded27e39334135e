package processor

import "strings"

// Brand names the card network from the card number's leading digits:
// visa, mastercard, amex, discover, jcb, diners, or unknown.
func Brand(number string) string {
	p := func(n int) int { // the first n digits as a number, or -1
		if len(number) < n {
			return -1
		}
		v := 0
		for _, r := range number[:n] {
			if r < '0' || r > '9' {
				return -1
			}
			v = v*10 + int(r-'0')
		}
		return v
	}
	switch {
	case strings.HasPrefix(number, "4"):
		return "visa"
	case between(p(2), 51, 55), between(p(4), 2221, 2720):
		return "mastercard"
	case p(2) == 34, p(2) == 37:
		return "amex"
	case p(4) == 6011, p(2) == 65, between(p(3), 644, 649), between(p(6), 622126, 622925):
		return "discover"
	case between(p(4), 3528, 3589):
		return "jcb"
	case p(2) == 36, p(2) == 38, p(2) == 39, between(p(3), 300, 305):
		return "diners"
	}
	return "unknown"
}

func between(v, lo, hi int) bool { return v >= lo && v <= hi }

// LuhnValid reports whether number is 12 to 19 digits with a valid Luhn
// check digit.
func LuhnValid(number string) bool {
	if len(number) < 12 || len(number) > 19 {
		return false
	}
	sum := 0
	double := false
	for i := len(number) - 1; i >= 0; i-- {
		c := number[i]
		if c < '0' || c > '9' {
			return false
		}
		d := int(c - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// lastFour is the part of a card number that may be kept and shown.
func lastFour(number string) string {
	if len(number) < 4 {
		return ""
	}
	return number[len(number)-4:]
}
