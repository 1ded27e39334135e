package framing

import "testing"

func TestNetwork(t *testing.T) {
	for address, want := range map[string]string{
		"203.0.113.9":                   "203.0.113.9",
		"::ffff:203.0.113.9":            "203.0.113.9",
		"2001:db8:1:2:3:4:5:6":          "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff:ffff:ffff:1": "2001:db8:1:2::/64",
		"2001:db8:1:3::1":               "2001:db8:1:3::/64",
		"fe80::1%eth0":                  "fe80::/64",
		"::1":                           "::/64",
		"not an address":                "not an address",
	} {
		if got := Network(address); got != want {
			t.Errorf("Network(%q) = %q, want %q", address, got, want)
		}
	}
}

// Only net/http's own refusals are taken for refusals: an answer a handler
// writes never is.
func TestRefusal(t *testing.T) {
	for raw, want := range map[string]int{
		"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request":                                                 400,
		"HTTP/1.1 400 Bad Request: invalid header value\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request: invalid header value":     400,
		"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large":         431,
		"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Length: 3\r\n\r\nbad": 0,
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n":                                                                         0,
		"HTTP/1.1 100 Continue\r\n\r\n": 0,
		"{\"a\":1}":                     0,
	} {
		status, ok := refusal([]byte(raw))
		if want == 0 && ok || want != 0 && status != want {
			t.Errorf("refusal(%.50q) = %d, %v; want %d", raw, status, ok, want)
		}
	}
}
