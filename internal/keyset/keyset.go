// Package keyset is the opaque cursor of newest-first keyset pages: the
// position (time, id) after the last item of a page.
package keyset

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
)

// ErrInvalid is a cursor this service did not make.
var ErrInvalid = errors.New("invalid cursor")

// Cursor is the (time, id) of the last item of a page.
type Cursor struct {
	At time.Time `json:"t"`
	ID uuid.UUID `json:"id"`
}

// Encode is the cursor as clients see it: base64url of its JSON.
func (c Cursor) Encode() string {
	b, _ := json.Marshal(c) // a time and a uuid always marshal
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode reads a cursor made by Encode.
func Decode(s string) (Cursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, ErrInvalid
	}
	var c Cursor
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.At.IsZero() || c.ID == uuid.Nil {
		return Cursor{}, ErrInvalid
	}
	return c, nil
}
