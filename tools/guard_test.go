package tools

import (
	"context"
	"errors"
	"net/netip"
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
		// public
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"100.128.0.1", ""},
		{"172.32.0.1", ""},
		{"2606:4700:4700::1111", ""},
		{"64:ff9b::808:808", ""},
	}
	for _, tt := range tests {
		if got := nonPublic(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("nonPublic(%s) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

func TestGuardAllowList(t *testing.T) {
	g := newGuard([]string{"127.0.0.1", "10.0.0.0/8", "Wiki.Intranet.", "[fd00::5]", " "}, nil)
	tests := []struct {
		host string
		addr string
		ok   bool
	}{
		{"127.0.0.1", "127.0.0.1", true},
		{"localhost", "127.0.0.1", true}, // the address is allowed, whatever the name
		{"127.0.0.2", "127.0.0.2", false},
		{"db", "10.20.30.40", true},
		{"wiki.intranet", "192.168.0.9", true}, // the name is allowed, whatever the address
		{"other.intranet", "192.168.0.9", false},
		{"v6", "fd00::5", true},
		{"v6", "fd00::6", false},
		{"mapped", "::ffff:10.1.1.1", true},
		{"meta", "169.254.169.254", false},
		{"example.com", "93.184.215.14", true},
	}
	for _, tt := range tests {
		err := g.check(tt.host, g.hostAllowed(tt.host), netip.MustParseAddr(tt.addr))
		if (err == nil) != tt.ok {
			t.Errorf("check(%s → %s) = %v, want allowed %v", tt.host, tt.addr, err, tt.ok)
		}
		var b *BlockedError
		if err != nil && !errors.As(err, &b) {
			t.Errorf("check(%s) error %T is not a *BlockedError", tt.host, err)
		}
	}
}

// The dialer refuses every blocked address a name resolves to, and says why.
func TestGuardDialRefusesBeforeConnecting(t *testing.T) {
	g := newGuard(nil, resolverFunc(func(string) []netip.Addr {
		return []netip.Addr{netip.MustParseAddr("10.1.1.1"), netip.MustParseAddr("127.0.0.1")}
	}))
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
