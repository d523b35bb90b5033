package router

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchboard/agent"
	"switchboard/channels"
	"switchboard/internal/testkit"
	"switchboard/llm"
	"switchboard/store"
)

// buttonChannel is a fake channel with buttons.
type buttonChannel struct {
	*fakeChannel
	mu      sync.Mutex
	asked   []channels.Outbound
	buttons [][]channels.Button
}

func (c *buttonChannel) Ask(ctx context.Context, m channels.Outbound, b []channels.Button) (string, error) {
	c.mu.Lock()
	c.asked = append(c.asked, m)
	c.buttons = append(c.buttons, b)
	c.mu.Unlock()
	return c.Send(ctx, m)
}

// approvalRig wires the real agent (scripted model, real SQLite) to the
// router with a channel that has buttons, and a tool that needs approval.
type approvalRig struct {
	t     *testing.T
	path  string
	fake  *testkit.FakeLLM
	st    *store.Store
	r     *Router
	ch    *buttonChannel
	ran   *atomic.Int32
	ticks chan time.Time
	clock *time.Time
}

func newApprovalRig(t *testing.T, path string, fake *testkit.FakeLLM, ran *atomic.Int32, now *time.Time) *approvalRig {
	t.Helper()
	st, err := store.Open(t.Context(), path, store.WithClock(func() time.Time { return *now }))
	if err != nil {
		t.Fatal(err)
	}
	model, err := llm.New(llm.Config{BaseURL: fake.URL, Model: "fake-model", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	danger := &agent.Tool{Name: "delete_file", RequiresApproval: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
		Fn:         func(context.Context, json.RawMessage) (string, error) { ran.Add(1); return "deleted", nil }}
	ag, err := agent.New(agent.Config{Model: model, Store: st,
		Sources: []agent.Source{agent.ChannelContext(), agent.StaticSource{SourceName: "test", List: []*agent.Tool{danger}}}})
	if err != nil {
		t.Fatal(err)
	}
	rig := &approvalRig{t: t, path: path, fake: fake, st: st, ran: ran, ticks: make(chan time.Time), clock: now,
		ch: &buttonChannel{fakeChannel: newFakeChannel()}}
	rig.r, err = New(Config{Store: st, Agent: ag, ApprovalTimeout: time.Hour, NewTicker: func(d time.Duration) Ticker {
		if d == time.Minute {
			return manualTicker{c: rig.ticks}
		}
		return stoppedTicker{}
	}})
	if err != nil {
		t.Fatal(err)
	}
	rig.r.AddChannel(rig.ch, everyone)
	if err := rig.r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rig.stop() })
	return rig
}

func (a *approvalRig) stop() {
	if a.st == nil {
		return
	}
	_ = a.r.Shutdown(context.Background())
	a.st.Close()
	a.st = nil
}

func (a *approvalRig) say(in channels.Inbound) {
	a.t.Helper()
	if err := a.r.Deliver(a.t.Context(), in); err != nil {
		a.t.Fatal(err)
	}
	if err := a.r.Drain(a.t.Context()); err != nil {
		a.t.Fatal(err)
	}
}

func press(action string) channels.Inbound {
	msgSeq++
	return channels.Inbound{Channel: "fake", ChatID: "c1", ChatType: channels.DM, MessageID: fmt.Sprint("cb", msgSeq),
		UserID: "u", Action: action, Mentioned: true}
}

func (a *approvalRig) approvalID() string {
	a.t.Helper()
	a.ch.mu.Lock()
	defer a.ch.mu.Unlock()
	if len(a.ch.buttons) == 0 {
		a.t.Fatalf("no question with buttons was asked; sent %q", a.ch.texts())
	}
	b := a.ch.buttons[len(a.ch.buttons)-1]
	if len(b) != 2 || b[0].Label != "Approve" || b[1].Label != "Deny" {
		a.t.Fatalf("buttons = %+v", b)
	}
	_, id, _ := strings.Cut(b[0].Action, ":")
	return id
}

func scriptDelete(fake *testkit.FakeLLM) {
	fake.Push(testkit.Reply{Text: "I'll delete it.", ToolCalls: []llm.ToolCall{testkit.Call("c1", "delete_file", `{"path":"old.txt"}`)}})
}

func TestApprovalApproveAndDuplicate(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var ran atomic.Int32
	a := newApprovalRig(t, filepath.Join(t.TempDir(), "a.db"), testkit.NewFakeLLM(t), &ran, &now)
	scriptDelete(a.fake)
	a.say(msg("c1", "u", "delete old.txt"))
	if ran.Load() != 0 {
		t.Fatal("the tool ran before approval")
	}
	if q := a.ch.texts(); len(q) != 1 || !strings.Contains(q[0], `delete_file {"path":"old.txt"}`) {
		t.Fatalf("question = %q", q)
	}
	id := a.approvalID()
	a.fake.Push(testkit.Reply{Text: "Deleted old.txt."})
	a.say(press("approve:" + id))
	a.say(press("approve:" + id)) // a second click is a no-op
	if ran.Load() != 1 {
		t.Fatalf("tool ran %d times; want 1", ran.Load())
	}
	got := a.ch.texts()
	if len(got) != 2 || got[1] != "Deleted old.txt." {
		t.Fatalf("sent %q", got)
	}
	if n := a.fake.Calls(); n != 2 {
		t.Fatalf("%d model calls; want 2", n)
	}
	last := a.fake.Requests()[1].Messages
	if r := last[len(last)-1]; r.Role != llm.RoleTool || r.Content != "deleted" {
		t.Fatalf("the resumed request lacks the tool result: %+v", r)
	}
}

func TestApprovalDenyByText(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var ran atomic.Int32
	a := newApprovalRig(t, filepath.Join(t.TempDir(), "a.db"), testkit.NewFakeLLM(t), &ran, &now)
	scriptDelete(a.fake)
	a.say(msg("c1", "u", "delete old.txt"))
	a.fake.Push(testkit.Reply{Text: "OK, I left it alone."})
	a.say(msg("c1", "u", "No."))
	if ran.Load() != 0 {
		t.Fatal("a denied tool ran")
	}
	last := a.fake.Requests()[1].Messages
	if r := last[len(last)-1]; !strings.Contains(r.Content, "not run: the user denied it") {
		t.Fatalf("result = %+v", r)
	}
	if got := a.ch.texts(); got[len(got)-1] != "OK, I left it alone." {
		t.Fatalf("sent %q", got)
	}
}

// A new message while paused denies the pending calls as superseded; the
// message is then handled, with a valid transcript.
func TestApprovalSuperseded(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var ran atomic.Int32
	a := newApprovalRig(t, filepath.Join(t.TempDir(), "a.db"), testkit.NewFakeLLM(t), &ran, &now)
	scriptDelete(a.fake)
	a.say(msg("c1", "u", "delete old.txt"))
	id := a.approvalID()
	a.fake.Push(testkit.Reply{Text: "It's sunny."})
	a.say(msg("c1", "u", "what's the weather?"))
	if ran.Load() != 0 {
		t.Fatal("a superseded tool ran")
	}
	req := a.fake.Requests()[1].Messages
	var roles []string
	for _, m := range req[1:] {
		roles = append(roles, string(m.Role))
	}
	if strings.Join(roles, ",") != "user,assistant,tool,user" || !strings.Contains(req[3].Content, "superseded") {
		t.Fatalf("request after supersede: roles %v, result %q", roles, req[3].Content)
	}
	a.say(press("approve:" + id)) // too late: a no-op
	if ran.Load() != 0 || a.fake.Calls() != 2 {
		t.Fatalf("a late approval ran the tool (%d) or the model (%d)", ran.Load(), a.fake.Calls())
	}
}

// An unanswered request expires: the calls are dropped and the chat told.
func TestApprovalExpires(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var ran atomic.Int32
	a := newApprovalRig(t, filepath.Join(t.TempDir(), "a.db"), testkit.NewFakeLLM(t), &ran, &now)
	scriptDelete(a.fake)
	a.say(msg("c1", "u", "delete old.txt"))
	id := a.approvalID()
	now = now.Add(2 * time.Hour)
	a.ticks <- now
	a.ticks <- now // the sweep handled the first tick once it takes the second
	if err := a.r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := a.ch.texts()
	if !strings.Contains(got[len(got)-1], "expired") {
		t.Fatalf("sent %q", got)
	}
	a.say(press("approve:" + id))
	if ran.Load() != 0 || a.fake.Calls() != 1 {
		t.Fatalf("an expired request ran: tool %d, model calls %d", ran.Load(), a.fake.Calls())
	}
	msgs, _ := a.st.Messages(t.Context(), 1)
	if last := msgs[len(msgs)-1]; last.Role != llm.RoleTool || !strings.Contains(last.Content, "expired") {
		t.Fatalf("transcript ends with %+v", last)
	}
}

// A restart while paused: the approval and the paused turn survive, and the
// decision resumes the turn where it stopped.
func TestApprovalSurvivesRestart(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var ran atomic.Int32
	path := filepath.Join(t.TempDir(), "a.db")
	fake := testkit.NewFakeLLM(t)
	a := newApprovalRig(t, path, fake, &ran, &now)
	scriptDelete(fake)
	a.say(msg("c1", "u", "delete old.txt"))
	id := a.approvalID()
	a.stop()

	b := newApprovalRig(t, path, fake, &ran, &now)
	fake.Push(testkit.Reply{Text: "Done after the restart."})
	b.say(press("approve:" + id))
	if ran.Load() != 1 {
		t.Fatalf("tool ran %d times after the restart", ran.Load())
	}
	if got := b.ch.texts(); len(got) != 1 || got[0] != "Done after the restart." {
		t.Fatalf("sent %q", got)
	}
	turns, _ := b.st.Turns(t.Context(), 1, 0)
	if len(turns) != 1 || turns[0].Status != "completed" || turns[0].StopReason != "end_turn" {
		t.Fatalf("turns = %+v", turns)
	}
}

func TestDecision(t *testing.T) {
	tests := []struct {
		in                     channels.Inbound
		approve, ok, wantStale bool
	}{
		{channels.Inbound{Action: "approve:7"}, true, true, false},
		{channels.Inbound{Action: "deny:7"}, false, true, false},
		{channels.Inbound{Action: "approve:6"}, false, false, true},
		{channels.Inbound{Action: "plan:continue"}, false, false, false},
		{channels.Inbound{Text: " Yes! "}, true, true, false},
		{channels.Inbound{Text: "no"}, false, true, false},
		{channels.Inbound{Text: "yes, but first tell me why"}, false, false, false},
	}
	for _, tt := range tests {
		approve, ok, stale := decision(tt.in, 7)
		if approve != tt.approve || ok != tt.ok || stale != tt.wantStale {
			t.Errorf("decision(%+v) = %v %v %v", tt.in, approve, ok, stale)
		}
	}
}
