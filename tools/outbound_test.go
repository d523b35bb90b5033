package tools

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// GuardedTransport (skill http tools) refuses a loopback service unless an
// entry allows its host and port, like web_fetch's guard.
func TestGuardedTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	none := func() ([]netip.Addr, error) { return nil, nil }
	for _, tc := range []struct {
		allow []string
		ok    bool
	}{
		{nil, false},
		{[]string{"127.0.0.1:1"}, false},
		{[]string{srv.Listener.Addr().String()}, true},
	} {
		c := &http.Client{Transport: GuardedTransport(tc.allow, nil, none)}
		resp, err := c.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		if _, refused := blocked(err); (err == nil) != tc.ok || !tc.ok && !refused {
			t.Errorf("allow %v: got %v, want allowed=%v", tc.allow, err, tc.ok)
		}
	}
}
