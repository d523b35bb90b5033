package tools

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Resolver looks up the addresses of a host name. *net.Resolver implements
// it; tests map names to addresses without a network.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// BlockedError is a connection the SSRF guard refused: the host resolved
// to an address that is not on the public internet and is not allowed.
type BlockedError struct {
	Host   string     // the host name or address as written in the URL
	Addr   netip.Addr // the address it resolved to
	Reason string     // "a loopback address", "the cloud metadata address"…
}

func (e *BlockedError) Error() string {
	if e.Host == e.Addr.String() {
		return fmt.Sprintf("%s is %s", e.Host, e.Reason)
	}
	return fmt.Sprintf("%s resolves to %s, %s", e.Host, e.Addr, e.Reason)
}

// guard decides which addresses web_fetch may connect to. It checks the
// address of every connection it makes, after DNS resolution, so that a
// public name pointing at a private address and a redirect to one are
// refused alike.
type guard struct {
	hosts    map[string]bool // allowed host names, lower case, no trailing dot
	nets     []netip.Prefix  // allowed addresses and networks
	resolver Resolver
	dialer   net.Dialer // template; Control is set per connection
}

// newGuard builds a guard from allow_hosts entries: host names, IP
// addresses or CIDR networks. Entries that are none of these (a URL, a
// host:port) never match; config validation reports them.
func newGuard(allow []string, r Resolver) *guard {
	if r == nil {
		r = net.DefaultResolver
	}
	g := &guard{hosts: map[string]bool{}, resolver: r, dialer: net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}}
	for _, a := range allow {
		a = strings.TrimSpace(a)
		if p, err := netip.ParsePrefix(a); err == nil {
			g.nets = append(g.nets, p.Masked())
		} else if ip, err := netip.ParseAddr(strings.Trim(a, "[]")); err == nil {
			ip = ip.Unmap().WithZone("")
			g.nets = append(g.nets, netip.PrefixFrom(ip, ip.BitLen()))
		} else if a != "" {
			g.hosts[normalHost(a)] = true
		}
	}
	return g
}

func normalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// hostAllowed reports whether a host name is listed in allow_hosts.
func (g *guard) hostAllowed(host string) bool { return g.hosts[normalHost(host)] }

// check returns a *BlockedError when ip may not be connected to.
func (g *guard) check(host string, hostAllowed bool, ip netip.Addr) error {
	ip = ip.Unmap().WithZone("")
	if hostAllowed {
		return nil
	}
	for _, p := range g.nets {
		if p.Contains(ip) {
			return nil
		}
	}
	if reason := nonPublic(ip); reason != "" {
		return &BlockedError{Host: host, Addr: ip, Reason: reason}
	}
	return nil
}

// Special-purpose networks beyond what netip's predicates cover.
var (
	metadataAddrs = []netip.Addr{
		netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack…
		netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
	}
	specialNets = []struct {
		net    netip.Prefix
		reason string
	}{
		{netip.MustParsePrefix("0.0.0.0/8"), "a \"this network\" address"},
		{netip.MustParsePrefix("100.64.0.0/10"), "a shared (CGNAT) address"},
		{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
		{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
		{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
		{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
		{netip.MustParsePrefix("100::/64"), "a discard address"},
	}
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
)

// nonPublic says why ip is not a public unicast address ("" when it is).
func nonPublic(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid():
		return "not a valid address"
	case slices.Contains(metadataAddrs, ip):
		return "the cloud metadata address"
	case ip.IsUnspecified():
		return "an unspecified address"
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsPrivate():
		return "a private address"
	case ip.IsLinkLocalUnicast():
		return "a link-local address"
	case ip.IsMulticast():
		return "a multicast address"
	case ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "the broadcast address"
	}
	for _, s := range specialNets {
		if s.net.Contains(ip) {
			return s.reason
		}
	}
	if nat64.Contains(ip) { // an IPv4 address behind a NAT64 gateway
		b := ip.As16()
		if r := nonPublic(netip.AddrFrom4([4]byte(b[12:16]))); r != "" {
			return r + " (through NAT64)"
		}
	}
	return ""
}

// DialContext connects to addr ("host:port") only through addresses the
// guard accepts: it resolves the host itself, checks every address and
// dials the address it checked, so a second DNS answer cannot differ. The
// dialer's Control hook checks the connected address once more.
func (g *guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	allowed := g.hostAllowed(host)
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		ips, err = g.resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("look up %s: %w", host, err)
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("look up %s: no addresses", host)
		}
	}
	var refused, failed error
	for _, ip := range ips {
		if err := g.check(host, allowed, ip); err != nil {
			refused = cmp.Or(refused, err)
			continue
		}
		d := g.dialer
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("unexpected address %q: %w", address, err)
			}
			return g.check(host, allowed, ap.Addr())
		}
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return conn, nil
		}
		failed = err
		if ctx.Err() != nil {
			break
		}
	}
	if failed != nil {
		return nil, failed
	}
	return nil, refused
}

// blocked returns the guard's refusal inside err, if that is what err is.
func blocked(err error) (*BlockedError, bool) {
	var b *BlockedError
	ok := errors.As(err, &b)
	return b, ok
}
