package skills

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// captured is what the fake server saw of a request.
type captured struct {
	method string
	url    *url.URL
	header http.Header
	body   []byte
}

func TestHTTPKind(t *testing.T) {
	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		io.WriteString(w, "other host")
	}))
	t.Cleanup(other.Close)

	echoAuth := func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "you sent "+r.Header.Get("Authorization"))
	}
	getenv := func(name string) string {
		if name == "API_TOKEN" {
			return "s3cr3t-token"
		}
		return ""
	}
	tests := []struct {
		name    string
		def     func(base string) ToolDef
		respond http.HandlerFunc
		args    string
		want    string // the whole result, when set
		wantErr string // a part of the error
		check   func(t *testing.T, got captured)
	}{
		{
			name: "query placeholder is one escaped parameter",
			def: func(base string) ToolDef {
				return ToolDef{Name: "search", Kind: "http", URL: base + "/search?q={q}&n={n}&exact={exact}&lang=en", Parameters: schema("q", "n", "exact")}
			},
			args: `{"q":"a b&c=d","n":5,"exact":true}`,
			want: "HTTP 200\nok",
			check: func(t *testing.T, got captured) {
				want := url.Values{"q": {"a b&c=d"}, "n": {"5"}, "exact": {"true"}, "lang": {"en"}}
				if q := got.url.Query(); !reflect.DeepEqual(q, want) || got.method != http.MethodGet {
					t.Errorf("got %s query %v, want GET %v", got.method, q, want)
				}
			},
		},
		{
			name: "path placeholder stays one segment",
			def: func(base string) ToolDef {
				return ToolDef{Name: "item", Kind: "http", URL: base + "/items/{id}/info", Parameters: schema("id")}
			},
			args: `{"id":"../x?y=1#z"}`,
			want: "HTTP 200\nok",
			check: func(t *testing.T, got captured) {
				if p := got.url.EscapedPath(); p != "/items/..%2Fx%3Fy=1%23z/info" {
					t.Errorf("got path %q, want /items/..%%2Fx%%3Fy=1%%23z/info", p)
				}
				if got.url.RawQuery != "" {
					t.Errorf("got query %q, want none", got.url.RawQuery)
				}
			},
		},
		{
			name: "dot-dot as a whole path segment is refused",
			def: func(base string) ToolDef {
				return ToolDef{Name: "item", Kind: "http", URL: base + "/items/{id}", Parameters: schema("id")}
			},
			args:    `{"id":".."}`,
			wantErr: "cannot be a path segment",
		},
		{
			name: "JSON body with quotes stays valid JSON",
			def: func(base string) ToolDef {
				return ToolDef{Name: "post", Kind: "http", Method: "post", URL: base + "/notes",
					Body: `{{"text": "{text}", "limit": {limit}, "tags": {tags}, "none": {missing}}}`, Parameters: schema("text", "limit", "tags", "missing")}
			},
			args: `{"text":"say \"hi\" \\ <b>\n","limit":5,"tags":["a","b"]}`,
			want: "HTTP 200\nok",
			check: func(t *testing.T, got captured) {
				var body struct {
					Text  string
					Limit int
					Tags  []string
					None  *string
				}
				if err := json.Unmarshal(got.body, &body); err != nil {
					t.Fatalf("body %s is not JSON: %v", got.body, err)
				}
				if body.Text != "say \"hi\" \\ <b>\n" || body.Limit != 5 || !reflect.DeepEqual(body.Tags, []string{"a", "b"}) || body.None != nil {
					t.Errorf("got body %s", got.body)
				}
				if ct := got.header.Get("Content-Type"); ct != "application/json" || got.method != http.MethodPost {
					t.Errorf("got %s with Content-Type %q, want POST application/json", got.method, ct)
				}
			},
		},
		{
			name: "raw body keeps text and the declared content type",
			def: func(base string) ToolDef {
				return ToolDef{Name: "put", Kind: "http", Method: "PUT", URL: base + "/doc", Headers: map[string]string{"Content-Type": "text/plain"},
					Body: "title: {title}", Parameters: schema("title")}
			},
			args: `{"title":"a \"b\""}`,
			want: "HTTP 200\nok",
			check: func(t *testing.T, got captured) {
				if string(got.body) != `title: a "b"` || got.header.Get("Content-Type") != "text/plain" {
					t.Errorf("got body %q type %q", got.body, got.header.Get("Content-Type"))
				}
			},
		},
		{
			name: "header ${VAR} is sent but never returned",
			def: func(base string) ToolDef {
				return ToolDef{Name: "auth", Kind: "http", URL: base + "/me",
					Headers: map[string]string{"Authorization": "Bearer ${API_TOKEN}", "X-Lang": "{lang}"}, Parameters: schema("lang")}
			},
			respond: echoAuth,
			args:    `{"lang":"de"}`,
			want:    "HTTP 200\nyou sent Bearer [redacted]",
			check: func(t *testing.T, got captured) {
				if a, l := got.header.Get("Authorization"), got.header.Get("X-Lang"); a != "Bearer s3cr3t-token" || l != "de" {
					t.Errorf("server got Authorization %q X-Lang %q", a, l)
				}
			},
		},
		{
			name: "header secret is not in an error either",
			def: func(base string) ToolDef {
				return ToolDef{Name: "auth", Kind: "http", URL: base + "/me", Headers: map[string]string{"Authorization": "Bearer ${API_TOKEN}"}}
			},
			respond: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusUnauthorized)
				echoAuth(w, r)
			},
			wantErr: "HTTP 401 Unauthorized: you sent Bearer [redacted]",
		},
		{
			name: "unset variable is an error before any request",
			def: func(base string) ToolDef {
				return ToolDef{Name: "auth", Kind: "http", URL: base + "/me", Headers: map[string]string{"Authorization": "Bearer ${NOT_SET}"}}
			},
			wantErr: "the environment variable NOT_SET is not set",
		},
		{
			name: "header argument with a line break is refused",
			def: func(base string) ToolDef {
				return ToolDef{Name: "h", Kind: "http", URL: base + "/", Headers: map[string]string{"X-Lang": "{lang}"}, Parameters: schema("lang")}
			},
			args:    `{"lang":"de\r\nX-Evil: 1"}`,
			wantErr: "cannot contain line breaks",
		},
		{
			name: "response over the cap is truncated",
			def: func(base string) ToolDef {
				return ToolDef{Name: "big", Kind: "http", URL: base + "/big", MaxResponseChars: 10}
			},
			respond: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, strings.Repeat("x", 100)) },
			want:    "HTTP 200\nxxxxxxxxxx\n[truncated: the response is longer than 10 bytes]",
		},
		{
			name: "response at the cap is whole",
			def: func(base string) ToolDef {
				return ToolDef{Name: "big", Kind: "http", URL: base + "/big", MaxResponseChars: 10}
			},
			respond: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "0123456789") },
			want:    "HTTP 200\n0123456789",
		},
		{
			name: "status 500 is an error with an excerpt",
			def:  func(base string) ToolDef { return ToolDef{Name: "fail", Kind: "http", URL: base + "/fail"} },
			respond: func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "boom: database on fire", http.StatusInternalServerError)
			},
			wantErr: "HTTP 500 Internal Server Error: boom: database on fire",
		},
		{
			name: "timeout is honoured",
			def: func(base string) ToolDef {
				return ToolDef{Name: "slow", Kind: "http", Method: "POST", URL: base + "/slow", Body: "x", Timeout: 100 * time.Millisecond}
			},
			respond: func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
			wantErr: "timed out after 100ms",
		},
		{
			name: "redirect to another host is refused",
			def:  func(base string) ToolDef { return ToolDef{Name: "redir", Kind: "http", URL: base + "/away"} },
			respond: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.URL+"/steal", http.StatusFound)
			},
			wantErr: "refused",
		},
		{
			name: "redirect on the same host is followed",
			def:  func(base string) ToolDef { return ToolDef{Name: "redir", Kind: "http", URL: base + "/old"} },
			respond: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/old" {
					http.Redirect(w, r, "/new", http.StatusMovedPermanently)
					return
				}
				io.WriteString(w, "moved to "+r.URL.Path)
			},
			want: "HTTP 200\nmoved to /new",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(chan captured, 10)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body) // drained first, so a blocking handler cannot stall the client
				seen <- captured{method: r.Method, url: r.URL, header: r.Header.Clone(), body: body}
				if tc.respond != nil {
					tc.respond(w, r)
					return
				}
				io.WriteString(w, "ok")
			}))
			defer srv.Close()
			tool := buildTool(t, tc.def(srv.URL), Env{Getenv: getenv})

			got, err := tool.Fn(t.Context(), json.RawMessage(tc.args))
			for _, s := range []string{got, errText(err)} {
				if strings.Contains(s, "s3cr3t") {
					t.Errorf("the secret leaked: %q", s)
				}
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
			} else if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
			if tc.check != nil {
				select {
				case c := <-seen:
					tc.check(t, c)
				default:
					t.Fatal("the server saw no request")
				}
			}
		})
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the other host got %d requests, want 0", n)
	}
}

func TestHTTPKindUsesGivenClientWithoutChangingIt(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://example.invalid/", http.StatusFound)
	}))
	defer srv.Close()
	client := &http.Client{}
	tool := buildTool(t, ToolDef{Name: "r", Kind: "http", URL: srv.URL + "/"}, Env{HTTPClient: client})
	if _, err := tool.Fn(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "redirect to http://example.invalid refused") {
		t.Errorf("got %v, want the redirect refused", err)
	}
	if client.CheckRedirect != nil {
		t.Error("Build modified the shared client")
	}
}
