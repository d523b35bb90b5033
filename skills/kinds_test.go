package skills

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"switchboard/agent"
	"switchboard/llm"
)

// buildTool builds d or fails the test.
func buildTool(t *testing.T, d ToolDef, env Env) *agent.Tool {
	t.Helper()
	tool, err := d.Build("skill:test", env)
	if err != nil {
		t.Fatalf("Build(%s): %v", d.Name, err)
	}
	return tool
}

func schema(props ...string) map[string]any {
	p := map[string]any{}
	for _, name := range props {
		p[name] = map[string]any{}
	}
	return map[string]any{"type": "object", "properties": p}
}

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

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestKindBuildErrors(t *testing.T) {
	tests := []struct {
		name string
		def  ToolDef
		want []string // parts of the error, one per problem
	}{
		{"bad kind", ToolDef{Name: "t", Kind: "teleport", URL: "https://x/"}, []string{`kind: "teleport" is not a kind`}},
		{"missing kind", ToolDef{Name: "t"}, []string{"kind: required"}},
		{"bad name", ToolDef{Name: "a b", Kind: "prompt", Prompt: "x"}, []string{"name: "}},
		{"missing url", ToolDef{Name: "t", Kind: "http"}, []string{"url: required"}},
		{"unknown placeholder", ToolDef{Name: "t", Kind: "http", URL: "https://x.example/{city}", Parameters: schema("town")},
			[]string{"url: placeholder {city} is not a declared parameter"}},
		{"placeholder without parameters", ToolDef{Name: "t", Kind: "prompt", Prompt: "hi {who}"},
			[]string{"prompt: placeholder {who} is not a declared parameter"}},
		{"env reference outside headers", ToolDef{Name: "t", Kind: "http", URL: "https://x.example/?key=${KEY}"},
			[]string{"url: placeholder {KEY} is not a declared parameter; ${VAR} environment references are only allowed in http header values"}},
		{"placeholder in host", ToolDef{Name: "t", Kind: "http", URL: "https://{h}.example.com/", Parameters: schema("h")},
			[]string{"url: placeholders may only appear in the path or query"}},
		{"placeholder right after host", ToolDef{Name: "t", Kind: "http", URL: "https://example.com{p}", Parameters: schema("p")},
			[]string{"url: placeholders may only appear in the path or query"}},
		{"not http", ToolDef{Name: "t", Kind: "http", URL: "file:///etc/passwd"}, []string{"url: must be an absolute http"}},
		{"bad method", ToolDef{Name: "t", Kind: "http", Method: "TRACE", URL: "https://x.example/"}, []string{`method: "TRACE" is not one of`}},
		{"GET with body", ToolDef{Name: "t", Kind: "http", URL: "https://x.example/", Body: "x"}, []string{"body: a GET request has no body"}},
		{"unescaped JSON brace", ToolDef{Name: "t", Kind: "http", Method: "POST", URL: "https://x.example/", Body: `{"q": 1}`},
			[]string{"body: unmatched { at offset 0"}},
		{"lone closing brace", ToolDef{Name: "t", Kind: "prompt", Prompt: "a } b"}, []string{"prompt: unmatched } at offset 2"}},
		{"body not JSON", ToolDef{Name: "t", Kind: "http", Method: "POST", URL: "https://x.example/", Body: `{{"q": }}`},
			[]string{"body: starts like JSON but is not valid JSON"}},
		{"bad header name", ToolDef{Name: "t", Kind: "http", URL: "https://x.example/", Headers: map[string]string{"Bad Name": "x"}},
			[]string{`headers.Bad Name: "Bad Name" is not a valid header name`}},
		{"host header", ToolDef{Name: "t", Kind: "http", URL: "https://x.example/", Headers: map[string]string{"host": "evil"}},
			[]string{"headers.host: the Host header comes from the url"}},
		{"parameters not an object", ToolDef{Name: "t", Kind: "prompt", Prompt: "x", Parameters: map[string]any{"type": "string"}},
			[]string{"parameters.type: string"}},
		{"properties not a mapping", ToolDef{Name: "t", Kind: "prompt", Prompt: "x", Parameters: map[string]any{"properties": "city"}},
			[]string{"parameters.properties: must be a mapping"}},
		{"invalid schema", ToolDef{Name: "t", Kind: "prompt", Prompt: "x", Parameters: map[string]any{"properties": map[string]any{"a": map[string]any{"type": 5}}}},
			[]string{"parameters: not a valid JSON Schema"}},
		{"missing argv", ToolDef{Name: "t", Kind: "command"}, []string{"argv: required"}},
		{"program placeholder", ToolDef{Name: "t", Kind: "command", Argv: []string{"{prog}"}, Parameters: schema("prog")},
			[]string{"argv[0]: the program cannot be a placeholder"}},
		{"argv placeholder unknown", ToolDef{Name: "t", Kind: "command", Argv: []string{"cat", "{file}"}},
			[]string{"argv[1]: placeholder {file} is not a declared parameter"}},
		{"missing prompt", ToolDef{Name: "t", Kind: "prompt", System: "be brief"}, []string{"prompt: required"}},
		{"field of another kind", ToolDef{Name: "t", Kind: "prompt", Prompt: "x", URL: "https://x.example/", Argv: []string{"ls"}},
			[]string{"url: is only for kind http", "argv: is only for kind command"}},
		{"name and schema both reported", ToolDef{Name: "no spaces", Kind: "prompt", Prompt: "x", Parameters: map[string]any{"properties": map[string]any{"a": map[string]any{"type": 5}}}},
			[]string{"name: ", "parameters: not a valid JSON Schema"}},
		{"negative limits", ToolDef{Name: "t", Kind: "prompt", Prompt: "x", Timeout: -time.Second, MaxResponseChars: -1},
			[]string{"timeout: must not be negative", "max_response_chars: must not be negative"}},
		{"every problem collected", ToolDef{Name: "t", Kind: "http", Method: "FETCH", URL: "https://x.example/{a}", Body: "{b}"},
			[]string{"method:", "url: placeholder {a}", "body: placeholder {b}"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tool, err := tc.def.Build("skill:test", Env{})
			if err == nil {
				t.Fatalf("got tool %+v, want an error", tool)
			}
			var de *DefError
			if !errors.As(err, &de) {
				t.Errorf("got %T, want a *DefError inside", err)
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != len(tc.want) {
				t.Errorf("got %d problems, want %d:\n%v", n, len(tc.want), err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestKindBuildFields(t *testing.T) {
	d := ToolDef{Name: "weather", Description: "Weather for a city.", Kind: "http", URL: "https://api.example.com/w?q={city}",
		ConcurrencySafe: true, MaxResponseChars: 1000,
		Parameters: map[string]any{"properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}}}
	tool := buildTool(t, d, Env{})
	got := struct {
		Name, Description, Source string
		Safe                      bool
		Max                       int
		Params                    string
	}{tool.Name, tool.Description, tool.Source, tool.ConcurrencySafe, tool.MaxResultChars, string(tool.Spec().Parameters)}
	want := got
	want.Name, want.Description, want.Source, want.Safe, want.Max = "weather", "Weather for a city.", "skill:test", true, 1000+resultSlack
	want.Params = `{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}`
	if got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if _, ok := d.Parameters["type"]; ok {
		t.Error("Build modified the definition's parameters")
	}
	// An HTTP response is outside text; a prompt sub-call's is not.
	if !tool.Untrusted {
		t.Error("an http tool's results are not labelled untrusted")
	}
	if p := buildTool(t, ToolDef{Name: "think", Kind: "prompt", Prompt: "x"}, Env{}); p.Untrusted {
		t.Error("a prompt tool's results are labelled untrusted")
	}
}

func TestKindTemplate(t *testing.T) {
	args := map[string]any{"x": "X", "n": json.Number("2.50"), "o": map[string]any{"k": []any{true, nil}}}
	tests := []struct {
		in, want, wantErr string
		withEnv           bool
	}{
		{in: "{{literal}} {x}", want: "{literal} X"},
		{in: "{{{x}}}", want: "{X}"},
		{in: "{n}|{o}|{missing}|", want: `2.50|{"k":[true,null]}||`},
		{in: "cost: $5 ${x}", want: "cost: $5 $X"},
		{in: "Bearer ${TOKEN}", want: "Bearer <TOKEN>", withEnv: true},
		{in: "${{x}}", want: "${x}", withEnv: true},
		{in: "{ x }", wantErr: "unmatched { at offset 0"},
		{in: "{x", wantErr: "unmatched { at offset 0"},
		{in: "x}", wantErr: "unmatched } at offset 1"},
		{in: "{}", wantErr: "unmatched { at offset 0"},
	}
	for _, tc := range tests {
		tp, err := parseTemplate(tc.in, tc.withEnv)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseTemplate(%q): got %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		got, err := tp.expand(func(s segment) (string, error) {
			if s.env != "" {
				return "<" + s.env + ">", nil
			}
			return argText(args[s.param]), nil
		})
		if err != nil || got != tc.want {
			t.Errorf("%q: got %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// workspace makes a workspace path (not yet created) next to a secret file.
func workspace(t *testing.T) (ws, secret string) {
	t.Helper()
	dir := t.TempDir()
	secret = filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(secret, []byte("top secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "ws"), secret
}

func TestCommandKind(t *testing.T) {
	ws, secret := workspace(t)
	policy := CommandPolicy{Enabled: true, Workspace: ws, Timeout: 10 * time.Second}
	// Build creates the workspace; make it first so files can be placed.
	buildTool(t, ToolDef{Name: "init", Kind: "command", Argv: []string{"true"}}, Env{Command: policy})
	if fi, err := os.Stat(ws); err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("workspace: %v, %v; want a 0750 directory", fi, err)
	}
	files := map[string]string{"notes.txt": "inside notes\n", "-n": "dash file\n", "hello.sh": "#!/bin/sh\necho hello from $0 \"$1\"\n"}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(secret, filepath.Join(ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(secret), filepath.Join(ws, "up")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(filepath.Dir(secret), "gone"), filepath.Join(ws, "dangling")); err != nil {
		t.Fatal(err)
	}

	cat := ToolDef{Name: "cat", Kind: "command", Argv: []string{"cat", "{file}"}, Parameters: schema("file")}
	echo := ToolDef{Name: "echo", Kind: "command", Argv: []string{"echo", "{text}"}, Parameters: schema("text")}
	tests := []struct {
		name    string
		def     ToolDef
		policy  func(*CommandPolicy)
		args    string
		want    string
		wantErr string
	}{
		{name: "echo", def: echo, args: `{"text":"hello world"}`, want: "hello world\n"},
		{name: "echo number and missing", def: ToolDef{Name: "e", Kind: "command", Argv: []string{"echo", "{n}", "[{none}]"}, Parameters: schema("n", "none")},
			args: `{"n":42}`, want: "42 []\n"},
		{name: "file inside", def: cat, args: `{"file":"notes.txt"}`, want: "inside notes\n"},
		{name: "dot-dot", def: cat, args: `{"file":"../secret.txt"}`, wantErr: `"../secret.txt" contains a .. path element`},
		{name: "absolute", def: cat, args: `{"file":"/etc/passwd"}`, wantErr: `"/etc/passwd" is an absolute path`},
		{name: "symlink outside", def: cat, args: `{"file":"link.txt"}`, wantErr: `"link.txt" resolves outside the workspace`},
		{name: "through a symlinked directory", def: cat, args: `{"file":"up/secret.txt"}`, wantErr: "resolves outside the workspace"},
		{name: "new file under a symlinked directory", def: cat, args: `{"file":"up/new/file.txt"}`, wantErr: "resolves outside the workspace"},
		{name: "dangling symlink", def: cat, args: `{"file":"dangling"}`, wantErr: "cannot be resolved"},
		{name: "element made absolute by joining", def: ToolDef{Name: "c", Kind: "command", Argv: []string{"cat", "{dir}/{file}"}, Parameters: schema("dir", "file")},
			args: `{"dir":"","file":"etc/passwd"}`, wantErr: `"/etc/passwd" is an absolute path`},
		{name: "option injection", def: cat, args: `{"file":"-n"}`, wantErr: "could be read as an option"},
		{name: "dash value after --", def: ToolDef{Name: "c", Kind: "command", Argv: []string{"cat", "--", "{file}"}, Parameters: schema("file")},
			args: `{"file":"-n"}`, want: "dash file\n"},
		{name: "non-zero exit", def: cat, args: `{"file":"missing.txt"}`, wantErr: "failed with exit status 1; output: cat: missing.txt: No such file"},
		{name: "output capped", def: echo, policy: func(p *CommandPolicy) { p.MaxOutputChars = 10 },
			args: `{"text":"` + strings.Repeat("a", 30) + `"}`, want: "aaaaaaaaaa\n[truncated: 21 more characters]"},
		{name: "cap counts characters", def: ToolDef{Name: "e", Kind: "command", Argv: []string{"echo", "{text}"}, Parameters: schema("text"), MaxResponseChars: 5},
			args: `{"text":"héllo wörld"}`, want: "héllo\n[truncated: 7 more characters]"},
		{name: "script in the workspace", def: ToolDef{Name: "s", Kind: "command", Argv: []string{"./hello.sh", "{who}"}, Parameters: schema("who")},
			args: `{"who":"me"}`, want: "hello from " + filepath.Join(ws, "hello.sh") + " me\n"},
		{name: "program not installed", def: ToolDef{Name: "x", Kind: "command", Argv: []string{"switchboard-no-such-program"}},
			wantErr: "program not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := policy
			if tc.policy != nil {
				tc.policy(&p)
			}
			tool := buildTool(t, tc.def, Env{Command: p})
			got, err := tool.Fn(t.Context(), json.RawMessage(tc.args))
			if strings.Contains(got+errText(err), "top secret") {
				t.Fatalf("the secret leaked: %q, %v", got, err)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestCommandKindDisabled(t *testing.T) {
	ws, _ := workspace(t)
	marker := filepath.Join(filepath.Dir(ws), "ran")
	tool := buildTool(t, ToolDef{Name: "touch", Kind: "command", Argv: []string{"touch", marker}}, Env{Command: CommandPolicy{Workspace: ws}})
	_, err := tool.Fn(t.Context(), nil)
	if err == nil || err.Error() != "command tools are disabled; the operator can enable them with tools.command.enabled" {
		t.Errorf("got %v, want the disabled error", err)
	}
	for _, p := range []string{marker, ws} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists (%v); a disabled tool must not run or prepare anything", p, err)
		}
	}
}

func TestCommandKindEnvironment(t *testing.T) {
	t.Setenv("SWITCHBOARD_LEAK_TEST", "leaky")
	ws, _ := workspace(t)
	tool := buildTool(t, ToolDef{Name: "env", Kind: "command", Argv: []string{"env"}}, Env{Command: CommandPolicy{Enabled: true, Workspace: ws}})
	got, err := tool.Fn(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for line := range strings.Lines(got) {
		name, _, _ := strings.Cut(line, "=")
		names = append(names, name)
	}
	if want := []string{"PATH", "HOME", "LANG", "TMPDIR"}; !reflect.DeepEqual(names, want) {
		t.Errorf("got variables %v, want %v", names, want)
	}
	for _, want := range []string{"HOME=" + ws + "\n", "LANG=C.UTF-8\n", "TMPDIR=" + filepath.Join(ws, ".tmp") + "\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("got env %q, want it to contain %q", got, want)
		}
	}
	if strings.Contains(got, "leaky") {
		t.Errorf("the environment leaked: %q", got)
	}
}

func TestCommandKindTimeout(t *testing.T) {
	tests := []struct {
		name       string
		policy     time.Duration
		def        time.Duration
		wantSuffix string
	}{
		{"policy timeout", 200 * time.Millisecond, 0, "timed out after 200ms"},
		{"tool timeout is smaller", 30 * time.Second, 200 * time.Millisecond, "timed out after 200ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws, _ := workspace(t)
			// The outer context fails the test (instead of hanging it) if
			// the kill does not happen; the tool's error must name its own.
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			tool := buildTool(t, ToolDef{Name: "nap", Kind: "command", Argv: []string{"sh", "-c", "echo started; sleep 30"}, Timeout: tc.def},
				Env{Command: CommandPolicy{Enabled: true, Workspace: ws, Timeout: tc.policy}})
			_, err := tool.Fn(ctx, nil)
			if err == nil || !strings.Contains(err.Error(), tc.wantSuffix) || !strings.Contains(err.Error(), "output so far: started") {
				t.Fatalf("got %v, want an error saying %q with the output so far", err, tc.wantSuffix)
			}
		})
	}
}

func TestCommandKindBackgroundProcess(t *testing.T) {
	ws, _ := workspace(t)
	tool := buildTool(t, ToolDef{Name: "bg", Kind: "command", Argv: []string{"sh", "-c", "sleep 30 & echo done"}},
		Env{Command: CommandPolicy{Enabled: true, Workspace: ws}})
	got, err := tool.Fn(t.Context(), nil)
	if want := "done\n\n[a background process it started was stopped]"; err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
}

func TestCommandKindCancelledTurn(t *testing.T) {
	ws, _ := workspace(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	tool := buildTool(t, ToolDef{Name: "nap", Kind: "command", Argv: []string{"sleep", "30"}},
		Env{Command: CommandPolicy{Enabled: true, Workspace: ws}})
	_, err := tool.Fn(ctx, nil)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "nap was stopped") {
		t.Errorf("got %v, want nap stopped by the cancelled turn", err)
	}
}

// fakeModel records the request and answers with a fixed reply.
type fakeModel struct {
	got   llm.Request
	calls int
	reply string
	err   error
	block bool // wait for the context to end
}

func (m *fakeModel) Complete(ctx context.Context, req llm.Request, _ func(llm.Delta)) (llm.Response, error) {
	m.calls++
	m.got = req
	if m.block {
		<-ctx.Done()
		return llm.Response{}, ctx.Err()
	}
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: m.reply}, FinishReason: llm.FinishStop}, m.err
}

func TestPromptKind(t *testing.T) {
	errDown := errors.New("model is down")
	tests := []struct {
		name     string
		def      ToolDef
		model    *fakeModel
		args     string
		want     string
		wantMsgs []llm.Message
		wantErr  string
	}{
		{
			name:  "system and user",
			def:   ToolDef{System: "You are {role}.", Prompt: "Summarise in {style}: {text}", Parameters: schema("role", "style", "text")},
			model: &fakeModel{reply: "done"},
			args:  `{"role":"terse","style":"bullets","text":"a \"long\" story"}`,
			want:  "done",
			wantMsgs: []llm.Message{{Role: llm.RoleSystem, Content: "You are terse."},
				{Role: llm.RoleUser, Content: `Summarise in bullets: a "long" story`}},
		},
		{
			name:     "user only, values of every type",
			def:      ToolDef{Prompt: "{n} {ok} {obj} [{missing}] {{braces}}", Parameters: schema("n", "ok", "obj", "missing")},
			model:    &fakeModel{reply: "fine"},
			args:     `{"n":3,"ok":true,"obj":{"a":[1,2]}}`,
			want:     "fine",
			wantMsgs: []llm.Message{{Role: llm.RoleUser, Content: `3 true {"a":[1,2]} [] {braces}`}},
		},
		{name: "empty reply", def: ToolDef{Prompt: "hi"}, model: &fakeModel{reply: " \n"}, wantErr: "empty reply"},
		{name: "model error", def: ToolDef{Prompt: "hi"}, model: &fakeModel{err: errDown}, wantErr: "model call: model is down"},
		{name: "timeout", def: ToolDef{Prompt: "hi", Timeout: 50 * time.Millisecond}, model: &fakeModel{block: true},
			wantErr: "the model did not answer within 50ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.def.Name, tc.def.Kind = "p", "prompt"
			tool := buildTool(t, tc.def, Env{Model: tc.model})
			got, err := tool.Fn(t.Context(), json.RawMessage(tc.args))
			if tc.model.calls != 1 || tc.model.got.Tools != nil || tc.model.got.ForceTool != "" {
				t.Errorf("got %d calls with tools %v %q, want one call without tools", tc.model.calls, tc.model.got.Tools, tc.model.got.ForceTool)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				if tc.model.err != nil && !errors.Is(err, tc.model.err) {
					t.Errorf("got %v, want it to wrap %v", err, tc.model.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
			if !reflect.DeepEqual(tc.model.got.Messages, tc.wantMsgs) {
				t.Errorf("got messages %+v\nwant %+v", tc.model.got.Messages, tc.wantMsgs)
			}
		})
	}
}

func TestPromptKindWithoutModel(t *testing.T) {
	tool := buildTool(t, ToolDef{Name: "p", Kind: "prompt", Prompt: "hi"}, Env{})
	if _, err := tool.Fn(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "no model is configured") {
		t.Errorf("got %v, want an error saying no model is configured", err)
	}
}

// TestKindsFromYAML builds the tools of testdata/kinds/tools.yaml as the
// loader decodes them, so YAML shapes (durations, nested maps) keep working.
func TestKindsFromYAML(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "kinds", "tools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var defs []ToolDef
	if err := dec.Decode(&defs); err != nil {
		t.Fatal(err)
	}
	env := Env{Command: CommandPolicy{Workspace: t.TempDir()}, Model: &fakeModel{reply: "x"}}
	got := map[string]string{}
	for _, d := range defs {
		tool := buildTool(t, d, env)
		got[tool.Name] = string(tool.Spec().Parameters)
	}
	want := map[string]string{
		"get_weather": `{"properties":{"city":{"description":"City name","type":"string"},"days":{"maximum":7,"minimum":1,"type":"integer"}},"required":["city"],"type":"object"}`,
		"grep_notes":  `{"properties":{"pattern":{"type":"string"}},"required":["pattern"],"type":"object"}`,
		"haiku":       `{"type":"object","properties":{}}`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	if defs[0].Timeout != 5*time.Second {
		t.Errorf("got timeout %v, want 5s", defs[0].Timeout)
	}
}
