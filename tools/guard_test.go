package tools

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestNonPublic(t *testing.T) {
	tests := []struct {
		addr, want string
	}{
		{"127.0.0.1", "a loopback address"},
		{"127.9.9.9", "a loopback address"},
		{"::1", "a loopback address"},
		{"::ffff:127.0.0.1", "a loopback address"},
		{"10.0.0.1", "a private address"},
		{"172.16.5.4", "a private address"},
		{"192.168.1.1", "a private address"},
		{"fc00::1", "a private address"},
		{"fd12:3456::1", "a private address"},
		{"169.254.169.254", "the cloud metadata address"},
		{"fd00:ec2::254", "the cloud metadata address"},
		{"169.254.10.1", "a link-local address"},
		{"fe80::1", "a link-local address"},
		{"100.64.0.1", "a shared (CGNAT) address"},
		{"100.127.255.254", "a shared (CGNAT) address"},
		{"0.0.0.0", "an unspecified address"},
		{"::", "an unspecified address"},
		{"0.1.2.3", "a \"this network\" address"},
		{"224.0.0.1", "a multicast address"},
		{"ff02::1", "a multicast address"},
		{"255.255.255.255", "the broadcast address"},
		{"64:ff9b::a00:1", "a private address (through NAT64)"},
		// the documentation ranges, and the rest of the special-purpose registries
		{"192.0.2.1", "a documentation address"},
		{"198.51.100.1", "a documentation address"},
		{"203.0.113.1", "a documentation address"},
		{"203.0.113.255", "a documentation address"},
		{"2001:db8::1", "a documentation address"},
		{"2001:db8:ffff::1", "a documentation address"},
		{"3fff::1", "a documentation address"},
		{"::ffff:198.51.100.1", "a documentation address"},
		{"64:ff9b::c000:201", "a documentation address (through NAT64)"},
		{"192.0.0.8", "an IETF protocol address"},
		{"192.0.0.9", "an IETF protocol address"}, // globally reachable, refused with its /24
		{"192.0.0.170", "an IETF protocol address"},
		{"192.88.99.1", "a deprecated 6to4 relay address"},
		{"198.19.255.254", "a benchmarking address"},
		{"240.0.0.1", "a reserved address"},
		{"100::1", "a discard address"},
		{"100:0:0:1::1", "a dummy address"},
		{"64:ff9b:1::a00:1", "a local-use IPv4/IPv6 translation address"},
		{"2001::1", "a Teredo address"},
		{"2001:1::1", "an IETF protocol address"}, // globally reachable, refused with its /23
		{"2001:2::1", "a benchmarking address"},
		{"2001:20::1", "an IETF protocol address"},
		{"2002:c000:201::1", "a 6to4 address"},
		{"5f00::1", "a segment routing (SRv6) address"},
		{"fec0::1", "a site-local address"},
		{"::7f00:1", "a loopback address (in IPv4-compatible form)"},
		{"::808:808", "a deprecated IPv4-compatible address"},
		{"4000::1", "not in the IPv6 global unicast space (2000::/3)"},
		{"1::1", "not in the IPv6 global unicast space (2000::/3)"},
		// public
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"100.128.0.1", ""},
		{"172.32.0.1", ""},
		{"2606:4700:4700::1111", ""},
		{"64:ff9b::808:808", ""},
		{"192.31.196.1", ""},    // AS112-v4: globally reachable
		{"192.52.193.1", ""},    // AMT: globally reachable
		{"192.175.48.1", ""},    // AS112 direct delegation: globally reachable
		{"2620:4f:8000::1", ""}, // the same, IPv6
		{"192.0.3.1", ""},
		{"198.51.99.255", ""},
		{"203.0.114.1", ""},
		{"2001:db9::1", ""},
		{"2001:200::1", ""}, // just past 2001::/23
	}
	for _, tt := range tests {
		if got := nonPublic(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("nonPublic(%s) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

func TestGuardAllowList(t *testing.T) {
	g := newGuard([]string{"127.0.0.1", "10.0.0.0/8", "Wiki.Intranet.", "[fd00::5]", " ",
		"192.168.7.7:8080", "[fd00::7]:443", "api.intranet:9000", "api.intranet:9001", "bad:port:x"}, nil, nil)
	tests := []struct {
		host string
		port uint16
		addr string
		ok   bool
	}{
		{"127.0.0.1", 80, "127.0.0.1", true},
		{"localhost", 8080, "127.0.0.1", true}, // the address is allowed, whatever the name
		{"127.0.0.2", 80, "127.0.0.2", false},
		{"db", 5432, "10.20.30.40", true},
		{"wiki.intranet", 80, "192.168.0.9", true}, // the name is allowed, whatever the address
		{"other.intranet", 80, "192.168.0.9", false},
		{"v6", 80, "fd00::5", true},
		{"v6", 80, "fd00::6", false},
		{"mapped", 80, "::ffff:10.1.1.1", true},
		{"meta", 80, "169.254.169.254", false},
		{"example.com", 443, "93.184.215.14", true},
		// entries with a port allow that port only
		{"192.168.7.7", 8080, "192.168.7.7", true},
		{"192.168.7.7", 8081, "192.168.7.7", false},
		{"printer", 8080, "::ffff:192.168.7.7", true},
		{"fd00::7", 443, "fd00::7", true},
		{"fd00::7", 80, "fd00::7", false},
		{"api.intranet", 9000, "10.0.0.1", true}, // also inside 10.0.0.0/8
		{"api.intranet", 9001, "172.16.0.1", true},
		{"api.intranet", 9002, "172.16.0.1", false},
		{"example.com", 8443, "93.184.215.14", true}, // public addresses need no entry
	}
	for _, tt := range tests {
		err := g.check(tt.host, tt.port, netip.MustParseAddr(tt.addr), nil)
		if (err == nil) != tt.ok {
			t.Errorf("check(%s:%d → %s) = %v, want allowed %v", tt.host, tt.port, tt.addr, err, tt.ok)
		}
		var b *BlockedError
		if err != nil && !errors.As(err, &b) {
			t.Errorf("check(%s) error %T is not a *BlockedError", tt.host, err)
		}
	}
	// A refused port says which ports the entries allow.
	err := g.check("api.intranet", 9002, netip.MustParseAddr("172.16.0.1"), nil)
	want := "api.intranet resolves to 172.16.0.1, a private address (172.16.0.0/12 \"Private-Use\", RFC 1918); " +
		"tools.web.allow_hosts allows it on port 9000, 9001 only, not 9002"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

// The host's own addresses are refused whatever kind of address they are,
// unless allowed: a server bound to 0.0.0.0 must not be reachable through
// the host's public address.
func TestGuardRefusesThisHostsAddresses(t *testing.T) {
	own := []netip.Addr{netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("2606:2800:21f:cb07:6820:80da:af6b:8b2c")}
	g := newGuard([]string{"2606:2800:21f:cb07:6820:80da:af6b:8b2c"}, nil, nil)
	tests := []struct {
		addr string
		want string // "" allowed
	}{
		{"93.184.215.14", "93.184.215.14 is an address of this host"},
		{"::ffff:93.184.215.14", "93.184.215.14 is an address of this host"},
		{"93.184.215.15", ""},
		{"2606:2800:21f:cb07:6820:80da:af6b:8b2c", ""}, // listed in allow_hosts
	}
	for _, tt := range tests {
		ip := netip.MustParseAddr(tt.addr)
		err := g.check(ip.Unmap().String(), 80, ip, own)
		if got := errText(err); got != tt.want {
			t.Errorf("check(%s) = %q, want %q", tt.addr, got, tt.want)
		}
		if err := g.check(ip.Unmap().String(), 80, ip, nil); err != nil {
			t.Errorf("check(%s) without it among this host's addresses = %v", tt.addr, err)
		}
	}

	// The default source is this host's interfaces: each is refused.
	addrs, err := interfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) == 0 {
		t.Fatal("no interface addresses; want at least loopback")
	}
	g = newGuard(nil, nil, nil)
	for _, ip := range addrs {
		if err := g.check("self", 80, ip, addrs); err == nil {
			t.Errorf("this host's address %s is allowed", ip)
		}
	}

	// The dialer asks at every connection, and does not dial when the
	// list cannot be read.
	calls := 0
	g = newGuard(nil, resolverFunc(func(string) []netip.Addr { return own[:1] }), func() ([]netip.Addr, error) {
		calls++
		return nil, errors.New("netlink: permission denied")
	})
	for range 2 {
		if _, err := g.DialContext(context.Background(), "tcp", "self.test:80"); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("dial with no interface list: %v", err)
		}
	}
	if calls != 2 {
		t.Errorf("the interface list was read %d times for 2 connections", calls)
	}
}

// Every row of the table is well formed and decides as the registry's
// "Globally Reachable" column says, and the blocks the issue names are in.
func TestRegistryBlocks(t *testing.T) {
	seen := map[netip.Prefix]bool{}
	for i := range specialBlocks {
		b := &specialBlocks[i]
		if b.prefix != b.prefix.Masked() || seen[b.prefix] {
			t.Errorf("%s: not masked, or listed twice", b.prefix)
		}
		seen[b.prefix] = true
		if b.name == "" || b.ref == "" || b.global != (b.what == "") {
			t.Errorf("%s: incomplete row %+v", b.prefix, b)
		}
		first, last := b.prefix.Addr(), lastAddr(b.prefix)
		for _, ip := range []netip.Addr{first, last} {
			reason, got := classify(ip)
			switch {
			case !b.global && (reason == "" || got == nil || !got.prefix.Contains(ip.Unmap()) || got.global):
				t.Errorf("%s (%s): classify = %q, %v; want refused by a block holding it", ip, b, reason, got)
			case b.global && got != nil && got.prefix.Bits() >= b.prefix.Bits():
				t.Errorf("%s (%s): refused by %s, a block inside a globally reachable one", ip, b, got)
			}
		}
	}
	for _, s := range []string{"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24", "192.88.99.0/24", "192.168.0.0/16",
		"192.175.48.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "240.0.0.0/4", "255.255.255.255/32",
		"224.0.0.0/4", "::/128", "::1/128", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/23",
		"2001:db8::/32", "2002::/16", "3fff::/20", "5f00::/16", "fc00::/7", "fe80::/10", "ff00::/8"} {
		if !seen[netip.MustParsePrefix(s)] {
			t.Errorf("%s is missing from the table", s)
		}
	}
	// A refusal names the row.
	err := newGuard(nil, nil, nil).check("docs.test", 80, netip.MustParseAddr("2001:db8::1"), nil)
	if want := `docs.test resolves to 2001:db8::1, a documentation address (2001:db8::/32 "Documentation", RFC 3849)`; errText(err) != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	ip, _ := netip.AddrFromSlice(b)
	return ip
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The dialer refuses every blocked address a name resolves to, and says why.
func TestGuardDialRefusesBeforeConnecting(t *testing.T) {
	g := newGuard(nil, resolverFunc(func(string) []netip.Addr {
		return []netip.Addr{netip.MustParseAddr("10.1.1.1"), netip.MustParseAddr("127.0.0.1")}
	}), nil)
	_, err := g.DialContext(context.Background(), "tcp", "twofaced.test:80")
	b, ok := blocked(err)
	if !ok || b.Host != "twofaced.test" || b.Addr != netip.MustParseAddr("10.1.1.1") {
		t.Fatalf("err = %v; want the first refusal", err)
	}
}

type resolverFunc func(host string) []netip.Addr

func (f resolverFunc) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return f(host), nil
}
