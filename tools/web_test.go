package tools_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/tools"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// hosts is a resolver that knows a few names and never touches a network.
type hosts map[string]string

func (h hosts) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a, ok := h[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []netip.Addr{netip.MustParseAddr(a)}, nil
}

// tool returns the named tool of src for an empty turn, or nil.
func tool(src agent.Source, name string) *agent.Tool {
	for _, t := range src.Tools(agent.TurnInfo{}) {
		if t.Name == name {
			return t
		}
	}
	return nil
}

func names(src agent.Source, info agent.TurnInfo) []string {
	var out []string
	for _, t := range src.Tools(info) {
		out = append(out, t.Name)
	}
	return out
}

// fetch runs web_fetch configured by cfg on rawURL.
func fetch(t *testing.T, cfg tools.WebConfig, rawURL string) (string, error) {
	t.Helper()
	cfg.Enabled = true
	wf := tool(tools.Web(cfg), tools.WebFetchTool)
	if wf == nil {
		t.Fatal("web_fetch is missing from an enabled web source")
	}
	args, _ := json.Marshal(map[string]string{"url": rawURL})
	return wf.Fn(t.Context(), args)
}

// loopback is the allowlist that lets a test reach its own servers.
var loopback = []string{"127.0.0.1"}

// counter is a handler that counts its requests and answers 200.
type counter struct{ n atomic.Int32 }

func (c *counter) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	c.n.Add(1)
	fmt.Fprint(w, "internal secret")
}

func TestFetchHTMLToCleanMarkdown(t *testing.T) {
	page, err := os.ReadFile("testdata/article.html")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	}))
	defer srv.Close()
	got, err := fetch(t, tools.WebConfig{AllowHosts: loopback}, srv.URL+"/posts/brew")
	if err != nil {
		t.Fatal(err)
	}
	got = strings.ReplaceAll(got, srv.URL, "http://SERVER")
	golden(t, "testdata/article.md", got)
	for _, junk := range []string{"TRACKING-SCRIPT", "SCRIPT-OUTPUT", "font-family", "HIDDEN-BANNER", "SIDEBAR-AD", "About us", "All rights reserved", "<p>", "<li>"} {
		if strings.Contains(got, junk) {
			t.Errorf("the text contains %q, which is not part of the article", junk)
		}
	}
	for _, want := range []string{"Title: How to brew tea", "## Steps", "1. Heat the water to 80 °C",
		"- A kettle with a thermometer", "[our guide to water](http://SERVER/guides/water)", "| Green | 80 °C | 2 |"} {
		if !strings.Contains(got, want) {
			t.Errorf("the text lacks %q", want)
		}
	}
}

// golden compares got with the file at path (rewritten with -update).
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it)\n got:\n%s\nwant:\n%s", path, got, want)
	}
}

// A page in a legacy encoding is decoded by its declared charset.
func TestFetchDecodesDeclaredCharset(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html") // the charset is only in the page
		fmt.Fprint(w, "<html><head><meta charset=\"iso-8859-1\"><title>Caf\xe9</title></head><body><p>Cr\xe8me br\xfbl\xe9e</p></body></html>")
	}))
	defer srv.Close()
	got, err := fetch(t, tools.WebConfig{AllowHosts: loopback}, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Title: Café\nURL: " + srv.URL + "\n\nCrème brûlée"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestFetchPassesJSONAndTextThroughAndRefusesBinary(t *testing.T) {
	bodies := map[string]struct{ ctype, body string }{
		"/data.json": {"application/json", `{"answer": 42, "html": "<b>not parsed</b>"}`},
		"/notes.txt": {"text/plain; charset=utf-8", "line one\n  line <two>\n"},
		"/sniffed":   {"", "just text, no content type"},
		"/logo.png":  {"image/png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := bodies[r.URL.Path]
		w.Header()["Content-Type"] = []string{b.ctype} // an empty value: no type said
		fmt.Fprint(w, b.body)
	}))
	defer srv.Close()
	cfg := tools.WebConfig{AllowHosts: loopback}
	for _, path := range []string{"/data.json", "/notes.txt", "/sniffed"} {
		got, err := fetch(t, cfg, srv.URL+path)
		if err != nil || got != bodies[path].body {
			t.Errorf("%s = %q, %v; want the body as it is", path, got, err)
		}
	}
	if got, err := fetch(t, cfg, srv.URL+"/logo.png"); err == nil || !strings.Contains(err.Error(), "image/png, not HTML, JSON or text") {
		t.Errorf("a PNG = %q, %v; want an error naming its type", got, err)
	}
}

func TestFetchRefusesLoopbackWhenNotAllowed(t *testing.T) {
	var c counter
	srv := httptest.NewServer(&c)
	defer srv.Close()
	_, err := fetch(t, tools.WebConfig{}, srv.URL+"/admin")
	if err == nil {
		t.Fatal("fetching 127.0.0.1 with an empty allowlist succeeded")
	}
	for _, want := range []string{"127.0.0.1 is a loopback address", "tools.web.allow_hosts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if n := c.n.Load(); n != 0 {
		t.Errorf("the server got %d requests; the guard must refuse before connecting", n)
	}
	// localhost is refused after resolution, too.
	if _, err := fetch(t, tools.WebConfig{Resolver: hosts{"localhost": "127.0.0.1"}},
		strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)); err == nil || !strings.Contains(err.Error(), "localhost resolves to 127.0.0.1, a loopback address") {
		t.Errorf("localhost: err = %v", err)
	}
}

// A page on an allowed host redirects to addresses that are not allowed:
// every redirect is checked when its connection is made.
func TestFetchRefusesRedirectsToInternalAddresses(t *testing.T) {
	var internal counter
	inner := httptest.NewServer(&internal)
	defer inner.Close()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-loopback":
			http.Redirect(w, r, inner.URL+"/secret", http.StatusFound)
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusMovedPermanently)
		case "/to-name":
			http.Redirect(w, r, "http://metadata.test/computeMetadata/v1/", http.StatusTemporaryRedirect)
		case "/hop":
			http.Redirect(w, r, "/final", http.StatusFound)
		case "/final":
			fmt.Fprint(w, "arrived")
		}
	}))
	defer site.Close()
	// site.test is allowed by name and maps to the test server's address;
	// 127.0.0.1 itself is not allowed.
	port := site.Listener.Addr().(*net.TCPAddr).Port
	base := fmt.Sprintf("http://site.test:%d", port)
	cfg := tools.WebConfig{AllowHosts: []string{"site.test"},
		Resolver: hosts{"site.test": "127.0.0.1", "metadata.test": "169.254.169.254"}}

	if got, err := fetch(t, cfg, base+"/hop"); err != nil || got != "arrived" {
		t.Fatalf("a redirect within the allowed host = %q, %v", got, err)
	}
	tests := []struct{ path, want string }{
		{"/to-loopback", "127.0.0.1 is a loopback address"},
		{"/to-metadata", "169.254.169.254 is the cloud metadata address"},
		{"/to-name", "metadata.test resolves to 169.254.169.254, the cloud metadata address"},
	}
	for _, tt := range tests {
		got, err := fetch(t, cfg, base+tt.path)
		if err == nil {
			t.Errorf("%s: fetched %q; want a refusal", tt.path, got)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "redirected from "+base+tt.path) {
			t.Errorf("%s: error %q; want %q and where the redirect came from", tt.path, err, tt.want)
		}
	}
	if n := internal.n.Load(); n != 0 {
		t.Errorf("the internal server got %d requests", n)
	}
}

func TestFetchRefusesNamesThatResolveToPrivateAddresses(t *testing.T) {
	cfg := tools.WebConfig{Resolver: hosts{"intranet.test": "10.0.0.1", "cgnat.test": "100.64.1.1", "v6.test": "fd12::1"}}
	for host, want := range map[string]string{
		"intranet.test": "intranet.test resolves to 10.0.0.1, a private address",
		"cgnat.test":    "cgnat.test resolves to 100.64.1.1, a shared (CGNAT) address",
		"v6.test":       "v6.test resolves to fd12::1, a private address",
	} {
		_, err := fetch(t, cfg, "http://"+host+"/wiki")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v; want %q", host, err, want)
		}
	}
	// The same name is reachable once the operator allows it (here it
	// points at a test server, allowed by its address).
	var c counter
	srv := httptest.NewServer(&c)
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	cfg = tools.WebConfig{AllowHosts: []string{"127.0.0.0/8"}, Resolver: hosts{"intranet.test": "127.0.0.1"}}
	if got, err := fetch(t, cfg, fmt.Sprintf("http://intranet.test:%d/", port)); err != nil || got != "internal secret" {
		t.Errorf("allowed network: %q, %v", got, err)
	}
}

func TestFetchCapsTheDownload(t *testing.T) {
	// An endless body: only the cap ends the fetch.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		line := []byte(strings.Repeat("a", 1023) + "\n")
		for r.Context().Err() == nil {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	got, err := fetch(t, tools.WebConfig{AllowHosts: loopback, MaxBytes: 64 << 10}, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, note, ok := strings.Cut(got, "\n\n[only the first 64 KiB of the response were read (tools.web.max_bytes)]")
	if !ok || note != "" {
		t.Fatalf("result ends %q; want the truncation note", got[max(0, len(got)-120):])
	}
	if len(body) != 64<<10 {
		t.Errorf("body = %d bytes, want exactly the 64 KiB cap", len(body))
	}
}

func TestFetchResultIsCappedInCharacters(t *testing.T) {
	wf := tool(tools.Web(tools.WebConfig{Enabled: true, MaxChars: 1234}), tools.WebFetchTool)
	if wf.MaxResultChars != 1234 || !wf.Untrusted || !wf.ConcurrencySafe {
		t.Errorf("web_fetch: MaxResultChars %d, Untrusted %v, ConcurrencySafe %v; want 1234, true, true",
			wf.MaxResultChars, wf.Untrusted, wf.ConcurrencySafe)
	}
}

func TestFetchTimesOut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // answers only when the client gives up
	}))
	defer srv.Close()
	began := time.Now()
	_, err := fetch(t, tools.WebConfig{AllowHosts: loopback, Timeout: 150 * time.Millisecond}, srv.URL)
	if err == nil || !strings.Contains(err.Error(), "did not answer within 150ms") {
		t.Fatalf("err = %v; want a timeout", err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("the fetch took %s; the timeout did not hold", d)
	}
}

func TestFetchRedirectLimitAndErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/loop/"):
			var n int
			fmt.Sscanf(r.URL.Path, "/loop/%d", &n)
			http.Redirect(w, r, fmt.Sprintf("/loop/%d", n+1), http.StatusFound)
		case r.URL.Path == "/ftp":
			http.Redirect(w, r, "ftp://example.com/file", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cfg := tools.WebConfig{AllowHosts: loopback, MaxRedirects: 2}
	tests := []struct{ url, want string }{
		{srv.URL + "/loop/0", "redirected more than 2 times"},
		{srv.URL + "/ftp", "only http and https can be fetched"},
		{srv.URL + "/missing", "answered HTTP 404 Not Found"},
		{"file:///etc/passwd", "is not an http or https URL"},
		{"example.com/page", "is not an http or https URL"},
		{"http://no-such-host.test/", "no such host"},
	}
	cfg.Resolver = hosts{}
	for _, tt := range tests {
		if _, err := fetch(t, cfg, tt.url); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v; want %q", tt.url, err, tt.want)
		}
	}
}

func TestWebDisabledOffersNothing(t *testing.T) {
	if got := names(tools.Web(tools.WebConfig{Search: tools.SearchConfig{Provider: tools.Brave, APIKey: "k"}}), agent.TurnInfo{}); len(got) != 0 {
		t.Errorf("disabled web source offers %q", got)
	}
}

// URLs in messages never carry a password.
func TestFetchErrorsRedactPasswords(t *testing.T) {
	_, err := fetch(t, tools.WebConfig{}, "http://user:hunter2@127.0.0.1:1/")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("err = %v; want a refusal without the password", err)
	}
}
