package webhooklb

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Requests go round robin; a backend that fails (5xx, or gone) is skipped
// for the next one, and each backend's 200s are counted.
func TestRoundRobinWithRetry(t *testing.T) {
	var got []string
	ok := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = append(got, name+r.URL.Path)
		}))
	}
	a, b := ok("a"), ok("b")
	defer a.Close()
	defer b.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer broken.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()

	lb := New(http.DefaultClient)
	lb.Add("a", strings.TrimPrefix(a.URL, "http://"))
	lb.Add("broken", strings.TrimPrefix(broken.URL, "http://"))
	lb.Add("gone", strings.TrimPrefix(gone.URL, "http://"))
	lb.Add("b", strings.TrimPrefix(b.URL, "http://"))
	front := httptest.NewServer(lb)
	defer front.Close()
	for range 4 {
		resp, err := http.Post(front.URL+"/hook", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	// a; broken→gone→b; gone→b; b.
	want := []string{"a/hook", "b/hook", "b/hook", "b/hook"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("forwarded to %v; want %v", got, want)
	}
	if acc := lb.Accepted(); acc["a"] != 1 || acc["b"] != 3 || acc["broken"] != 0 {
		t.Errorf("accepted %v", acc)
	}
	if lb.Retries() != 3 {
		t.Errorf("retries %d; want 3", lb.Retries())
	}
}
