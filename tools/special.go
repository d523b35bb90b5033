package tools

import "net/netip"

// The special-purpose address blocks web_fetch judges addresses by.
//
// Transcribed from the "IANA IPv4 Special-Purpose Address Registry" and the
// "IANA IPv6 Special-Purpose Address Registry" (RFC 6890 and its updates,
// https://www.iana.org/assignments/iana-ipv4-special-registry/ and
// .../iana-ipv6-special-registry/), every row, as the registries stood in
// 2025: the newest rows here are 100:0:0:1::/64 (RFC 9780, 2025),
// 3fff::/20 (RFC 9637, 2024-07), 5f00::/16 (RFC 9602, 2024-04) and
// 2001:1::3/128 (RFC 9665) on the IPv6 side, 192.0.0.10/32 (RFC 8155,
// 2017-02) on the IPv4 side. The table was written from that knowledge, not
// downloaded; when the registries change, add their rows here (name and
// reference as the registry gives them) and a case to TestRegistryBlocks.
//
// The rule is the registries' own "Globally Reachable" column: an address in
// any block marked False (or N/A: 6to4, Teredo, the deprecated 6to4 relay
// anycast and ORCHID blocks) is refused. Where a block that is not globally
// reachable holds smaller blocks that are (192.0.0.9/32 and 192.0.0.10/32
// in 192.0.0.0/24; PCP and TURN anycast, AMT, AS112-v6, ORCHIDv2 and DETs in
// 2001::/23), the whole outer block is refused: none of them serves web
// pages, and refusing too much there costs nothing. Their rows are kept so
// the table reads as the registry does.
//
// A few blocks come from elsewhere and say so in ref: multicast (the IPv4
// and IPv6 multicast address space registries), the deprecated IPv6
// site-local block, and the cloud metadata addresses. Beyond the table,
// nonPublic also refuses every IPv6 address outside 2000::/3 (the only
// block the IANA IPv6 Address Space registry gives to global unicast),
// judges an IPv4-mapped or IPv4-compatible IPv6 address by its IPv4 part,
// and an address in the NAT64 prefix 64:ff9b::/96 by the IPv4 address it
// carries.
var specialBlocks = []specialBlock{
	// IANA IPv4 Special-Purpose Address Registry.
	{pfx("0.0.0.0/8"), "This network", "RFC 791, Section 3.2", false, `a "this network" address`},
	{pfx("0.0.0.0/32"), "This host on this network", "RFC 1122, Section 3.2.1.3", false, "an unspecified address"},
	{pfx("10.0.0.0/8"), "Private-Use", "RFC 1918", false, "a private address"},
	{pfx("100.64.0.0/10"), "Shared Address Space", "RFC 6598", false, "a shared (CGNAT) address"},
	{pfx("127.0.0.0/8"), "Loopback", "RFC 1122, Section 3.2.1.3", false, "a loopback address"},
	{pfx("169.254.0.0/16"), "Link Local", "RFC 3927", false, "a link-local address"},
	{pfx("172.16.0.0/12"), "Private-Use", "RFC 1918", false, "a private address"},
	{pfx("192.0.0.0/24"), "IETF Protocol Assignments", "RFC 6890, Section 2.1", false, "an IETF protocol address"},
	{pfx("192.0.0.0/29"), "IPv4 Service Continuity Prefix", "RFC 7335", false, "an IETF protocol address"},
	{pfx("192.0.0.8/32"), "IPv4 dummy address", "RFC 7600", false, "an IETF protocol address"},
	{pfx("192.0.0.9/32"), "Port Control Protocol Anycast", "RFC 7723", true, ""},
	{pfx("192.0.0.10/32"), "Traversal Using Relays around NAT Anycast", "RFC 8155", true, ""},
	{pfx("192.0.0.170/32"), "NAT64/DNS64 Discovery", "RFC 8880, RFC 7050 Section 2.2", false, "an IETF protocol address"},
	{pfx("192.0.0.171/32"), "NAT64/DNS64 Discovery", "RFC 8880, RFC 7050 Section 2.2", false, "an IETF protocol address"},
	{pfx("192.0.2.0/24"), "Documentation (TEST-NET-1)", "RFC 5737", false, "a documentation address"},
	{pfx("192.31.196.0/24"), "AS112-v4", "RFC 7535", true, ""},
	{pfx("192.52.193.0/24"), "AMT", "RFC 7450", true, ""},
	{pfx("192.88.99.0/24"), "Deprecated (6to4 Relay Anycast)", "RFC 7526", false, "a deprecated 6to4 relay address"},
	{pfx("192.88.99.2/32"), "6a44-relay anycast address", "RFC 6751", false, "a deprecated 6to4 relay address"},
	{pfx("192.168.0.0/16"), "Private-Use", "RFC 1918", false, "a private address"},
	{pfx("192.175.48.0/24"), "Direct Delegation AS112 Service", "RFC 7534", true, ""},
	{pfx("198.18.0.0/15"), "Benchmarking", "RFC 2544", false, "a benchmarking address"},
	{pfx("198.51.100.0/24"), "Documentation (TEST-NET-2)", "RFC 5737", false, "a documentation address"},
	{pfx("203.0.113.0/24"), "Documentation (TEST-NET-3)", "RFC 5737", false, "a documentation address"},
	{pfx("240.0.0.0/4"), "Reserved", "RFC 1112, Section 4", false, "a reserved address"},
	{pfx("255.255.255.255/32"), "Limited Broadcast", "RFC 8190, RFC 919 Section 7", false, "the broadcast address"},

	// IANA IPv6 Special-Purpose Address Registry.
	{pfx("::1/128"), "Loopback Address", "RFC 4291", false, "a loopback address"},
	{pfx("::/128"), "Unspecified Address", "RFC 4291", false, "an unspecified address"},
	{pfx("::ffff:0:0/96"), "IPv4-mapped Address", "RFC 4291", false, "an IPv4-mapped address"}, // judged by its IPv4 part first
	{pfx("64:ff9b::/96"), "IPv4-IPv6 Translat.", "RFC 6052", true, ""},                         // judged by its IPv4 part first
	{pfx("64:ff9b:1::/48"), "IPv4-IPv6 Translat.", "RFC 8215", false, "a local-use IPv4/IPv6 translation address"},
	{pfx("100::/64"), "Discard-Only Address Block", "RFC 6666", false, "a discard address"},
	{pfx("100:0:0:1::/64"), "Dummy IPv6 Prefix", "RFC 9780", false, "a dummy address"},
	{pfx("2001::/23"), "IETF Protocol Assignments", "RFC 2928", false, "an IETF protocol address"},
	{pfx("2001::/32"), "TEREDO", "RFC 4380, RFC 8190", false, "a Teredo address"},
	{pfx("2001:1::1/128"), "Port Control Protocol Anycast", "RFC 7723", true, ""},
	{pfx("2001:1::2/128"), "Traversal Using Relays around NAT Anycast", "RFC 8155", true, ""},
	{pfx("2001:1::3/128"), "DNS-SD Service Registration Protocol Anycast Address", "RFC 9665", true, ""},
	{pfx("2001:2::/48"), "Benchmarking", "RFC 5180", false, "a benchmarking address"},
	{pfx("2001:3::/32"), "AMT", "RFC 7450", true, ""},
	{pfx("2001:4:112::/48"), "AS112-v6", "RFC 7535", true, ""},
	{pfx("2001:10::/28"), "Deprecated (previously ORCHID)", "RFC 4843", false, "an IETF protocol address"},
	{pfx("2001:20::/28"), "ORCHIDv2", "RFC 7343", true, ""},
	{pfx("2001:30::/28"), "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "RFC 9374", true, ""},
	{pfx("2001:db8::/32"), "Documentation", "RFC 3849", false, "a documentation address"},
	{pfx("2002::/16"), "6to4", "RFC 3056", false, "a 6to4 address"},
	{pfx("2620:4f:8000::/48"), "Direct Delegation AS112 Service", "RFC 7534", true, ""},
	{pfx("3fff::/20"), "Documentation", "RFC 9637", false, "a documentation address"},
	{pfx("5f00::/16"), "Segment Routing (SRv6) SIDs", "RFC 9602", false, "a segment routing (SRv6) address"},
	{pfx("fc00::/7"), "Unique-Local", "RFC 4193, RFC 8190", false, "a private address"},
	{pfx("fe80::/10"), "Link-Local Unicast", "RFC 4291", false, "a link-local address"},

	// Not in the special-purpose registries.
	{pfx("224.0.0.0/4"), "Multicast", "IANA IPv4 Multicast Address Space Registry, RFC 5771", false, "a multicast address"},
	{pfx("ff00::/8"), "Multicast", "IANA IPv6 Multicast Address Space Registry, RFC 4291", false, "a multicast address"},
	{pfx("fec0::/10"), "Site-Local (deprecated)", "RFC 3879", false, "a site-local address"},
	{pfx("169.254.169.254/32"), "Cloud metadata", "AWS, GCP, Azure, OpenStack instance metadata", false, "the cloud metadata address"},
	{pfx("fd00:ec2::254/128"), "Cloud metadata", "AWS instance metadata over IPv6", false, "the cloud metadata address"},
}

// A specialBlock is one row of the table above.
type specialBlock struct {
	prefix netip.Prefix
	name   string // as the registry names it
	ref    string // as the registry cites it
	global bool   // the registry's "Globally Reachable"; N/A is false
	what   string // how a refusal describes the address: "a loopback address"
}

// String names the row for a refusal: `192.0.2.0/24 "Documentation (TEST-NET-1)", RFC 5737`.
func (b *specialBlock) String() string {
	return b.prefix.String() + ` "` + b.name + `", ` + b.ref
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

var (
	globalUnicast = pfx("2000::/3")     // IANA IPv6 Address Space registry
	nat64         = pfx("64:ff9b::/96") // RFC 6052 well-known prefix: the IPv4 address is in the last 32 bits
	v4Compatible  = pfx("::/96")        // RFC 4291 2.5.5.1, deprecated: ::a.b.c.d
)

// refusedBlock returns the block that refuses ip, nil if none does: the
// most specific one of those not globally reachable that hold it. ip must
// not be IPv4-mapped.
func refusedBlock(ip netip.Addr) *specialBlock {
	var found *specialBlock
	for i := range specialBlocks {
		b := &specialBlocks[i]
		if !b.global && b.prefix.Contains(ip) && (found == nil || b.prefix.Bits() > found.prefix.Bits()) {
			found = b
		}
	}
	return found
}
