package store

import (
	"testing"

	"github.com/switchboard-gateway/switchboard/llm"
)

// BenchmarkCommitStep stores one step: an assistant message with two tool
// calls and the two tool results, plus the turn's usage.
func BenchmarkCommitStep(b *testing.B) {
	forEachBackendB(b, func(b *testing.B, db backend) {
		s, _, _ := db.openTest(b)
		f := newFixture(b, s, "1")
		turnID := f.beginTurn(b, s, "hi")
		msgs := toolStep(1)
		usage := llm.Usage{PromptTokens: 1200, CompletionTokens: 80, TotalTokens: 1280}
		step := 0
		for b.Loop() {
			step++
			if _, err := s.CommitStep(b.Context(), turnID, step, msgs, usage); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkBeginTurn starts a turn with one user message.
func BenchmarkBeginTurn(b *testing.B) {
	forEachBackendB(b, func(b *testing.B, db backend) {
		s, _, _ := db.openTest(b)
		f := newFixture(b, s, "1")
		start := TurnStart{ChatID: f.chat.ID, SessionID: f.sess.ID, UserID: "u1", Channel: "telegram", Kind: "user"}
		first := []llm.Message{{Role: llm.RoleUser, Content: "what's the weather in Paris?"}}
		for b.Loop() {
			if _, _, err := s.BeginTurn(b.Context(), start, first); err != nil {
				b.Fatal(err)
			}
		}
	})
}
