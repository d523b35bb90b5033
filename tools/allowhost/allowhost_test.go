package allowhost

import (
	"net/netip"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Entry
		err  string
	}{
		{"wiki.internal", Entry{Host: "wiki.internal"}, ""},
		{" Wiki.Internal. ", Entry{Host: "wiki.internal"}, ""},
		{"localhost", Entry{Host: "localhost"}, ""},
		{"wiki.internal:8080", Entry{Host: "wiki.internal", Port: 8080}, ""},
		{"10.0.0.5", Entry{Prefix: netip.MustParsePrefix("10.0.0.5/32")}, ""},
		{"10.0.0.5:8080", Entry{Prefix: netip.MustParsePrefix("10.0.0.5/32"), Port: 8080}, ""},
		{"10.0.0.0/8", Entry{Prefix: netip.MustParsePrefix("10.0.0.0/8")}, ""},
		{"10.1.2.3/8", Entry{Prefix: netip.MustParsePrefix("10.0.0.0/8")}, ""},
		{"::ffff:10.0.0.0/104", Entry{Prefix: netip.MustParsePrefix("10.0.0.0/8")}, ""},
		{"::ffff:10.0.0.5", Entry{Prefix: netip.MustParsePrefix("10.0.0.5/32")}, ""},
		{"fd00::5", Entry{Prefix: netip.MustParsePrefix("fd00::5/128")}, ""},
		{"fd00::5:8080", Entry{Prefix: netip.MustParsePrefix("fd00::5:8080/128")}, ""}, // an address: a port takes brackets
		{"[fd00::5]", Entry{Prefix: netip.MustParsePrefix("fd00::5/128")}, ""},
		{"[::1]", Entry{Prefix: netip.MustParsePrefix("::1/128")}, ""},
		{"[fd00::5]:8080", Entry{Prefix: netip.MustParsePrefix("fd00::5/128"), Port: 8080}, ""},
		{"fd00::/8", Entry{Prefix: netip.MustParsePrefix("fd00::/8")}, ""},
		{"", Entry{}, "is empty"},
		{"https://wiki.internal", Entry{}, "is a URL, not a host"},
		{"wiki.internal:0", Entry{}, "has a port that is not a number from 1 to 65535"},
		{"wiki.internal:65536", Entry{}, "has a port that is not a number from 1 to 65535"},
		{"wiki.internal:http", Entry{}, "has a port that is not a number from 1 to 65535"},
		{"10.0.0.0/8:80", Entry{}, "is a network with a port; a port can only follow a host name or an address"},
		{"[wiki.internal]:80", Entry{}, "has brackets around something that is not an IPv6 address"},
		{"[fd00::5", Entry{}, "is not a host name, an address or a network"},
		{"10.0.0.0/33", Entry{}, "is not a host name, an address or a network"},
		{"wiki internal", Entry{}, "is not a host name, an address or a network"},
		{"a:b:c", Entry{}, "is not a host name, an address or a network"},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("Parse(%q) = %+v, %v; want error %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestMatches(t *testing.T) {
	ip := netip.MustParseAddr
	name, _ := Parse("Wiki.Internal:8080")
	addr, _ := Parse("[fd00::5]:443")
	network, _ := Parse("10.0.0.0/8")
	tests := []struct {
		e      Entry
		host   string
		ip     netip.Addr
		port   uint16
		ok, by bool // Matches, Covers
	}{
		{name, "wiki.internal.", ip("10.0.0.1"), 8080, true, true},
		{name, "WIKI.internal", ip("10.0.0.1"), 80, false, true},
		{name, "other.internal", ip("10.0.0.1"), 8080, false, false},
		{addr, "x", ip("fd00::5%eth0"), 443, true, true},
		{addr, "x", ip("fd00::5"), 80, false, true},
		{addr, "x", ip("fd00::6"), 443, false, false},
		{network, "x", ip("::ffff:10.9.9.9"), 1, true, true},
		{network, "x", ip("11.0.0.1"), 1, false, false},
	}
	for _, tt := range tests {
		if got := tt.e.Matches(tt.host, tt.ip, tt.port); got != tt.ok {
			t.Errorf("%+v.Matches(%s, %s, %d) = %v", tt.e, tt.host, tt.ip, tt.port, got)
		}
		if got := tt.e.Covers(tt.host, tt.ip); got != tt.by {
			t.Errorf("%+v.Covers(%s, %s) = %v", tt.e, tt.host, tt.ip, got)
		}
	}
}
