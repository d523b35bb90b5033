package skills

import "testing"

// Finding 4: a skill's tools declare what they do. A command, and an http
// tool whose method is not GET, act beyond the reply (asked about or
// withdrawn after untrusted content); a command's output is labelled
// untrusted like an http response; GET and prompt tools only read.
func TestKindsDeclareActsAndUntrusted(t *testing.T) {
	cmd := CommandPolicy{Enabled: true, Workspace: t.TempDir()}
	tests := []struct {
		def             ToolDef
		acts, untrusted bool
	}{
		{ToolDef{Name: "get", Kind: "http", URL: "https://api.example.com/x"}, false, true},
		{ToolDef{Name: "get_named", Kind: "http", Method: "get", URL: "https://api.example.com/x"}, false, true},
		{ToolDef{Name: "post", Kind: "http", Method: "POST", URL: "https://api.example.com/x"}, true, true},
		{ToolDef{Name: "delete", Kind: "http", Method: "DELETE", URL: "https://api.example.com/x"}, true, true},
		{ToolDef{Name: "report", Kind: "command", Argv: []string{"true"}}, true, true},
		{ToolDef{Name: "think", Kind: "prompt", Prompt: "x"}, false, false},
	}
	for _, tc := range tests {
		tool := buildTool(t, tc.def, Env{Command: cmd})
		if tool.Acts != tc.acts || tool.Untrusted != tc.untrusted {
			t.Errorf("%s: Acts=%v Untrusted=%v, want %v and %v", tc.def.Name, tool.Acts, tool.Untrusted, tc.acts, tc.untrusted)
		}
	}
}
