package people

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// Device tokens (decisions: "Device cookies", OWASP's defence against
// lockouts and hashing floods): a sign-in that passes both steps gets one,
// a random id and an HMAC under DeviceKey of the person and that id, which
// the browser keeps a year. Nothing is stored: the HMAC alone proves that
// this browser signed in as the person before.

// newDevice is a new device token of person; "" without a DeviceKey.
func (s *Store) newDevice(person uuid.UUID) string {
	if len(s.DeviceKey) == 0 {
		return ""
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		panic(fmt.Sprintf("people: crypto/rand failed: %v", err))
	}
	b64 := base64.RawURLEncoding.EncodeToString
	return b64(id) + "." + b64(s.deviceMAC(person, id))
}

// deviceOf reports whether token is a device token of person.
func (s *Store) deviceOf(token string, person uuid.UUID) bool {
	idText, macText, ok := strings.Cut(token, ".")
	if !ok || len(s.DeviceKey) == 0 {
		return false
	}
	id, err1 := base64.RawURLEncoding.DecodeString(idText)
	mac, err2 := base64.RawURLEncoding.DecodeString(macText)
	return err1 == nil && err2 == nil && len(id) == 16 && hmac.Equal(mac, s.deviceMAC(person, id))
}

func (s *Store) deviceMAC(person uuid.UUID, id []byte) []byte {
	m := hmac.New(sha256.New, s.DeviceKey)
	m.Write([]byte("payreq device\x00"))
	m.Write(person[:])
	m.Write(id)
	return m.Sum(nil)
}
