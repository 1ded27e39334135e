package secretfile

import (
	"bytes"
	"fmt"
	"path/filepath"
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
