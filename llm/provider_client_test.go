package llm_test

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// sentParams is what a request carried of the output cap and temperature.
type sentParams struct {
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	Tools               []any           `json:"tools"`
}

func params(t *testing.T, r testkit.Recorded) sentParams {
	t.Helper()
	var p sentParams
	if err := json.Unmarshal(r.Raw, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func ptr[T any](v T) *T { return &v }

// Reasoning models get max_completion_tokens and no temperature: known by
// name, by setting, or learnt from the first refusal (then the request is
// sent again at once, and later ones are right the first time).
func TestReasoningModelParameters(t *testing.T) {
	tests := []struct {
		name     string
		p        testkit.Profile
		models   map[string]llm.ModelSettings
		requests []int // requests per call, for two calls
	}{
		{"by name", testkit.ProfileOpenAIReasoning, nil, []int{1, 1}},
		{"learnt from the refusal", testkit.ProfileAzure, nil, []int{2, 1}},
		{"by setting", testkit.ProfileAzure, map[string]llm.ModelSettings{testkit.ProfileAzure.Model: {Reasoning: ptr(true)}}, []int{1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := testkit.NewFakeLLMProfile(t, tt.p)
			cfg := tt.p.ClientConfig(fake)
			cfg.Temperature, cfg.Models = ptr(0.3), tt.models
			c, err := llm.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			before := 0
			for i, want := range tt.requests {
				fake.Push(testkit.Reply{Text: "fine"})
				resp, err := c.Complete(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}, MaxTokens: 500}, nil)
				if err != nil || resp.Message.Content != "fine" {
					t.Fatalf("call %d: %v, %q", i, err, resp.Message.Content)
				}
				reqs := fake.Requests()
				if got := len(reqs) - before; got != want {
					t.Errorf("call %d: %d requests, want %d", i, got, want)
				}
				before = len(reqs)
				last := params(t, reqs[len(reqs)-1])
				if last.MaxTokens != nil || last.Temperature != nil || last.MaxCompletionTokens == nil || *last.MaxCompletionTokens != 500 {
					t.Errorf("call %d sent max_tokens %v, temperature %v, max_completion_tokens %v; want only max_completion_tokens 500",
						i, last.MaxTokens, last.Temperature, last.MaxCompletionTokens)
				}
			}
		})
	}

	// Other models get max_tokens and the temperature, a model's own first.
	fake := testkit.NewFakeLLMProfile(t, testkit.ProfileOpenAI)
	cfg := testkit.ProfileOpenAI.ClientConfig(fake)
	cfg.Temperature, cfg.Models = ptr(0.3), map[string]llm.ModelSettings{testkit.ProfileOpenAI.Model: {Temperature: ptr(0.1)}}
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fake.Push(testkit.Reply{Text: "fine"})
	if _, err := c.Complete(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}, MaxTokens: 500}, nil); err != nil {
		t.Fatal(err)
	}
	if p := params(t, fake.Requests()[0]); p.MaxTokens == nil || *p.MaxTokens != 500 || p.Temperature == nil || *p.Temperature != 0.1 {
		t.Errorf("sent max_tokens %v, temperature %v; want 500 and 0.1", p.MaxTokens, p.Temperature)
	}
}

// A server that answers call_0 at every step, or no id at all: each call
// gets an id unique in the history, the same in the streamed fragments as
// in the answer.
func TestToolCallIDsUniqueInTheHistory(t *testing.T) {
	history := []llm.Message{
		{Role: llm.RoleUser, Content: "hi"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_0", Name: "send_message", Arguments: `{"text":"a"}`}}},
		{Role: llm.RoleTool, ToolCallID: "call_0", Name: "send_message", Content: "sent"},
	}
	missing := testkit.ProfileOpenAI
	missing.Name, missing.IDs = "missing ids", testkit.IDsMissing
	for _, p := range []testkit.Profile{testkit.ProfileLMStudio, missing} {
		t.Run(p.String(), func(t *testing.T) {
			fake := testkit.NewFakeLLMProfile(t, p)
			c, err := llm.New(p.ClientConfig(fake))
			if err != nil {
				t.Fatal(err)
			}
			fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("call_0", "send_message", `{"text":"b"}`), testkit.Call("call_1", "note", `{}`)}})
			streamed := map[string]bool{}
			resp, err := c.Complete(t.Context(), llm.Request{Messages: history, StreamCalls: []string{"send_message"}}, func(d llm.Delta) {
				if d.ToolName != "" {
					streamed[d.ToolID] = true
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			calls := resp.Message.ToolCalls
			if len(calls) != 2 || calls[0].ID == "" || calls[0].ID == "call_0" || calls[0].ID == calls[1].ID || calls[1].ID == "" {
				t.Fatalf("calls %+v: want two ids, neither empty nor call_0 (already in the history)", calls)
			}
			if len(streamed) != 1 || !streamed[calls[0].ID] {
				t.Errorf("streamed ids %v, want the answer's %s", streamed, calls[0].ID)
			}
		})
	}
}

// Gemini streams calls whole and without an index: two calls stay two.
func TestCallsWithoutIndex(t *testing.T) {
	fake := testkit.NewFakeLLMProfile(t, testkit.ProfileGemini)
	c, err := llm.New(testkit.ProfileGemini.ClientConfig(fake))
	if err != nil {
		t.Fatal(err)
	}
	fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("a", "get_weather", `{"city":"Paris"}`), testkit.Call("b", "get_time", `{"tz":"UTC"}`)}})
	resp, err := c.Complete(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls
	if len(calls) != 2 || calls[0].Name != "get_weather" || calls[0].Arguments != `{"city":"Paris"}` ||
		calls[1].Name != "get_time" || calls[1].Arguments != `{"tz":"UTC"}` {
		t.Fatalf("calls %+v: want get_weather(Paris) and get_time(UTC)", calls)
	}
}

// Mistral takes only 9-character ids in a history: every other id (of
// another model, the gateway's own plan_1) is sent in a stable 9-character
// form, the call and its result alike; known by the model's name, by the
// provider, or learnt from the first refusal.
func TestMistralToolCallIDs(t *testing.T) {
	history := []llm.Message{
		{Role: llm.RoleUser, Content: "hi"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_abcdefghijklmnop", Name: "note", Arguments: `{}`}, {ID: "plan_1", Name: "note", Arguments: `{}`}}},
		{Role: llm.RoleTool, ToolCallID: "call_abcdefghijklmnop", Name: "note", Content: "ok"},
		{Role: llm.RoleTool, ToolCallID: "plan_1", Name: "note", Content: "ok"},
	}
	renamed := testkit.ProfileVLLM
	renamed.Model = "local-model" // a name that says nothing: the refusal tells
	for _, tt := range []struct {
		p        testkit.Profile
		requests int
	}{{testkit.ProfileMistral, 1}, {testkit.ProfileVLLM, 1}, {renamed, 2}} {
		t.Run(tt.p.Model, func(t *testing.T) {
			fake := testkit.NewFakeLLMProfile(t, tt.p)
			c, err := llm.New(tt.p.ClientConfig(fake))
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("x", "note", `{}`)}})
				resp, err := c.Complete(t.Context(), llm.Request{Messages: history}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if id := resp.Message.ToolCalls[0].ID; !regexp.MustCompile(`^[a-zA-Z0-9]{9}$`).MatchString(id) {
					t.Errorf("answer id %q is not Mistral's form", id)
				}
			}
			reqs := fake.Requests()
			if len(reqs) != tt.requests+1 {
				t.Errorf("%d requests for two calls, want %d", len(reqs), tt.requests+1)
			}
			a, b := reqs[len(reqs)-1], reqs[len(reqs)-2]
			for i, m := range a.Messages[1].ToolCalls {
				if m.ID != a.Messages[2+i].ToolCallID || m.ID != b.Messages[1].ToolCalls[i].ID {
					t.Errorf("call %d sent as %q, its result as %q, before as %q: want one stable id", i, m.ID, a.Messages[2+i].ToolCallID, b.Messages[1].ToolCalls[i].ID)
				}
			}
		})
	}
}

// A server that refuses tool_choice naming a function (llama.cpp) gets
// "required" with the forced tool alone.
func TestForcedCallAsRequired(t *testing.T) {
	fake := testkit.NewFakeLLMProfile(t, testkit.ProfileLlamaCpp)
	c, err := llm.New(testkit.ProfileLlamaCpp.ClientConfig(fake))
	if err != nil {
		t.Fatal(err)
	}
	tools := []llm.ToolSpec{{Name: "other"}, {Name: "submit"}}
	for range 2 {
		fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("x", "submit", `{}`)}})
		resp, err := c.Complete(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "go"}}, Tools: tools, ForceTool: "submit"}, nil)
		if err != nil || len(resp.Message.ToolCalls) != 1 {
			t.Fatalf("forced call: %v, %+v", err, resp.Message)
		}
	}
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests for two calls, want 3 (one refused)", len(reqs))
	}
	for _, r := range reqs[1:] {
		if p := params(t, r); string(p.ToolChoice) != `"required"` || len(r.Tools) != 1 || r.Tools[0].Name != "submit" {
			t.Errorf("sent tool_choice %s with tools %v; want \"required\" with submit alone", p.ToolChoice, r.Tools)
		}
	}
}
