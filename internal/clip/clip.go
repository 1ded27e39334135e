// Package clip cuts a text to a length in bytes without splitting a UTF-8
// character: what payreq keeps, logs or tells of a text that may be long
// (a processor's or a mail server's error, a name or value a client sent).
package clip

// To is s cut to at most n bytes, on a character boundary.
func To(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// Marked is To with "…" after it when s was cut, so that a reader knows
// there was more.
func Marked(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return To(s, n) + "…"
}
