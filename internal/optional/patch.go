package optional

import "encoding/json"

// Patch is a nullable member of a merge patch (RFC 7396): left out (Set
// false: keep the value), null (Set, Value nil: clear it) or a value.
type Patch[T any] struct {
	Set   bool
	Value *T
}

// UnmarshalJSON is called for null too, which sets the member to clear it.
func (p *Patch[T]) UnmarshalJSON(b []byte) error {
	p.Set, p.Value = true, nil
	if string(b) == "null" {
		return nil
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	p.Value = &v
	return nil
}

// MarshalJSON writes the value or null; a member left out is omitted by
// its omitzero tag (IsZero).
func (p Patch[T]) MarshalJSON() ([]byte, error) {
	if p.Value == nil {
		return []byte("null"), nil
	}
	return json.Marshal(*p.Value)
}

// IsZero: the member was left out.
func (p Patch[T]) IsZero() bool { return !p.Set }
