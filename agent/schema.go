package agent

import (
	"embed"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// The JSON Schema 2020-12 meta-schema (schema.json and its vocabularies in
// meta/), as published at https://json-schema.org/draft/2020-12/. The
// jsonschema library resolves a schema without checking its keywords' values
// (`type: strin` resolves and then rejects every argument), so tool schemas
// are validated against the meta-schema first.
//
//go:embed metaschema
var metaFS embed.FS

const metaBase = "https://json-schema.org/draft/2020-12/"

var metaSchema = sync.OnceValues(func() (*jsonschema.Resolved, error) {
	load := func(name string) (*jsonschema.Schema, error) {
		data, err := metaFS.ReadFile("metaschema/" + name + ".json")
		if err != nil {
			return nil, err
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("meta-schema %s: %w", name, err)
		}
		return &s, nil
	}
	root, err := load("schema")
	if err != nil {
		return nil, err
	}
	return root.Resolve(&jsonschema.ResolveOptions{Loader: func(u *url.URL) (*jsonschema.Schema, error) {
		name, ok := strings.CutPrefix(u.String(), metaBase)
		if !ok {
			return nil, fmt.Errorf("meta-schema: no schema at %s", u)
		}
		return load(name)
	}})
})

// SchemaError is a tool schema that is not valid JSON Schema: Path is where
// in it ("properties.city.type"; "" for the whole), Msg what is wrong.
type SchemaError struct {
	Path string
	Msg  string
}

func (e *SchemaError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// CheckSchema validates a tool's parameter schema against the JSON Schema
// 2020-12 meta-schema and returns a *SchemaError naming the first keyword in
// error. A schema that declares another draft in $schema is left to the
// resolver.
func CheckSchema(raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return &SchemaError{Msg: "not JSON: " + err.Error()}
	}
	if m, ok := v.(map[string]any); ok {
		if s, ok := m["$schema"].(string); ok && !strings.HasPrefix(s, metaBase) {
			return nil
		}
	}
	meta, err := metaSchema()
	if err != nil {
		return fmt.Errorf("agent: the embedded meta-schema: %w", err) // a build problem
	}
	if meta.Validate(v) == nil {
		return nil
	}
	path, msg := locate(meta, v, nil)
	return &SchemaError{Path: strings.Join(path, "."), Msg: msg}
}

// Keywords whose values are schemas, maps of schemas, or lists of schemas.
var (
	schemaKeys    = []string{"additionalItems", "additionalProperties", "contains", "else", "if", "items", "not", "propertyNames", "then", "unevaluatedItems", "unevaluatedProperties"}
	schemaMapKeys = []string{"$defs", "definitions", "dependentSchemas", "patternProperties", "properties"}
	schemaListKey = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
)

// locate finds the deepest subschema of v that fails the meta-schema, then
// its first failing keyword, and says what is wrong there.
func locate(meta *jsonschema.Resolved, v any, path []string) ([]string, string) {
	m, ok := v.(map[string]any)
	if !ok {
		return path, leaf(meta.Validate(v), v)
	}
	at := func(p ...string) []string { return append(slices.Clip(path), p...) }
	for _, k := range sortedKeys(m) {
		switch {
		case slices.Contains(schemaKeys, k):
			if meta.Validate(m[k]) != nil {
				return locate(meta, m[k], at(k))
			}
		case slices.Contains(schemaMapKeys, k):
			sub, _ := m[k].(map[string]any)
			for _, name := range sortedKeys(sub) {
				if meta.Validate(sub[name]) != nil {
					return locate(meta, sub[name], at(k, name))
				}
			}
		case slices.Contains(schemaListKey, k):
			list, _ := m[k].([]any)
			for i, s := range list {
				if meta.Validate(s) != nil {
					return locate(meta, s, at(fmt.Sprintf("%s[%d]", k, i)))
				}
			}
		}
	}
	for _, k := range sortedKeys(m) {
		if err := meta.Validate(map[string]any{k: m[k]}); err != nil {
			return at(k), leaf(err, m[k])
		}
	}
	return path, leaf(meta.Validate(v), v)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var (
	validating = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*(validating \S+: )*`) })
	enumMsg    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^enum: (.*) does not equal any of: \[(.*)\]$`) })
	typeMsg    = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^type: (.*) has type "(\w+)", want (?:one of )?"([\w, ]+)"$`)
	})
)

// leaf turns the validator's nested message about value into its innermost
// reason: "validating …: validating …: enum: strin does not equal any of:
// [array …]" becomes `"strin" is not one of array, …`.
func leaf(err error, value any) string {
	if err == nil {
		return "not valid JSON Schema"
	}
	for line := range strings.SplitSeq(err.Error(), "\n") {
		msg := validating().ReplaceAllString(line, "")
		if strings.HasSuffix(msg, ":") || msg == "" { // "anyOf: did not validate against any of […]:"; the reasons follow
			continue
		}
		if m := enumMsg().FindStringSubmatch(msg); m != nil {
			return fmt.Sprintf("%s is not one of %s", show(value, m[1]), strings.ReplaceAll(m[2], " ", ", "))
		}
		if m := typeMsg().FindStringSubmatch(msg); m != nil {
			return fmt.Sprintf("%s is a%s %s; it must be a%s %s", show(value, m[1]), article(m[2]), m[2], article(m[3]), strings.ReplaceAll(m[3], ", ", " or "))
		}
		return msg
	}
	return validating().ReplaceAllString(err.Error(), "")
}

// show writes a short value as JSON ("strin" quoted, 5 not), else as the
// validator printed it.
func show(value any, printed string) string {
	if b, err := json.Marshal(value); err == nil && len(b) <= 60 {
		return string(b)
	}
	return printed
}

func article(word string) string {
	if strings.ContainsRune("aeiou", rune(word[0])) {
		return "n"
	}
	return ""
}
