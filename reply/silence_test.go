package reply_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/reply"
	"github.com/switchboard-gateway/switchboard/router"
)

// stillWorkingRun runs one message on ch through a router whose replies
// say StillWorking after 30 s of a silent model call, previews as preview.
func stillWorkingRun(t *testing.T, ch channels.Channel, preview bool, script func(ctx context.Context, t agent.Turn) agent.Result) {
	t.Helper()
	st := openWaitStore(t)
	cfg := router.Config{Store: st, Agent: &scriptRunner{script: func(ctx context.Context, tt agent.Turn, _ int) agent.Result { return script(ctx, tt) }},
		Replies:   reply.Options{Preview: map[string]bool{"fake": preview}, StillWorkingAfter: 30 * time.Second},
		NewTicker: func(time.Duration) router.Ticker { return stoppedTicker{} }}
	r, err := router.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.AddChannel(ch, everyone)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	in := msg("c1", "u", "question")
	in.ChatType = channels.Group
	if err := r.Deliver(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	if err := r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A model call that brings nothing for 30 s gets the chat one "Still
// working on it…" line per turn: a message of its own where the channel
// has no previews, a preview line the reply takes over where it has them;
// a model that answers in time, or tools that run long (they have their own
// progress line), get none.
func TestStillWorkingLine(t *testing.T) {
	slowModel := func(ctx context.Context, tt agent.Turn) agent.Result {
		tt.OnEvent(agent.Event{Kind: agent.EventTurnStart})
		elapse(45 * time.Second) // the first call: silent
		tt.OnEvent(agent.Event{Kind: agent.EventUsage})
		runTool(tt, "web_search", "", "t1", time.Second)
		elapse(70 * time.Second) // the second call: silent again, no second line
		stream(tt, agent.EventTextDelta, "", answer, 100*time.Millisecond)
		tt.OnEvent(agent.Event{Kind: agent.EventUsage})
		_, _ = tt.Chat.Send(ctx, answer)
		tt.OnEvent(agent.Event{Kind: agent.EventDone, StopReason: agent.StopEndTurn})
		return endTurn
	}
	t.Run("a message where the channel has no previews", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ch := newFakeChannel()
			stillWorkingRun(t, ch, false, slowModel)
			if got, want := ch.Texts(), []string{reply.StillWorking, answer}; !slices.Equal(got, want) {
				t.Fatalf("sent %q, want %q", got, want)
			}
		})
	})
	t.Run("a preview line the reply takes over", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ch := newLiveChannel(false)
			stillWorkingRun(t, ch, true, slowModel)
			ops := ch.calls(true)
			got := kinds(ops)
			if len(got) < 2 || got[0] != "send out-1 [p] "+reply.StillWorking || ops[0].at != 30*time.Second {
				t.Fatalf("calls %q (first at %s); want the line as a preview message at 30 s", got, ops[0].at)
			}
			if ch.count("send") != 1 || got[len(got)-1] != "edit out-1 [r] "+answer {
				t.Fatalf("calls %q; want the line's message edited into the reply, and no other message", got)
			}
		})
	})
	for _, tc := range []struct {
		name   string
		script func(ctx context.Context, tt agent.Turn) agent.Result
	}{
		{"a model in time", func(ctx context.Context, tt agent.Turn) agent.Result {
			tt.OnEvent(agent.Event{Kind: agent.EventTurnStart})
			elapse(20 * time.Second)
			stream(tt, agent.EventTextDelta, "", answer, 5*time.Second) // slow, but never 30 s silent
			_, _ = tt.Chat.Send(ctx, answer)
			tt.OnEvent(agent.Event{Kind: agent.EventDone, StopReason: agent.StopEndTurn})
			return endTurn
		}},
		{"a long tool", func(ctx context.Context, tt agent.Turn) agent.Result {
			tt.OnEvent(agent.Event{Kind: agent.EventTurnStart})
			tt.OnEvent(agent.Event{Kind: agent.EventUsage})
			runTool(tt, "web_fetch", "", "t1", 2*time.Minute)
			elapse(time.Second)
			_, _ = tt.Chat.Send(ctx, answer)
			tt.OnEvent(agent.Event{Kind: agent.EventDone, StopReason: agent.StopEndTurn})
			return endTurn
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ch := newFakeChannel()
				stillWorkingRun(t, ch, false, tc.script)
				if got, want := ch.Texts(), []string{answer}; !slices.Equal(got, want) {
					t.Fatalf("sent %q, want only the answer %q", got, want)
				}
			})
		})
	}
}
