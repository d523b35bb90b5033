package profile

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// fakeModel answers the forced call with args and records the prompts.
type fakeModel struct {
	mu      sync.Mutex
	args    []string // one per call
	prompts []string
}

func (f *fakeModel) Complete(_ context.Context, req llm.Request, _ func(llm.Delta)) (llm.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prompts = append(f.prompts, req.Messages[len(req.Messages)-1].Content)
	a := f.args[0]
	f.args = f.args[1:]
	return llm.Response{Message: llm.Message{ToolCalls: []llm.ToolCall{{Name: req.ForceTool, Arguments: a}}}}, nil
}

func openStore(t *testing.T) (*store.Store, store.Chat, store.Session) {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	chat, _ := st.EnsureChat(t.Context(), "tg", "d1", "dm", "")
	sess, _ := st.CurrentSession(t.Context(), chat.ID)
	return st, chat, sess
}

func say(t *testing.T, st *store.Store, chat store.Chat, sess store.Session, user, text, answer string) int64 {
	t.Helper()
	id, _, err := st.BeginTurn(t.Context(), store.TurnStart{ChatID: chat.ID, SessionID: sess.ID, UserID: user, Channel: "tg", Kind: "user"},
		[]llm.Message{{Role: llm.RoleUser, Content: text}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CommitStep(t.Context(), id, 1, []store.StepMessage{{Message: llm.Message{Role: llm.RoleAssistant, Content: answer}}}, llm.Usage{}); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishTurn(t.Context(), id, store.TurnEnd{StopReason: "end_turn", Status: store.TurnCompleted}); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestLearnUpdatesTheProfileNewestWins(t *testing.T) {
	st, chat, sess := openStore(t)
	m := &fakeModel{args: []string{
		`{"profile":[{"dimension":"name","value":"Ada","source":1},{"dimension":"timezone","value":"Europe/Lisbon","source":1},` +
			`{"dimension":"style","value":"chatty","source":2},{"dimension":"timezone","value":"Lisbon time","source":1}]}`,
		`{"profile":[{"dimension":"timezone","value":"Asia/Tokyo","source":1},{"dimension":"preferences","value":"metric units","source":1}]}`,
	}}
	p := New(Config{Store: st, Model: m})
	ada := store.UserKey("tg", "ada")
	if got := p.ZoneFor(ada); got != nil {
		t.Errorf("ZoneFor before anything is known = %v, want nil", got)
	}
	first := say(t, st, chat, sess, "ada", "Hi, I'm Ada, writing from Lisbon.", "Hello Ada! I'll be chatty.")
	c := store.Cursor{Channel: "tg", UserID: "ada", ChatID: chat.ID}
	if err := p.Learn(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	es, _ := p.Get(t.Context(), ada)
	if len(es) != 2 || es[0].Value != "Ada" || es[1].Value != "Europe/Lisbon" || es[1].SourceTurnID != first {
		t.Fatalf("profile = %+v; want name and zone (style came from the assistant's line, the bad zone is dropped)", es)
	}
	if got := p.ZoneFor(ada); got.String() != "Europe/Lisbon" {
		t.Errorf("ZoneFor = %v", got)
	}

	say(t, st, chat, sess, "ada", "I moved to Tokyo. Metric units please.", "Got it.")
	if err := p.Learn(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.prompts[1], "- timezone: Europe/Lisbon") || strings.Contains(m.prompts[1], "Hi, I'm Ada") {
		t.Errorf("second prompt:\n%s\nwant the current profile and only the new messages", m.prompts[1])
	}
	if got := p.ZoneFor(ada); got.String() != "Asia/Tokyo" {
		t.Errorf("ZoneFor after the move = %v, want the newer entry", got)
	}
	// The scheduler knows the platform id only: it resolves while unambiguous.
	if got := p.ZoneFor("ada"); got == nil || got.String() != "Asia/Tokyo" {
		t.Errorf("ZoneFor(bare id) = %v, want Asia/Tokyo", got)
	}
	if err := st.SetProfile(t.Context(), store.ProfileEntry{UserKey: store.UserKey("discord", "ada"), Dimension: store.ProfileTimezone, Value: "America/Lima"}); err != nil {
		t.Fatal(err)
	}
	if got := p.ZoneFor("ada"); got != nil {
		t.Errorf("ZoneFor(bare id) shared by two channels' users = %v, want nil", got)
	}
	sec, ok := p.Section(t.Context(), ada, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	want := "- Name: Ada\n- Time zone: Asia/Tokyo (it is Sun 21:00 there now)\n- Preferences: metric units\n"
	if !ok || sec.Body != want {
		t.Errorf("Section = %q, want %q", sec.Body, want)
	}
	if got := p.ZoneFor(store.UserKey("tg", "bob")); got != nil {
		t.Errorf("another user's zone = %v, want nil", got)
	}
	if _, ok := p.Section(t.Context(), store.UserKey("tg", "bob"), time.Now()); ok {
		t.Error("an unknown user has a profile section")
	}
	if _, err := p.Forget(t.Context(), ada, "shoe_size"); err == nil {
		t.Error("Forget accepted an unknown dimension")
	}
	if n, err := p.Forget(t.Context(), ada, store.ProfileTimezone); err != nil || n != 2 {
		t.Errorf("Forget(timezone) = %d, %v", n, err)
	}
	if got := p.ZoneFor(ada); got != nil {
		t.Errorf("ZoneFor after forgetting = %v, want nil", got)
	}
}
