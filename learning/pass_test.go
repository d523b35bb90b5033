package learning_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/switchboard-gateway/switchboard/learning"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/memory"
	"github.com/switchboard-gateway/switchboard/profile"
	"github.com/switchboard-gateway/switchboard/store"
)

// passModel answers the pass's forced call with answer(prompt) and records
// every request.
type passModel struct {
	mu     sync.Mutex
	reqs   []llm.Request
	answer func(n int, prompt string) (string, error) // n counts calls from 0
}

func (m *passModel) Complete(_ context.Context, req llm.Request, _ func(llm.Delta)) (llm.Response, error) {
	m.mu.Lock()
	n := len(m.reqs)
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	args, err := m.answer(n, req.Messages[len(req.Messages)-1].Content)
	if err != nil {
		return llm.Response{}, err
	}
	return llm.Response{Message: llm.Message{ToolCalls: []llm.ToolCall{{Name: req.ForceTool, Arguments: args}}}}, nil
}

func (m *passModel) requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

type passRig struct {
	path string
	st   *store.Store
	chat store.Chat
	sess store.Session
}

func newPassRig(t *testing.T) *passRig {
	t.Helper()
	r := &passRig{path: filepath.Join(t.TempDir(), "pass.db")}
	r.open(t)
	r.chat, _ = r.st.EnsureChat(t.Context(), "tg", "d1", "dm", "")
	r.sess, _ = r.st.CurrentSession(t.Context(), r.chat.ID)
	return r
}

// open opens (or, after close, reopens: a restart) the store.
func (r *passRig) open(t *testing.T) {
	t.Helper()
	st, err := store.Open(t.Context(), r.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r.st = st
}

// say stores a finished turn of ada: her text and an answer.
func (r *passRig) say(t *testing.T, text string) {
	t.Helper()
	id, _, err := r.st.BeginTurn(t.Context(), store.TurnStart{ChatID: r.chat.ID, SessionID: r.sess.ID, UserID: "ada", Channel: "tg", Kind: "user"},
		[]llm.Message{{Role: llm.RoleUser, Content: text}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.CommitStep(t.Context(), id, 1, []store.StepMessage{{Message: llm.Message{Role: llm.RoleAssistant, Content: "ok"}}}, llm.Usage{}); err != nil {
		t.Fatal(err)
	}
	if err := r.st.FinishTurn(t.Context(), id, store.TurnEnd{StopReason: "end_turn", Status: store.TurnCompleted}); err != nil {
		t.Fatal(err)
	}
}

func (r *passRig) pass(m learning.Model) learning.PassConfig {
	return learning.PassConfig{Store: r.st, Model: m, Parts: []learning.Part{
		memory.New(memory.Config{Store: r.st, Model: m}).Part(),
		profile.New(profile.Config{Store: r.st, Model: m}).Part(),
	}}
}

var ada = learning.Trigger{Channel: "tg", UserID: "ada"}

// One call learns memories and the profile together, and both are
// committed with the cursor.
func TestPassLearnsMemoriesAndProfileInOneCall(t *testing.T) {
	r := newPassRig(t)
	r.say(t, "I'm Ada, I live in Lisbon and I'm allergic to peanuts.")
	m := &passModel{answer: func(int, string) (string, error) {
		return `{"facts":[{"text":"Is allergic to peanuts","scope":"user","source":1}],` +
			`"profile":[{"dimension":"name","value":"Ada","source":1},{"dimension":"timezone","value":"Europe/Lisbon","source":1}]}`, nil
	}}
	trig := ada
	trig.ChatID = r.chat.ID
	if err := learning.RunPass(t.Context(), r.pass(m), trig); err != nil {
		t.Fatal(err)
	}
	reqs := m.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model calls, want 1 for memories and profile together", len(reqs))
	}
	req := reqs[0]
	if req.ForceTool != learning.PassTool || len(req.Tools) != 1 {
		t.Fatalf("request forces %q with %d tools, want %q alone", req.ForceTool, len(req.Tools), learning.PassTool)
	}
	var schema struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(req.Tools[0].Parameters, &schema); err != nil || !slices.Equal(schema.Required, []string{"facts", "profile"}) {
		t.Errorf("the function requires %v (%v), want facts and profile", schema.Required, err)
	}
	prompt := req.Messages[1].Content
	for _, want := range []string{"Known memories:", "Current profile:", "allergic to peanuts"} {
		if !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(prompt) {
			t.Errorf("prompt lacks %q:\n%s", want, prompt)
		}
	}
	mems, _ := r.st.Memories(t.Context(), store.Owners{User: store.UserKey("tg", "ada")}, 0)
	prof, _ := r.st.Profile(t.Context(), store.UserKey("tg", "ada"))
	if len(mems) != 1 || mems[0].Text != "Is allergic to peanuts" || len(prof) != 2 {
		t.Errorf("learned memories %+v and profile %+v; want the fact, the name and the zone", mems, prof)
	}
	// Nothing new: no call.
	if err := learning.RunPass(t.Context(), r.pass(m), trig); err != nil || len(m.requests()) != 1 {
		t.Errorf("a pass with nothing new made %d calls (%v), want none", len(m.requests())-1, err)
	}
}

// Over failures, restarts and a new session, every message reaches exactly one committed
// call: a failed call does not move the cursor, and its messages come again.
func TestPassCursorCoversEveryMessageOnceAcrossRestarts(t *testing.T) {
	r := newPassRig(t)
	trig := ada
	trig.ChatID = r.chat.ID
	seen := map[string]int{} // user lines of the calls whose answer was committed
	line := regexp.MustCompile(`USER: "(message \d+)"`)
	var failNext bool
	m := &passModel{answer: func(_ int, prompt string) (string, error) {
		if failNext {
			failNext = false
			return "", errors.New("model unavailable")
		}
		for _, g := range line.FindAllStringSubmatch(prompt, -1) {
			seen[g[1]]++
		}
		return `{"facts":[],"profile":[]}`, nil
	}}
	n := 0
	say := func(k int) {
		for range k {
			n++
			r.say(t, fmt.Sprintf("message %d", n))
		}
	}

	say(7)
	if err := learning.RunPass(t.Context(), r.pass(m), trig); err != nil {
		t.Fatal(err)
	}
	say(5)
	failNext = true // the next pass fails: its messages come again
	if err := learning.RunPass(t.Context(), r.pass(m), trig); err == nil {
		t.Fatal("a pass whose call failed reported success")
	}
	say(3)
	r.st.Close() // restart
	r.open(t)
	say(10)
	sess, err := r.st.NewSession(t.Context(), r.chat.ID) // /new: the rest in a new session
	if err != nil {
		t.Fatal(err)
	}
	r.sess = sess
	say(20) // with the 10 before, more than one batch, over two sessions
	if err := learning.RunPass(t.Context(), r.pass(m), trig); err != nil {
		t.Fatal(err)
	}
	say(2)
	if err := learning.RunPass(t.Context(), r.pass(m), trig); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if got := seen[fmt.Sprintf("message %d", i)]; got != 1 {
			t.Errorf("message %d reached %d committed calls, want exactly 1", i, got)
		}
	}
	if calls := len(m.requests()); calls != 5 {
		t.Errorf("%d calls, want 5 (7 messages; 5 failed; 38 in two batches; 2)", calls)
	}
}
