package agent

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Tool schemas are checked against the JSON Schema meta-schema, and a
// mistake is named by where it is in the schema.
func TestCheckSchema(t *testing.T) {
	tests := []struct {
		schema string
		want   string // "" for valid
	}{
		{`{"type":"object","properties":{"city":{"type":"string","minLength":1}},"required":["city"],"additionalProperties":false}`, ""},
		{`{"type":"object","properties":{"city":{"type":"strin"}}}`, `properties.city.type: "strin" is not one of array, boolean, integer, null, number, object, string`},
		{`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"sting"}}}}`, `properties.tags.items.type: "sting" is not one of`},
		{`{"type":"object","properties":{"n":{"anyOf":[{"type":"integer"},{"type":"integr"}]}}}`, `properties.n.anyOf[1].type: "integr" is not one of`},
		{`{"type":"object","properties":{"n":{"type":"integer","minimum":"one"}}}`, `properties.n.minimum: "one" is a string; it must be a number`},
		{`{"type":"object","required":"city"}`, `required: "city" is a string; it must be an array`},
		{`{"type":"object","properties":{"city":"string"}}`, `properties.city: "string" is a string; it must be an object or boolean`},
		// Another draft is left to the resolver (its keywords differ).
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"p":{"items":[{"type":"string"}]}}}`, ""},
	}
	for _, tt := range tests {
		err := CheckSchema(json.RawMessage(tt.schema))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tt.schema, err)
		case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
			t.Errorf("%s: got %v, want %q", tt.schema, err, tt.want)
		}
	}

	// Every source compiles its tools, MCP's as listed: Compile rejects the
	// typo with the tool's name.
	tool := &Tool{Name: "forecast", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"strin"}}}`)}
	err := tool.Compile()
	if _, ok := errors.AsType[*SchemaError](err); !ok || !strings.HasPrefix(err.Error(), `tool "forecast": parameters: properties.city.type:`) {
		t.Errorf("Compile: %v", err)
	}
}
