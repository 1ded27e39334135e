// Package optional moves between a value that may be absent (a pointer: a
// nullable column, an optional member of a request) and the value shown or
// sent for it.
package optional

// String is s, or nil when s is "".
func String(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Value is *p, or the zero value when p is nil.
func Value[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
