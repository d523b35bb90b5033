package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// A turn that runs past its deadline (agent.turn_timeout) is never
// silent: in a slow model call or in a tool that the deadline cancels, the
// user gets one sentence, and the turn is recorded as failed with the
// reason, not as cancelled like a /stop.
func TestTurnPastItsDeadlineTellsTheUser(t *testing.T) {
	tests := []struct {
		name  string
		setup func(h *harness, started chan struct{})
		tools func(started chan struct{}) []*agent.Tool
	}{
		{
			name: "slow model",
			setup: func(h *harness, started chan struct{}) {
				close(started)
				h.fake.Push(testkit.Reply{Text: "too late", Delay: time.Minute})
			},
		},
		{
			name: "tool cancelled by the deadline",
			setup: func(h *harness, _ chan struct{}) {
				h.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c1", "slow", `{}`)}})
			},
			tools: func(started chan struct{}) []*agent.Tool { return []*agent.Tool{blockingTool("slow", started)} },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			started := make(chan struct{})
			var opts []option
			if tc.tools != nil {
				opts = append(opts, withTools(tc.tools(started)...))
			}
			h := newHarness(t, opts...)
			tc.setup(h, started)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			res := h.agent.Run(ctx, h.turn("take your time"))
			<-started
			if res.StopReason != agent.StopTurnTimeout || res.StopReason.Class() != "failed" {
				t.Fatalf("stop = %s (%s); want %s, failed", res.StopReason, res.StopReason.Class(), agent.StopTurnTimeout)
			}
			sent := h.chat.Sent()
			if len(sent) != 1 || !strings.Contains(sent[0], "took longer than the 2 seconds") {
				t.Fatalf("sent %q; want one sentence naming the 2 seconds", sent)
			}
			if row := h.turnRow(res.TurnID); row.Status != "failed" || row.StopReason != string(agent.StopTurnTimeout) ||
				!strings.Contains(row.Error, "agent.turn_timeout") {
				t.Fatalf("turn row = %s %s %q; want failed %s naming agent.turn_timeout", row.Status, row.StopReason, row.Error, agent.StopTurnTimeout)
			}
			if done := h.eventsOf(agent.EventDone); len(done) != 1 || done[0].StopReason != agent.StopTurnTimeout {
				t.Fatalf("done events = %+v; want one with %s", done, agent.StopTurnTimeout)
			}
		})
	}
}
