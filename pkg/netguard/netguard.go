// Package netguard decides which network addresses a renderer may connect to. Renderers
// fetch and render what teams name, so a batch must not turn them into a probe of the
// operator's network: every address of the IANA special-purpose registries (IPv4 and
// IPv6) is refused unless explicitly permitted, and the check runs on the address
// actually dialled, after name resolution (as a net.Dialer's Control function), so
// neither a DNS answer nor a redirect can get around it.
//
// The ranges come from code.dny.dev/ssrf, which is generated from the IANA registries:
// in IPv4, "this network" (0/8), private use, shared address space (100.64/10, carrier
// NAT and some cloud metadata services), loopback, link local, the IETF protocol
// assignments, documentation, benchmarking (198.18/15), reserved (240/4, with the
// limited broadcast address) and multicast; in IPv6, everything outside global unicast
// (2000::/3: loopback, unspecified, IPv4-mapped and IPv4-compatible addresses, NAT64
// 64:ff9b::/96 and 64:ff9b:1::/48, discard, unique local, link local, multicast) and the
// special ranges inside it (Teredo and the other IETF assignments in 2001::/23,
// documentation, 6to4 2002::/16, AS112). An IPv4-mapped address is judged as the IPv4
// address it carries; for the other forms that embed an IPv4 address (NAT64, 6to4,
// Teredo, IPv4-compatible) the whole range is refused and the reason names the embedded
// address.
package netguard

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"syscall"

	"code.dny.dev/ssrf"
	"github.com/tribunal-dev/tribunal/pkg/errclass"
)

// ErrForbidden marks an address a Guard refuses.
var ErrForbidden = errclass.New(errclass.Refused, "address not allowed")

// Ranges a Guard may be told to permit.
var (
	// Loopback is 127.0.0.0/8 and ::1.
	Loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	// PrivateUse is RFC 1918 (10/8, 172.16/12, 192.168/16) and IPv6 unique local
	// addresses (fc00::/7, RFC 4193).
	PrivateUse = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("fc00::/7")}
	// SharedAddress is RFC 6598's 100.64.0.0/10: carrier-grade NAT, and in practice
	// overlay networks inside an organisation.
	SharedAddress = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/10")}
	// LinkLocal is 169.254.0.0/16 and fe80::/10, where cloud metadata services answer.
	LinkLocal = []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10")}
)

// Guard checks addresses against the special-purpose ranges. It is safe for concurrent
// use.
type Guard struct {
	g *ssrf.Guardian
}

// New returns a Guard that refuses every special-purpose address except those in
// permit. Ports and networks are not restricted: only where a connection goes.
func New(permit ...[]netip.Prefix) *Guard {
	var v4, v6 []netip.Prefix
	for _, list := range permit {
		for _, p := range list {
			if p.Addr().Is4() {
				v4 = append(v4, p)
			} else {
				v6 = append(v6, p)
			}
		}
	}
	return &Guard{g: ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork(), ssrf.WithAllowedV4Prefixes(v4...), ssrf.WithAllowedV6Prefixes(v6...))}
}

// Check returns nil when addr may be dialled, else an error wrapping ErrForbidden that
// names the address and the range that refused it.
func (g *Guard) Check(addr netip.Addr) error {
	// An IPv4-mapped address reaches the IPv4 address it carries; a zone says nothing
	// about the range (and would keep a prefix from matching).
	ip := addr.Unmap().WithZone("")
	err := g.g.SafeAddr(ip)
	if err == nil {
		return nil
	}
	detail := strings.TrimPrefix(err.Error(), ssrf.ErrProhibitedIP.Error()+": ")
	if inner, form, ok := Embedded(ip); ok {
		detail += fmt.Sprintf(" (%s of %s)", form, inner)
	}
	return fmt.Errorf("%w: %s", ErrForbidden, detail)
}

// ForURLs returns the Guard for every connection a team's input leads a renderer to make
// (artifact URLs, rubric routes and what their pages load): every special-purpose
// address refused, or, with allowPrivate, every one but loopback, private use, shared
// address space and link local (see IsPrivate). It is the one rule both follow, so an
// operator's --allow-private-urls means the same thing wherever it applies. permit adds
// ranges an operator named explicitly (an allowed host given as an IP address).
func ForURLs(allowPrivate bool, permit ...[]netip.Prefix) *Guard {
	if allowPrivate {
		permit = slices.Concat(permit, private)
	}
	return New(permit...)
}

// private are the ranges ForURLs(true) opens.
var private = [][]netip.Prefix{Loopback, PrivateUse, SharedAddress, LinkLocal}

var (
	strictGuard  = New()
	privateGuard = New(private...)
)

// IsPrivate reports whether addr is refused by ForURLs(false) but reached with
// ForURLs(true), so a refusal can name the setting that would allow it (and say so
// when none would).
func IsPrivate(addr netip.Addr) bool {
	return strictGuard.Check(addr) != nil && privateGuard.Check(addr) == nil
}

// Control is a net.Dialer Control function: it runs on every address the dialer is
// about to connect to, after name resolution.
func (g *Guard) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unexpected address %q", ErrForbidden, address)
	}
	return g.Check(ap.Addr())
}

var (
	nat64       = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
	teredo      = netip.MustParsePrefix("2001::/32")
	v4Compat    = netip.MustParsePrefix("::/96")
	v4CompatLow = netip.MustParsePrefix("::/127") // :: and ::1 are not IPv4-compatible addresses
)

// Embedded returns the IPv4 address an IPv6 address carries in one of the forms that
// embed one: NAT64 (64:ff9b::/96, RFC 6052), 6to4 (2002::/16, RFC 3056), Teredo
// (2001::/32, the client's address, RFC 4380) and IPv4-compatible (::/96, RFC 4291), with
// the form's name. IPv4-mapped addresses are not listed: netip.Addr.Unmap handles them.
func Embedded(ip netip.Addr) (netip.Addr, string, bool) {
	if !ip.Is6() || ip.Is4In6() {
		return netip.Addr{}, "", false
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip):
		return netip.AddrFrom4([4]byte(b[12:16])), "NAT64", true
	case sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte(b[2:6])), "6to4", true
	case teredo.Contains(ip):
		var v4 [4]byte
		binary.BigEndian.PutUint32(v4[:], ^binary.BigEndian.Uint32(b[12:16]))
		return netip.AddrFrom4(v4), "Teredo", true
	case v4Compat.Contains(ip) && !v4CompatLow.Contains(ip):
		return netip.AddrFrom4([4]byte(b[12:16])), "IPv4-compatible", true
	}
	return netip.Addr{}, "", false
}
