package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/switchboard-gateway/switchboard/config"
)

// healthTimeout bounds one probe: a container engine's HEALTHCHECK gives a
// probe a few seconds (the Dockerfile's --timeout).
const healthTimeout = 5 * time.Second

// healthcheck asks the running gateway's HTTP server for GET /healthz at
// http.listen, for container health checks in an image without a shell or
// curl: exit 0 when it answers 200, 1 when it does not answer or answers
// anything else, 2 when the configuration has no HTTP server to ask. An
// unspecified listen address (0.0.0.0:8080, [::]:8080) is asked on
// loopback. /healthz needs no token, so only http.listen is read.
func healthcheck(ctx context.Context, cfgPath string, stdout, stderr io.Writer) int {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard: %v\n", err)
		return ExitConfig
	}
	url, err := healthURL(cfg.HTTP.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard healthcheck: %v\n", err)
		return ExitConfig
	}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard healthcheck: %v\n", err)
		return ExitFail
	}
	// Straight to the server: a proxy from the environment (HTTP_PROXY)
	// is for the model and the platforms, not for loopback.
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard healthcheck: %s: %v\n", url, err)
		return ExitFail
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "switchboard healthcheck: %s answered %s\n", url, resp.Status)
		return ExitFail
	}
	fmt.Fprintf(stdout, "ok: %s\n", url)
	return ExitOK
}

// healthURL is the /healthz URL of the server listening on listen (host:port).
func healthURL(listen string) (string, error) {
	if listen == "" {
		return "", errors.New("http.listen is empty: the HTTP server, and /healthz with it, is off")
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("http.listen %q: %w", listen, err)
	}
	if ip, err := netip.ParseAddr(host); host == "" || (err == nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if err == nil && ip.Is6() {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}
