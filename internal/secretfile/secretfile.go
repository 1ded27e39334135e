// Package secretfile loads the server's own secrets (signing key, pepper,
// encryption key) from files, creating them on first use so that a fresh
// machine needs no set-up.
package secretfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LoadOrCreate returns the contents of path. When the file does not exist it
// is created with the bytes from generate. Creation is atomic: a second
// process racing on the same path reads the first one's file, never a
// half-written one.
func LoadOrCreate(path string, generate func() ([]byte, error)) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("secretfile: read %s: %w", path, err)
	}
	content, err := generate()
	if err != nil {
		return nil, fmt.Errorf("secretfile: generate %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("secretfile: create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".secret-*")
	if err != nil {
		return nil, fmt.Errorf("secretfile: create %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(content); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("secretfile: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("secretfile: write %s: %w", path, err)
	}
	// Link fails when another process won the race; then its file is the one.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("secretfile: create %s: %w", path, err)
	}
	b, err = os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secretfile: read %s: %w", path, err)
	}
	return b, nil
}
