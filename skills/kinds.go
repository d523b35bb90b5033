package skills

// This file turns a define_tools entry (ToolDef) into an agent.Tool of one
// of three kinds: an HTTP request, a command run in the workspace, or a
// templated sub-call to the model.
//
// Templates: {name} is replaced by the top-level argument name (missing
// arguments render as "", strings as they are, numbers and booleans as
// written, objects and arrays as compact JSON); {{ and }} are literal braces;
// in http header values ${VAR} is read from the environment at call time.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"switchboard/agent"
	"switchboard/llm"
)

const (
	// defaultHTTPTimeout: an API slower than this is not worth holding a turn for.
	defaultHTTPTimeout = 15 * time.Second
	// defaultCommandTimeout matches config's tools.command.timeout default.
	defaultCommandTimeout = 30 * time.Second
	// defaultPromptTimeout leaves a sub-call time to write a few paragraphs.
	defaultPromptTimeout = 60 * time.Second
	// defaultMaxChars fits a page of output in the model's context; it caps
	// http bodies and, as tools.command.max_output_chars, command output.
	defaultMaxChars = 20000
	// resultSlack is room above a cap for "HTTP 200" and truncation notes, so
	// the loop's own cap (agent.Tool.MaxResultChars) never cuts them off.
	resultSlack = 200
	// excerptChars is how much of a failed response or output an error quotes.
	excerptChars = 500
	// tailBytes is how much of a command's output is kept for its error.
	tailBytes = 2000
	// maxRedirects to the same host before giving up.
	maxRedirects = 10
	// killGrace is how long a killed command's pipes may stay open (held by
	// a process that escaped the group) before Wait stops waiting for them.
	killGrace = 2 * time.Second
	// minSecretLen: shorter environment values are not redacted from
	// results, since redacting "a" would garble every response.
	minSecretLen = 4
)

// Model is the part of the LLM client prompt tools need.
type Model interface {
	Complete(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error)
}

var _ Model = (*llm.Client)(nil)

// CommandPolicy governs command tools (from config tools.command.*).
type CommandPolicy struct {
	Enabled bool
	// Workspace is the only directory commands run in and may name paths
	// in; absolute or relative to the working directory, created (0o750)
	// when missing and Enabled.
	Workspace string
	// Timeout per call; 0 means 30s. A tool's own smaller timeout wins.
	Timeout time.Duration
	// MaxOutputChars caps stdout+stderr; 0 means 20000. A tool's own
	// smaller max_response_chars wins.
	MaxOutputChars int
}

// Env is what building a tool may use.
type Env struct {
	Model Model
	// HTTPClient sends http tools' requests; nil means a client with the
	// tool's timeout. It is copied, never modified: the copy refuses
	// redirects to another host.
	HTTPClient *http.Client
	Command    CommandPolicy
	// Getenv expands ${VAR} in http header values at call time; nil means
	// os.Getenv.
	Getenv func(string) string
}

// DefError is one problem with a tool definition, naming the field as it is
// written in YAML ("url", "argv[2]", "headers.Authorization").
type DefError struct {
	Field string
	Msg   string
}

func (e *DefError) Error() string { return e.Field + ": " + e.Msg }

// errCommandsDisabled is what a command tool answers while the operator has
// not enabled command tools.
var errCommandsDisabled = errors.New("command tools are disabled; the operator can enable them with tools.command.enabled")

var toolKinds = []string{"http", "command", "prompt"}

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Build turns a definition into a tool; source is "skill:<name>". It
// validates the definition and returns every problem found (errors.Join of
// *DefError), each naming its field.
func (d ToolDef) Build(source string, env Env) (*agent.Tool, error) {
	b := &defBuilder{def: d}
	if !toolNameRE.MatchString(d.Name) {
		b.add("name", "%q must be letters, digits, _ or - (up to 64)", d.Name)
	}
	if d.Timeout < 0 {
		b.add("timeout", "must not be negative")
	}
	if d.MaxResponseChars < 0 {
		b.add("max_response_chars", "must not be negative")
	}
	t := &agent.Tool{Name: d.Name, Description: d.Description, ConcurrencySafe: d.ConcurrencySafe,
		RequiresApproval: d.RequiresApproval, Source: source}
	before := len(b.errs)
	t.Parameters, b.params = b.parameters()
	if t.Parameters != nil && len(b.errs) == before {
		if err := t.Compile(); err != nil {
			if inner := errors.Unwrap(err); inner != nil {
				err = inner
			}
			b.add("parameters", "not a valid JSON Schema: %v", err)
		}
	}

	b.onlyFor("http", defField{"method", d.Method != ""}, defField{"url", d.URL != ""}, defField{"headers", len(d.Headers) > 0}, defField{"body", d.Body != ""})
	b.onlyFor("command", defField{"argv", len(d.Argv) > 0})
	b.onlyFor("prompt", defField{"prompt", d.Prompt != ""}, defField{"system", d.System != ""})

	var call func(context.Context, json.RawMessage) (string, error)
	var maxChars int
	var err error
	switch d.Kind {
	case "http":
		call, maxChars = b.http(env)
	case "command":
		call, maxChars, err = b.command(env.Command)
	case "prompt":
		call, maxChars = b.prompt(env.Model)
	case "":
		b.add("kind", "required: http, command or prompt")
	default:
		b.add("kind", "%q is not a kind; use http, command or prompt", d.Kind)
	}
	if len(b.errs) > 0 {
		return nil, errors.Join(b.errs...)
	}
	if err != nil {
		return nil, err
	}
	t.Fn = call
	// An HTTP response is whatever the remote service returned: the loop
	// labels it as data, not instructions, like web_fetch's pages.
	t.Untrusted = d.Kind == "http"
	if maxChars > 0 {
		t.MaxResultChars = maxChars + resultSlack
	}
	return t, nil
}

// defBuilder collects the problems of one definition.
type defBuilder struct {
	def    ToolDef
	params map[string]bool // declared parameter names
	errs   []error
}

func (b *defBuilder) add(field, format string, args ...any) {
	b.errs = append(b.errs, &DefError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// defField is a definition field and whether it is set.
type defField struct {
	name string
	set  bool
}

// onlyFor reports fields set on a tool of another kind.
func (b *defBuilder) onlyFor(kind string, fields ...defField) {
	if b.def.Kind == kind || !slices.Contains(toolKinds, b.def.Kind) {
		return // an unknown kind is reported once, as such
	}
	for _, f := range fields {
		if f.set {
			b.add(f.name, "is only for kind %s; this tool is kind %s", kind, b.def.Kind)
		}
	}
}

// parameters checks the arguments schema and returns it as JSON (nil when
// the tool takes no arguments) with the declared property names.
func (b *defBuilder) parameters() (json.RawMessage, map[string]bool) {
	declared := map[string]bool{}
	p := b.def.Parameters
	if p == nil {
		return nil, declared
	}
	schema := make(map[string]any, len(p)+1)
	for k, v := range p {
		schema[k] = v
	}
	switch typ, ok := schema["type"]; {
	case !ok:
		schema["type"] = "object"
	case typ != "object":
		b.add("parameters.type", "%v: the arguments are an object; write type: object", typ)
	}
	if props, ok := schema["properties"]; ok {
		m, isMap := props.(map[string]any)
		if !isMap {
			b.add("parameters.properties", "must be a mapping of parameter names to schemas")
		}
		for name := range m {
			declared[name] = true
		}
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		b.add("parameters", "cannot be written as JSON: %v", err)
		return nil, declared
	}
	return raw, declared
}

// template parses a template field and checks that its placeholders are
// declared parameters.
func (b *defBuilder) template(field, s string, withEnv bool) (tmpl, bool) {
	t, err := parseTemplate(s, withEnv)
	if err != nil {
		b.add(field, "%v", err)
		return t, false
	}
	ok := true
	for i, seg := range t.segs {
		if seg.param == "" || b.params[seg.param] {
			continue
		}
		ok = false
		hint := "declare it under parameters.properties, or write {{ and }} for literal braces"
		if i > 0 && strings.HasSuffix(t.segs[i-1].text, "$") {
			hint = "${VAR} environment references are only allowed in http header values"
		}
		b.add(field, "placeholder {%s} is not a declared parameter; %s", seg.param, hint)
	}
	return t, ok
}

// ---- templates ----

// segment is a piece of a template: literal text, a {param} or a ${VAR}.
type segment struct {
	text  string
	param string
	env   string
	mode  escMode // how the kind substitutes this placeholder
}

type escMode int

const (
	escRaw        escMode = iota
	escPath               // url.PathEscape
	escQuery              // url.QueryEscape
	escJSONString         // inside a JSON string, without quotes
	escJSONValue          // a JSON value in place (strings quoted, missing → null)
)

type tmpl struct{ segs []segment }

func (t tmpl) hasPlaceholders() bool {
	return slices.ContainsFunc(t.segs, func(s segment) bool { return s.param != "" || s.env != "" })
}

// literal is the template's text with every placeholder left out.
func (t tmpl) literal() string {
	var b strings.Builder
	for _, s := range t.segs {
		b.WriteString(s.text)
	}
	return b.String()
}

// prefix is the literal text before the first placeholder.
func (t tmpl) prefix() string {
	var b strings.Builder
	for _, s := range t.segs {
		if s.param != "" || s.env != "" {
			break
		}
		b.WriteString(s.text)
	}
	return b.String()
}

// expand renders the template, passing each placeholder through sub.
func (t tmpl) expand(sub func(segment) (string, error)) (string, error) {
	var b strings.Builder
	for _, s := range t.segs {
		if s.param == "" && s.env == "" {
			b.WriteString(s.text)
			continue
		}
		v, err := sub(s)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' ||
		!first && ('0' <= c && c <= '9' || c == '-')
}

// nameAt returns the length of the name starting at s[i] ("" → 0).
func nameAt(s string, i int) int {
	n := 0
	for i+n < len(s) && isNameByte(s[i+n], n == 0) {
		n++
	}
	return n
}

// parseTemplate splits s into segments; withEnv enables ${VAR}.
func parseTemplate(s string, withEnv bool) (tmpl, error) {
	var t tmpl
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.segs = append(t.segs, segment{text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case withEnv && c == '$' && i+1 < len(s) && s[i+1] == '{':
			if n := nameAt(s, i+2); n > 0 && i+2+n < len(s) && s[i+2+n] == '}' && !strings.Contains(s[i+2:i+2+n], "-") {
				flush()
				t.segs = append(t.segs, segment{env: s[i+2 : i+2+n]})
				i += n + 3
				continue
			}
			lit.WriteByte('$')
			i++
		case c == '{' && strings.HasPrefix(s[i:], "{{"):
			lit.WriteByte('{')
			i += 2
		case c == '}' && strings.HasPrefix(s[i:], "}}"):
			lit.WriteByte('}')
			i += 2
		case c == '{':
			n := nameAt(s, i+1)
			if n == 0 || i+1+n >= len(s) || s[i+1+n] != '}' {
				return t, fmt.Errorf("unmatched { at offset %d: a placeholder is {name} (letters, digits, _ or -); write {{ for a literal brace", i)
			}
			flush()
			t.segs = append(t.segs, segment{param: s[i+1 : i+1+n]})
			i += n + 2
		case c == '}':
			return t, fmt.Errorf("unmatched } at offset %d; write }} for a literal brace", i)
		default:
			lit.WriteByte(c)
			i++
		}
	}
	flush()
	return t, nil
}

// ---- arguments ----

// parseArgs decodes the call's arguments object (empty or null means none).
func parseArgs(raw json.RawMessage) (map[string]any, error) {
	args := map[string]any{}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return args, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		return nil, fmt.Errorf("the arguments must be a JSON object: %w", err)
	}
	return args, nil
}

// argText renders an argument as text: strings as they are, numbers and
// booleans as written, missing and null as "", objects and arrays as JSON.
func argText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case json.Number, bool:
		return fmt.Sprint(v)
	}
	return argJSON(v)
}

// argJSON renders an argument as a JSON value (missing → null).
func argJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "null" // values decoded from JSON always encode
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// jsonStringContent escapes s as the inside of a JSON string.
func jsonStringContent(s string) string {
	q := argJSON(s)
	return q[1 : len(q)-1]
}

// excerpt shortens s for an error message.
func excerpt(s string, n int) string {
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// ---- kind http ----

var httpMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

type headerTmpl struct {
	name string
	val  tmpl
}

type httpTool struct {
	method   string
	url      tmpl
	scheme   string
	host     string
	headers  []headerTmpl
	body     *tmpl
	jsonBody bool
	setJSON  bool // add Content-Type: application/json
	client   *http.Client
	timeout  time.Duration
	max      int
	getenv   func(string) string
}

func (b *defBuilder) http(env Env) (func(context.Context, json.RawMessage) (string, error), int) {
	d := b.def
	h := &httpTool{method: strings.ToUpper(d.Method), timeout: d.Timeout, max: d.MaxResponseChars, getenv: env.Getenv}
	if h.method == "" {
		h.method = http.MethodGet
	}
	if !slices.Contains(httpMethods, h.method) {
		b.add("method", "%q is not one of %s", d.Method, strings.Join(httpMethods, ", "))
	}
	if h.timeout == 0 {
		h.timeout = defaultHTTPTimeout
	}
	if h.max == 0 {
		h.max = defaultMaxChars
	}
	if h.getenv == nil {
		h.getenv = os.Getenv
	}

	if strings.TrimSpace(d.URL) == "" {
		b.add("url", "required: the request URL, such as https://api.example.com/items/{id}?q={query}")
	} else if t, ok := b.template("url", d.URL, false); ok {
		h.url = b.urlModes("url", t, &h.scheme, &h.host)
	}

	for _, name := range slices.Sorted(maps.Keys(d.Headers)) {
		field := "headers." + name
		switch {
		case !validHeaderName(name):
			b.add(field, "%q is not a valid header name", name)
			continue
		case strings.EqualFold(name, "Host"):
			b.add(field, "the Host header comes from the url and cannot be set")
			continue
		}
		if t, ok := b.template(field, d.Headers[name], true); ok {
			h.headers = append(h.headers, headerTmpl{name: name, val: t})
		}
	}

	if d.Body != "" {
		if h.method == http.MethodGet {
			b.add("body", "a GET request has no body; use method POST, PUT or PATCH")
		}
		if t, ok := b.template("body", d.Body, false); ok {
			h.body = &t
			h.jsonBody = b.bodyModes(h.body)
			h.setJSON = h.jsonBody && !slices.ContainsFunc(h.headers, func(x headerTmpl) bool { return strings.EqualFold(x.name, "Content-Type") })
		}
	}

	if env.HTTPClient != nil {
		c := *env.HTTPClient
		h.client = &c
	} else {
		h.client = &http.Client{Timeout: h.timeout}
	}
	h.client.CheckRedirect = sameHostRedirects(h.client.CheckRedirect)
	return h.call, h.max
}

// urlModes checks that placeholders sit only in the path or query of an
// http(s) URL and marks how each is escaped.
func (b *defBuilder) urlModes(field string, t tmpl, scheme, host *string) tmpl {
	u, err := url.Parse(t.literal())
	if err != nil {
		b.add(field, "not a valid URL: %v", err)
		return t
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		b.add(field, "must be an absolute http:// or https:// URL")
		return t
	}
	*scheme, *host = u.Scheme, u.Host
	if t.hasPlaceholders() {
		pre := t.prefix()
		i := strings.Index(pre, "://")
		if i < 0 || !strings.ContainsAny(pre[i+3:], "/?#") {
			b.add(field, "placeholders may only appear in the path or query, never in the scheme or host")
			return t
		}
	}
	mode := escPath
	for i, s := range t.segs {
		if s.param != "" {
			t.segs[i].mode = mode
		} else if strings.ContainsAny(s.text, "?#") {
			mode = escQuery
		}
	}
	return t
}

// bodyModes decides whether the body is JSON (its first character is { or
// [) and, if so, whether each placeholder sits inside a JSON string (escaped
// there) or stands for a whole value (written as JSON). It checks that the
// body is valid JSON with sample values.
func (b *defBuilder) bodyModes(t *tmpl) bool {
	lit := strings.TrimSpace(t.literal())
	if !strings.HasPrefix(lit, "{") && !strings.HasPrefix(lit, "[") {
		return false
	}
	inString, escaped := false, false
	for i, s := range t.segs {
		if s.param != "" {
			t.segs[i].mode = escJSONValue
			if inString {
				t.segs[i].mode = escJSONString
			}
			continue
		}
		for j := 0; j < len(s.text); j++ {
			switch c := s.text[j]; {
			case escaped:
				escaped = false
			case inString && c == '\\':
				escaped = true
			case c == '"':
				inString = !inString
			}
		}
	}
	sample, _ := t.expand(func(s segment) (string, error) {
		if s.mode == escJSONString {
			return "x", nil
		}
		return "0", nil
	})
	if !json.Valid([]byte(sample)) {
		b.add("body", "starts like JSON but is not valid JSON: write {{ and }} for literal braces, and put a placeholder either inside a string (\"{q}\") or where a whole value goes ({n})")
	}
	return true
}

// validHeaderName reports whether s is an HTTP token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// sameHostRedirects follows redirects only to the same scheme and host.
func sameHostRedirects(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		if !strings.EqualFold(req.URL.Scheme, first.Scheme) || !strings.EqualFold(req.URL.Host, first.Host) {
			return fmt.Errorf("redirect to %s://%s refused: the tool may only talk to %s://%s", req.URL.Scheme, req.URL.Host, first.Scheme, first.Host)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
}

// redact replaces secret values in s.
func redactSecrets(s string, secrets []string) string {
	for _, v := range secrets {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	return s
}

// redactErr keeps err unless its text holds a secret.
func redactErr(err error, secrets []string) error {
	if msg := err.Error(); redactSecrets(msg, secrets) != msg {
		return errors.New(redactSecrets(msg, secrets))
	}
	return err
}

func (h *httpTool) call(parent context.Context, raw json.RawMessage) (string, error) {
	args, err := parseArgs(raw)
	if err != nil {
		return "", err
	}
	target, err := h.url.expand(func(s segment) (string, error) {
		v := argText(args[s.param])
		if s.mode == escPath {
			if v == "." || v == ".." {
				return "", fmt.Errorf("argument %s: %q cannot be a path segment", s.param, v)
			}
			return url.PathEscape(v), nil
		}
		return url.QueryEscape(v), nil
	})
	if err != nil {
		return "", err
	}
	u, err := url.Parse(target)
	if err != nil {
		return "", fmt.Errorf("url after substituting the arguments: %w", err)
	}
	if u.Scheme != h.scheme || !strings.EqualFold(u.Host, h.host) {
		return "", fmt.Errorf("url after substituting the arguments points to %s://%s instead of %s://%s; refused", u.Scheme, u.Host, h.scheme, h.host)
	}

	var body io.Reader
	if h.body != nil {
		text, _ := h.body.expand(func(s segment) (string, error) {
			v := args[s.param]
			switch s.mode {
			case escJSONString:
				return jsonStringContent(argText(v)), nil
			case escJSONValue:
				return argJSON(v), nil
			}
			return argText(v), nil
		})
		if h.jsonBody && !json.Valid([]byte(text)) {
			return "", errors.New("the request body is not valid JSON after substituting the arguments")
		}
		body = strings.NewReader(text)
	}

	ctx, cancel := context.WithTimeout(parent, h.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, h.method, u.String(), body)
	if err != nil {
		return "", fmt.Errorf("build request: %w", err)
	}
	var secrets []string
	for _, hd := range h.headers {
		v, err := hd.val.expand(func(s segment) (string, error) {
			if s.env != "" {
				v := h.getenv(s.env)
				if v == "" {
					return "", fmt.Errorf("header %s: the environment variable %s is not set; ask the operator to set it", hd.name, s.env)
				}
				if len(v) >= minSecretLen {
					secrets = append(secrets, v)
				}
				return v, nil
			}
			v := argText(args[s.param])
			if strings.ContainsAny(v, "\r\n\x00") {
				return "", fmt.Errorf("argument %s: a header value cannot contain line breaks", s.param)
			}
			return v, nil
		})
		if err != nil {
			return "", err
		}
		req.Header.Set(hd.name, v)
	}
	if h.setJSON {
		req.Header.Set("Content-Type", "application/json")
	}

	resp, err := h.client.Do(req)
	if err != nil {
		return "", redactErr(h.failure(parent, err), secrets)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(h.max)+1))
	if err != nil {
		return "", redactErr(h.failure(parent, fmt.Errorf("read response: %w", err)), secrets)
	}
	truncated := len(data) > h.max
	if truncated {
		data = data[:h.max]
	}
	text := redactSecrets(strings.ToValidUTF8(string(data), "\uFFFD"), secrets)
	if resp.StatusCode >= 400 {
		return "", fmt.Errorf("HTTP %d %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode), excerpt(text, excerptChars))
	}
	if truncated {
		text += fmt.Sprintf("\n[truncated: the response is longer than %d bytes]", h.max)
	}
	return fmt.Sprintf("HTTP %d\n%s", resp.StatusCode, text), nil
}

// failure explains a transport error, naming the tool's timeout as such.
func (h *httpTool) failure(parent context.Context, err error) error {
	var ne net.Error
	if parent.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("%s %s://%s: timed out after %s: %w", h.method, h.scheme, h.host, h.timeout, err)
	}
	return fmt.Errorf("%s %s://%s: %w", h.method, h.scheme, h.host, err)
}

// ---- kind command ----

type commandTool struct {
	name     string
	enabled  bool
	argv0    string // the program as written
	program  string // resolved at build time
	lookErr  error
	argv     []tmpl // argv[1:]
	optsEnd  int    // index in argv after a literal "--" (len(argv) when none)
	ws       string // absolute, symlinks resolved
	environ  []string
	timeout  time.Duration
	maxChars int
}

func (b *defBuilder) command(p CommandPolicy) (func(context.Context, json.RawMessage) (string, error), int, error) {
	d := b.def
	c := &commandTool{name: d.Name, argv0: firstOf(d.Argv), enabled: p.Enabled, timeout: p.Timeout, maxChars: p.MaxOutputChars}
	if c.timeout <= 0 {
		c.timeout = defaultCommandTimeout
	}
	if d.Timeout > 0 && d.Timeout < c.timeout {
		c.timeout = d.Timeout
	}
	if c.maxChars <= 0 {
		c.maxChars = defaultMaxChars
	}
	if d.MaxResponseChars > 0 && d.MaxResponseChars < c.maxChars {
		c.maxChars = d.MaxResponseChars
	}
	switch {
	case len(d.Argv) == 0:
		b.add("argv", "required: the program and its arguments, such as [grep, -n, \"{pattern}\", notes.txt]")
		return nil, 0, nil
	case strings.TrimSpace(d.Argv[0]) == "":
		b.add("argv[0]", "the program is empty")
	case strings.ContainsAny(d.Argv[0], "{}"):
		b.add("argv[0]", "the program cannot be a placeholder; name it literally")
	}
	c.optsEnd = len(d.Argv) - 1
	for i, a := range d.Argv[1:] {
		t, _ := b.template(fmt.Sprintf("argv[%d]", i+1), a, false)
		c.argv = append(c.argv, t)
		if a == "--" && c.optsEnd == len(d.Argv)-1 {
			c.optsEnd = i + 1
		}
	}
	if len(b.errs) > 0 || !p.Enabled {
		return c.call, c.maxChars, nil
	}

	if strings.TrimSpace(p.Workspace) == "" {
		return nil, 0, errors.New("tools.command.workspace is empty; set the directory command tools run in")
	}
	ws, err := filepath.Abs(p.Workspace)
	if err != nil {
		return nil, 0, fmt.Errorf("tools.command.workspace: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(ws, ".tmp"), 0o750); err != nil {
		return nil, 0, fmt.Errorf("tools.command.workspace: create: %w", err)
	}
	if c.ws, err = filepath.EvalSymlinks(ws); err != nil {
		return nil, 0, fmt.Errorf("tools.command.workspace: %w", err)
	}
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	c.environ = []string{"PATH=" + path, "HOME=" + c.ws, "LANG=C.UTF-8", "TMPDIR=" + filepath.Join(c.ws, ".tmp")}

	prog := d.Argv[0]
	if strings.ContainsRune(prog, filepath.Separator) && !filepath.IsAbs(prog) {
		prog = filepath.Join(c.ws, prog) // a script in the workspace
	}
	c.program, c.lookErr = exec.LookPath(prog)
	return c.call, c.maxChars, nil
}

func (c *commandTool) call(parent context.Context, raw json.RawMessage) (string, error) {
	if !c.enabled {
		return "", errCommandsDisabled
	}
	if c.lookErr != nil {
		return "", fmt.Errorf("program not found: %w", c.lookErr)
	}
	args, err := parseArgs(raw)
	if err != nil {
		return "", err
	}
	argv := make([]string, len(c.argv))
	for i, t := range c.argv {
		if argv[i], err = c.renderArg(t, args, i < c.optsEnd); err != nil {
			return "", err
		}
	}

	ctx, cancel := context.WithTimeout(parent, c.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.program, argv...)
	cmd.Args[0] = c.argv0 // as written, for the program's messages
	cmd.Dir = c.ws
	cmd.Env = c.environ
	out := &outputCap{max: c.maxChars}
	cmd.Stdout, cmd.Stderr = out, out
	// A process group of its own, so a timeout kills what the program
	// started too, not just the program.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = killGrace
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leftovers started in the background
	}

	switch {
	case parent.Err() != nil:
		return "", fmt.Errorf("%s was stopped: %w", c.name, parent.Err())
	case ctx.Err() != nil:
		return "", fmt.Errorf("%s timed out after %s and was stopped; output so far: %s", c.name, c.timeout, out.tail())
	case errors.Is(err, exec.ErrWaitDelay):
		// The program succeeded but left a background process holding its
		// output; that process was stopped with the group above.
		return out.String() + "\n[a background process it started was stopped]", nil
	case err != nil:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			status := fmt.Sprintf("exit status %d", ee.ExitCode())
			if ee.ExitCode() < 0 {
				status = ee.String()
			}
			return "", fmt.Errorf("%s failed with %s; output: %s", c.name, status, out.tail())
		}
		return "", fmt.Errorf("run %s: %w", c.name, err)
	}
	return out.String(), nil
}

// renderArg substitutes one argv element. Every argument value, and the
// element as a whole, must stay inside the workspace; a value that would
// start the element with "-" is refused where it could be read as an option.
func (c *commandTool) renderArg(t tmpl, args map[string]any, options bool) (string, error) {
	s, err := t.expand(func(seg segment) (string, error) {
		v := argText(args[seg.param])
		if why := c.escapes(v); why != "" {
			return "", fmt.Errorf("argument %s: %q %s; command arguments must stay inside the workspace", seg.param, v, why)
		}
		return v, nil
	})
	if err != nil || !t.hasPlaceholders() {
		return s, err
	}
	pre := t.prefix()
	if options && pre == "" && strings.HasPrefix(s, "-") {
		return "", fmt.Errorf("argument %q starts with - and could be read as an option; refused", s)
	}
	why := ""
	if filepath.IsAbs(pre) {
		// The skill names a fixed directory; only .. could leave it.
		if hasDotDot(s) {
			why = "contains a .. path element"
		}
	} else {
		why = c.escapes(s)
	}
	if why != "" {
		return "", fmt.Errorf("argument %q %s; command arguments must stay inside the workspace", s, why)
	}
	return s, nil
}

func firstOf(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	return argv[0]
}

func hasDotDot(p string) bool {
	return slices.Contains(strings.Split(filepath.ToSlash(p), "/"), "..")
}

// escapes says why the value v, taken as a path in the workspace, would
// leave it ("" when it would not).
func (c *commandTool) escapes(v string) string {
	switch {
	case strings.ContainsRune(v, 0):
		return "contains a NUL byte"
	case filepath.IsAbs(v):
		return "is an absolute path"
	case hasDotDot(v):
		return "contains a .. path element"
	}
	p := filepath.Join(c.ws, v)
	// Resolve the longest part that exists; the rest cannot be a symlink yet.
	rest := ""
	for p != c.ws {
		if _, err := os.Lstat(p); err == nil {
			break
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = filepath.Dir(p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "cannot be resolved (a broken symlink?)"
	}
	real = filepath.Join(real, rest)
	if real != c.ws && !strings.HasPrefix(real, c.ws+string(filepath.Separator)) {
		return "resolves outside the workspace"
	}
	return ""
}

// outputCap keeps the start of a command's output up to max characters,
// counts the rest, and keeps the last bytes for error messages. exec calls
// Write from one goroutine at a time when Stdout and Stderr are the same.
type outputCap struct {
	max   int
	head  []byte
	chars int // UTF-8 sequence starts seen
	total int // bytes seen
	last  []byte
}

func (w *outputCap) Write(p []byte) (int, error) {
	for _, c := range p {
		if c&0xC0 != 0x80 {
			w.chars++
		}
		if w.chars <= w.max {
			w.head = append(w.head, c)
		}
	}
	w.total += len(p)
	if len(p) >= tailBytes {
		w.last = append(w.last[:0], p[len(p)-tailBytes:]...)
	} else {
		w.last = append(w.last, p...)
		if len(w.last) > 2*tailBytes {
			w.last = append(w.last[:0], w.last[len(w.last)-tailBytes:]...)
		}
	}
	return len(p), nil
}

// String is the capped output with a note on what was cut.
func (w *outputCap) String() string {
	s := strings.ToValidUTF8(string(w.head), "\uFFFD")
	if w.chars > w.max {
		s += fmt.Sprintf("\n[truncated: %d more characters]", w.chars-w.max)
	}
	return s
}

// tail is the end of the output, for errors.
func (w *outputCap) tail() string {
	if w.total == 0 {
		return "(none)"
	}
	b := w.last
	if len(b) > tailBytes {
		b = b[len(b)-tailBytes:]
	}
	cut := w.total > len(b)
	for cut && len(b) > 0 && b[0]&0xC0 == 0x80 {
		b = b[1:]
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
	if cut {
		s = "…" + s
	}
	return s
}

// ---- kind prompt ----

type promptTool struct {
	model   Model
	prompt  tmpl
	system  *tmpl
	timeout time.Duration
}

func (b *defBuilder) prompt(m Model) (func(context.Context, json.RawMessage) (string, error), int) {
	d := b.def
	p := &promptTool{model: m, timeout: d.Timeout}
	if p.timeout == 0 {
		p.timeout = defaultPromptTimeout
	}
	if strings.TrimSpace(d.Prompt) == "" {
		b.add("prompt", "required: the message sent to the model, such as \"Summarise in {style}: {text}\"")
	} else {
		p.prompt, _ = b.template("prompt", d.Prompt, false)
	}
	if d.System != "" {
		t, _ := b.template("system", d.System, false)
		p.system = &t
	}
	return p.call, d.MaxResponseChars
}

func (p *promptTool) call(parent context.Context, raw json.RawMessage) (string, error) {
	if p.model == nil {
		return "", errors.New("no model is configured for prompt tools")
	}
	args, err := parseArgs(raw)
	if err != nil {
		return "", err
	}
	text := func(s segment) (string, error) { return argText(args[s.param]), nil }
	var msgs []llm.Message
	if p.system != nil {
		sys, _ := p.system.expand(text)
		msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: sys})
	}
	user, _ := p.prompt.expand(text)
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: user})

	ctx, cancel := context.WithTimeout(parent, p.timeout)
	defer cancel()
	resp, err := p.model.Complete(ctx, llm.Request{Messages: msgs}, func(llm.Delta) {})
	if err != nil {
		if parent.Err() == nil && ctx.Err() != nil {
			return "", fmt.Errorf("the model did not answer within %s: %w", p.timeout, err)
		}
		return "", fmt.Errorf("model call: %w", err)
	}
	if strings.TrimSpace(resp.Message.Content) == "" {
		return "", fmt.Errorf("the model returned an empty reply (finish reason %q)", resp.FinishReason)
	}
	return resp.Message.Content, nil
}
