package chatapi

// The agent loop against every provider profile of the fake model server
// (testkit.Profiles): tools (two calls in one step), a streamed answer,
// an approval and its resume, learning's forced call and /plan's forced
// call retried after a text answer, all through the real stack. Each
// profile replays one server's documented quirks; the gateway adapts
// (llm/provider.go).

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/learning"
	"github.com/switchboard-gateway/switchboard/llm"
)

// profileTemperature is configured for every profile: reasoning models
// must not get it.
const profileTemperature = 0.3

func TestAgentLoopAgainstEveryProfile(t *testing.T) {
	for _, p := range testkit.Profiles() {
		t.Run(p.String(), func(t *testing.T) {
			var ran, noted atomic.Int32
			note := &agent.Tool{Name: "note", Description: "Take a note.", ConcurrencySafe: true,
				Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
				Fn: func(_ context.Context, args json.RawMessage) (string, error) {
					var a struct{ Text string }
					if err := json.Unmarshal(args, &a); err != nil || a.Text == "" {
						return "", err
					}
					noted.Add(1)
					return "noted", nil
				}}
			fake := testkit.NewFakeLLMProfile(t, p)
			temp := profileTemperature
			s := newStack(t, testToken, stackExtras{tools: []*agent.Tool{deleteTool(&ran), note}, approvals: true,
				fake: fake, maxOutput: 1000, model: func(c *llm.Config) {
					*c = p.ClientConfig(fake)
					c.Temperature = &temp
				}})

			// Tools: two calls in one step, then a streamed answer.
			fake.Push(
				testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c1", "note", `{"text":"first"}`), testkit.Call("c2", "note", `{"text":"second"}`)}},
				testkit.Reply{Text: "Both are noted now."})
			events, done := s.streamChat("ada", "note two things")
			if got := streamedText(events); !done || got != "Both are noted now." || noted.Load() != 2 ||
				(p.Thought != "" && strings.Contains(got, p.Thought)) {
				t.Fatalf("tools, streamed: done %v, content %q, note ran %d times; want the answer and 2 runs\nrequests: %s",
					done, got, noted.Load(), refusals(fake))
			}

			// An approval after a step of another call, and its resume.
			fake.Push(
				testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c3", "note", `{"text":"before"}`)}},
				testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c4", "delete_file", `{"path":"old.txt"}`)}})
			content, resp := s.chatWithin(20*time.Second, "ada", "delete old.txt")
			if resp[ApprovalField] == nil || !strings.Contains(content, "delete_file") {
				t.Fatalf("approval: got %q, want the question\nrequests: %s", content, refusals(fake))
			}
			fake.Push(testkit.Reply{Text: "Deleted old.txt."})
			if got, _ := s.chatWithin(20*time.Second, "ada", "yes"); got != "Deleted old.txt." || ran.Load() != 1 {
				t.Fatalf("approval resumed: got %q, tool ran %d times; want the reply and 1 run\nrequests: %s", got, ran.Load(), refusals(fake))
			}
			checkIDsUnique(t, fake)

			// Learning's forced call.
			fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c5", "record_facts", `{"facts":["likes tea"]}`)}})
			var facts struct{ Facts []string }
			spec := llm.ToolSpec{Name: "record_facts", Description: "Record facts.",
				Parameters: json.RawMessage(`{"type":"object","properties":{"facts":{"type":"array","items":{"type":"string"}}}}`)}
			if err := learning.Call(t.Context(), s.model, "Extract facts.", "I like tea.", spec, &facts); err != nil ||
				len(facts.Facts) != 1 {
				t.Fatalf("learning's forced call: %v, facts %v\nrequests: %s", err, facts.Facts, refusals(fake))
			}

			// /plan's forced call, retried after a text answer with a
			// call id of the gateway's own in the history.
			fake.Push(testkit.Reply{Text: "Sure, let me plan."},
				testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c6", "submit_plan",
					`{"steps":[{"title":"a","instructions":"do a"},{"title":"b","instructions":"do b"},{"title":"c","instructions":"do c"}]}`)}})
			steps, _, err := s.agent.MakePlan(t.Context(), "tidy the files", "")
			if err != nil || len(steps) != 3 {
				t.Fatalf("plan: %v, %d steps\nrequests: %s", err, len(steps), refusals(fake))
			}

			checkParameters(t, p, fake)
		})
	}
}

// chatWithin is chat with a deadline, so that a request that hangs fails
// the test instead of timing out the package.
func (s *stack) chatWithin(d time.Duration, user, text string) (string, map[string]any) {
	s.t.Helper()
	type result struct {
		text string
		resp map[string]any
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		defer func() { ch <- r }()
		r.text, r.resp = s.chat(user, text)
	}()
	select {
	case r := <-ch:
		return r.text, r.resp
	case <-time.After(d):
		s.t.Fatalf("chat %q: no answer within %s (the request hangs)", text, d)
		return "", nil
	}
}

func streamedText(events []map[string]any) string {
	var b strings.Builder
	for _, ev := range events {
		for _, ch := range ev["choices"].([]any) {
			if c, ok := ch.(map[string]any)["delta"].(map[string]any)["content"].(string); ok {
				b.WriteString(c)
			}
		}
	}
	return b.String()
}

// refusals describes the requests the fake received, for a failure's
// message.
func refusals(fake *testkit.FakeLLM) string {
	var b strings.Builder
	for i, r := range fake.Requests() {
		b.WriteString("\n  ")
		b.WriteString(r.Path)
		if i < 40 {
			b.WriteString(" ")
			b.WriteString(string(r.Raw[:min(len(r.Raw), 300)]))
		}
	}
	return b.String()
}

// checkIDsUnique checks that no request repeated a tool-call id across its
// assistant messages, whatever ids the server made.
func checkIDsUnique(t *testing.T, fake *testkit.FakeLLM) {
	t.Helper()
	for i, r := range fake.Requests() {
		seen := map[string]bool{}
		for _, m := range r.Messages {
			for _, c := range m.ToolCalls {
				if c.ID == "" || seen[c.ID] {
					t.Errorf("request %d: tool-call id %q is empty or repeated", i, c.ID)
				}
				seen[c.ID] = true
			}
		}
	}
}

// checkParameters checks the output cap and the temperature as each model
// takes them: max_completion_tokens and no temperature for reasoning
// models, max_tokens and the temperature for the others.
func checkParameters(t *testing.T, p testkit.Profile, fake *testkit.FakeLLM) {
	t.Helper()
	capped := 0
	for i, r := range fake.Requests() {
		var body struct {
			MaxTokens           *int     `json:"max_tokens"`
			MaxCompletionTokens *int     `json:"max_completion_tokens"`
			Temperature         *float64 `json:"temperature"`
		}
		if err := json.Unmarshal(r.Raw, &body); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if body.MaxTokens != nil || body.MaxCompletionTokens != nil {
			capped++
		}
		if p.Reasoning {
			if i == 0 && !llm.IsReasoningModel(p.Model) {
				continue // a deployment named anything: the server's refusal tells
			}
			if body.MaxTokens != nil || body.Temperature != nil {
				t.Errorf("request %d to reasoning model %s: max_tokens %v, temperature %v; want neither", i, p.Model, body.MaxTokens, body.Temperature)
			}
			continue
		}
		if body.MaxCompletionTokens != nil || body.Temperature == nil || *body.Temperature != profileTemperature {
			t.Errorf("request %d to %s: max_completion_tokens %v, temperature %v; want max_tokens and %g", i, p.Model, body.MaxCompletionTokens, body.Temperature, profileTemperature)
		}
	}
	if capped == 0 {
		t.Errorf("no request carried the output cap")
	}
}

// A turn's tokens (prompt, cached, completion, reasoning), as the store
// keeps them per step and /status and the dashboard read them, are what
// each profile's server wrote in its own usage shape; a server that sends
// no usage in streams (LM Studio) leaves the turn without counts rather
// than with made-up ones.
func TestTurnTokensMatchEveryProfile(t *testing.T) {
	sent := llm.Usage{PromptTokens: 1200, CompletionTokens: 300, TotalTokens: 1500, CachedTokens: 1024, ReasoningTokens: 120}
	for _, p := range testkit.Profiles() {
		t.Run(p.String(), func(t *testing.T) {
			fake := testkit.NewFakeLLMProfile(t, p)
			s := newStack(t, testToken, stackExtras{fake: fake, model: func(c *llm.Config) { *c = p.ClientConfig(fake) }})
			u := sent
			fake.Push(testkit.Reply{Text: "Counted.", Usage: &u})
			if got, _ := s.chat("ada", "count my tokens"); got != "Counted." {
				t.Fatalf("answer %q\nrequests: %s", got, refusals(fake))
			}
			var turnID int64
			if err := s.store.DB().QueryRowContext(t.Context(), `SELECT MAX(id) FROM turns`).Scan(&turnID); err != nil {
				t.Fatal(err)
			}
			steps, err := s.store.StepUsages(t.Context(), turnID)
			if err != nil {
				t.Fatal(err)
			}
			want := sent
			if p.NoStreamUsage {
				want = llm.Usage{}
			}
			var got llm.Usage
			for _, st := range steps {
				got = got.Add(st.Usage)
			}
			if got != want {
				t.Errorf("the turn's tokens %+v, want %+v (the %s server's usage fields)", got, want, p)
			}
		})
	}
}
