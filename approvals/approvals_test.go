package approvals

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/router/routertest"
	"github.com/switchboard-gateway/switchboard/store"
)

// rig wires the real agent (scripted model, real SQLite) to the router
// and approvals, with a channel that has buttons, and a tool that needs
// approval.
type rig struct {
	*routertest.Rig
	t    *testing.T
	fake *testkit.FakeLLM
	st   *store.Store
	ch   *routertest.Channel
	// closeStore closes st once (the router stopped first).
	closeStore func()
}

func newRig(t *testing.T, path string, fake *testkit.FakeLLM, ran *atomic.Int32, now *time.Time) *rig {
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
	closeStore := sync.OnceFunc(func() { st.Close() })
	t.Cleanup(closeStore) // after the router's shutdown
	r := routertest.Start(t, router.Config{Store: st, Agent: ag,
		Interceptors: []router.Interceptor{New(Config{Store: st, Timeout: time.Hour})}})
	return &rig{Rig: r, t: t, fake: fake, st: st, ch: r.Ch, closeStore: closeStore}
}

func (a *rig) approvalID() string {
	a.t.Helper()
	all := a.ch.Buttons()
	if len(all) == 0 {
		a.t.Fatalf("no question with buttons was asked; sent %q", a.ch.Texts())
	}
	b := all[len(all)-1]
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
	a := newRig(t, filepath.Join(t.TempDir(), "a.db"), testkit.NewFakeLLM(t), &ran, &now)
	scriptDelete(a.fake)
	a.Say(routertest.Msg("c1", "u", "delete old.txt"))
	if ran.Load() != 0 {
		t.Fatal("the tool ran before approval")
	}
	if q := a.ch.Texts(); len(q) != 1 || !strings.Contains(q[0], `delete_file {"path":"old.txt"}`) {
		t.Fatalf("question = %q", q)
	}
	id := a.approvalID()
	a.fake.Push(testkit.Reply{Text: "Deleted old.txt."})
	a.Say(routertest.Press("approve:" + id))
	a.Say(routertest.Press("approve:" + id)) // a second click is a no-op
	if ran.Load() != 1 {
		t.Fatalf("tool ran %d times; want 1", ran.Load())
	}
	got := a.ch.Texts()
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
	a := newRig(t, filepath.Join(t.TempDir(), "a.db"), testkit.NewFakeLLM(t), &ran, &now)
	scriptDelete(a.fake)
	a.Say(routertest.Msg("c1", "u", "delete old.txt"))
	a.fake.Push(testkit.Reply{Text: "OK, I left it alone."})
	a.Say(routertest.Msg("c1", "u", "No."))
	if ran.Load() != 0 {
		t.Fatal("a denied tool ran")
	}
	last := a.fake.Requests()[1].Messages
	if r := last[len(last)-1]; !strings.Contains(r.Content, "not run: the user denied it") {
		t.Fatalf("result = %+v", r)
	}
	if got := a.ch.Texts(); got[len(got)-1] != "OK, I left it alone." {
		t.Fatalf("sent %q", got)
	}
}

// A new message while paused denies the pending calls as superseded; the
// message is then handled, with a valid transcript.
func TestApprovalSuperseded(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var ran atomic.Int32
	a := newRig(t, filepath.Join(t.TempDir(), "a.db"), testkit.NewFakeLLM(t), &ran, &now)
	scriptDelete(a.fake)
	a.Say(routertest.Msg("c1", "u", "delete old.txt"))
	id := a.approvalID()
	a.fake.Push(testkit.Reply{Text: "It's sunny."})
	a.Say(routertest.Msg("c1", "u", "what's the weather?"))
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
	a.Say(routertest.Press("approve:" + id)) // too late: a no-op
	if ran.Load() != 0 || a.fake.Calls() != 2 {
		t.Fatalf("a late approval ran the tool (%d) or the model (%d)", ran.Load(), a.fake.Calls())
	}
}

// An unanswered request expires: the calls are dropped and the chat told.
func TestApprovalExpires(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var ran atomic.Int32
	a := newRig(t, filepath.Join(t.TempDir(), "a.db"), testkit.NewFakeLLM(t), &ran, &now)
	scriptDelete(a.fake)
	a.Say(routertest.Msg("c1", "u", "delete old.txt"))
	id := a.approvalID()
	now = now.Add(2 * time.Hour)
	a.Tick(now)
	got := a.ch.Texts()
	if !strings.Contains(got[len(got)-1], "expired") {
		t.Fatalf("sent %q", got)
	}
	a.Say(routertest.Press("approve:" + id))
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
	a := newRig(t, path, fake, &ran, &now)
	scriptDelete(fake)
	a.Say(routertest.Msg("c1", "u", "delete old.txt"))
	id := a.approvalID()
	a.Stop()
	a.closeStore()

	b := newRig(t, path, fake, &ran, &now)
	fake.Push(testkit.Reply{Text: "Done after the restart."})
	b.Say(routertest.Press("approve:" + id))
	if ran.Load() != 1 {
		t.Fatalf("tool ran %d times after the restart", ran.Load())
	}
	if got := b.ch.Texts(); len(got) != 1 || got[0] != "Done after the restart." {
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
