package skills

// Templates: {name} is replaced by the top-level argument name (missing
// arguments render as "", strings as they are, numbers and booleans as
// written, objects and arrays as compact JSON); {{ and }} are literal braces;
// in http header values ${VAR} is read from the environment at call time.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

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

// The arguments a call passes, as templates render them.

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
