package netguard

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// specialPurpose has one address in every range of the IANA IPv4 and IPv6
// special-purpose address registries (iana-ipv4-special-registry,
// iana-ipv6-special-registry), plus multicast and the deprecated IPv4-compatible form,
// which are not in the registries but never a web server. internal marks the ranges
// New(Loopback, PrivateUse, SharedAddress, LinkLocal) lets through.
var specialPurpose = []struct {
	rng, addr string
	internal  bool
}{
	// IPv4 (RFC 6890 and its updates).
	{"0.0.0.0/8 this network (RFC 791)", "0.1.2.3", false},
	{"0.0.0.0/32 this host (RFC 1122)", "0.0.0.0", false},
	{"10.0.0.0/8 private use (RFC 1918)", "10.1.2.3", true},
	{"100.64.0.0/10 shared address space (RFC 6598)", "100.64.0.1", true},
	{"100.64.0.0/10: a cloud metadata address in it", "100.100.100.200", true},
	{"127.0.0.0/8 loopback (RFC 1122)", "127.0.0.1", true},
	{"127.0.0.0/8 loopback, not only .1", "127.255.255.254", true},
	{"169.254.0.0/16 link local (RFC 3927)", "169.254.169.254", true},
	{"172.16.0.0/12 private use (RFC 1918)", "172.31.255.255", true},
	{"192.0.0.0/24 IETF protocol assignments (RFC 6890)", "192.0.0.100", false},
	{"192.0.0.0/29 IPv4 service continuity prefix (RFC 7335)", "192.0.0.5", false},
	{"192.0.0.8/32 IPv4 dummy address (RFC 7600)", "192.0.0.8", false},
	{"192.0.0.9/32 port control protocol anycast (RFC 7723)", "192.0.0.9", false},
	{"192.0.0.10/32 TURN anycast (RFC 8155)", "192.0.0.10", false},
	{"192.0.0.170/32 NAT64/DNS64 discovery (RFC 7050)", "192.0.0.170", false},
	{"192.0.0.171/32 NAT64/DNS64 discovery (RFC 7050)", "192.0.0.171", false},
	{"192.0.2.0/24 documentation TEST-NET-1 (RFC 5737)", "192.0.2.1", false},
	{"192.31.196.0/24 AS112-v4 (RFC 7535)", "192.31.196.1", false},
	{"192.52.193.0/24 AMT (RFC 7450)", "192.52.193.1", false},
	{"192.88.99.0/24 deprecated 6to4 relay anycast (RFC 7526)", "192.88.99.1", false},
	{"192.168.0.0/16 private use (RFC 1918)", "192.168.1.1", true},
	{"192.175.48.0/24 direct delegation AS112 service (RFC 7534)", "192.175.48.1", false},
	{"198.18.0.0/15 benchmarking (RFC 2544)", "198.18.0.1", false},
	{"198.18.0.0/15 benchmarking, upper half", "198.19.255.254", false},
	{"198.51.100.0/24 documentation TEST-NET-2 (RFC 5737)", "198.51.100.1", false},
	{"203.0.113.0/24 documentation TEST-NET-3 (RFC 5737)", "203.0.113.1", false},
	{"240.0.0.0/4 reserved (RFC 1112)", "240.0.0.1", false},
	{"255.255.255.255/32 limited broadcast (RFC 919)", "255.255.255.255", false},
	{"224.0.0.0/4 multicast (RFC 5771)", "224.0.0.251", false},

	// IPv6 (RFC 6890 and its updates).
	{"::1/128 loopback (RFC 4291)", "::1", true},
	{"::/128 unspecified (RFC 4291)", "::", false},
	{"::ffff:0:0/96 IPv4-mapped, of loopback (RFC 4291)", "::ffff:127.0.0.1", true},
	{"::ffff:0:0/96 IPv4-mapped, of a benchmarking address", "::ffff:198.18.0.1", false},
	{"::/96 IPv4-compatible, of loopback (RFC 4291, deprecated)", "::127.0.0.1", false},
	{"::/96 IPv4-compatible, of a public address", "::8.8.8.8", false},
	{"64:ff9b::/96 IPv4-IPv6 translation, NAT64 of loopback (RFC 6052)", "64:ff9b::7f00:1", false},
	{"64:ff9b::/96 NAT64 of a public address", "64:ff9b::808:808", false},
	{"64:ff9b:1::/48 local-use IPv4/IPv6 translation (RFC 8215)", "64:ff9b:1::a00:1", false},
	{"100::/64 discard-only (RFC 6666)", "100::1", false},
	{"100:0:0:1::/64 dummy IPv6 prefix (RFC 9780)", "100:0:0:1::1", false},
	{"2001::/23 IETF protocol assignments (RFC 2928)", "2001:1ff::1", false},
	{"2001::/32 Teredo (RFC 4380)", "2001:0:4136:e378:8000:63bf:80ff:fffe", false},
	{"2001:1::1/128 port control protocol anycast (RFC 7723)", "2001:1::1", false},
	{"2001:1::2/128 TURN anycast (RFC 8155)", "2001:1::2", false},
	{"2001:1::3/128 DNS-SD service registration protocol anycast (RFC 9665)", "2001:1::3", false},
	{"2001:2::/48 benchmarking (RFC 5180)", "2001:2::1", false},
	{"2001:3::/32 AMT (RFC 7450)", "2001:3::1", false},
	{"2001:4:112::/48 AS112-v6 (RFC 7535)", "2001:4:112::1", false},
	{"2001:10::/28 deprecated ORCHID (RFC 4843)", "2001:10::1", false},
	{"2001:20::/28 ORCHIDv2 (RFC 7343)", "2001:20::1", false},
	{"2001:30::/28 drone remote ID protocol entity tags (RFC 9374)", "2001:30::1", false},
	{"2001:db8::/32 documentation (RFC 3849)", "2001:db8::1", false},
	{"2002::/16 6to4, of loopback (RFC 3056)", "2002:7f00:1::1", false},
	{"2002::/16 6to4, of a public address", "2002:808:808::1", false},
	{"2620:4f:8000::/48 direct delegation AS112 service (RFC 7534)", "2620:4f:8000::1", false},
	{"3fff::/20 documentation (RFC 9637)", "3fff::1", false},
	{"5f00::/16 segment routing SIDs (RFC 9602)", "5f00::1", false},
	{"fc00::/7 unique local (RFC 4193)", "fd12:3456::1", true},
	{"fe80::/10 link-local unicast (RFC 4291)", "fe80::1", true},
	{"fe80::/10 link-local with a zone", "fe80::1%eth0", true},
	{"ff00::/8 multicast (RFC 4291)", "ff02::1", false},
}

// public are ordinary internet addresses, including neighbours of refused ranges.
var public = []string{
	"8.8.8.8", "1.1.1.1", "93.184.215.14", "223.255.255.255",
	"100.63.255.255", "100.128.0.0", // either side of 100.64.0.0/10
	"172.15.255.255", "172.32.0.0", // either side of 172.16.0.0/12
	"198.17.255.255", "198.20.0.0", // either side of 198.18.0.0/15
	"192.0.1.1", "192.88.98.1",
	"::ffff:8.8.8.8", // an IPv4-mapped public address reaches 8.8.8.8
	"2606:4700:4700::1111", "2a00:1450:4001:81b::200e", "2001:4860:4860::8888",
	"2001:200::1", // just past 2001::/23
}

// TestGuardRefusesSpecialPurpose: one case per registry range, refused by default and,
// except loopback, private-use, shared and link-local, with every range permitted the way
// --allow-private-urls permits them (ForURLs, the rule of artifact URLs and rubric
// routes alike); public addresses pass both.
func TestGuardRefusesSpecialPurpose(t *testing.T) {
	t.Parallel()
	strict := ForURLs(false)
	internal := ForURLs(true)
	for _, tt := range specialPurpose {
		t.Run(tt.rng, func(t *testing.T) {
			addr := netip.MustParseAddr(tt.addr)
			err := strict.Check(addr)
			if !errors.Is(err, ErrForbidden) {
				t.Fatalf("Check(%s) = %v; want refused", tt.addr, err)
			}
			if !strings.Contains(err.Error(), addr.Unmap().WithZone("").String()) {
				t.Errorf("reason %q does not name the address", err)
			}
			err = internal.Check(addr)
			if tt.internal && err != nil {
				t.Errorf("with internal ranges permitted: Check(%s) = %v; want allowed", tt.addr, err)
			}
			if !tt.internal && !errors.Is(err, ErrForbidden) {
				t.Errorf("with internal ranges permitted: Check(%s) = %v; want still refused", tt.addr, err)
			}
			if IsPrivate(addr) != tt.internal {
				t.Errorf("IsPrivate(%s) = %v; want %v", tt.addr, !tt.internal, tt.internal)
			}
			// The dialer's view: an address and a port, after resolution.
			if err := strict.Control("tcp", netip.AddrPortFrom(addr, 443).String(), nil); !errors.Is(err, ErrForbidden) {
				t.Errorf("Control(%s) = %v; want refused", tt.addr, err)
			}
		})
	}
	for _, a := range public {
		for _, g := range []*Guard{strict, internal} {
			if err := g.Check(netip.MustParseAddr(a)); err != nil {
				t.Errorf("public address %s refused: %v", a, err)
			}
			if err := g.Control("tcp", netip.AddrPortFrom(netip.MustParseAddr(a), 8080).String(), nil); err != nil {
				t.Errorf("Control(%s) on any port: %v", a, err)
			}
		}
		if IsPrivate(netip.MustParseAddr(a)) {
			t.Errorf("IsPrivate(%s) = true", a)
		}
	}
}

// TestForURLsPermitsNamedAddresses: an operator's exact address passes, its neighbours
// do not, and naming one does not open the private ranges.
func TestForURLsPermitsNamedAddresses(t *testing.T) {
	t.Parallel()
	g := ForURLs(false, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("100.100.100.200/32")})
	for addr, want := range map[string]bool{"127.0.0.1": true, "100.100.100.200": true, "::ffff:127.0.0.1": true,
		"127.0.0.2": false, "10.0.0.1": false, "169.254.169.254": false, "::1": false} {
		if err := g.Check(netip.MustParseAddr(addr)); (err == nil) != want {
			t.Errorf("Check(%s) = %v; want allowed %v", addr, err, want)
		}
	}
}

// TestGuardNamesEmbeddedAddress: for the forms that carry an IPv4 address the reason
// says which one, so an operator sees that 64:ff9b::7f00:1 meant 127.0.0.1.
func TestGuardNamesEmbeddedAddress(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"64:ff9b::7f00:1":                      "NAT64 of 127.0.0.1",
		"2002:7f00:1::1":                       "6to4 of 127.0.0.1",
		"::127.0.0.1":                          "IPv4-compatible of 127.0.0.1",
		"2001:0:4136:e378:8000:63bf:80ff:fffe": "Teredo of 127.0.0.1",
	} {
		err := New().Check(netip.MustParseAddr(addr))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%s) = %v; want it to say %q", addr, err, want)
		}
	}
	if _, _, ok := Embedded(netip.MustParseAddr("::1")); ok {
		t.Error("::1 taken for an IPv4-compatible address")
	}
}
