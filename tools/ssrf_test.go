package tools_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/tools"
)

// A server bound to every address (0.0.0.0 and ::) is refused through
// this host's own non-loopback addresses, whatever kind of address they
// are. The fetches never leave the host: every address is its own.
func TestFetchRefusesThisHostsOwnAddresses(t *testing.T) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	var c counter
	srv := httptest.NewUnstartedServer(&c)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	tried := 0
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, _ := netip.AddrFromSlice(n.IP)
		ip = ip.Unmap()
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() { // link-local needs a zone in a URL
			continue
		}
		tried++
		u := fmt.Sprintf("http://%s/", netip.AddrPortFrom(ip, uint16(port)))
		got, err := fetch(t, tools.WebConfig{}, u)
		if err == nil || !strings.Contains(err.Error(), "refused to fetch") || !strings.Contains(err.Error(), ip.String()+" is ") {
			t.Errorf("%s: got %q, %v; want a refusal", u, got, err)
		}
	}
	if tried == 0 {
		testkit.SkipFor(t, "", "this host has no non-loopback address to fetch through; TestGuardRefusesThisHostsAddresses covers the rule with injected addresses")
	}
	t.Logf("tried %d addresses of this host", tried)
	if n := c.n.Load(); n != 0 {
		t.Errorf("the server got %d requests through this host's own addresses", n)
	}
}

// An allow_hosts entry with a port allows that port only, for an address
// and for a name, on the first request and on a redirect.
func TestFetchAllowHostsWithPort(t *testing.T) {
	var other counter
	otherSrv := httptest.NewServer(&other)
	defer otherSrv.Close()
	otherPort := otherSrv.Listener.Addr().(*net.TCPAddr).Port
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-other-port":
			host, _, _ := net.SplitHostPort(r.Host)
			http.Redirect(w, r, fmt.Sprintf("http://%s:%d/secret", host, otherPort), http.StatusFound)
		default:
			fmt.Fprint(w, "allowed page")
		}
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port

	for _, tt := range []struct {
		name  string
		allow string
		host  string
	}{
		{"address", fmt.Sprintf("127.0.0.1:%d", port), "127.0.0.1"},
		{"name", fmt.Sprintf("site.test:%d", port), "site.test"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tools.WebConfig{AllowHosts: []string{tt.allow}, Resolver: hosts{"site.test": "127.0.0.1"}}
			if got, err := fetch(t, cfg, fmt.Sprintf("http://%s:%d/page", tt.host, port)); err != nil || got != "allowed page" {
				t.Fatalf("the allowed port: %q, %v", got, err)
			}
			wantPort := fmt.Sprintf("tools.web.allow_hosts allows it on port %d only, not %d", port, otherPort)
			_, err := fetch(t, cfg, fmt.Sprintf("http://%s:%d/secret", tt.host, otherPort))
			if err == nil || !strings.Contains(err.Error(), "a loopback address") || !strings.Contains(err.Error(), wantPort) {
				t.Errorf("another port: err = %v; want a refusal saying %q", err, wantPort)
			}
			_, err = fetch(t, cfg, fmt.Sprintf("http://%s:%d/to-other-port", tt.host, port))
			if err == nil || !strings.Contains(err.Error(), wantPort) || !strings.Contains(err.Error(), "redirected from") {
				t.Errorf("a redirect to another port: err = %v; want a refusal saying %q", err, wantPort)
			}
		})
	}
	if n := other.n.Load(); n != 0 {
		t.Errorf("the server on the other port got %d requests", n)
	}
}
