package agent_test

import (
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

const secretThought = "SECRET-CHAIN-OF-THOUGHT"

// noSecretAnywhere checks that the reasoning reached neither the chat, nor
// the store, nor any event of the turn.
func (h *harness) noSecretAnywhere(t *testing.T) {
	t.Helper()
	for _, s := range h.chat.Sent() {
		if strings.Contains(s, secretThought) || strings.Contains(s, "think>") {
			t.Errorf("sent to the chat: %q", s)
		}
	}
	msgs, err := h.store.Messages(t.Context(), h.session)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if strings.Contains(m.Content, secretThought) || m.Reasoning != "" {
			t.Errorf("stored: %+v", m.Message)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var leaked []string // text deltas not taken back yet
	for _, e := range h.events {
		switch {
		case e.Kind == agent.EventRetry:
			leaked = nil
		case e.Kind == agent.EventTextDelta && strings.Contains(e.Text, secretThought):
			leaked = append(leaked, e.Text)
		case strings.Contains(e.Text, secretThought):
			t.Errorf("event %s carries the reasoning: %q", e.Kind, e.Text)
		}
	}
	if leaked != nil {
		t.Errorf("text deltas carried the reasoning and were not taken back: %q", leaked)
	}
}

// A reasoning model's reasoning, in whichever form it comes, never reaches
// the chat, the stored reply or an event; the turn tells that the model
// thinks.
func TestReasoningNeverReachesTheChat(t *testing.T) {
	tests := []struct {
		name  string
		reply testkit.Reply
	}{
		{"think block", testkit.Reply{TextChunks: []string{"<think>The user says hi. ", secretThought, "</think>\n\n", "Hello!"}}},
		{"unopened think block", testkit.Reply{TextChunks: []string{"The user says hi. ", secretThought, "\n</think>\n\n", "Hello!"}}},
		{"reasoning_content", testkit.Reply{Reasoning: "The user says hi. " + secretThought, Text: "Hello!"}},
		{"reasoning", testkit.Reply{Reasoning: "The user says hi. " + secretThought, ReasoningField: "reasoning", Text: "Hello!"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.fake.Push(tt.reply)
			res := h.run("hi")
			if res.StopReason != agent.StopEndTurn || res.Reply != "Hello!" {
				t.Fatalf("result = %+v", res)
			}
			equal(t, "sent", h.chat.Sent(), []string{"Hello!"})
			equal(t, "transcript", h.transcript(), []string{"user: hi", "assistant: Hello!"})
			if len(h.eventsOf(agent.EventThinking)) != 1 {
				t.Errorf("events %v, want one thinking", h.kinds())
			}
			h.noSecretAnywhere(t)
		})
	}
}

// A model that reasons and then only reasons (an unclosed <think>) gave
// no answer: retried like an empty reply, never sent.
func TestOnlyReasoningIsAnEmptyReply(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(testkit.Reply{TextChunks: []string{"<think>", secretThought}}, testkit.Reply{Text: "Hello!"})
	res := h.run("hi")
	if res.StopReason != agent.StopEndTurn || res.ModelCalls != 2 {
		t.Fatalf("result = %+v", res)
	}
	equal(t, "sent", h.chat.Sent(), []string{"Hello!"})
	h.noSecretAnywhere(t)
}

// reasoning_content goes back to the server on the tool-calling message
// within the turn's tool loop, and not in the next turn.
func TestReasoningHandedBackWithinTheToolLoop(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		testkit.Reply{Reasoning: "I need the time.", ToolCalls: []llm.ToolCall{testkit.Call("c1", "current_time", `{}`)}},
		testkit.Reply{Reasoning: "Now I know.", Text: "It is 15:04."},
		testkit.Reply{Text: "You're welcome."},
	)
	h.run("what time is it?")
	h.run("thanks")
	reqs := h.fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	withCalls := func(msgs []llm.Message) llm.Message {
		for _, m := range msgs {
			if len(m.ToolCalls) > 0 {
				return m
			}
		}
		t.Fatalf("no tool-calling message in %+v", msgs)
		return llm.Message{}
	}
	if got := withCalls(reqs[1].Messages).Reasoning; got != "I need the time." {
		t.Errorf("within the tool loop: reasoning %q, want it handed back", got)
	}
	if got := withCalls(reqs[2].Messages).Reasoning; got != "" {
		t.Errorf("next turn: reasoning %q handed back", got)
	}
	for _, m := range reqs[2].Messages {
		if m.Role == llm.RoleAssistant && m.Reasoning != "" {
			t.Errorf("next turn carries reasoning: %+v", m)
		}
	}
}

// A tool call written as text runs the tool, and the call text is never
// sent to the chat.
func TestToolCallWrittenAsTextRunsTheTool(t *testing.T) {
	tests := []struct {
		name string
		text string
	}{
		{"bare json", `{"name": "current_time", "arguments": {}}`},
		{"tool_call tags", "<tool_call>\n{\"name\": \"current_time\", \"arguments\": {}}\n</tool_call>"},
		{"fenced json", "```json\n{\"name\": \"current_time\", \"parameters\": {}}\n```"},
		{"mistral", `[TOOL_CALLS][{"name": "current_time", "arguments": {}}]`},
		{"llama", `<|python_tag|>{"name": "current_time", "parameters": {}}`},
		{"after reasoning", "<think>" + secretThought + "</think>\n" + `{"name": "current_time", "arguments": {}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.fake.Push(testkit.Reply{Text: tt.text}, testkit.Reply{Text: "It is 15:04."})
			res := h.run("what time is it?")
			if res.StopReason != agent.StopEndTurn || res.ModelCalls != 2 {
				t.Fatalf("result = %+v", res)
			}
			equal(t, "sent", h.chat.Sent(), []string{"It is 15:04."})
			// The recovered call's id is a fresh one (llm's idAssigner).
			transcript := h.transcript()
			for i, l := range transcript {
				if rest, ok := strings.CutPrefix(l, "tool [call_"); ok {
					if _, after, found := strings.Cut(rest, "]"); found {
						transcript[i] = "tool [ID]" + after
					}
				}
			}
			equal(t, "transcript", transcript, []string{
				"user: what time is it?",
				"assistant call current_time{}",
				"tool [ID]: Wednesday, 2 December 2026 15:04:00 (UTC, UTC+00:00)",
				"assistant: It is 15:04.",
			})
			for _, e := range h.eventsOf(agent.EventTextDelta) {
				if strings.Contains(e.Text, "current_time") {
					t.Errorf("the call text was streamed: %q", e.Text)
				}
			}
			h.noSecretAnywhere(t)
		})
	}
}

// Call text that cannot be a call (broken JSON, a tool not offered) is
// never sent nor stored: the turn retries once with a hint, then
// apologises.
func TestMalformedCallTextRetriedThenApologised(t *testing.T) {
	broken := `<tool_call>{"name": "current_time", "arguments": {</tool_call>`
	notOffered := `{"name": "run_shell", "arguments": {"cmd": "rm -rf /"}}`
	t.Run("retry succeeds", func(t *testing.T) {
		h := newHarness(t)
		h.fake.Push(testkit.Reply{Text: notOffered}, testkit.Reply{Text: "I can't run commands."})
		res := h.run("clean up")
		if res.StopReason != agent.StopEndTurn || res.ModelCalls != 2 {
			t.Fatalf("result = %+v", res)
		}
		equal(t, "sent", h.chat.Sent(), []string{"I can't run commands."})
		equal(t, "transcript", h.transcript(), []string{"user: clean up", "assistant: I can't run commands."})
		retry := h.fake.Requests()[1].Messages
		hint := retry[len(retry)-1]
		if hint.Role != llm.RoleSystem || !strings.Contains(hint.Content, `"run_shell", which is not an offered tool`) {
			t.Errorf("the retry ends with %+v, want the hint naming the tool", hint)
		}
		if n := len(h.fake.Requests()[0].Messages); len(retry) != n+1 {
			t.Errorf("the retry has %d messages, want the first request's %d and the hint", len(retry), n)
		}
	})
	t.Run("twice malformed apologises", func(t *testing.T) {
		h := newHarness(t)
		h.fake.Push(testkit.Reply{Text: broken}, testkit.Reply{Text: notOffered})
		res := h.run("what time is it?")
		if res.StopReason != agent.StopInvalidResponse || res.ModelCalls != 2 {
			t.Fatalf("result = %+v", res)
		}
		sent := h.chat.Sent()
		if len(sent) != 1 || !strings.Contains(sent[0], "Sorry") {
			t.Fatalf("sent = %q; want one apology", sent)
		}
		equal(t, "transcript", h.transcript(), []string{"user: what time is it?"})
		if res.Err == nil || !strings.Contains(res.Err.Error(), "run_shell") {
			t.Errorf("err = %v", res.Err)
		}
	})
}
