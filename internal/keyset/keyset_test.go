package keyset

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestRoundTripAndRefusals(t *testing.T) {
	c := Cursor{At: time.Date(2026, 11, 22, 1, 2, 3, 456789000, time.UTC), ID: uuid.New()}
	got, err := Decode(c.Encode())
	if err != nil || !got.At.Equal(c.At) || got.ID != c.ID {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []string{"", "not a cursor", base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2025-01-01T00:00:00Z"}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2025-01-01T00:00:00Z","id":"` + uuid.NewString() + `","x":1}`))} {
		if _, err := Decode(bad); err != ErrInvalid {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
