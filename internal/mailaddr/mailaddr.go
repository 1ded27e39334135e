// Package mailaddr says which text is an email address the service takes.
// The address is kept exactly as sent; this only decides whether it is one.
package mailaddr

import (
	"net/mail"
	"strings"
)

// Valid reports whether s is one bare address (no display name, no angle
// brackets, no comments) that net/mail parses and whose domain has a dot:
// "dana@example.com" and "\"x.y\"@example.com" are; "x@example.com." and
// "Dana <dana@example.com>" are not.
func Valid(s string) bool {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" {
		return false
	}
	at := strings.LastIndexByte(s, '@')
	if at < 0 || !strings.Contains(s[at+1:], ".") {
		return false
	}
	if local := s[:at]; len(local) >= 2 && local[0] == '"' && local[len(local)-1] == '"' {
		// A quoted local part parses to its unquoted form; the domain must
		// still be all that follows it.
		return strings.HasSuffix(a.Address, s[at:])
	}
	return a.Address == s
}
