// Package secretfile loads the server's own secrets (signing key, pepper,
// encryption key) from files, creating them on first use so that a fresh
// machine needs no set-up.
package secretfile

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

// MissingError: a secret file that does not exist.
type MissingError struct{ Path string }

func (e *MissingError) Error() string { return "secretfile: " + e.Path + " does not exist" }

// Load returns the contents of path; a file that does not exist is a
// *MissingError.
func Load(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &MissingError{Path: path}
	}
	if err != nil {
		return nil, fmt.Errorf("secretfile: read %s: %w", path, err)
	}
	return b, nil
}

// Create writes a new secret file, readable by its owner only; an
// existing file is fs.ErrExist and stays as it is.
func Create(path string, content []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("secretfile: create %s: %w", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("secretfile: create %s: %w", path, err)
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("secretfile: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return fmt.Errorf("secretfile: write %s: %w", path, err)
	}
	return nil
}

// HexKeys reads a file of keys as payreq secrets init writes it: a key a
// line, each 64 hex digits (32 bytes), the first one current. Anything
// else (an empty file, a blank or short line, spaces) is an error naming
// the line, never its content.
func HexKeys(b []byte) ([][]byte, error) {
	text := strings.TrimSuffix(string(b), "\n")
	if text == "" {
		return nil, errors.New("holds no key; each line must be 64 hex digits (32 bytes), as payreq secrets init writes")
	}
	var keys [][]byte
	for i, line := range strings.Split(text, "\n") {
		key, err := hex.DecodeString(line)
		if err != nil || len(key) != 32 {
			return nil, fmt.Errorf("line %d is not 64 hex digits (32 bytes); each line must be, as payreq secrets init writes", i+1)
		}
		keys = append(keys, key)
	}
	return keys, nil
}
