package transport

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// TestReusingKeepsConnections: after 16 requests at once, 16 more at once
// dial no new connection (the default transport keeps only 2 and dials 14).
func TestReusingKeepsConnections(t *testing.T) {
	var conns atomic.Int64
	release := make(chan struct{})
	var arrived sync.WaitGroup
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			arrived.Done()
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := &http.Client{Transport: Reusing()}
	burst := func(path string, hold bool) {
		var wg sync.WaitGroup
		if hold {
			arrived.Add(16)
		}
		for range 16 {
			wg.Go(func() {
				resp, err := c.Get(srv.URL + path)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		if hold {
			arrived.Wait() // 16 connections open at once
			close(release)
		}
		wg.Wait()
	}
	burst("/hold", true)
	if got := conns.Load(); got != 16 {
		t.Fatalf("first burst opened %d connections, want 16", got)
	}
	burst("/again", false)
	if got := conns.Load(); got != 16 {
		t.Errorf("after a second burst %d connections were opened in all, want 16 (all reused)", got)
	}
}
