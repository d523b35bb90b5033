// Package allowhost reads the entries of tools.web.allow_hosts, for the
// web_fetch guard that applies them and for the config check that reports
// the ones it cannot read, so both read them alike.
package allowhost

import (
	"errors"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Entry is one allow_hosts entry: a host name or an address, either with
// an optional port, or a network.
type Entry struct {
	// Host is a host name, lower case and without a trailing dot; "" when
	// the entry is an address or a network.
	Host string
	// Prefix is the address (a /32 or /128) or the network; not valid when
	// the entry is a host name. IPv4-mapped IPv6 addresses are unmapped.
	Prefix netip.Prefix
	// Port is the only port the entry allows; 0 allows every port.
	Port uint16
}

// Matches reports whether the entry allows a connection to ip on port for
// a URL whose host was host.
func (e Entry) Matches(host string, ip netip.Addr, port uint16) bool {
	if e.Port != 0 && e.Port != port {
		return false
	}
	if e.Host != "" {
		return e.Host == NormalHost(host)
	}
	return e.Prefix.Contains(ip.Unmap().WithZone(""))
}

// Covers reports whether the entry names this host or address, whatever
// its port: the guard says so when it refuses another port.
func (e Entry) Covers(host string, ip netip.Addr) bool {
	e.Port = 0
	return e.Matches(host, ip, 0)
}

// NormalHost is a host name as entries keep it: lower case, no trailing dot.
func NormalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// Syntax says what an entry may be, for error messages.
const Syntax = "write a host name (wiki.internal), an address (10.0.0.5) or a network (10.0.0.0/8); " +
	"a name or an address may carry a port, then only that port is allowed (wiki.internal:8080, 10.0.0.5:8080, [fd00::5]:8080)"

var hostName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?\.?$`) })

// Parse reads one entry. Its errors say what is wrong in words that follow
// the entry: `"x" is a URL, not a host`.
func Parse(s string) (Entry, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return Entry{}, errors.New("is empty")
	case strings.Contains(s, "://"):
		return Entry{}, errors.New("is a URL, not a host")
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return Entry{Prefix: p.Masked()}, nil
	}
	// A bare address; an IPv6 address takes brackets to carry a port.
	if ip, ok := parseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); ok && (s[0] == '[') == strings.HasSuffix(s, "]") {
		return Entry{Prefix: netip.PrefixFrom(ip, ip.BitLen())}, nil
	}
	if !strings.HasPrefix(s, "[") && strings.Count(s, ":") != 1 {
		return name(s, 0)
	}
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return Entry{}, errors.New("is not a host name, an address or a network")
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil || port == 0 {
		return Entry{}, errors.New("has a port that is not a number from 1 to 65535")
	}
	if ip, ok := parseAddr(host); ok {
		return Entry{Prefix: netip.PrefixFrom(ip, ip.BitLen()), Port: uint16(port)}, nil
	}
	if _, err := netip.ParsePrefix(host); err == nil {
		return Entry{}, errors.New("is a network with a port; a port can only follow a host name or an address")
	}
	if strings.HasPrefix(s, "[") {
		return Entry{}, errors.New("has brackets around something that is not an IPv6 address")
	}
	return name(host, uint16(port))
}

func name(h string, port uint16) (Entry, error) {
	if !hostName().MatchString(h) {
		return Entry{}, errors.New("is not a host name, an address or a network")
	}
	return Entry{Host: NormalHost(h), Port: port}, nil
}

func parseAddr(s string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return ip.Unmap().WithZone(""), true
}
