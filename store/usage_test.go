package store

import (
	"slices"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
)

// Every kind of token is kept per step and per turn, summed per session,
// and by day, user and model.
func TestTokenKinds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		ctx := t.Context()
		f := newFixture(t, s, "1")
		step1 := llm.Usage{PromptTokens: 2000, CachedTokens: 1024, CompletionTokens: 50, ReasoningTokens: 20, TotalTokens: 2050}
		step2 := llm.Usage{PromptTokens: 2100, CachedTokens: 2048, CompletionTokens: 30, TotalTokens: 2130}
		wrap := llm.Usage{PromptTokens: 100, CompletionTokens: 10, TotalTokens: 110} // committed again as step 2

		id := f.beginTurn(t, s, "hi")
		for i, c := range []struct {
			step int
			u    llm.Usage
		}{{1, step1}, {2, step2}, {2, wrap}, {3, llm.Usage{}}} {
			if _, err := s.CommitStep(ctx, id, c.step, nil, c.u); err != nil {
				t.Fatalf("commit %d: %v", i, err)
			}
		}
		if err := s.FinishTurn(ctx, id, TurnEnd{Status: TurnCompleted, Model: "gpt-x"}); err != nil {
			t.Fatal(err)
		}
		steps, err := s.StepUsages(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := []StepUsage{{1, step1}, {2, step2.Add(wrap)}}
		if !slices.Equal(steps, want) {
			t.Errorf("steps = %+v, want %+v", steps, want)
		}
		total := step1.Add(step2).Add(wrap)
		turn, err := s.Turn(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if turn.Usage != total {
			t.Errorf("turn usage = %+v, want %+v", turn.Usage, total)
		}

		clk.Advance(24 * time.Hour) // the next day: another turn, by another user
		id2, _, err := s.BeginTurn(ctx, TurnStart{ChatID: f.chat.ID, SessionID: f.sess.ID, UserID: "u2",
			Channel: "telegram", Kind: "user"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CommitStep(ctx, id2, 1, nil, step2); err != nil {
			t.Fatal(err)
		}
		n, su, err := s.SessionUsage(ctx, f.sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := total.Add(step2); n != 2 || su != want {
			t.Errorf("session: %d turns, %+v; want 2, %+v", n, su, want)
		}
		if got, err := s.UsageSince(ctx, "u1", time.Time{}); err != nil || got != total {
			t.Errorf("UsageSince(u1) = %+v, %v; want %+v", got, err, total)
		}

		days, err := s.UsageByDay(ctx, clk.Now().Add(-48*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		day1 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		wantDays := []DayUsage{
			{Day: day1, Channel: "telegram", UserID: "u1", Model: "gpt-x", Turns: 1, Usage: total},
			{Day: day1.AddDate(0, 0, 1), Channel: "telegram", UserID: "u2", Model: "", Turns: 1, Usage: step2},
		}
		if !slices.Equal(days, wantDays) {
			t.Errorf("by day = %+v\nwant %+v", days, wantDays)
		}
	})
}
