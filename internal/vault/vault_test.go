package vault

import (
	"bytes"
	"testing"
)

func TestSealOpenAndRotation(t *testing.T) {
	oldKey, _ := GenerateKeyFile()
	newKey, _ := GenerateKeyFile()
	old, err := New(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	sealed, oldID, err := old.Seal("123456789", "application:1:tax_id")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("123456789")) {
		t.Fatal("sealed value contains the plaintext")
	}
	rotated, err := New(append(newKey, oldKey...))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rotated.Open(sealed, oldID, "application:1:tax_id"); err != nil || got != "123456789" {
		t.Fatalf("open after rotation = %q, %v", got, err)
	}
	if _, err := rotated.Open(sealed, oldID, "application:2:tax_id"); err == nil {
		t.Fatal("a value opened under another row's aad")
	}
	_, newID, _ := rotated.Seal("x", "a")
	if newID == oldID {
		t.Fatal("rotation kept sealing with the old key")
	}
}
