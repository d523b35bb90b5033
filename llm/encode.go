package llm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// The request body is encoded here, not by go-openai: encoding/json
// re-scans the output of every MarshalJSON it calls (go-openai's messages
// and tools, the tools' schemas), so one request was scanned two or three
// times over and building it was most of a model call's CPU on our side.
// This encoder writes each message once, and keeps what does not change
// from step to step: each tool's encoded definition (content-addressed, so
// a changed name, description or schema is a new entry) and the system
// prompt's static prefix (learnt as the common start of consecutive system
// messages). The body goes to the server through headerCapture, which
// puts it in place of go-openai's stand-in (see attempt).

// Bounds of the encoder's caches. Tools: the gateway offers a few dozen;
// skill reloads and MCP servers add new versions, and when the cache is full
// it starts over. Prefixes: one per distinct static prompt (one per skill
// catalogue in practice), the oldest replaced.
const (
	maxCachedTools    = 512
	maxCachedPrefixes = 8
	minPrefix         = 256 // bytes: shorter common starts are not worth keeping
)

// emptySchema is the parameters schema of a tool that declares none.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// encoder encodes requests; safe for concurrent use.
type encoder struct {
	seed maphash.Seed

	mu       sync.Mutex
	tools    map[uint64]*encodedTool
	prefixes []encodedPrefix // most recent last
	lastSys  string          // the previous system message, to learn a prefix from
}

type encodedTool struct {
	name, desc string
	params     []byte // as given, to tell hash collisions apart
	json       []byte // {"function":{…},"type":"function"}
}

type encodedPrefix struct {
	raw  string
	json []byte // raw escaped for a JSON string, without quotes
}

func newEncoder() *encoder {
	return &encoder{seed: maphash.MakeSeed(), tools: map[uint64]*encodedTool{}}
}

// body is a request encoded but for the parts that vary by attempt (the
// model and stream_options).
type body struct {
	messages  []byte // "messages":[…]
	maxTokens int
	tools     []byte // ,"tools":[…],"tool_choice":{…}, or empty
	// required is tools for a server that refuses tool_choice naming a
	// function: the forced tool alone, with "required" (provider.go).
	required []byte
}

// bytes assembles the body for one attempt.
func (b *body) bytes(model string, o wireOptions) []byte {
	out := make([]byte, 0, len(b.messages)+len(b.tools)+len(model)+128)
	out = append(out, `{"model":`...)
	out = appendString(out, model)
	out = append(out, ',')
	out = append(out, b.messages...)
	if b.maxTokens != 0 {
		if o.reasoning {
			out = append(out, `,"max_completion_tokens":`...)
		} else {
			out = append(out, `,"max_tokens":`...)
		}
		out = strconv.AppendInt(out, int64(b.maxTokens), 10)
	}
	if o.temperature != nil {
		out = append(out, `,"temperature":`...)
		out = strconv.AppendFloat(out, *o.temperature, 'g', -1, 64)
	}
	out = append(out, `,"stream":true`...)
	if o.streamOptions {
		out = append(out, `,"stream_options":{"include_usage":true}`...)
	}
	if o.requiredChoice && b.required != nil {
		out = append(out, b.required...)
	} else {
		out = append(out, b.tools...)
	}
	return append(out, '}')
}

// encode checks req and encodes it.
func (e *encoder) encode(req Request) (*body, error) {
	b := &body{maxTokens: req.MaxTokens}
	size := 16
	for _, m := range req.Messages {
		size += 48 + len(m.Content) + len(m.Content)/16 // room for a few escapes
		for _, tc := range m.ToolCalls {
			size += 64 + len(tc.ID) + len(tc.Name) + len(tc.Arguments) + len(tc.Arguments)/8
		}
	}
	msgs := make([]byte, 0, size)
	msgs = append(msgs, `"messages":[`...)
	for i, m := range req.Messages {
		if i > 0 {
			msgs = append(msgs, ',')
		}
		var err error
		if msgs, err = e.appendMessage(msgs, m, i == 0); err != nil {
			return nil, fmt.Errorf("message %d (%s): %w", i, m.Role, err)
		}
	}
	b.messages = append(msgs, ']')
	if len(req.Tools) == 0 && req.ForceTool == "" {
		return b, nil
	}
	var tools []byte
	forced := false
	for i, t := range req.Tools {
		enc, err := e.tool(t)
		if err != nil {
			return nil, err
		}
		if t.Name == req.ForceTool {
			b.required = append(append([]byte(`,"tools":[`), enc...), `],"tool_choice":"required"`...)
		}
		if i == 0 {
			tools = append(tools, `,"tools":[`...)
		} else {
			tools = append(tools, ',')
		}
		tools = append(tools, enc...)
		forced = forced || t.Name == req.ForceTool
	}
	if len(tools) > 0 {
		tools = append(tools, ']')
	}
	if req.ForceTool != "" {
		if !forced {
			return nil, fmt.Errorf("forced tool %s is not among the offered tools", req.ForceTool)
		}
		tools = append(tools, `,"tool_choice":{"type":"function","function":{"name":`...)
		tools = appendString(tools, req.ForceTool)
		tools = append(tools, "}}"...)
	}
	b.tools = tools
	return b, nil
}

// tool returns t's encoded definition, from the cache when t was seen.
func (e *encoder) tool(t ToolSpec) ([]byte, error) {
	if t.Name == "" {
		return nil, errors.New("tool with an empty name")
	}
	var h maphash.Hash
	h.SetSeed(e.seed)
	h.WriteString(t.Name)
	h.WriteByte(0)
	h.WriteString(t.Description)
	h.WriteByte(0)
	h.Write(t.Parameters)
	key := h.Sum64()
	e.mu.Lock()
	c, ok := e.tools[key]
	e.mu.Unlock()
	if ok && c.name == t.Name && c.desc == t.Description && bytes.Equal(c.params, t.Parameters) {
		return c.json, nil
	}
	params := t.Parameters
	if len(params) == 0 {
		params = emptySchema
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, params); err != nil {
		return nil, fmt.Errorf("tool %s: parameters are not valid JSON", t.Name)
	}
	out := []byte(`{"function":{"name":`)
	out = appendString(out, t.Name)
	if t.Description != "" {
		out = append(out, `,"description":`...)
		out = appendString(out, t.Description)
	}
	out = append(out, `,"parameters":`...)
	out = append(out, compact.Bytes()...)
	out = append(out, `},"type":"function"}`...)
	c = &encodedTool{name: t.Name, desc: t.Description, params: bytes.Clone(t.Parameters), json: out}
	e.mu.Lock()
	if len(e.tools) >= maxCachedTools {
		clear(e.tools) // tool sets changed a lot (reloads): start over
	}
	e.tools[key] = c
	e.mu.Unlock()
	return out, nil
}

// appendMessage encodes m as go-openai's ChatCompletionMessage would be.
// first: m opens the request, where the system prompt is.
func (e *encoder) appendMessage(out []byte, m Message, first bool) ([]byte, error) {
	out = append(out, `{"role":`...)
	out = appendString(out, string(m.Role))
	switch {
	case len(m.Images) > 0:
		if m.Role != RoleUser {
			return out, errors.New("images are only supported on user messages")
		}
		var err error
		if out, err = appendParts(out, m); err != nil {
			return out, err
		}
	case m.Content != "" && first && m.Role == RoleSystem:
		out = append(out, `,"content":"`...)
		out = e.appendSystem(out, m.Content)
		out = append(out, '"')
	case m.Content != "":
		out = append(out, `,"content":`...)
		out = appendString(out, m.Content)
	}
	if m.Role == RoleAssistant && m.Reasoning != "" && len(m.ToolCalls) > 0 { // handed back within a tool loop (reasoning.go)
		out = append(out, `,"reasoning_content":`...)
		out = appendString(out, m.Reasoning)
	}
	if m.Role != RoleTool && m.Name != "" { // on a tool result the API identifies the call by id
		out = append(out, `,"name":`...)
		out = appendString(out, m.Name)
	}
	if len(m.ToolCalls) > 0 {
		out = append(out, `,"tool_calls":[`...)
		for i, tc := range m.ToolCalls {
			if i > 0 {
				out = append(out, ',')
			}
			args := tc.Arguments
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			if tc.ID != "" {
				out = append(out, `{"id":`...)
				out = appendString(out, tc.ID)
				out = append(out, `,"type":"function","function":{`...)
			} else {
				out = append(out, `{"type":"function","function":{`...)
			}
			if tc.Name != "" {
				out = append(out, `"name":`...)
				out = appendString(out, tc.Name)
				out = append(out, ',')
			}
			out = append(out, `"arguments":`...)
			out = appendString(out, args)
			out = append(out, "}}"...)
		}
		out = append(out, ']')
	}
	if m.Role == RoleTool && m.ToolCallID != "" {
		out = append(out, `,"tool_call_id":`...)
		out = appendString(out, m.ToolCallID)
	}
	return append(out, '}'), nil
}

// appendParts writes a user message with images as content parts.
func appendParts(out []byte, m Message) ([]byte, error) {
	out = append(out, `,"content":[`...)
	if m.Content != "" {
		out = append(out, `{"type":"text","text":`...)
		out = appendString(out, m.Content)
		out = append(out, "},"...)
	}
	for i, img := range m.Images {
		u := img.URL
		if len(img.Data) > 0 {
			mime := img.MIME
			if mime == "" {
				mime = http.DetectContentType(img.Data)
			}
			u = "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
		}
		if u == "" {
			return out, fmt.Errorf("image %d has neither data nor a URL", i)
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"type":"image_url","image_url":{"url":`...)
		out = appendString(out, u)
		out = append(out, "}}"...)
	}
	return append(out, ']'), nil
}

// appendSystem writes the system prompt s escaped (without quotes), its
// static prefix from the cache. A prefix is learnt when two consecutive
// system messages differ: their common start (at least minPrefix bytes) is
// what stays the same from turn to turn. A known prefix that s shares only
// in part is cut back to the shared part, so each converges on the static
// prefix.
func (e *encoder) appendSystem(out []byte, s string) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.prefixes) - 1; i >= 0; i-- {
		if p := e.prefixes[i]; strings.HasPrefix(s, p.raw) {
			out = append(out, p.json...)
			return appendEscaped(out, s[len(p.raw):])
		}
	}
	best, n := -1, commonStart(s, e.lastSys)
	for i, p := range e.prefixes {
		if m := commonStart(s, p.raw); m >= minPrefix && m >= n {
			best, n = i, m
		}
	}
	e.lastSys = s
	if n < minPrefix {
		return appendEscaped(out, s)
	}
	p := encodedPrefix{raw: s[:n], json: appendEscaped(nil, s[:n])}
	if best >= 0 {
		e.prefixes = append(e.prefixes[:best], e.prefixes[best+1:]...)
	} else if len(e.prefixes) >= maxCachedPrefixes {
		e.prefixes = append(e.prefixes[:0], e.prefixes[1:]...)
	}
	e.prefixes = append(e.prefixes, p)
	out = append(out, p.json...)
	return appendEscaped(out, s[n:])
}

// commonStart is the length of the longest common start of a and b, cut
// back to a rune boundary of a (where escaping can resume).
func commonStart(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	for n > 0 && n < len(a) && !utf8.RuneStart(a[n]) {
		n--
	}
	return n
}

// appendString writes s as a JSON string.
func appendString(out []byte, s string) []byte {
	out = append(out, '"')
	out = appendEscaped(out, s)
	return append(out, '"')
}

const hexDigits = "0123456789abcdef"

// appendEscaped writes s escaped for a JSON string, as encoding/json does
// but for HTML characters, which need no escaping here: control
// characters, quotes and backslashes escaped, invalid UTF-8 replaced by
// U+FFFD, U+2028 and U+2029 escaped.
func appendEscaped(out []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			out = append(out, s[start:i]...)
			switch c {
			case '"', '\\':
				out = append(out, '\\', c)
			case '\n':
				out = append(out, '\\', 'n')
			case '\r':
				out = append(out, '\\', 'r')
			case '\t':
				out = append(out, '\\', 't')
			default:
				out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			out = append(out, s[start:i]...)
			out = append(out, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			out = append(out, s[start:i]...)
			out = append(out, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(out, s[start:]...)
}
