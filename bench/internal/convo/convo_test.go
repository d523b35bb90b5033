package convo

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// The fake model's script decides what the benchmarks measure: these pin it.

func TestMessagesAreAbout240Bytes(t *testing.T) {
	for _, n := range []int{1, FactTurn, 999} {
		for _, s := range []string{UserText(n), AnswerText(n)} {
			if len(s) < 200 || len(s) > 300 {
				t.Errorf("%d bytes: %q", len(s), s)
			}
		}
		if got, ok := TurnOf(UserText(n), "turn"); !ok || got != n {
			t.Errorf("TurnOf(UserText(%d)) = %d, %v", n, got, ok)
		}
		if got, ok := TurnOf(AnswerText(n), "answer"); !ok || got != n {
			t.Errorf("TurnOf(AnswerText(%d)) = %d, %v", n, got, ok)
		}
	}
	if !strings.Contains(UserText(FactTurn), Fact) {
		t.Errorf("turn %d does not state the fact", FactTurn)
	}
}

// A summary keeps the facts of the summary so far and of the transcript,
// once each, and has 300 words.
func TestSummaryKeepsFacts(t *testing.T) {
	first := Answer(Classify(testkit.Recorded{Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: summarySystem + " Write…"},
		{Role: llm.RoleUser, Content: "[user] " + UserText(FactTurn) + "\n[assistant] " + AnswerText(FactTurn)},
	}})).Text
	second := Answer(Classify(testkit.Recorded{Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: summarySystem + " Write…"},
		{Role: llm.RoleUser, Content: "Summary so far:\n" + first + "\n\nThen:\n[user] " + UserText(10)},
	}})).Text
	for _, s := range []string{first, second} {
		if strings.Count(s, Fact) != 1 {
			t.Errorf("the fact appears %d times in %q", strings.Count(s, Fact), s)
		}
		if n := len(strings.Fields(s)); n != 300 {
			t.Errorf("%d words", n)
		}
	}
}

// A forced call gets the smallest arguments its schema accepts; a turn its
// answer.
func TestAnswers(t *testing.T) {
	forced := testkit.Recorded{ForcedTool: "save_memories", Tools: []llm.ToolSpec{{Name: "save_memories",
		Parameters: json.RawMessage(`{"type":"object","properties":{"facts":{"type":"array"},"note":{"type":"string"}},"required":["facts"]}`)}}}
	r := Answer(Classify(forced))
	if len(r.ToolCalls) != 1 || r.ToolCalls[0].Name != "save_memories" || r.ToolCalls[0].Arguments != `{"facts":[]}` {
		t.Errorf("forced call answered %+v", r)
	}
	turn := testkit.Recorded{Tools: []llm.ToolSpec{{Name: "send_message"}}, Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: "You are…"}, {Role: llm.RoleUser, Content: UserText(7)}}}
	req := Classify(turn)
	if req.Kind != Turn || req.Turn != 7 || Answer(req).Text != AnswerText(7) {
		t.Errorf("turn 7: %+v answered %q", req, Answer(req).Text)
	}
}
