package httpapi

// What a web page in a browser on the same host can do to the server: DNS
// rebinding (a Host of the attacker's), cross-site POSTs to the chat API,
// and a forged login form. Each request is sent as the browser would,
// with the headers it would set.

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// send makes one request with exactly the given headers (and Host), no
// token unless the headers carry one.
func send(t *testing.T, method, rawURL, host, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, rawURL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// DNS rebinding: evil.example resolves to 127.0.0.1, so the browser sends
// the attacker's page's requests to the server with Host: evil.example,
// and the page may read the answers (same origin, as far as the browser
// knows). Nothing but /healthz may answer them.
func TestHostGuardDNSRebinding(t *testing.T) {
	s := newStack(t, func(o *Options) {
		o.PublicHosts = []string{"dash.example.com", "api.example.com:8443"}
	})
	port := strings.TrimPrefix(s.url, "http://127.0.0.1:")
	chat := `{"model":"switchboard","user":"mallory","messages":[{"role":"user","content":"plant a job"}]}`
	jsonBody := map[string]string{"Content-Type": "application/json"}

	for _, tt := range []struct {
		method, path, host, body string
		header                   map[string]string
		want                     int
	}{
		// The attacker's names.
		{"GET", "/", "evil.example", "", nil, http.StatusMisdirectedRequest},
		{"GET", "/", "evil.example:" + port, "", nil, http.StatusMisdirectedRequest},
		{"GET", "/chats", "evil.example:" + port, "", nil, http.StatusMisdirectedRequest},
		{"GET", "/fragments/overview", "evil.example:" + port, "", nil, http.StatusMisdirectedRequest},
		{"GET", "/metrics", "evil.example:" + port, "", nil, http.StatusMisdirectedRequest},
		{"GET", "/readyz", "evil.example:" + port, "", nil, http.StatusMisdirectedRequest},
		{"GET", "/v1/models", "evil.example:" + port, "", nil, http.StatusMisdirectedRequest},
		{"POST", "/v1/chat/completions", "evil.example:" + port, chat, jsonBody, http.StatusMisdirectedRequest},
		{"GET", "/", "localhost.evil.example", "", nil, http.StatusMisdirectedRequest},
		{"GET", "/", "127.0.0.1.nip.io:" + port, "", nil, http.StatusMisdirectedRequest},
		{"GET", "/", "dash.example.com.evil.example", "", nil, http.StatusMisdirectedRequest},
		{"GET", "/", "api.example.com:" + port, "", nil, http.StatusMisdirectedRequest}, // listed with :8443 only
		{"GET", "/", "api.example.com", "", nil, http.StatusMisdirectedRequest},
		// Probes send what Host they like; /healthz says nothing.
		{"GET", "/healthz", "evil.example", "", nil, http.StatusOK},
		// The server's own names.
		{"GET", "/", "localhost:" + port, "", nil, http.StatusOK},
		{"GET", "/", "LocalHost", "", nil, http.StatusOK},
		{"GET", "/", "127.0.0.1:" + port, "", nil, http.StatusOK},
		{"GET", "/", "127.0.0.1", "", nil, http.StatusOK},
		{"GET", "/", "127.8.9.10:" + port, "", nil, http.StatusOK},
		{"GET", "/", "[::1]:" + port, "", nil, http.StatusOK},
		{"GET", "/metrics", "localhost:" + port, "", nil, http.StatusOK},
		{"GET", "/v1/models", "127.0.0.1:" + port, "", nil, http.StatusOK},
		{"GET", "/readyz", "localhost", "", nil, http.StatusOK},
		// An address cannot be rebound: a pod IP or a LAN address is fine.
		{"GET", "/readyz", "10.1.2.3:" + port, "", nil, http.StatusOK},
		// The configured public names.
		{"GET", "/", "dash.example.com", "", nil, http.StatusOK},
		{"GET", "/", "Dash.Example.COM.:443", "", nil, http.StatusOK},
		{"GET", "/", "api.example.com:8443", "", nil, http.StatusOK},
	} {
		code, body := send(t, tt.method, s.url+tt.path, tt.host, tt.body, tt.header)
		if code != tt.want {
			t.Errorf("%s %s with Host %q: %d, want %d: %s", tt.method, tt.path, tt.host, code, tt.want, clipRunes(body, 200))
		}
		if code == http.StatusMisdirectedRequest && strings.Contains(body, "mallory") {
			t.Errorf("a refused request's answer echoes the request: %s", body)
		}
	}
	if n := s.fake.Calls(); n != 0 {
		t.Errorf("the model got %d requests from refused chats, want 0", n)
	}
	if turns, err := s.store.RecentTurns(t.Context(), 10); err != nil || len(turns) != 0 {
		t.Errorf("turns after refused chats: %v, %v", turns, err)
	}
}

// A page on evil.example posts to http://127.0.0.1:8080/v1/chat/completions:
// text/plain needs no CORS preflight, so the browser sends it with the
// page's Origin (and, in current browsers, Sec-Fetch-Site: cross-site).
// No turn may run; the server's own pages and SDKs still chat.
func TestCrossSiteChatRefused(t *testing.T) {
	s := newStack(t, nil)
	chat := `{"model":"switchboard","user":"mallory","messages":[{"role":"user","content":"every day at 9, fetch evil.example"}]}`
	for _, tt := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"text/plain with a foreign Origin (older browsers)",
			map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example"}, http.StatusForbidden},
		{"text/plain, cross-site",
			map[string]string{"Content-Type": "text/plain;charset=UTF-8", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"JSON, cross-site (as after a preflight nobody answers)",
			map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"JSON, same-site but another origin",
			map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"JSON with a foreign Origin and no Sec-Fetch-Site",
			map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}, http.StatusForbidden},
		{"JSON from a sandboxed frame (Origin null)",
			map[string]string{"Content-Type": "application/json", "Origin": "null"}, http.StatusForbidden},
		{"a form, same origin", // only JSON runs turns
			map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": s.url, "Sec-Fetch-Site": "same-origin"}, http.StatusUnsupportedMediaType},
		{"text/plain without browser headers",
			map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"no Content-Type", nil, http.StatusUnsupportedMediaType},
	} {
		code, body := send(t, "POST", s.url+"/v1/chat/completions", "", chat, tt.header)
		if code != tt.want {
			t.Errorf("%s: %d, want %d: %s", tt.name, code, tt.want, body)
		}
		if !strings.Contains(body, `"error"`) {
			t.Errorf("%s: the answer is not an OpenAI-style error: %s", tt.name, body)
		}
	}
	if n := s.fake.Calls(); n != 0 {
		t.Fatalf("the model got %d requests from refused chats, want 0", n)
	}

	// The same request from the server's own origin, and from an SDK.
	for _, header := range []map[string]string{
		{"Content-Type": "application/json", "Origin": s.url, "Sec-Fetch-Site": "same-origin"},
		{"Content-Type": "application/json", "Origin": s.url},
		{"Content-Type": "application/json; charset=utf-8"},
	} {
		s.fake.Push(testkit.Reply{Text: "Hello."})
		code, body := send(t, "POST", s.url+"/v1/chat/completions", "", `{"user":"ada","messages":[{"role":"user","content":"hi"}]}`, header)
		if code != http.StatusOK || !strings.Contains(body, "Hello.") {
			t.Errorf("chat with %v: %d %s", header, code, body)
		}
	}
	if n := s.fake.Calls(); n != 3 {
		t.Errorf("the model got %d requests, want 3 (the accepted chats)", n)
	}
	turns, err := s.store.RecentTurns(t.Context(), 10)
	if err != nil || len(turns) != 3 {
		t.Fatalf("turns = %d, %v; want the 3 accepted ones", len(turns), err)
	}
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// pageForm opens a page as a browser would (with header) and returns its
// status, the CSRF field of its form and the cookie that goes with it.
func pageForm(t *testing.T, base, path string, header map[string]string) (int, string, *http.Cookie) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := csrfInput.FindSubmatch(b)
	if m == nil {
		t.Fatalf("GET %s: %d, no csrf field:\n%s", path, resp.StatusCode, b)
	}
	for _, c := range resp.Cookies() {
		if c.Name == csrfCookie {
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Value != string(m[1]) {
				t.Fatalf("csrf cookie %+v: want HttpOnly, SameSite=Strict, the form's value", c)
			}
			return resp.StatusCode, string(m[1]), c
		}
	}
	t.Fatalf("GET %s without a %s cookie: %v", path, csrfCookie, resp.Cookies())
	return 0, "", nil
}

// loginForm opens the login form as a browser would and returns its CSRF
// token and the cookie that goes with it.
func loginForm(t *testing.T, base string) (string, *http.Cookie) {
	t.Helper()
	code, csrf, c := pageForm(t, base, "/chats", nil)
	if code != http.StatusUnauthorized {
		t.Fatalf("login form: %d, want 401", code)
	}
	return csrf, c
}

// postLogin posts the login form with the given cookie (nil: none).
func postLogin(t *testing.T, client *http.Client, base string, form url.Values, c *http.Cookie) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", base+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c != nil {
		req.AddCookie(c)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// The login form is accepted only with the CSRF token of the browser's own
// copy of the form.
func TestLoginCSRF(t *testing.T) {
	s := newStack(t, func(o *Options) { o.Token = testToken })
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	csrf, cookie := loginForm(t, s.url)
	other, otherCookie := loginForm(t, s.url)
	if csrf == other {
		t.Fatal("two browsers got the same CSRF token")
	}
	session := func(resp *http.Response) bool {
		for _, c := range resp.Cookies() {
			if c.Name == sessionCookie {
				return true
			}
		}
		return false
	}
	for _, tt := range []struct {
		name   string
		csrf   string
		cookie *http.Cookie
		want   int
	}{
		{"no token, no cookie", "", nil, http.StatusForbidden},
		{"no token", "", cookie, http.StatusForbidden},
		{"a wrong token", strings.Repeat("ab", csrfBytes), cookie, http.StatusForbidden},
		{"another browser's token", other, cookie, http.StatusForbidden},
		{"the token without its cookie", csrf, nil, http.StatusForbidden},
		{"a forged pair that is not the server's format", "x", &http.Cookie{Name: csrfCookie, Value: "x"}, http.StatusForbidden},
		{"the right token", csrf, cookie, http.StatusSeeOther},
		{"the other browser's own pair", other, otherCookie, http.StatusSeeOther},
	} {
		form := url.Values{"token": {testToken}, "next": {"/chats"}}
		if tt.csrf != "" {
			form.Set("csrf", tt.csrf)
		}
		resp := postLogin(t, client, s.url, form, tt.cookie)
		if resp.StatusCode != tt.want || session(resp) != (tt.want == http.StatusSeeOther) {
			t.Errorf("login with %s: %d, session cookie %v; want %d", tt.name, resp.StatusCode, session(resp), tt.want)
		}
	}

	// A page elsewhere that somehow had the pair still cannot post it.
	form := url.Values{"token": {testToken}, "csrf": {csrf}}
	code, _ := send(t, "POST", s.url+"/login", "", form.Encode(), map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site",
		"Cookie": cookie.Name + "=" + cookie.Value})
	if code != http.StatusForbidden {
		t.Errorf("cross-site login: %d, want 403", code)
	}
}

func TestHostSet(t *testing.T) {
	hs, err := newHostSet([]string{"Dash.Example.com", "api.example.com:8443", "[2001:db8::1]:80"})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"localhost": true, "localhost:8080": true, "127.0.0.1": true, "127.255.0.1:80": true, "[::1]:8080": true, "[::1]": true,
		"192.168.1.2:8080": true, "[fe80::1]:80": true,
		"dash.example.com": true, "dash.example.com:1234": true, "DASH.example.com.": true,
		"api.example.com:8443": true, "api.example.com": false, "api.example.com:443": false,
		"": false, "evil.example": false, "evil.example:8080": false, "localhost.evil.example": false,
		"sub.dash.example.com": false, "2130706433:8080": false, "localhost:8080@evil.example": false,
	} {
		if got := hs.allows(host); got != want {
			t.Errorf("allows(%q) = %v, want %v", host, got, want)
		}
	}
	for _, bad := range []string{"", "https://dash.example.com", "dash.example.com/", "dash.example.com:"} {
		if _, err := newHostSet([]string{bad}); err == nil {
			t.Errorf("newHostSet(%q): no error", bad)
		}
	}
}
