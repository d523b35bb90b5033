package httpapi

import (
	"net"
	"net/netip"
	"strings"
)

// DashboardURL is where a browser on this machine opens the dashboard of a
// server listening on hostport (http.listen, or the address it bound): an
// unspecified host (0.0.0.0, ::, none) is reached on loopback.
func DashboardURL(hostport string) string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "http://" + hostport + "/"
	}
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); host == "" || (err == nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}
