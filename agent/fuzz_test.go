package agent

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// fuzzSchema is a tool schema in the shapes the gateway's tools use,
// together with a small independent checker of the same rules, so the
// fuzz target can tell whether validate judged the arguments right.
type fuzzSchema struct {
	name  string
	props map[string]fuzzProp
	req   []string
	open  bool // no additionalProperties:false
}

type fuzzProp struct {
	typ      string // string, integer, number, boolean, array (of strings)
	enum     []string
	min, max *float64
}

func (s fuzzSchema) tool() *Tool {
	if s.props == nil && s.open {
		return &Tool{Name: s.name} // no schema: any object
	}
	props := map[string]any{}
	for name, p := range s.props {
		m := map[string]any{"type": p.typ, "description": "the " + name}
		if p.typ == "array" {
			m["items"] = map[string]any{"type": "string"}
		}
		if p.enum != nil {
			m["enum"] = p.enum
		}
		if p.min != nil {
			m["minimum"] = *p.min
		}
		if p.max != nil {
			m["maximum"] = *p.max
		}
		props[name] = m
	}
	schema := map[string]any{"type": "object", "properties": props}
	if len(s.req) > 0 {
		schema["required"] = s.req
	}
	if !s.open {
		schema["additionalProperties"] = false
	}
	raw, _ := json.Marshal(schema)
	return &Tool{Name: s.name, Parameters: raw}
}

// check applies the schema's rules to a decoded object and returns the
// names of the fields that break them.
func (s fuzzSchema) check(obj map[string]any) []string {
	var bad []string
	for _, r := range s.req {
		if _, ok := obj[r]; !ok {
			bad = append(bad, r)
		}
	}
	for k, v := range obj {
		p, known := s.props[k]
		if !known {
			if !s.open {
				bad = append(bad, k)
			}
			continue
		}
		if !p.accepts(v) {
			bad = append(bad, k)
		}
	}
	return bad
}

func (p fuzzProp) accepts(v any) bool {
	switch p.typ {
	case "string":
		s, ok := v.(string)
		return ok && (p.enum == nil || slices.Contains(p.enum, s))
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "array":
		a, ok := v.([]any)
		if !ok {
			return false
		}
		for _, x := range a {
			if _, ok := x.(string); !ok {
				return false
			}
		}
		return true
	case "integer", "number":
		f, ok := v.(float64)
		if !ok || p.typ == "integer" && f != math.Trunc(f) {
			return false
		}
		return (p.min == nil || f >= *p.min) && (p.max == nil || f <= *p.max)
	}
	return false
}

func ptr(f float64) *float64 { return &f }

// fuzzSchemas copy the shapes of real tools: send_message, file_write,
// web_search (bounded integer), schedule_create (enum), delegate (array),
// schedule_list (no fields), and a tool without a schema.
var fuzzSchemas = []fuzzSchema{
	{name: "send_message", props: map[string]fuzzProp{"text": {typ: "string"}}, req: []string{"text"}},
	{name: "file_write", props: map[string]fuzzProp{"path": {typ: "string"}, "content": {typ: "string"}}, req: []string{"path", "content"}},
	{name: "web_search", props: map[string]fuzzProp{"query": {typ: "string"}, "count": {typ: "integer", min: ptr(1), max: ptr(10)}}, req: []string{"query"}},
	{name: "schedule_create", props: map[string]fuzzProp{"spec": {typ: "string"}, "kind": {typ: "string", enum: []string{"reminder", "task"}},
		"text": {typ: "string"}, "silent": {typ: "boolean"}, "ratio": {typ: "number", min: ptr(0)}}, req: []string{"spec", "kind", "text"}},
	{name: "delegate", props: map[string]fuzzProp{"task": {typ: "string"}, "tools": {typ: "array"}}, req: []string{"task"}},
	{name: "schedule_list", props: map[string]fuzzProp{}},
	{name: "open_tool", props: map[string]fuzzProp{"q": {typ: "string"}}, open: true},
	{name: "mcp_anything", open: true},
}

// pointerName is how the validator names a field in a JSON pointer.
func pointerName(k string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
}

// FuzzToolArguments feeds model-written tool-call arguments to the check
// the loop runs before any tool: it never panics; a refusal is an error
// result for the model that names the tool and, for a schema mismatch, the
// offending field; it accepts exactly what the schema allows (checked
// against an independent reading of the schema); and accepted arguments
// reach the tool unchanged, as a JSON object that passes the check again.
func FuzzToolArguments(f *testing.F) {
	for _, seed := range []struct {
		schema uint8
		args   string
	}{
		{0, `{"text":"hello"}`},
		{0, ``},
		{0, `   `},
		{0, `null`},
		{0, `{"text":1}`},
		{0, `{"text":"a","extra":true}`},
		{0, `{"text":"a","TEXT":"b"}`},
		{0, `{"text":"a","text":2}`},
		{0, `{"text":"a"} trailing`},
		{0, `{"text":"\ud800 \u0000 \xff"}`},
		{1, `{"path":"notes/a.md","content":""}`},
		{1, `{"path":"../etc/passwd"}`},
		{1, `{"pa/th~":"x"}`},
		{2, `{"query":"go fuzz","count":3}`},
		{2, `{"query":"q","count":0}`},
		{2, `{"query":"q","count":2.5}`},
		{2, `{"query":"q","count":1e400}`},
		{2, `{"query":"q","count":10.0}`},
		{3, `{"spec":"@daily","kind":"task","text":"x","silent":false,"ratio":0.5}`},
		{3, `{"spec":"@daily","kind":"shell","text":"rm -rf /"}`},
		{4, `{"task":"t","tools":["web_fetch",1]}`},
		{4, `{"task":"t","tools":null}`},
		{5, `{}`},
		{5, `[]`},
		{5, `"string"`},
		{5, `{"a":{"b":[{}]}}`},
		{6, `{"Q":"case"}`},
		{7, `{"anything":[1,{"x":null}]}`},
		{7, `[{"nested":true}]`},
	} {
		f.Add(seed.schema, seed.args)
	}
	tools := make([]*Tool, len(fuzzSchemas))
	for i, s := range fuzzSchemas {
		tools[i] = s.tool()
		if err := tools[i].Compile(); err != nil {
			f.Fatalf("schema %s: %v", s.name, err)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, raw string) {
		i := int(which) % len(fuzzSchemas)
		s, tool := fuzzSchemas[i], tools[i]
		args, msg := tool.validate(raw)

		effective := raw
		if strings.TrimSpace(raw) == "" {
			effective = "{}"
		}
		var decoded any
		jsonErr := json.Unmarshal([]byte(effective), &decoded)
		obj, isObj := decoded.(map[string]any)
		var bad []string
		if jsonErr == nil && isObj {
			bad = s.check(obj)
		}

		if msg != "" {
			if args != nil {
				t.Fatalf("refused %q but handed on arguments %q", raw, args)
			}
			if !strings.HasPrefix(msg, "error: the arguments for "+s.name+" ") {
				t.Fatalf("refusal of %q does not name the tool %s: %q", raw, s.name, msg)
			}
			switch {
			case jsonErr != nil:
				if !strings.Contains(msg, "not valid JSON") {
					t.Fatalf("invalid JSON %q refused with %q", raw, msg)
				}
			case !isObj:
				if !strings.Contains(msg, "must be a JSON object") {
					t.Fatalf("non-object %q refused with %q", raw, msg)
				}
			default:
				if len(bad) == 0 {
					t.Fatalf("%s: %q satisfies the schema but was refused: %q", s.name, raw, msg)
				}
				named := slices.ContainsFunc(bad, func(k string) bool {
					return strings.Contains(msg, fmt.Sprintf("%q", k)) || strings.Contains(msg, "/properties/"+pointerName(k))
				})
				if !named {
					t.Fatalf("%s: refusal of %q names none of the fields %q: %q", s.name, raw, bad, msg)
				}
			}
			return
		}

		// Accepted: an object that meets the schema, handed on as sent.
		if jsonErr != nil || !isObj {
			t.Fatalf("%s: accepted %q, which is not a JSON object", s.name, raw)
		}
		if len(bad) > 0 {
			t.Fatalf("%s: accepted %q although fields %q break the schema", s.name, raw, bad)
		}
		if string(args) != effective {
			t.Fatalf("%s: arguments %q reach the tool as %q", s.name, effective, args)
		}
		again, msg2 := tool.validate(string(args))
		if msg2 != "" || string(again) != string(args) {
			t.Fatalf("%s: accepted arguments %q do not pass again: %q", s.name, args, msg2)
		}
		if canonicalJSON(args) != canonicalJSON(json.RawMessage(effective)) {
			t.Fatalf("%s: canonical form changed", s.name)
		}
	})
}
