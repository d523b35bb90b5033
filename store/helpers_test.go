package store

import (
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
)

// fakeClock is a settable clock for WithClock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// openAt opens the store at loc (see backend) and closes it when the test
// ends.
func (b backend) openAt(t testing.TB, loc string, clk *fakeClock) *Store {
	t.Helper()
	s, err := b.open(t.Context(), loc, WithClock(clk.Now))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openTest opens a store on a fresh database and returns its location, to
// open it again (a restart) or from a second process.
func (b backend) openTest(t testing.TB) (*Store, *fakeClock, string) {
	t.Helper()
	clk := newClock()
	loc := b.migrated(t)
	return b.openAt(t, loc, clk), clk, loc
}

// fixture is a chat with its current session.
type fixture struct {
	chat Chat
	sess Session
}

func newFixture(t testing.TB, s *Store, key string) fixture {
	t.Helper()
	c, err := s.EnsureChat(t.Context(), "telegram", key, "private", "Alice")
	if err != nil {
		t.Fatalf("EnsureChat: %v", err)
	}
	sess, err := s.CurrentSession(t.Context(), c.ID)
	if err != nil {
		t.Fatalf("CurrentSession: %v", err)
	}
	return fixture{chat: c, sess: sess}
}

// beginTurn starts a "user" turn for user "u1" with one user message.
func (f fixture) beginTurn(t testing.TB, s *Store, text string) int64 {
	t.Helper()
	id, _, err := s.BeginTurn(t.Context(), TurnStart{ChatID: f.chat.ID, SessionID: f.sess.ID, UserID: "u1",
		Channel: "telegram", Kind: "user"}, []llm.Message{{Role: llm.RoleUser, Content: text}})
	if err != nil {
		t.Fatalf("BeginTurn: %v", err)
	}
	return id
}

// toolStep is a typical step: an assistant message calling two tools and
// their two results.
func toolStep(n int) []StepMessage {
	return []StepMessage{
		{Message: llm.Message{Role: llm.RoleAssistant, Content: "checking", ToolCalls: []llm.ToolCall{
			{ID: "call_a", Name: "get_weather", Arguments: `{"city":"Paris"}`},
			{ID: "call_b", Name: "get_time", Arguments: `{"tz":"UTC"}`},
		}}},
		{Message: llm.Message{Role: llm.RoleTool, ToolCallID: "call_a", Name: "get_weather", Content: "sunny"}},
		{Message: llm.Message{Role: llm.RoleTool, ToolCallID: "call_b", Name: "get_time", Content: time.Duration(n).String()}},
	}
}
