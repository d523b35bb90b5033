package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/learning"
	"github.com/switchboard-gateway/switchboard/llm"
)

// Learning jobs are not started after a turn that failed because of the
// model: they would only fail on it again, with a WARN each.
func TestLearnerSkipsTurnsTheModelFailed(t *testing.T) {
	tests := []struct {
		reason agent.StopReason
		learns bool
	}{
		{agent.StopEndTurn, true},
		{agent.StopMaxSteps, true},
		{agent.StopStoreError, true}, // the turn's messages are still worth learning from once stored
		{agent.StopLLMError, false},
		{agent.StopInvalidResponse, false},
		{agent.StopContextOverflow, false},
		{agent.StopModelUnavailable, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.reason), func(t *testing.T) {
			r := learning.NewRunner(learning.Config{EveryNTurns: 1})
			r.Start(t.Context())
			t.Cleanup(func() { _ = r.Shutdown(t.Context()) })
			l := &learner{on: true, runner: r}
			l.onEvent(channels.Inbound{Channel: "telegram", UserID: "7", ChatID: "7"},
				agent.Event{Kind: agent.EventDone, TurnID: 1, ChatID: 1, StopReason: tt.reason})
			if got := r.Stats().Triggers == 1; got != tt.learns {
				t.Errorf("learning triggered = %v, want %v", got, tt.learns)
			}
		})
	}
}

// The learning jobs' model requests are background work: under
// llm.max_concurrent_requests a user's turn that asks later goes first.
func TestLearningRequestsWaitBehindTurns(t *testing.T) {
	fake := testkit.NewFakeLLM(t)
	block := make(chan struct{})
	fake.Push(testkit.Reply{Text: "busy", Block: block}, testkit.Reply{Text: "second"}, testkit.Reply{Text: "third"})
	model, err := llm.New(llm.Config{BaseURL: fake.URL, Model: "m", MaxConcurrentRequests: 1})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(ctx context.Context, m learning.Model) <-chan string {
		out := make(chan string, 1)
		go func() {
			resp, err := m.Complete(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}, nil)
			if err != nil {
				t.Error(err)
			}
			out <- resp.Message.Content
		}()
		return out
	}
	queued := make(chan int, 2)
	inLine := llm.WithWaitNotice(t.Context(), 0, func(ahead int) { queued <- ahead })
	first := ask(t.Context(), model)
	if err := fake.WaitCalls(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	learned := ask(inLine, backgroundModel{model})
	<-queued
	turn := ask(inLine, model)
	if ahead := <-queued; ahead != 0 {
		t.Fatalf("the turn's request has %d ahead, want 0 (before the learning job's)", ahead)
	}
	close(block)
	if got := []string{<-first, <-turn, <-learned}; got[1] != "second" || got[2] != "third" {
		t.Errorf("answers %q, want the turn's second and the learning job's third", got)
	}
}

// Once learning has turned itself off (the model answers forced calls with
// text), /status tells the operator.
func TestLearnerStatusSaysLearningIsOff(t *testing.T) {
	job := learning.Job{Name: "learn", Run: func(context.Context, learning.Trigger) error {
		return fmt.Errorf("learning: pass: %w", learning.ErrNoCall)
	}}
	r := learning.NewRunner(learning.Config{Jobs: []learning.Job{job}, EveryNTurns: 1})
	r.Start(t.Context())
	t.Cleanup(func() { _ = r.Shutdown(t.Context()) })
	l := &learner{on: true, runner: r}
	notes := l.statusNotes(func() []string { return []string{"Skill problem: x"} })
	if got := notes(); len(got) != 1 {
		t.Fatalf("notes while learning works = %q, want the others only", got)
	}
	for range 3 { // three text answers in a row turn learning off
		r.Notify(learning.Trigger{Channel: "telegram", UserID: "7", ChatID: 1})
		if err := r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	got := notes()
	if len(got) != 2 || !strings.HasPrefix(got[1], "Learning is off: the model cannot make forced function calls") {
		t.Errorf("notes = %q, want a line saying learning is off", got)
	}
}
