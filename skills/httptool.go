package skills

// Kind http: a templated HTTP request.

import (
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
	"slices"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/tools"
)

const (
	// defaultHTTPTimeout: an API slower than this is not worth holding a turn for.
	defaultHTTPTimeout = 15 * time.Second
	// excerptChars is how much of a failed response or output an error quotes.
	excerptChars = 500
	// maxRedirects to the same host before giving up.
	maxRedirects = 10
	// minSecretLen: shorter environment values are not redacted from
	// results, since redacting "a" would garble every response.
	minSecretLen = 4
)

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
	secrets  []string // the gateway's secret values, never sent
}

func (b *defBuilder) http(env Env) (func(context.Context, json.RawMessage) (string, error), int) {
	d := b.def
	h := &httpTool{method: strings.ToUpper(d.Method), timeout: d.Timeout, max: d.MaxResponseChars, getenv: env.Getenv, secrets: env.Secrets}
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
		if h.host != "" && !hostGranted(b.grant, h.scheme, h.host) {
			b.ungranted("url", "the host %s is not granted to skill %q; the operator may grant it under skills.grants.%s.hosts", h.host, b.skill, b.skill)
		}
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
		// The outbound guard of web_fetch, with the skill's granted hosts
		// allowed: a granted name that resolves to a private address, or a
		// granted loopback service, is reachable; nothing else that is not
		// public is.
		h.client = &http.Client{Timeout: h.timeout, Transport: tools.GuardedTransport(b.grant.Hosts, env.Resolver, env.InterfaceAddrs)}
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

// redactSecrets replaces secret values in s.
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
				if secretValue(v, h.secrets) {
					return "", fmt.Errorf("header %s: the environment variable %s holds one of the gateway's own secrets; a skill never gets it", hd.name, s.env)
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
