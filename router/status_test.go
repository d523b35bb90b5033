package router

import (
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// /status speaks of the current conversation: "1 step", not "1 steps";
// a scheduled reminder as what it was, not "0 steps, 0 tokens"; after
// /new, not the previous conversation's last turn; and with the model
// server not answering, that, not "Idle.".
func TestStatusLines(t *testing.T) {
	down := ""
	e := newEnvWith(t, everyone, func(c *Config) {
		c.MaxConcurrentTurns, c.ModelName = 4, "m"
		c.ModelWait.Down = func() string { return down }
	})
	chat, _ := e.st.EnsureChat(e.ctx, "fake", "c1", "dm", "")
	sess, _ := e.st.CurrentSession(e.ctx, chat.ID)
	turn := func(kind string, steps int, tokens int) {
		t.Helper()
		id, _, err := e.st.BeginTurn(e.ctx, store.TurnStart{ChatID: chat.ID, SessionID: sess.ID, Kind: kind},
			[]llm.Message{{Role: llm.RoleUser, Content: "hello"}})
		if err != nil {
			t.Fatal(err)
		}
		if steps > 0 {
			if _, err := e.st.CommitStep(e.ctx, id, steps, nil, llm.Usage{TotalTokens: tokens}); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.st.FinishTurn(e.ctx, id, store.TurnEnd{StopReason: "end_turn", Status: store.TurnCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	status := func() string {
		t.Helper()
		n := len(e.ch.Texts())
		e.deliver(t, msg("c1", "u", "/status"))
		e.waitSent(t, 1)
		return e.ch.Texts()[n]
	}

	turn("user", 1, 1)
	if got := status(); !strings.Contains(got, "Last turn: completed (end_turn), 1 step, 1 token") {
		t.Errorf("/status after a one-step turn = %q", got)
	}
	turn("job", 0, 0)
	if got := status(); !strings.Contains(got, "Last turn: a scheduled reminder, sent ") || strings.Contains(got, "0 steps") {
		t.Errorf("/status after a reminder = %q", got)
	}
	e.deliver(t, msg("c1", "u", "/new"))
	e.waitSent(t, 1)
	if err := e.r.Drain(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := status(); strings.Contains(got, "Last turn") {
		t.Errorf("/status after /new = %q; the new conversation has no turn yet", got)
	}
	down = "1 call in a row failed, the last at 09:00:00 UTC: connection refused"
	if got := status(); !strings.HasPrefix(got, "The model server is not answering, so I cannot answer now.\n") ||
		!strings.Contains(got, "Model server: "+down) || strings.Contains(got, "Idle") {
		t.Errorf("/status with the model down = %q", got)
	}
}
