package agent_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// instantModel answers at once: steps tool calls, then a text reply. It
// isolates the loop's own overhead (tool set, prompt, request rendering,
// execution, step commit) from the model's time.
type instantModel struct {
	steps int
	n     int
}

func (m *instantModel) Complete(_ context.Context, req llm.Request, _ func(llm.Delta)) (llm.Response, error) {
	m.n++
	if m.n%(m.steps+1) != 0 {
		return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
			{ID: fmt.Sprint("c", m.n), Name: "current_time", Arguments: fmt.Sprintf(`{"timezone":"","n":%d}`, m.n)}}},
			FinishReason: "tool_calls", Usage: llm.Usage{TotalTokens: 10}}, nil
	}
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: "done"}, FinishReason: "stop"}, nil
}

func benchLoop(b *testing.B, steps int) {
	st, err := store.Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ag, err := agent.New(agent.Config{Model: &instantModel{steps: steps}, Store: st,
		Sources: []agent.Source{agent.Builtin(nil, nil), agent.ChannelContext()}})
	if err != nil {
		b.Fatal(err)
	}
	chat := &testkit.RecordingChat{}
	b.ResetTimer()
	for i := range b.N {
		if i%20 == 0 { // a fresh session now and then keeps the history realistic
			b.StopTimer()
			c, _ := st.EnsureChat(b.Context(), "bench", fmt.Sprint("chat", i), "dm", "")
			sess, _ := st.CurrentSession(b.Context(), c.ID)
			b.StartTimer()
			chatID, sessionID = c.ID, sess.ID
		}
		res := ag.Run(b.Context(), agent.Turn{ChatID: chatID, SessionID: sessionID, Channel: "bench", ChatType: "dm",
			UserID: "u", Input: llm.Message{Role: llm.RoleUser, Content: "hello"}, Chat: chat})
		if res.StopReason != agent.StopEndTurn {
			b.Fatalf("stop %s: %v", res.StopReason, res.Err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(steps+1))/1e6, "ms/step")
}

var chatID, sessionID int64

// BenchmarkTurn: a one-step turn (text reply sent by the fallback).
func BenchmarkTurn(b *testing.B) { benchLoop(b, 0) }

// BenchmarkStep: a ten-step turn (nine tool steps, then text); see ms/step.
func BenchmarkStep(b *testing.B) { benchLoop(b, 9) }
