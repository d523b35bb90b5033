package testkit_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// post sends body to the profile's chat route with its key, as its
// clients do, and returns the status and the data lines of the answer.
func post(t *testing.T, f *testkit.FakeLLM, p testkit.Profile, body string, header map[string]string) (int, []string) {
	t.Helper()
	url := f.URL + "/chat/completions"
	if p.Azure {
		url = f.URL + "/openai/deployments/" + p.Model + "/chat/completions?api-version=" + testkit.AzureAPIVersion
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	switch {
	case header != nil:
		for k, v := range header {
			req.Header.Set(k, v)
		}
	case p.Azure:
		req.Header.Set("api-key", p.Key)
	default:
		req.Header.Set("Authorization", "Bearer "+p.Key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "[DONE]" {
			lines = append(lines, d)
		} else if !ok && sc.Text() != "" && !strings.HasPrefix(sc.Text(), ":") {
			lines = append(lines, sc.Text()) // an error body
		}
	}
	return resp.StatusCode, lines
}

const twoCalls = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`

// Each profile's quirks are on the wire as its server documents them.
func TestProfilesOnTheWire(t *testing.T) {
	calls := testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("a1", "get_weather", `{"city":"Paris"}`), testkit.Call("b2", "get_time", `{"tz":"UTC"}`)},
		Usage: &llm.Usage{PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, CachedTokens: 64, ReasoningTokens: 12}}
	type callDelta struct {
		Index    *int    `json:"index"`
		ID       *string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	type chunk struct {
		Choices []struct {
			Delta struct {
				ToolCalls        []callDelta `json:"tool_calls"`
				ReasoningContent string      `json:"reasoning_content"`
				Reasoning        string      `json:"reasoning"`
			} `json:"delta"`
		} `json:"choices"`
		Usage map[string]any `json:"usage"`
	}
	for _, p := range testkit.Profiles() {
		t.Run(p.String(), func(t *testing.T) {
			f := testkit.NewFakeLLMProfile(t, p)
			f.Push(calls)
			status, lines := post(t, f, p, twoCalls, nil)
			if status != http.StatusOK {
				t.Fatalf("status %d: %v", status, lines)
			}
			var deltas []callDelta
			var usage map[string]any
			thought := ""
			for _, l := range lines {
				var c chunk
				if err := json.Unmarshal([]byte(l), &c); err != nil {
					t.Fatalf("%v: %s", err, l)
				}
				if c.Usage != nil {
					usage = c.Usage
				}
				for _, ch := range c.Choices {
					deltas = append(deltas, ch.Delta.ToolCalls...)
					thought += ch.Delta.ReasoningContent + ch.Delta.Reasoning
				}
			}
			if p.WholeCalls && (len(deltas) != 2 || deltas[0].Function.Arguments != `{"city":"Paris"}`) {
				t.Errorf("whole calls: %d deltas, first %+v; want one whole delta per call", len(deltas), deltas[0])
			}
			if !p.WholeCalls && len(deltas) <= 2 {
				t.Errorf("%d deltas: want the arguments in fragments", len(deltas))
			}
			for _, d := range deltas {
				if (d.Index == nil) != p.NoIndex {
					t.Errorf("delta %+v: index present %v, want %v", d, d.Index != nil, !p.NoIndex)
				}
			}
			var ids []string
			for _, d := range deltas {
				if d.ID != nil && *d.ID != "" {
					ids = append(ids, *d.ID)
				}
			}
			switch p.IDs {
			case testkit.IDsReused:
				if strings.Join(ids, ",") != "call_0,call_1" {
					t.Errorf("ids %v, want call_0,call_1", ids)
				}
			case testkit.IDsMistral:
				if len(ids) != 2 || len(ids[0]) != 9 || ids[0] == "a1" {
					t.Errorf("ids %v, want two of 9 characters", ids)
				}
			case testkit.IDsScripted:
				if strings.Join(ids, ",") != "a1,b2" {
					t.Errorf("ids %v, want a1,b2", ids)
				}
			}
			if thought != p.Thought {
				t.Errorf("reasoning %q, want %q in %s", thought, p.Thought, p.ReasoningField)
			}
			switch {
			case p.NoStreamUsage:
				if usage != nil {
					t.Errorf("usage %v, want none in the stream", usage)
				}
			case p.Usage == testkit.UsageDeepSeek:
				if usage["prompt_cache_hit_tokens"] != 64.0 || usage["prompt_cache_miss_tokens"] != 36.0 {
					t.Errorf("usage %v, want DeepSeek's cache fields", usage)
				}
			case p.Usage == testkit.UsageOpenAI:
				if d, _ := usage["prompt_tokens_details"].(map[string]any); d["cached_tokens"] != 64.0 {
					t.Errorf("usage %v, want prompt_tokens_details.cached_tokens", usage)
				}
			}
		})
	}
}

// The refusals each profile's server answers with.
func TestProfileRefusals(t *testing.T) {
	tests := []struct {
		name   string
		p      testkit.Profile
		body   string
		header map[string]string
		status int
		says   string
	}{
		{"reasoning: max_tokens", testkit.ProfileOpenAIReasoning, `{"model":"o4-mini","max_tokens":5,"messages":[]}`, nil, 400, "max_completion_tokens"},
		{"reasoning: temperature", testkit.ProfileOpenAIReasoning, `{"model":"o4-mini","temperature":0.2,"messages":[]}`, nil, 400, "'temperature' does not support 0.2"},
		{"azure: bearer", testkit.ProfileAzure, `{"messages":[]}`, map[string]string{"Authorization": "Bearer " + testkit.ProfileAzure.Key}, 401, "Access denied"},
		{"mistral: foreign id", testkit.ProfileMistral, `{"messages":[{"role":"assistant","tool_calls":[{"id":"call_0","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, nil, 400, "Tool call id was call_0"},
		{"anthropic: repeated id", testkit.ProfileAnthropic, `{"messages":[{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, nil, 400, "must be unique"},
		{"deepseek: reasoning of an earlier turn sent back", testkit.ProfileDeepSeek, `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"x","reasoning_content":"y"},{"role":"user","content":"b"}]}`, nil, 400, "reasoning_content"},
		{"deepseek: reasoning within the turn's tool calls", testkit.ProfileDeepSeek, `{"messages":[{"role":"user","content":"a"},{"role":"assistant","reasoning_content":"y","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`, nil, 200, "accepted"},
		{"deepseek: image", testkit.ProfileDeepSeek, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}`, nil, 400, "image_url"},
		{"llama.cpp: named tool_choice", testkit.ProfileLlamaCpp, `{"messages":[],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`, nil, 400, "tool_choice"},
		{"a wrong key", testkit.ProfileGroq, `{"messages":[]}`, map[string]string{"Authorization": "Bearer nope"}, 401, "API key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := testkit.NewFakeLLMProfile(t, tt.p)
			f.SetDefault(&testkit.Reply{Text: "accepted"})
			status, lines := post(t, f, tt.p, tt.body, tt.header)
			if status != tt.status || !strings.Contains(strings.Join(lines, "\n"), tt.says) {
				t.Errorf("status %d, body %v; want %d saying %q", status, lines, tt.status, tt.says)
			}
		})
	}
}
