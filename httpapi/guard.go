package httpapi

// What keeps web pages out of the server: a browser on the same host can
// reach 127.0.0.1, so without these checks any page it opens could read the
// dashboard (DNS rebinding: a name of the attacker's that resolves to
// 127.0.0.1) or run turns with tools (a cross-site form POST).
//
//   - The Host header must name this server: a loopback name, an IP
//     address, or one of Options.PublicHosts (421 otherwise).
//   - Requests other than GET, HEAD and OPTIONS must come from the server's
//     own origin or from no browser at all (http.CrossOriginProtection:
//     Sec-Fetch-Site, else Origin against Host; 403 otherwise).
//   - The chat API takes only application/json bodies (415 otherwise), and
//     the dashboard's forms (login, pairing) carry a CSRF token (csrf.go).

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/switchboard-gateway/switchboard/internal/httpjson"
)

// hostSet is the names the server answers to besides loopback names and IP
// addresses.
type hostSet struct {
	any   map[string]bool // names listed without a port: any port
	exact map[string]bool // "name:port" entries: that port only
}

// newHostSet parses http.public_hosts entries: a host name, optionally
// with ":port".
func newHostSet(entries []string) (hostSet, error) {
	hs := hostSet{any: map[string]bool{}, exact: map[string]bool{}}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" || strings.ContainsAny(e, "/?#@ ") {
			return hs, fmt.Errorf("httpapi: public host %q: write a host name, optionally with :port, such as dash.example.com or dash.example.com:8443", e)
		}
		host, port, err := net.SplitHostPort(e)
		if err != nil {
			hs.any[canonicalHost(e)] = true
			continue
		}
		if host == "" || port == "" {
			return hs, fmt.Errorf("httpapi: public host %q: empty host or port", e)
		}
		hs.exact[canonicalHost(host)+":"+port] = true
	}
	return hs, nil
}

// canonicalHost lower-cases a name and drops its brackets and a trailing
// dot ("Example.COM." and "example.com" are one name).
func canonicalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

// allows reports whether a Host header value names this server: a
// loopback name (localhost, 127.0.0.0/8, [::1]), any IP address (an
// address cannot be rebound to another server by DNS, so it is no
// rebinding risk), or a configured public name; each with or without a
// port.
func (hs hostSet) allows(hostport string) bool {
	host, port := hostport, ""
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		if strings.Trim(p, "0123456789") != "" {
			return false
		}
		host, port = h, p
	}
	host = canonicalHost(host)
	if host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return hs.any[host] || (port != "" && hs.exact[host+":"+port])
}

// hostGuard answers 421 Misdirected Request to a request whose Host is not
// one of this server's names. GET and HEAD /healthz are exempt, for probes
// that send whatever Host they like; the answer holds nothing.
func (s *Server) hostGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.hosts.allows(r.Host) ||
			(r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead)) {
			next.ServeHTTP(w, r)
			return
		}
		s.log.Info("request refused: unknown Host", "host", clipRunes(r.Host, 100), "path", r.URL.Path, "remote", r.RemoteAddr)
		http.Error(w, "misdirected request: this server does not answer to that host name; "+
			"use localhost or an address, or add the name to http.public_hosts", http.StatusMisdirectedRequest)
	})
}

// crossOrigin refuses state-changing requests (any method but GET, HEAD
// and OPTIONS) that a browser sends from another origin: Sec-Fetch-Site
// other than same-origin or none, or, from browsers without it, an Origin
// whose host is not the request's Host. Requests without either header
// (curl, SDKs, probes) pass.
func (s *Server) crossOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := cop.Check(r)
		if err == nil {
			next.ServeHTTP(w, r)
			return
		}
		s.log.Info("request refused: cross-origin", "method", r.Method, "path", r.URL.Path,
			"origin", clipRunes(r.Header.Get("Origin"), 100), "sec_fetch_site", clipRunes(r.Header.Get("Sec-Fetch-Site"), 30),
			"remote", r.RemoteAddr)
		const msg = "cross-origin request refused: this server takes state-changing requests only from its own pages or from non-browser clients"
		if isAPIPath(r.URL.Path) {
			httpjson.Error(w, http.StatusForbidden, "invalid_request_error", "cross_origin", msg)
			return
		}
		http.Error(w, msg, http.StatusForbidden)
	})
}

// isAPIPath reports whether a path belongs to the chat API, whose clients
// expect OpenAI-style JSON errors.
func isAPIPath(p string) bool { return strings.HasPrefix(p, "/v1/") }

// jsonOnly requires Content-Type: application/json on requests with a body
// method (POST, PUT, PATCH, DELETE): a browser can send text/plain or a
// form across sites without asking, but not JSON.
func jsonOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			next.ServeHTTP(w, r)
			return
		}
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			httpjson.Error(w, http.StatusUnsupportedMediaType, "invalid_request_error", "unsupported_media_type",
				"send the request body as JSON, with \"Content-Type: application/json\"")
			return
		}
		next.ServeHTTP(w, r)
	})
}
