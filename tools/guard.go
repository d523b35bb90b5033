package tools

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/switchboard-gateway/switchboard/tools/allowhost"
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
	// Block is the special-purpose block that refused the address, as
	// `192.0.2.0/24 "Documentation (TEST-NET-1)", RFC 5737`; "" when no
	// row of the table says so (an address of this host, IPv6 outside
	// 2000::/3).
	Block string
	// Port is the port refused; Ports, when set, are the only ports
	// tools.web.allow_hosts allows for this host or address.
	Port  uint16
	Ports []uint16
}

func (e *BlockedError) Error() string {
	var b strings.Builder
	if e.Host == e.Addr.String() {
		fmt.Fprintf(&b, "%s is %s", e.Host, e.Reason)
	} else {
		fmt.Fprintf(&b, "%s resolves to %s, %s", e.Host, e.Addr, e.Reason)
	}
	if e.Block != "" {
		fmt.Fprintf(&b, " (%s)", e.Block)
	}
	if len(e.Ports) > 0 {
		ports := make([]string, len(e.Ports))
		for i, p := range e.Ports {
			ports[i] = strconv.Itoa(int(p))
		}
		fmt.Fprintf(&b, "; tools.web.allow_hosts allows it on port %s only, not %d", strings.Join(ports, ", "), e.Port)
	}
	return b.String()
}

// guard decides which addresses web_fetch may connect to. It checks the
// address of every connection it makes, after DNS resolution, so that a
// public name pointing at a private address and a redirect to one are
// refused alike.
type guard struct {
	allow    []allowhost.Entry
	resolver Resolver
	// own lists the addresses of this host's interfaces; it is asked at
	// every connection, so an address that comes up later is refused too.
	own    func() ([]netip.Addr, error)
	dialer net.Dialer // template; Control is set per connection
}

// newGuard builds a guard from allow_hosts entries: host names and
// addresses, either with an optional port, or networks. Entries it cannot
// read never match; config validation reports them. A nil r uses the
// system's resolver; a nil own, net.InterfaceAddrs.
func newGuard(allow []string, r Resolver, own func() ([]netip.Addr, error)) *guard {
	if r == nil {
		r = net.DefaultResolver
	}
	if own == nil {
		own = interfaceAddrs
	}
	g := &guard{resolver: r, own: own, dialer: net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}}
	for _, a := range allow {
		if e, err := allowhost.Parse(a); err == nil {
			g.allow = append(g.allow, e)
		}
	}
	return g
}

// interfaceAddrs returns the addresses of this host's network interfaces.
func interfaceAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list this host's addresses: %w", err)
	}
	ips := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				ips = append(ips, ip.Unmap())
			}
		}
	}
	return ips, nil
}

// check returns a *BlockedError when ip may not be connected to on port for
// a URL whose host was host; own are this host's addresses.
func (g *guard) check(host string, port uint16, ip netip.Addr, own []netip.Addr) error {
	ip = ip.Unmap().WithZone("")
	var ports []uint16
	for _, e := range g.allow {
		if e.Matches(host, ip, port) {
			return nil
		}
		if e.Covers(host, ip) && !slices.Contains(ports, e.Port) {
			ports = append(ports, e.Port)
		}
	}
	slices.Sort(ports)
	reason, block := classify(ip)
	if reason == "" && slices.ContainsFunc(own, func(a netip.Addr) bool { return a.Unmap().WithZone("") == ip }) {
		reason = "an address of this host"
	}
	if reason == "" {
		return nil
	}
	e := &BlockedError{Host: host, Addr: ip, Reason: reason, Port: port, Ports: ports}
	if block != nil {
		e.Block = block.String()
	}
	return e
}

// nonPublic says why ip is not a public unicast address ("" when it is).
func nonPublic(ip netip.Addr) string {
	r, _ := classify(ip)
	return r
}

// classify says why ip is not a public unicast address ("" when it is)
// and which special-purpose block says so (nil when none of the table's
// does). See specialBlocks for the rules.
func classify(ip netip.Addr) (string, *specialBlock) {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return "not a valid address", nil
	}
	if ip.Is6() && nat64.Contains(ip) { // an IPv4 address behind a NAT64 gateway
		if r, b := classify(embedded4(ip)); r != "" {
			return r + " (through NAT64)", b
		}
		return "", nil
	}
	if b := refusedBlock(ip); b != nil {
		return b.what, b
	}
	if ip.Is4() {
		return "", nil
	}
	if v4Compatible.Contains(ip) { // :: and ::1 are in the table
		if r, b := classify(embedded4(ip)); r != "" {
			return r + " (in IPv4-compatible form)", b
		}
		return "a deprecated IPv4-compatible address", nil
	}
	if !globalUnicast.Contains(ip) {
		return "not in the IPv6 global unicast space (2000::/3)", nil
	}
	return "", nil
}

// embedded4 is the IPv4 address in the last 32 bits of an IPv6 address.
func embedded4(ip netip.Addr) netip.Addr {
	b := ip.As16()
	return netip.AddrFrom4([4]byte(b[12:16]))
}

// DialContext connects to addr ("host:port") only through addresses the
// guard accepts: it resolves the host itself, checks every address and
// dials the address it checked, so a second DNS answer cannot differ. The
// dialer's Control hook checks the connected address once more.
func (g *guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("dial %s: the port is not a number", addr)
	}
	own, err := g.own()
	if err != nil { // without them, this host's public addresses could not be refused
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
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
		if err := g.check(host, uint16(port), ip, own); err != nil {
			refused = cmp.Or(refused, err)
			continue
		}
		d := g.dialer
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("unexpected address %q: %w", address, err)
			}
			return g.check(host, ap.Port(), ap.Addr(), own)
		}
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), p))
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
