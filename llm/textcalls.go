package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Small and local models often write a tool call as text instead of
// making it: a bare JSON object {"name": …, "arguments": …} (or
// "parameters"), Hermes/Qwen <tool_call>…</tool_call> blocks, a fenced
// ```json call, Mistral's [TOOL_CALLS][…] (or [TOOL_CALLS]name[ARGS]{…}),
// Llama 3.1's <|python_tag|>{…}, Gemma's trailing ```tool_code
// name(k="v")``` or trailing JSON. When tools were offered, the client
// holds such text back from the stream (callHold) and, at the end, turns
// it into structured calls to offered tools (recoverCalls); text that is
// plainly a call but unusable becomes Response.MalformedCall, never a reply.

// callMarkers open a tool call written as text.
var callMarkers = []string{"<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "```json", "```tool"}

// callHold holds back streamed answer text from where a tool call written
// as text may begin, so that call text never reaches a preview.
type callHold struct {
	on        bool // tools were offered
	held      bool // a call may have begun: everything from here is held
	midLine   bool // the text handed out so far does not end at a line start
	pending   string
	handedOut bool
}

// feed takes the next fragment of answer text and returns what may be
// handed out now.
func (h *callHold) feed(s string) string {
	if !h.on {
		return s
	}
	if !h.held && h.pending == "" && !strings.ContainsAny(s, "{[<`") {
		// No call can begin in s: only the line state changes.
		if i := strings.LastIndexFunc(s, func(r rune) bool { return r != ' ' && r != '\t' && r != '\r' }); i >= 0 {
			h.midLine = s[i] != '\n'
		}
		return h.out(s)
	}
	h.pending += s
	if h.held {
		return ""
	}
	p := h.pending
	mid := h.midLine
	for i := 0; i < len(p); i++ {
		c := p[i]
		wait := false
		switch {
		case !mid && c == '{':
			h.held = true
		case !mid && c == '[':
			j := i + 1
			for j < len(p) && (p[j] == ' ' || p[j] == '\n' || p[j] == '\t' || p[j] == '\r') {
				j++
			}
			h.held = j < len(p) && p[j] == '{'
			wait = j == len(p)
		}
		for _, m := range callMarkers {
			if strings.HasPrefix(p[i:], m) {
				h.held = true
			} else if strings.HasPrefix(m, p[i:]) {
				wait = true
			}
		}
		if h.held || wait {
			h.pending = p[i:]
			h.midLine = mid
			return h.out(p[:i])
		}
		switch c {
		case '\n':
			mid = false
		case ' ', '\t', '\r':
		default:
			mid = true
		}
	}
	h.pending, h.midLine = "", mid
	return h.out(p)
}

func (h *callHold) out(s string) string {
	if s != "" {
		h.handedOut = true
	}
	return s
}

// end returns the text still held.
func (h *callHold) end() string {
	s := h.pending
	h.pending = ""
	return s
}

// recoverCalls reads a tool call written as text in content. It returns
// the calls and the text around them when content holds calls to offered
// tools; malformed says what is wrong when content is plainly call text
// that cannot be used; all zero when content is not call text.
func recoverCalls(content string, offered []ToolSpec) (calls []ToolCall, rest, malformed string) {
	names := make(map[string]bool, len(offered))
	for _, t := range offered {
		names[t.Name] = true
	}
	if len(names) == 0 {
		return nil, "", ""
	}
	bodies, rest, strict, err := callText(content)
	if err != nil {
		return nil, "", err.Error()
	}
	if bodies == nil {
		return nil, "", ""
	}
	for _, b := range bodies {
		got, err := b.calls(names, strict)
		if err != nil {
			return nil, "", err.Error()
		}
		if got == nil { // JSON that is not a call: an answer
			return nil, "", ""
		}
		calls = append(calls, got...)
	}
	return calls, strings.TrimSpace(rest), ""
}

// callBody is the text of one or more calls in one of the forms.
type callBody struct {
	text string
	code bool // Python call syntax allowed (Gemma's tool_code)
}

// callText finds the call text in content: the bodies, the text around
// them, and strict: the form says it is a call (a tag, a marker), so a
// body that is not a call is malformed rather than an answer.
func callText(content string) (bodies []callBody, rest string, strict bool, err error) {
	if i := strings.Index(content, "<tool_call>"); i >= 0 {
		rest = content[:i]
		s := content[i:]
		for {
			s = strings.TrimSpace(s)
			b, ok := strings.CutPrefix(s, "<tool_call>")
			if !ok {
				rest += "\n" + s
				break
			}
			body, after, closed := strings.Cut(b, "</tool_call>")
			bodies = append(bodies, callBody{text: unfence(body)})
			s = after
			if !closed {
				break
			}
		}
		return bodies, rest, true, nil
	}
	if i := strings.Index(content, "[TOOL_CALLS]"); i >= 0 {
		bodies, err := mistralCalls(content[i:])
		return bodies, content[:i], true, err
	}
	if i := strings.Index(content, "<|python_tag|>"); i >= 0 {
		body := content[i+len("<|python_tag|>"):]
		for _, tok := range []string{"<|eom_id|>", "<|eot_id|>"} {
			body, _, _ = strings.Cut(body, tok)
		}
		return []callBody{{text: body}}, content[:i], true, nil
	}
	if start, end, lang, body, ok := lastFence(content); ok {
		switch lang {
		case "json", "tool_call", "tool_code", "tool", "":
			return []callBody{{text: body, code: lang != "json" && lang != ""}},
				content[:start] + content[end:], lang != "json" && lang != "", nil
		}
	}
	t := strings.TrimRightFunc(content, unicode.IsSpace)
	for _, tok := range []string{"<end_of_turn>", "<|eot_id|>", "<|im_end|>"} {
		t = strings.TrimSuffix(t, tok)
	}
	if i := bareStart(t); i >= 0 {
		return []callBody{{text: t[i:]}}, t[:i], false, nil
	}
	return nil, "", false, nil
}

// bareStart is where bare JSON call text begins in t: t's start, or a line
// start from which the rest of t is JSON (a trailing call); -1 if none.
func bareStart(t string) int {
	lead := len(t) - len(strings.TrimLeftFunc(t, unicode.IsSpace))
	if lead < len(t) && (t[lead] == '{' || t[lead] == '[') {
		return lead
	}
	for i := strings.LastIndex(t, "\n{"); i >= 0; i = strings.LastIndex(t[:i], "\n{") {
		if json.Valid([]byte(t[i+1:])) {
			return i + 1
		}
	}
	return -1
}

// lastFence finds the last fenced block of content: its bounds, language
// tag and body.
func lastFence(content string) (start, end int, lang, body string, ok bool) {
	close := strings.LastIndex(content, "```")
	if close < 0 {
		return 0, 0, "", "", false
	}
	open := strings.LastIndex(content[:close], "```")
	if open < 0 {
		return 0, 0, "", "", false
	}
	inner := content[open+3 : close]
	lang, body, found := strings.Cut(inner, "\n")
	if !found {
		return 0, 0, "", "", false
	}
	return open, close + 3, strings.ToLower(strings.TrimSpace(lang)), body, true
}

// unfence takes a body out of a code fence, if it is in one.
func unfence(s string) string {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "```") && strings.HasSuffix(t, "```") && len(t) >= 6 {
		if _, body, ok := strings.Cut(t[3:len(t)-3], "\n"); ok {
			return body
		}
	}
	return s
}

// mistralCalls reads Mistral's call text: [TOOL_CALLS][{…},…] or, from
// later templates, [TOOL_CALLS]name[ARGS]{…} (optionally with
// [CALL_ID]id), repeated.
func mistralCalls(s string) ([]callBody, error) {
	var bodies []callBody
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		after, ok := strings.CutPrefix(s, "[TOOL_CALLS]")
		if !ok {
			break
		}
		after = strings.TrimSpace(after)
		if strings.HasPrefix(after, "[") || strings.HasPrefix(after, "{") {
			bodies = append(bodies, callBody{text: after})
			break
		}
		name, args, ok := strings.Cut(after, "[ARGS]")
		if !ok {
			return nil, errors.New("[TOOL_CALLS] is followed by neither a JSON list nor name[ARGS]{…}")
		}
		name, _, _ = strings.Cut(name, "[CALL_ID]")
		vals, tail, err := jsonValues(args, 1)
		if err != nil {
			return nil, fmt.Errorf("the arguments of %s after [ARGS] are not JSON: %w", strings.TrimSpace(name), err)
		}
		obj, _ := json.Marshal(map[string]json.RawMessage{"name": quote(strings.TrimSpace(name)), "arguments": vals[0]})
		bodies = append(bodies, callBody{text: string(obj)})
		s = tail
	}
	return bodies, nil
}

func quote(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// jsonValues reads up to n (n <= 0: any number of) JSON values from the
// start of s, separated by white space, commas or semicolons, and returns
// the text after them.
func jsonValues(s string, n int) ([]json.RawMessage, string, error) {
	var vals []json.RawMessage
	for n <= 0 || len(vals) < n {
		s = strings.TrimLeft(s, " \t\r\n;,")
		if s == "" || (s[0] != '{' && s[0] != '[') {
			break
		}
		dec := json.NewDecoder(strings.NewReader(s))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, s, err
		}
		vals = append(vals, v)
		s = s[dec.InputOffset():]
	}
	if len(vals) == 0 {
		return nil, s, errors.New("no JSON value")
	}
	return vals, s, nil
}

// calls reads the calls of one body. A body that is JSON but no call is
// an answer (nil, nil) unless strict; one that names a tool not offered,
// or does not parse, is an error.
func (b callBody) calls(names map[string]bool, strict bool) ([]ToolCall, error) {
	text := strings.TrimSpace(b.text)
	if b.code && !strings.HasPrefix(text, "{") && !strings.HasPrefix(text, "[") {
		c, err := pythonCall(text)
		if err != nil {
			return nil, err
		}
		return checkCalls([]ToolCall{c}, names)
	}
	vals, tail, err := jsonValues(text, 0)
	if err != nil || strings.TrimSpace(tail) != "" {
		if strict || (strings.HasPrefix(text, "{") && strings.Contains(text, `"name"`)) {
			return nil, fmt.Errorf("the tool call written as text is not valid JSON: %s", excerpt([]byte(text)))
		}
		return nil, nil
	}
	var calls []ToolCall
	for _, v := range vals {
		got, ok := jsonCalls(v)
		if !ok {
			if strict {
				return nil, fmt.Errorf("the tool call written as text has no name and arguments: %s", excerpt(v))
			}
			return nil, nil
		}
		calls = append(calls, got...)
	}
	return checkCalls(calls, names)
}

// jsonCalls reads a call object, a list of them, or {"tool_calls": […]};
// ok is false when v is not call-shaped.
func jsonCalls(v json.RawMessage) ([]ToolCall, bool) {
	v = bytes.TrimSpace(v)
	if len(v) > 0 && v[0] == '[' {
		var list []json.RawMessage
		if json.Unmarshal(v, &list) != nil || len(list) == 0 {
			return nil, false
		}
		var out []ToolCall
		for _, e := range list {
			got, ok := jsonCalls(e)
			if !ok {
				return nil, false
			}
			out = append(out, got...)
		}
		return out, true
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(v, &obj) != nil {
		return nil, false
	}
	if tc, ok := obj["tool_calls"]; ok && len(obj) == 1 {
		return jsonCalls(tc)
	}
	if fn, ok := obj["function"]; ok {
		var inner map[string]json.RawMessage
		if json.Unmarshal(fn, &inner) == nil {
			obj = inner
		}
	}
	var name string
	if json.Unmarshal(obj["name"], &name) != nil || name == "" {
		return nil, false
	}
	args, ok := obj["arguments"]
	if !ok {
		args, ok = obj["parameters"]
	}
	if !ok {
		return nil, false
	}
	var s string
	if json.Unmarshal(args, &s) == nil { // arguments as a JSON string
		args = json.RawMessage(s)
	}
	return []ToolCall{{Name: name, Arguments: string(bytes.TrimSpace(args))}}, true
}

// checkCalls keeps calls to offered tools with JSON object arguments.
func checkCalls(calls []ToolCall, names map[string]bool) ([]ToolCall, error) {
	for i, c := range calls {
		if !names[c.Name] {
			offered := slices.Sorted(func(yield func(string) bool) {
				for n := range names {
					if !yield(n) {
						return
					}
				}
			})
			return nil, fmt.Errorf("the tool call written as text names %q, which is not an offered tool (offered: %s)",
				c.Name, strings.Join(offered, ", "))
		}
		a := strings.TrimSpace(c.Arguments)
		if a == "" || a == "null" {
			a = "{}"
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(a), &obj) != nil {
			return nil, fmt.Errorf("the arguments of the %s call written as text are not a JSON object: %s", c.Name, excerpt([]byte(a)))
		}
		var buf bytes.Buffer
		json.Compact(&buf, []byte(a))
		calls[i].Arguments = buf.String()
	}
	return calls, nil
}

// pythonCall reads Gemma's tool_code: name(key=value, …), optionally
// inside print(…), with string, number, True/False/None values.
func pythonCall(s string) (ToolCall, error) {
	s = strings.TrimSpace(s)
	if inner, ok := strings.CutPrefix(s, "print("); ok && strings.HasSuffix(inner, ")") {
		s = strings.TrimSpace(inner[:len(inner)-1])
	}
	bad := func(why string) (ToolCall, error) {
		return ToolCall{}, fmt.Errorf("the tool call written as code %s: %s", why, excerpt([]byte(s)))
	}
	open := strings.IndexByte(s, '(')
	if open <= 0 || !strings.HasSuffix(s, ")") {
		return bad("is not name(arguments)")
	}
	name := strings.TrimSpace(s[:open])
	for _, r := range name {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '.' && r != '-' {
			return bad("has no plain name")
		}
	}
	args := map[string]any{}
	p := s[open+1 : len(s)-1]
	for {
		p = strings.TrimLeft(p, " \t\r\n,")
		if p == "" {
			break
		}
		key, after, ok := strings.Cut(p, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" || strings.ContainsAny(key, " \"'(),") {
			return bad("has an argument that is not key=value")
		}
		val, tail, err := pythonValue(strings.TrimLeft(after, " \t"))
		if err != nil {
			return bad("has a value that is not a literal")
		}
		args[key], p = val, tail
	}
	b, _ := json.Marshal(args)
	return ToolCall{Name: name, Arguments: string(b)}, nil
}

// pythonValue reads a string, number or True/False/None literal.
func pythonValue(s string) (any, string, error) {
	if s == "" {
		return nil, s, errors.New("empty")
	}
	if q := s[0]; q == '"' || q == '\'' {
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			switch c := s[i]; {
			case c == '\\' && i+1 < len(s):
				i++
				b.WriteByte(s[i])
			case c == q:
				return b.String(), s[i+1:], nil
			default:
				b.WriteByte(c)
			}
		}
		return nil, s, errors.New("unterminated string")
	}
	end := strings.IndexAny(s, ",)")
	if end < 0 {
		end = len(s)
	}
	lit := strings.TrimSpace(s[:end])
	switch lit {
	case "True", "true":
		return true, s[end:], nil
	case "False", "false":
		return false, s[end:], nil
	case "None", "null":
		return nil, s[end:], nil
	}
	if n, err := strconv.ParseFloat(lit, 64); err == nil {
		return n, s[end:], nil
	}
	return nil, s, errors.New("not a literal")
}
