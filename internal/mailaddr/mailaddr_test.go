package mailaddr

import "testing"

func TestValid(t *testing.T) {
	for s, want := range map[string]bool{
		"dana@example.com":            true,
		"Dana.W+inv@mail.example.org": true,
		`"x.y"@example.com`:           true,
		`"x y"@example.com`:           true,
		"x@example.com.":              false,
		"x@localhost":                 false,
		"Dana <dana@example.com>":     false,
		"<dana@example.com>":          false,
		"dana@example.com (Dana)":     false,
		"dana@":                       false,
		"@example.com":                false,
		"":                            false,
	} {
		if got := Valid(s); got != want {
			t.Errorf("Valid(%q) = %v, want %v", s, got, want)
		}
	}
}
