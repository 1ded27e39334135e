package clip

import "testing"

// A cut never splits a character, and says so only when it cut.
func TestClip(t *testing.T) {
	for _, c := range []struct {
		s          string
		n          int
		to, marked string
	}{
		{"payreq", 10, "payreq", "payreq"},
		{"payreq", 6, "payreq", "payreq"},
		{"payreq", 3, "pay", "pay…"},
		{"café au lait", 4, "caf", "caf…"}, // é is two bytes: not split
		{"café au lait", 5, "café", "café…"},
		{"日本", 2, "", "…"},
		{"", 0, "", ""},
	} {
		if got := To(c.s, c.n); got != c.to {
			t.Errorf("To(%q, %d) = %q, want %q", c.s, c.n, got, c.to)
		}
		if got := Marked(c.s, c.n); got != c.marked {
			t.Errorf("Marked(%q, %d) = %q, want %q", c.s, c.n, got, c.marked)
		}
	}
}
