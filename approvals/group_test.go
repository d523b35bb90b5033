package approvals

import (
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/router/routertest"
)

// groupMsg is a message from a member of group g1 of the fake channel.
func groupMsg(user, text string) channels.Inbound {
	in := routertest.Msg("g1", user, text)
	in.ChatType, in.ChatTitle, in.UserName = channels.Group, "Team", user
	return in
}

func groupPress(user, action string) channels.Inbound {
	in := routertest.Press(action)
	in.ChatID, in.ChatType, in.UserID, in.UserName = "g1", channels.Group, user, user
	return in
}

// aliceAsks is a group g1 where alice's request waits for approval.
func aliceAsks(t *testing.T) (*rig, *atomic.Int32) {
	t.Helper()
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	ran := new(atomic.Int32)
	a := newRig(t, filepath.Join(t.TempDir(), "a.db"), testkit.NewFakeLLM(t), ran, &now)
	scriptDelete(a.fake)
	a.Say(groupMsg("alice", "delete old.txt"))
	return a, ran
}

// Finding 8 (group approvals): another member's message neither cancels
// nor decides the asker's pending request. Their ordinary message is
// answered as usual; their "yes" and their button press get a reply
// naming who may decide; the asker's own "yes" then runs the call once.
func TestGroupApprovalOnlyTheAskerDecides(t *testing.T) {
	a, ran := aliceAsks(t)
	id := a.approvalID()

	a.fake.Push(testkit.Reply{Text: "Hi Bob."})
	a.Say(groupMsg("bob", "hi bot, what's up?"))
	if got := a.ch.Texts(); got[len(got)-1] != "Hi Bob." {
		t.Fatalf("bob's message was not answered as usual: sent %q", got)
	}
	if p, ok, err := a.st.PendingApproval(t.Context(), "fake", "g1"); err != nil || !ok || p.UserID != "alice" {
		t.Fatalf("alice's request after bob's message: %+v, %v, %v; want it still pending", p, ok, err)
	}

	before := a.fake.Calls()
	a.Say(groupMsg("bob", "yes"))
	a.Say(groupPress("bob", "approve:"+id))
	got := a.ch.Texts()
	want := "Only @alice can approve or deny this request."
	if len(got) < 2 || got[len(got)-1] != want || got[len(got)-2] != want {
		t.Fatalf("sent %q; want bob's yes and press answered with %q", got, want)
	}
	if ran.Load() != 0 || a.fake.Calls() != before {
		t.Fatalf("bob's answers ran the tool (%d) or the model (%d calls, want %d)", ran.Load(), a.fake.Calls(), before)
	}

	a.fake.Push(testkit.Reply{Text: "Deleted old.txt."})
	a.Say(groupMsg("alice", "yes"))
	if ran.Load() != 1 {
		t.Fatalf("alice's yes ran the tool %d times; want 1", ran.Load())
	}
	if got := a.ch.Texts(); got[len(got)-1] != "Deleted old.txt." {
		t.Fatalf("sent %q", got)
	}
}

// The asker's own new message still supersedes their request in a group.
func TestGroupApprovalAskersMessageSupersedes(t *testing.T) {
	a, ran := aliceAsks(t)
	a.fake.Push(testkit.Reply{Text: "Never mind then."})
	a.Say(groupMsg("alice", "actually, keep it"))
	if _, ok, _ := a.st.PendingApproval(t.Context(), "fake", "g1"); ok {
		t.Fatal("alice's own message left her request pending")
	}
	req := a.fake.Requests()[1].Messages
	if i := slices.IndexFunc(req, func(m llm.Message) bool { return m.Role == llm.RoleTool }); i < 0 || !strings.Contains(req[i].Content, "superseded") {
		t.Fatalf("request after alice's message: %+v", req)
	}
	if ran.Load() != 0 {
		t.Fatal("a superseded call ran")
	}
}
