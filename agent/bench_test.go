package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
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

// toolChatModel holds a chat whose every turn fetches a page (one tool
// call) and then answers in ~240 bytes; summary calls get 300 words. It
// counts the characters of every request's messages.
type toolChatModel struct {
	calls, chars int
}

func (m *toolChatModel) Complete(_ context.Context, req llm.Request, _ func(llm.Delta)) (llm.Response, error) {
	m.calls++
	for _, msg := range req.Messages {
		m.chars += len(msg.Content)
		for _, c := range msg.ToolCalls {
			m.chars += len(c.Name) + len(c.Arguments)
		}
	}
	text := func(s string) (llm.Response, error) {
		return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: s}, FinishReason: "stop"}, nil
	}
	if strings.HasPrefix(req.Messages[0].Content, "You compress chat transcripts") {
		return text(strings.TrimSpace(strings.Repeat("summary ", 300)))
	}
	if req.Messages[len(req.Messages)-1].Role == llm.RoleUser {
		return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
			{ID: fmt.Sprint("f", m.calls), Name: "fetch", Arguments: fmt.Sprintf(`{"page":%d}`, m.calls)}}}, FinishReason: "tool_calls"}, nil
	}
	return text("answer " + strings.Repeat("a", 233))
}

// BenchmarkToolChatBytes: a 100-turn chat whose every turn reads a
// 4,000-character tool result, with the default history budget (5,000
// tokens); chars/turn is what a turn's requests carry in messages (the
// summary calls included; the tools' specs are not counted).
func BenchmarkToolChatBytes(b *testing.B) {
	const turns = 100
	st, err := store.Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	fetch := &agent.Tool{Name: "fetch", Fn: func(context.Context, json.RawMessage) (string, error) {
		return strings.Repeat("page text ", 400), nil
	}}
	model := &toolChatModel{}
	ag, err := agent.New(agent.Config{Model: model, Store: st, HistoryBudget: 5000,
		Sources: []agent.Source{agent.Builtin(nil, nil), agent.StaticSource{SourceName: "bench", List: []*agent.Tool{fetch}}}})
	if err != nil {
		b.Fatal(err)
	}
	chat := &testkit.RecordingChat{}
	for i := range b.N {
		c, _ := st.EnsureChat(b.Context(), "bench", fmt.Sprint("tools", i), "dm", "")
		sess, _ := st.CurrentSession(b.Context(), c.ID)
		for t := range turns {
			res := ag.Run(b.Context(), agent.Turn{ChatID: c.ID, SessionID: sess.ID, Channel: "bench", ChatType: "dm", UserID: "u",
				Input: llm.Message{Role: llm.RoleUser, Content: fmt.Sprintf("(turn %d) %s", t, strings.Repeat("q", 230))}, Chat: chat})
			if res.StopReason != agent.StopEndTurn {
				b.Fatalf("turn %d: stop %s: %v", t, res.StopReason, res.Err)
			}
		}
	}
	b.ReportMetric(float64(model.chars)/float64(b.N*turns), "chars/turn")
	b.ReportMetric(float64(model.calls)/float64(b.N*turns), "calls/turn")
}
