// Package webhooklb is a round-robin load balancer for tests and
// benchmarks of replicas: it forwards each request (a Telegram webhook
// update) to the next backend in turn and, on a connection error or a 5xx,
// to the one after it, as a load balancer with retries does (and as
// Telegram retries a failed delivery).
package webhooklb

import (
	"bytes"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
)

// Balancer is an http.Handler; serve it where the platform posts.
type Balancer struct {
	client *http.Client

	mu       sync.Mutex
	backends []string // base URLs
	names    []string
	next     int
	accepted map[string]int // backend → requests it answered 200

	retries atomic.Int64 // forwards that failed and went to the next backend
}

// New returns a balancer that forwards with client.
func New(client *http.Client) *Balancer {
	return &Balancer{client: client, accepted: map[string]int{}}
}

// Add adds a backend named name at host:port addr (plain HTTP).
func (b *Balancer) Add(name, addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = append(b.backends, "http://"+addr)
	b.names = append(b.names, name)
}

// Accepted returns how many requests each backend answered 200.
func (b *Balancer) Accepted() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.accepted)
}

// Retries counts forwards that failed and went to the next backend.
func (b *Balancer) Retries() int64 { return b.retries.Load() }

// ServeHTTP forwards the request; each backend is tried at most twice.
func (b *Balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	b.mu.Lock()
	backends, names := slices.Clone(b.backends), slices.Clone(b.names)
	first := b.next
	if len(backends) > 0 {
		b.next = (b.next + 1) % len(backends)
	}
	b.mu.Unlock()
	for i := range 2 * len(backends) {
		k := (first + i) % len(backends)
		req, err := http.NewRequestWithContext(r.Context(), r.Method, backends[k]+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			break
		}
		req.Header = r.Header.Clone()
		resp, err := b.client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 500 {
				if resp.StatusCode == http.StatusOK {
					b.mu.Lock()
					b.accepted[names[k]]++
					b.mu.Unlock()
				}
				w.WriteHeader(resp.StatusCode)
				return
			}
		}
		if r.Context().Err() != nil {
			return
		}
		b.retries.Add(1)
	}
	http.Error(w, "no backend took the request", http.StatusBadGateway)
}
