package skills

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/confine"
)

// fuzzWorkspace is a command workspace with links that lead out of it, in
// and nowhere, and a secret next to it.
func fuzzWorkspace(f *testing.F) (ws string) {
	dir := f.TempDir()
	outside := filepath.Join(dir, "outside")
	ws = filepath.Join(dir, "ws")
	for _, d := range []string{outside, filepath.Join(ws, "inside", "deep")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			f.Fatal(err)
		}
	}
	files := map[string]string{filepath.Join(outside, "secret.txt"): "top secret", filepath.Join(ws, "notes.txt"): "notes"}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			f.Fatal(err)
		}
	}
	links := map[string]string{
		"out":       outside,
		"leak.txt":  filepath.Join(outside, "secret.txt"),
		"rel-out":   "../outside",
		"alias":     "inside",
		"dangling":  filepath.Join(outside, "gone"),
		"loop":      "loop",
		"inside/up": "..",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			f.Fatal(err)
		}
	}
	real, err := filepath.EvalSymlinks(ws)
	if err != nil {
		f.Fatal(err)
	}
	return real
}

// FuzzCommandArguments renders model-written arguments into a command
// tool's argv, as every call does before it runs the program. Whatever
// the arguments, an element that holds an argument is either refused (the
// refusal names the argument or the value) or stays inside the workspace:
// no NUL, no absolute path, no .. element, no symbolic link out (checked
// independently with os.Root), and no leading "-" where it could be read
// as an option. The program itself is never an argument.
func FuzzCommandArguments(f *testing.F) {
	ws := fuzzWorkspace(f)
	dir, err := confine.At(ws)
	if err != nil {
		f.Fatal(err)
	}
	c := &commandTool{name: "fuzz", ws: dir}
	root, err := os.OpenRoot(ws)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { root.Close() })
	templates := []string{"{file}", "notes/{file}", "{dir}/{file}", "/srv/data/{file}", "--file={file}", "prefix-{file}.txt", "{file}{dir}", "literal"}
	parsed := make([]tmpl, len(templates))
	for i, s := range templates {
		if parsed[i], err = parseTemplate(s, false); err != nil {
			f.Fatalf("template %q: %v", s, err)
		}
	}
	for _, seed := range []string{
		`{"file":"notes.txt"}`, `{"file":"../outside/secret.txt"}`, `{"file":"/etc/passwd"}`, `{"file":"leak.txt"}`,
		`{"file":"out/secret.txt"}`, `{"file":"out/new/file"}`, `{"file":"rel-out"}`, `{"file":"alias/deep"}`,
		`{"file":"inside/up/notes.txt"}`, `{"file":"inside/up/../outside"}`, `{"file":"dangling"}`, `{"file":"loop"}`,
		`{"file":"-rf"}`, `{"file":"a\u0000b"}`, `{"dir":"","file":"etc/passwd"}`, `{"dir":"..","file":"x"}`,
		`{"dir":"/","file":"x"}`, `{"file":["../x"]}`, `{"file":{"a":".."}}`, `{"file":1e3}`, `{"file":true}`, `{"file":null}`,
		`{"file":"./././notes.txt"}`, `{"file":"inside//deep/"}`, `{"file":"..."}`, `{"file":"a/.."}`, `null`, ``, `[1]`,
		`{"file":"notes.txt","file":"../x"}`, `{"FILE":"../x"}`,
	} {
		for i := range templates {
			f.Add(seed, uint8(i), true)
		}
		f.Add(seed, uint8(0), false)
	}
	f.Fuzz(func(t *testing.T, raw string, which uint8, options bool) {
		args, err := parseArgs(json.RawMessage(raw))
		if err != nil {
			return // the call fails before any argv is built
		}
		tp := parsed[int(which)%len(parsed)]
		s, err := c.renderArg(tp, args, options)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "argument ") {
				t.Fatalf("refusal %q does not name the argument", msg)
			}
			return
		}
		if !tp.hasPlaceholders() {
			if s != tp.literal() {
				t.Fatalf("a literal element became %q", s)
			}
			return
		}
		if strings.ContainsRune(s, 0) || confine.HasDotDot(s) {
			t.Fatalf("accepted %q (from %s): NUL or .. element", s, raw)
		}
		pre := tp.prefix()
		if filepath.IsAbs(pre) {
			if !strings.HasPrefix(s, pre) {
				t.Fatalf("%q left the skill's fixed directory %q", s, pre)
			}
			return
		}
		if filepath.IsAbs(s) {
			t.Fatalf("accepted the absolute path %q (from %s)", s, raw)
		}
		if options && pre == "" && strings.HasPrefix(s, "-") {
			t.Fatalf("accepted %q where it reads as an option", s)
		}
		if _, err := root.Stat(s); err != nil && strings.Contains(err.Error(), "escapes") {
			t.Fatalf("accepted %q (from %s), which leads out of the workspace: %v", s, raw, err)
		}
	})
}

// recordingTransport answers every request with 200 and keeps it.
type recordingTransport struct {
	mu   sync.Mutex
	last *http.Request
	body []byte
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body.Close()
	}
	rt.mu.Lock()
	rt.last, rt.body = r, body
	rt.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
}

func (rt *recordingTransport) take() (*http.Request, []byte) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	r, b := rt.last, rt.body
	rt.last, rt.body = nil, nil
	return r, b
}

// FuzzHTTPArguments calls http tools with model-written arguments through a
// transport that records the request instead of sending it. Whatever the
// arguments, a request that goes out goes to the skill's scheme and host,
// keeps the template's path segments (an argument is one segment, never a
// / or a ..), carries no query parameter the template does not name, sets
// only the template's headers with single-line values, and has a valid
// JSON body when the template's body is JSON.
func FuzzHTTPArguments(f *testing.F) {
	rt := &recordingTransport{}
	env := Env{HTTPClient: &http.Client{Transport: rt}, Getenv: func(string) string { return "env-secret-value" },
		Grants: map[string]config.SkillGrant{"fuzz": {Hosts: []string{"api.example.com", "search.internal:8080"}, Env: []string{"API_TOKEN"}}}}
	defs := []ToolDef{
		{Name: "get_item", Kind: "http", URL: "https://api.example.com/v1/items/{id}?q={query}&lang=en", Parameters: schema("id", "query")},
		{Name: "post_item", Kind: "http", Method: "POST", URL: "https://api.example.com/v1/items",
			Body: `{{"name":"{name}","count":{count},"tags":{tags}}}`, Headers: map[string]string{"X-Trace": "t-{trace}", "Authorization": "Bearer ${API_TOKEN}"},
			Parameters: schema("name", "count", "tags", "trace")},
		{Name: "search", Kind: "http", URL: "http://search.internal:8080/{index}/_search#{frag}", Parameters: schema("index", "frag")},
	}
	tools := make([]*agent.Tool, len(defs))
	for i, d := range defs {
		tool, err := d.Build("skill:fuzz", env)
		if err != nil {
			f.Fatalf("%s: %v", d.Name, err)
		}
		tools[i] = tool
	}
	for _, seed := range []string{
		`{"id":"42","query":"cats & dogs"}`, `{"id":"..","query":"x"}`, `{"id":"a/../../admin","query":"?x=1#y"}`,
		`{"id":"@evil.example","query":"x"}`, `{"id":"//evil.example/x"}`, `{"id":"%2e%2e","query":"%26admin%3Dtrue"}`,
		`{"name":"a\"b","count":3,"tags":["x"],"trace":"ok"}`, `{"name":"x","count":"1}, \"admin\": true, \"x\": {","tags":null,"trace":"a\r\nX-Admin: 1"}`,
		`{"name":{"nested":true},"count":1e999,"tags":"str","trace":""}`, `{"index":"logs","frag":"a#b"}`, `{"index":".","frag":""}`,
		`{"index":"\\\\evil","frag":"\u0000"}`, `{}`, `null`, `{"id":["a","b"],"query":{"q":1}}`,
	} {
		for i := range defs {
			f.Add(seed, uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, raw string, which uint8) {
		i := int(which) % len(defs)
		d := defs[i]
		_, _ = tools[i].Fn(t.Context(), json.RawMessage(raw))
		req, body := rt.take()
		if req == nil {
			return // refused before sending
		}
		want, _ := url.Parse(d.URL)
		if req.URL.Scheme != want.Scheme || req.URL.Host != want.Host {
			t.Fatalf("%s with %s went to %s://%s", d.Name, raw, req.URL.Scheme, req.URL.Host)
		}
		gotSegs := strings.Split(req.URL.EscapedPath(), "/")
		wantSegs := strings.Split(want.Path, "/")
		if len(gotSegs) != len(wantSegs) {
			t.Fatalf("%s with %s: path %q, want the segments of %q", d.Name, raw, req.URL.EscapedPath(), want.EscapedPath())
		}
		for j, w := range wantSegs {
			seg, err := url.PathUnescape(gotSegs[j])
			if err != nil || seg == ".." || seg == "." || !strings.Contains(w, "{") && seg != w {
				t.Fatalf("%s with %s: segment %d is %q, want %q", d.Name, raw, j, gotSegs[j], w)
			}
		}
		for k := range req.URL.Query() {
			if !want.Query().Has(k) {
				t.Fatalf("%s with %s: query parameter %q added", d.Name, raw, k)
			}
		}
		for k, vs := range req.Header {
			if _, ok := d.Headers[k]; !ok && k != "Content-Type" {
				t.Fatalf("%s with %s: header %q added", d.Name, raw, k)
			}
			for _, v := range vs {
				if strings.ContainsAny(v, "\r\n\x00") {
					t.Fatalf("%s with %s: header %s has a line break: %q", d.Name, raw, k, v)
				}
			}
		}
		if d.Body != "" && !json.Valid(body) {
			t.Fatalf("%s with %s: body %q is not JSON", d.Name, raw, body)
		}
		if d.Body != "" {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(body, &obj); err != nil || len(obj) != 3 || bytes.Contains(body, []byte("env-secret")) {
				t.Fatalf("%s with %s: body %s does not have the template's three fields", d.Name, raw, body)
			}
		}
	})
}
