package tools

import (
	"net/http"
	"net/netip"
	"time"
)

// GuardedTransport returns an HTTP transport whose every connection passes
// the guard web_fetch uses: loopback, private, link-local, metadata and this
// host's own addresses are refused at dial time, after DNS resolution,
// unless an allow entry (the syntax of tools.web.allow_hosts) names them.
// Skill http tools send through it with their skill's granted hosts. A nil
// r uses the system's resolver; a nil own, net.InterfaceAddrs.
func GuardedTransport(allow []string, r Resolver, own func() ([]netip.Addr, error)) *http.Transport {
	return guardedTransport(newGuard(allow, r, own))
}

func guardedTransport(g *guard) *http.Transport {
	return &http.Transport{
		Proxy:               nil, // a proxy would make the dialed address the proxy's, defeating the guard
		DialContext:         g.DialContext,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        16,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
}
