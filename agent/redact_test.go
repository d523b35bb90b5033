package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/internal/redact"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// Issue 29, finding 7: a secret in a tool's result or error is replaced
// before the result is stored, sent to the model or shown to observers.
func TestToolResultsAreRedacted(t *testing.T) {
	const secret = "sk-proj-SECRET-0123456789"
	leaks := &agent.Tool{Name: "env", Fn: func(context.Context, json.RawMessage) (string, error) {
		return "OPENAI_API_KEY=" + secret, nil
	}}
	fails := &agent.Tool{Name: "fails", Fn: func(context.Context, json.RawMessage) (string, error) {
		return "", errors.New("401 for key " + secret)
	}}
	r := redact.New([]redact.Secret{{Name: "OPENAI_API_KEY", Value: secret}})
	h := newHarness(t, withTools(leaks, fails), func(c *agent.Config) { c.Redact = r.String })
	h.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "env", "{}"), testkit.Call("2", "fails", "{}")}},
		testkit.Reply{Text: "done"})
	h.run("show me the environment")

	msgs, err := h.store.Messages(t.Context(), h.session)
	if err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, m := range msgs {
		if m.Role == llm.RoleTool {
			results = append(results, m.Content)
		}
		if strings.Contains(m.Content, secret) {
			t.Errorf("stored %s message holds the secret: %q", m.Role, m.Content)
		}
	}
	want := []string{"OPENAI_API_KEY=[redacted:OPENAI_API_KEY]", "error: 401 for key [redacted:OPENAI_API_KEY]"}
	equal(t, "stored results", results, want)
	for _, req := range h.fake.Requests() {
		for _, m := range req.Messages {
			if strings.Contains(m.Content, secret) {
				t.Errorf("the model request carried the secret in a %s message", m.Role)
			}
		}
	}
	for _, ev := range h.eventsOf(agent.EventToolEnd) {
		if strings.Contains(ev.Result, secret) {
			t.Errorf("tool_end event of %s holds the secret", ev.Tool)
		}
	}
}
