package people

import (
	"errors"
	"strings"
	"testing"
)

// A hash verifies its password and no other. While every shared slot is
// taken an anonymous check waits SlotWait, then is refused (ErrBusy, the
// portal's busy page), and a check carrying a device cookie still runs in
// the slot reserved to it.
func TestHasherBoundsHashesAtOnce(t *testing.T) {
	h := NewHasher(2)
	hash, err := h.Hash("a long enough password")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("hash %q is not argon2id with m=19 MiB, t=2, p=1", hash)
	}
	for pw, want := range map[string]bool{"a long enough password": true, "a long enough passwore": false} {
		if ok, err := h.Verify(hash, pw); err != nil || ok != want {
			t.Errorf("Verify(%q) = %v, %v; want %v", pw, ok, err, want)
		}
	}
	slot, err := h.acquire(false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Verify(hash, "a long enough password"); !errors.Is(err, ErrBusy) {
		t.Errorf("with every shared slot taken: %v, want ErrBusy", err)
	}
	if _, err := h.Hash("another long password"); !errors.Is(err, ErrBusy) {
		t.Errorf("a new hash with every shared slot taken: %v, want ErrBusy", err)
	}
	if ok, err := h.verify(hash, "a long enough password", true); !ok || err != nil {
		t.Errorf("a device cookie's check with the shared slots taken: %v, %v; want it verified", ok, err)
	}
	<-slot
	if ok, err := h.Verify("", "anything at all here"); ok || err != nil {
		t.Errorf("no hash (an unknown email) verified: %v %v", ok, err)
	}
}

// Passwords zxcvbn guesses soon are refused with the reason in plain
// words: a common one with digits, one built from the email or the name;
// a passphrase of uncommon words is taken.
func TestCheckPassword(t *testing.T) {
	for pw, want := range map[string]string{
		"short":                        "at least 12",
		strings.Repeat("x", 129):       "at most 128",
		"password1234":                 "common password",
		"Unbelievable":                 "too easy to guess",
		"qwertyuiop12":                 "too easy to guess",
		"dana.whitfield is here!!":     "email",
		"WhitfieldDana!":               "your email or your name",
		"correct horse battery":        "",
		"plinth marmot cobalt lantern": "",
		"日本語のパスワードはこれです十二": "",
	} {
		err := CheckPassword("password", "Dana.Whitfield@example.com", "Dana Whitfield", pw)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q refused: %v", pw, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: %v, want a refusal saying %q", pw, err, want)
		}
	}
}
