package delegate

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/router/routertest"
	"github.com/switchboard-gateway/switchboard/store"
)

// rig: the real agent with the delegate tool in each turn, scripted model,
// real store.
func rig(t *testing.T) (*routertest.Rig, *Tasks, *testkit.FakeLLM) {
	t.Helper()
	fake := testkit.NewFakeLLM(t)
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "d.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the router's shutdown
	model, _ := llm.New(llm.Config{BaseURL: fake.URL, Model: "fake-model", MaxRetries: -1})
	ag, err := agent.New(agent.Config{Model: model, Store: st, Sources: []agent.Source{agent.Builtin(nil, nil), agent.ChannelContext()}})
	if err != nil {
		t.Fatal(err)
	}
	tasks := New(Config{Agent: ag, Store: st})
	a := routertest.Start(t, router.Config{Store: st, Agent: ag, Tasks: tasks,
		Hooks: router.Hooks{Prepare: func(_ context.Context, in channels.Inbound, _ int64) router.Prepared {
			return router.Prepared{Sources: []agent.Source{tasks.Source(in)}}
		}}})
	return a, tasks, fake
}

// isTask reports whether r is a background task's request: it carries the
// gateway's system note with the task marker.
func isTask(r testkit.Recorded) bool {
	for _, m := range r.Messages[1:] {
		if m.Role == llm.RoleSystem && strings.HasPrefix(m.Content, taskMarker) {
			return true
		}
	}
	return false
}

// delegateModel: the parent delegates and answers at once; the background
// task's model call waits for release (or its cancellation).
func delegateModel(release <-chan struct{}) func(testkit.Recorded) testkit.Reply {
	return func(r testkit.Recorded) testkit.Reply {
		task := isTask(r)
		last := r.Messages[len(r.Messages)-1]
		switch {
		case task:
			return testkit.Reply{Text: "Found three sources.", Block: release}
		case last.Role == llm.RoleTool:
			return testkit.Reply{Text: "I've started that in the background."}
		case last.Role == llm.RoleUser && strings.HasPrefix(last.Content, "research"):
			return testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("d1", "delegate", `{"task":"research solar panels"}`)}}
		}
		return testkit.Reply{Text: "ok"}
	}
}

// A delegated task taking long does not delay the parent's reply; its
// result arrives once; /tasks lists it while it runs.
func TestDelegateRunsInBackground(t *testing.T) {
	a, tasks, fake := rig(t)
	release := make(chan struct{})
	fake.SetDefault(&testkit.Reply{Func: delegateModel(release)})
	a.Say(routertest.Msg("c1", "u", "research solar panels please"))
	got := a.Ch.Texts()
	if len(got) != 1 || got[0] != "I've started that in the background." {
		t.Fatalf("parent reply = %q", got)
	}
	if err := fake.WaitCalls(t.Context(), 3); err != nil { // the task's call is in flight
		t.Fatal(err)
	}
	a.Say(routertest.Msg("c1", "u", "/tasks"))
	if got := a.Ch.Texts(); !strings.Contains(got[1], "#1 research solar panels") {
		t.Fatalf("/tasks = %q", got[1])
	}
	close(release)
	tasks.Wait()
	got = a.Ch.Texts()
	if len(got) != 3 || got[2] != "Background task #1 (research solar panels):\nFound three sources." {
		t.Fatalf("task result = %q", got)
	}
	if n := len(tasks.forChat("fake\x00c1")); n != 0 {
		t.Fatalf("%d tasks still listed", n)
	}
}

func TestDelegateStop(t *testing.T) {
	a, tasks, fake := rig(t)
	release := make(chan struct{}) // never closed: the task waits until stopped
	fake.SetDefault(&testkit.Reply{Func: delegateModel(release)})
	a.Say(routertest.Msg("c1", "u", "research solar panels"))
	if err := fake.WaitCalls(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	a.Say(routertest.Msg("c1", "u", "/stop"))
	tasks.Wait()
	got := a.Ch.Texts()
	// The task may report before or after the /stop reply.
	if len(got) != 3 || !slices.Contains(got[1:], "Stopped.") || !slices.Contains(got[1:], "Background task #1 was stopped.") {
		t.Fatalf("sent %q", got)
	}
}

// Limits: at most maxTasksPerChat tasks per chat; a task cannot delegate.
func TestDelegateLimits(t *testing.T) {
	a, tasks, fake := rig(t)
	release := make(chan struct{})
	defer close(release)
	fake.SetDefault(&testkit.Reply{Func: func(r testkit.Recorded) testkit.Reply {
		task := isTask(r)
		for _, tool := range r.Tools {
			if task && tool.Name == Tool {
				return testkit.Reply{Text: "a task was offered delegate"}
			}
		}
		last := r.Messages[len(r.Messages)-1]
		switch {
		case task:
			return testkit.Reply{Text: "working", Block: release}
		case last.Role == llm.RoleTool:
			var all []string
			for _, m := range r.Messages {
				if m.Role == llm.RoleTool {
					all = append(all, m.Content)
				}
			}
			return testkit.Reply{Text: "results: " + strings.Join(all, " | ")}
		}
		return testkit.Reply{ToolCalls: []llm.ToolCall{
			testkit.Call("d1", "delegate", `{"task":"one"}`), testkit.Call("d2", "delegate", `{"task":"two"}`),
			testkit.Call("d3", "delegate", `{"task":"three"}`)}}
	}})
	a.Say(routertest.Msg("c1", "u", "do three things"))
	got := a.Ch.Texts()
	if len(got) != 1 || strings.Count(got[0], "Started background task") != 2 || !strings.Contains(got[0], "too many background tasks running (2 in this chat") {
		t.Fatalf("reply = %q", got)
	}
	if n := len(tasks.forChat("fake\x00c1")); n != 2 {
		t.Fatalf("%d tasks running; want 2", n)
	}
	if err := fake.WaitCalls(t.Context(), 4); err != nil {
		t.Fatal(err)
	}
	for _, r := range fake.Requests() {
		if !isTask(r) {
			continue
		}
		for _, tool := range r.Tools {
			if tool.Name == Tool {
				t.Fatal("a background task was offered the delegate tool")
			}
		}
	}
}

// Finding 4: delegate starts work of its own, so it acts beyond the reply
// (asked about or withdrawn after untrusted content).
func TestDelegateDeclaresActs(t *testing.T) {
	_, tasks, _ := rig(t)
	list := tasks.Source(routertest.Msg("c1", "u", "x")).Tools(agent.TurnInfo{})
	if len(list) != 1 || !list[0].Acts {
		t.Fatalf("delegate tools = %+v; want one that acts", list)
	}
}
