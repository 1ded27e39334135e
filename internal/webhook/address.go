package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/payreq/payreq/internal/rule"
)

// MaxURL is the longest endpoint URL taken.
const MaxURL = 2048

// Resolver looks host names up; net.DefaultResolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// notPublic are the ranges no webhook may reach (unless private addresses
// are allowed): this network, private (RFC 1918, unique-local), carrier
// NAT, loopback, link-local, IETF protocol assignments, benchmarking,
// documentation, multicast and reserved ranges; and the IPv6 ranges that
// lead to IPv4 or site-local space (IPv4-compatible and -mapped, NAT64,
// 6to4, the old site-local).
var notPublic = func() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
		"224.0.0.0/4", "240.0.0.0/4",
		"::/96", "::1/128", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001:db8::/32", "2002::/16",
		"fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}()

// Public says whether a is an address on the public internet. An address
// with a zone is link-scoped, never public (and no prefix contains it).
func Public(a netip.Addr) bool {
	if !a.IsValid() || a.Zone() != "" {
		return false
	}
	for _, p := range notPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// badURL refuses an endpoint URL: why, for errors.url.
func badURL(why string) error { return rule.InvalidField("url", why) }

// notPublicURL is the one refusal of a host that is, or resolves to, an
// address off the public internet: the same words whatever the address.
// What the host resolved to (detail) wraps it, for the server's log only:
// an answer naming it would let a caller map the network.
func notPublicURL(detail string) error {
	return fmt.Errorf("webhook: %s: %w", detail, badURL("must be on the public internet"))
}

// checkURL refuses what may not be an endpoint: not https (plain http only
// when private addresses are allowed), credentials in it, longer than
// MaxURL, a port outside 1–65535, a host that has an IPv6 zone (always),
// or, unless private addresses are allowed, a host that is, or resolves
// to, an address that is not public. A name that does not
// resolve now is taken: every delivery checks again.
func checkURL(ctx context.Context, raw string, allowPrivate bool, r Resolver) error {
	if len(raw) > MaxURL {
		return badURL(fmt.Sprintf("must be at most %d characters", MaxURL))
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return badURL("must be an absolute https:// URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowPrivate:
	default:
		return badURL("must be an https:// URL")
	}
	if u.User != nil {
		return badURL("must not hold a user name or password")
	}
	if u.Fragment != "" {
		return badURL("must not have a fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return badURL("must have a port from 1 to 65535")
		}
	}
	// A zone (%25 in the URL) names a link of this machine: refused
	// wherever private addresses are allowed too, as a delivery's dial is.
	host := strings.TrimSuffix(u.Hostname(), ".")
	if strings.Contains(host, "%") {
		return badURL("must not name an IPv6 zone (a link of the server, written with %25)")
	}
	if allowPrivate {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !Public(a) {
			return notPublicURL(host + " is not a public address")
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		// LookupNetIP gives an IPv4 address as IPv4-mapped IPv6.
		if a.Is4In6() {
			a = a.Unmap()
		}
		if !Public(a) {
			return notPublicURL(host + " resolves to " + a.String())
		}
	}
	return nil
}

// errNotPublic: a delivery's connection would reach an address that is not public.
var errNotPublic = errors.New("the address is not on the public internet")

// dialControl refuses connections to addresses that are not public (an
// IPv6 zone included): it runs after DNS, on the address actually dialled,
// so a name that came to resolve to a private address since the endpoint
// was made is refused too, and so is a URL stored before a rule existed.
func dialControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook: dial %s: %w", address, err)
	}
	if !Public(ap.Addr()) {
		return fmt.Errorf("webhook: dial %s: %w", ap.Addr(), errNotPublic)
	}
	return nil
}

// newDialer is the dialer of deliveries.
func newDialer(allowPrivate bool) *net.Dialer {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if !allowPrivate {
		d.Control = dialControl
	}
	return d
}
