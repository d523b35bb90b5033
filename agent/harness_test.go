package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// harness wires the real loop to the scripted model server (through the
// real go-openai client) and a real SQLite file.
type harness struct {
	t       *testing.T
	fake    *testkit.FakeLLM
	store   *store.Store
	agent   *agent.Agent
	chat    *testkit.RecordingChat
	chatID  int64
	session int64
	now     time.Time
	sleeps  []time.Duration
	cfg     agent.Config // what agent was built with (restart builds another)

	mu     sync.Mutex
	events []agent.Event
}

type option func(*agent.Config)

func withTools(tools ...*agent.Tool) option {
	return func(c *agent.Config) {
		c.Sources = append(c.Sources, agent.StaticSource{SourceName: "test", List: tools})
	}
}

func newHarness(t *testing.T, opts ...option) *harness {
	t.Helper()
	h := &harness{t: t, fake: testkit.NewFakeLLM(t), chat: &testkit.RecordingChat{},
		now: time.Date(2026, 12, 2, 15, 4, 0, 0, time.UTC)}
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "sb.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h.store = st
	model, err := llm.New(llm.Config{BaseURL: h.fake.URL, APIKey: "sk-test", Model: "fake-model", MaxRetries: 2,
		Sleep: func(_ context.Context, d time.Duration) error {
			h.mu.Lock()
			h.sleeps = append(h.sleeps, d)
			h.mu.Unlock()
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := agent.Config{
		Model: model, Store: st,
		Sources: []agent.Source{agent.Builtin(func() time.Time { return h.now }, nil), agent.ChannelContext()},
		Now:     func() time.Time { return h.now },
	}
	for _, o := range opts {
		o(&cfg)
	}
	h.cfg = cfg
	h.agent, err = agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	chat, err := st.EnsureChat(t.Context(), "test", "chat-1", "dm", "")
	if err != nil {
		t.Fatal(err)
	}
	sess, err := st.CurrentSession(t.Context(), chat.ID)
	if err != nil {
		t.Fatal(err)
	}
	h.chatID, h.session = chat.ID, sess.ID
	return h
}

func (h *harness) turn(text string) agent.Turn {
	return agent.Turn{ChatID: h.chatID, SessionID: h.session, Channel: "test", ChatType: "dm", UserID: "u1",
		DisplayName: "Ada", Input: llm.Message{Role: llm.RoleUser, Content: text}, Chat: h.chat,
		OnEvent: func(ev agent.Event) {
			h.mu.Lock()
			h.events = append(h.events, ev)
			h.mu.Unlock()
		}}
}

func (h *harness) run(text string, mods ...func(*agent.Turn)) agent.Result {
	h.t.Helper()
	tr := h.turn(text)
	for _, m := range mods {
		m(&tr)
	}
	return h.agent.Run(h.t.Context(), tr)
}

// kinds returns the event kinds of the last turn, without text deltas.
func (h *harness) kinds() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.events {
		if e.Kind == agent.EventTurnStart {
			out = out[:0]
		}
		if e.Kind != agent.EventTextDelta {
			out = append(out, string(e.Kind))
		}
	}
	return out
}

func (h *harness) eventsOf(kind agent.EventKind) []agent.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []agent.Event
	for _, e := range h.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// transcript renders the stored messages of the session compactly.
func (h *harness) transcript() []string {
	h.t.Helper()
	msgs, err := h.store.Messages(h.t.Context(), h.session)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, render(m.Message, m.Hidden))
	}
	return out
}

func render(m llm.Message, hidden bool) string {
	var b strings.Builder
	b.WriteString(string(m.Role))
	if hidden {
		b.WriteString("(hidden)")
	}
	for _, c := range m.ToolCalls {
		b.WriteString(" call " + c.Name + c.Arguments)
	}
	if m.ToolCallID != "" {
		b.WriteString(" [" + m.ToolCallID + "]")
	}
	if m.Content != "" {
		c := m.Content
		if len(c) > 60 {
			c = c[:60] + "…"
		}
		b.WriteString(": " + c)
	}
	return b.String()
}

// assertValidTranscript checks that every stored tool call has its result.
func assertValidTranscript(t *testing.T, msgs []store.Message) {
	t.Helper()
	plain := make([]llm.Message, len(msgs))
	for i, m := range msgs {
		plain[i] = m.Message
	}
	repaired := agent.RepairOrphans(plain)
	if len(repaired) != len(plain) {
		t.Fatalf("stored transcript is not valid (repair changed it):\n%v", plain)
	}
}

func (h *harness) turnRow(id int64) store.Turn {
	h.t.Helper()
	tr, err := h.store.Turn(h.t.Context(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return tr
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got  %q\n want %q", what, got, want)
	}
}

// blockingTool returns a tool that signals when it starts and blocks until
// its context ends.
func blockingTool(name string, started chan<- struct{}) *agent.Tool {
	return &agent.Tool{Name: name, Description: "blocks", Fn: func(ctx context.Context, _ json.RawMessage) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}}
}

var errBoom = errors.New("boom")
