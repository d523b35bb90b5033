package skills

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/config"
)

// buildTool builds d or fails the test.
func buildTool(t *testing.T, d ToolDef, env Env) *agent.Tool {
	t.Helper()
	if env.Grants == nil { // grant what the tool asks for, as an operator would
		needs := (&Skill{DefineTools: []ToolDef{d}}).Needs()
		env.Grants = map[string]config.SkillGrant{"test": {Hosts: needs.Hosts, Env: needs.Env}}
	}
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
			[]string{"parameters.properties.a.type: not valid JSON Schema: 5 is not one of array, boolean, integer, null, number, object, string"}},
		{"schema typo", ToolDef{Name: "t", Kind: "prompt", Prompt: "x", Parameters: map[string]any{"properties": map[string]any{"city": map[string]any{"type": "strin"}}}},
			[]string{`parameters.properties.city.type: not valid JSON Schema: "strin" is not one of array, boolean, integer, null, number, object, string`}},
		{"schema keyword of the wrong type", ToolDef{Name: "t", Kind: "prompt", Prompt: "x", Parameters: map[string]any{"properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": "one"}}}},
			[]string{`parameters.properties.n.minimum: not valid JSON Schema: "one" is a string; it must be a number`}},
		{"missing argv", ToolDef{Name: "t", Kind: "command"}, []string{"argv: required"}},
		{"program placeholder", ToolDef{Name: "t", Kind: "command", Argv: []string{"{prog}"}, Parameters: schema("prog")},
			[]string{"argv[0]: the program cannot be a placeholder"}},
		{"argv placeholder unknown", ToolDef{Name: "t", Kind: "command", Argv: []string{"cat", "{file}"}},
			[]string{"argv[1]: placeholder {file} is not a declared parameter"}},
		{"missing prompt", ToolDef{Name: "t", Kind: "prompt", System: "be brief"}, []string{"prompt: required"}},
		{"field of another kind", ToolDef{Name: "t", Kind: "prompt", Prompt: "x", URL: "https://x.example/", Argv: []string{"ls"}},
			[]string{"url: is only for kind http", "argv: is only for kind command"}},
		{"name and schema both reported", ToolDef{Name: "no spaces", Kind: "prompt", Prompt: "x", Parameters: map[string]any{"properties": map[string]any{"a": map[string]any{"type": 5}}}},
			[]string{"name: ", "parameters.properties.a.type: not valid JSON Schema"}},
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
