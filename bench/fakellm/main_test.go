package main

import (
	"encoding/json"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// learningTool has the shape of the learning pass's function (learn):
// two required lists, facts and profile.
func learningTool(name string) llm.ToolSpec {
	return llm.ToolSpec{Name: name, Parameters: json.RawMessage(`{"type":"object","properties":{` +
		`"facts":{"type":"array","items":{"type":"object"}},"profile":{"type":"array","items":{"type":"object"}}},` +
		`"required":["facts","profile"],"additionalProperties":false}`)}
}

func TestReply(t *testing.T) {
	user := []llm.Message{{Role: llm.RoleUser, Content: "hello there"}}
	tests := []struct {
		name     string
		rec      testkit.Recorded
		text     string
		call     string
		wantArgs string
	}{
		{name: "echo", rec: testkit.Recorded{Messages: user}, text: "You said: hello there"},
		{name: "time", rec: testkit.Recorded{Messages: []llm.Message{{Role: llm.RoleUser, Content: "What time is it?"}},
			Tools: []llm.ToolSpec{{Name: "current_time"}}}, call: "current_time", wantArgs: `{}`},
		{name: "tool result", rec: testkit.Recorded{Messages: []llm.Message{{Role: llm.RoleTool, Content: "12:00"}}},
			text: "The tool said: 12:00"},
		// The learning pass's call: nothing to learn, and
		// arguments their own schemas accept.
		{name: "learning pass", rec: testkit.Recorded{Messages: user, Tools: []llm.ToolSpec{learningTool("learn")}, ForcedTool: "learn"},
			call: "learn", wantArgs: `{"facts":[],"profile":[]}`},
		{name: "several kinds", rec: testkit.Recorded{Messages: user, ForcedTool: "f", Tools: []llm.ToolSpec{{Name: "f", Parameters: json.RawMessage(
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"},"c":{"type":"object"},"d":{"type":"boolean"},"e":{"type":"string"}},"required":["a","b","c","d"]}`)}}},
			call: "f", wantArgs: `{"a":"","b":0,"c":{},"d":false}`},
		{name: "unknown schema", rec: testkit.Recorded{Messages: user, Tools: []llm.ToolSpec{{Name: "x", Parameters: json.RawMessage(`[`)}}, ForcedTool: "x"},
			call: "x", wantArgs: `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := reply(tt.rec)
			if tt.call == "" {
				if got.Text != tt.text || len(got.ToolCalls) != 0 {
					t.Fatalf("reply = %+v, want the text %q", got, tt.text)
				}
				return
			}
			if len(got.ToolCalls) != 1 || got.ToolCalls[0].Name != tt.call || got.ToolCalls[0].Arguments != tt.wantArgs {
				t.Fatalf("reply = %+v, want a call to %s with %s", got, tt.call, tt.wantArgs)
			}
		})
	}
}
