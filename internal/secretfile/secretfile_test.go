package secretfile

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestConcurrentCreatorsAgreeOnOneSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "key")
	var wg sync.WaitGroup
	got := make([][]byte, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := LoadOrCreate(path, func() ([]byte, error) { return []byte(fmt.Sprint("secret-", i)), nil })
			if err != nil {
				t.Error(err)
			}
			got[i] = b
		}()
	}
	wg.Wait()
	for i := range got {
		if !bytes.Equal(got[i], got[0]) {
			t.Fatalf("creator %d read %q, creator 0 read %q", i, got[i], got[0])
		}
	}
	again, err := LoadOrCreate(path, func() ([]byte, error) { return []byte("other"), nil })
	if err != nil || !bytes.Equal(again, got[0]) {
		t.Fatalf("second load = %q, %v", again, err)
	}
}

// A key file holds what payreq secrets init writes: lines of 64 hex
// digits. Anything else is refused, naming the line, never its content.
func TestHexKeys(t *testing.T) {
	a, b := strings.Repeat("ab", 32), strings.Repeat("0F", 32)
	keys, err := HexKeys([]byte(a + "\n" + b + "\n"))
	if err != nil || len(keys) != 2 || len(keys[0]) != 32 || keys[0][0] != 0xab || keys[1][0] != 0x0f {
		t.Fatalf("two keys: %x, %v", keys, err)
	}
	if keys, err := HexKeys([]byte(a)); err != nil || len(keys) != 1 {
		t.Errorf("a key without a final newline: %x, %v", keys, err)
	}
	for name, content := range map[string]string{
		"empty":                  "",
		"31 characters":          strings.Repeat("7", 31) + "\n",
		"40 spaces":              strings.Repeat(" ", 40),
		"33 newlines":            strings.Repeat("\n", 33),
		"62 hex digits":          strings.Repeat("ab", 31) + "\n",
		"66 hex digits":          strings.Repeat("ab", 33) + "\n",
		"not hex":                strings.Repeat("zz", 32) + "\n",
		"a blank line after one": a + "\n\n",
		"a blank line between":   a + "\n\n" + b + "\n",
		"spaces around a key":    " " + a + " \n",
		"a carriage return":      a + "\r\n",
		"raw bytes":              string(bytes.Repeat([]byte{7}, 32)),
	} {
		if keys, err := HexKeys([]byte(content)); err == nil {
			t.Errorf("%s: taken as %x", name, keys)
		} else if strings.Contains(err.Error(), "ab") || strings.Contains(err.Error(), "7777") {
			t.Errorf("%s: the error repeats the content: %v", name, err)
		}
	}
}
