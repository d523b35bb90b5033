package plans

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
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

// planRig: the real agent as runner and planner, scripted model, real
// store; adjust changes the configurations before the router starts.
func planRig(t *testing.T, adjust func(*Config, *router.Config)) (*routertest.Rig, *testkit.FakeLLM) {
	t.Helper()
	fake := testkit.NewFakeLLM(t)
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the router's shutdown
	model, _ := llm.New(llm.Config{BaseURL: fake.URL, Model: "fake-model", MaxRetries: -1})
	ag, err := agent.New(agent.Config{Model: model, Store: st, Sources: []agent.Source{agent.Builtin(nil, nil), agent.ChannelContext()}})
	if err != nil {
		t.Fatal(err)
	}
	pc := Config{Store: st, Planner: ag, StepMaxSteps: 2}
	rc := router.Config{Store: st, Agent: ag}
	if adjust != nil {
		adjust(&pc, &rc)
	}
	rc.Interceptors = []router.Interceptor{New(pc)}
	return routertest.Start(t, rc), fake
}

// scriptedPlanModel answers the planning call with three steps and each
// step from a per-step script; step 2 never stops calling tools.
type scriptedPlanModel struct {
	mu    sync.Mutex
	n     int
	steps map[int]func(testkit.Recorded) testkit.Reply
}

func (s *scriptedPlanModel) reply(r testkit.Recorded) testkit.Reply {
	if r.ForcedTool == "submit_plan" {
		args, _ := json.Marshal(map[string]any{"steps": []map[string]string{
			{"title": "Gather", "instructions": "Gather the facts."},
			{"title": "Compare", "instructions": "Compare the options."},
			{"title": "Write", "instructions": "Write the summary."}}})
		return testkit.Reply{ToolCalls: []llm.ToolCall{{ID: "p", Name: "submit_plan", Arguments: string(args)}}}
	}
	last := ""
	for _, m := range r.Messages {
		if m.Role == llm.RoleUser && strings.HasPrefix(m.Content, "[plan step ") {
			last = m.Content
		}
	}
	var step int
	fmt.Sscanf(last, "[plan step %d", &step)
	return s.steps[step](r)
}

func TestPlanSkipAfterCapThenFinish(t *testing.T) {
	a, fake := planRig(t, nil)
	s := &scriptedPlanModel{}
	s.steps = map[int]func(testkit.Recorded) testkit.Reply{
		1: func(testkit.Recorded) testkit.Reply { return testkit.Reply{Text: "Facts gathered."} },
		2: func(r testkit.Recorded) testkit.Reply {
			if len(r.Tools) == 0 {
				return testkit.Reply{Text: "Compared half of them."} // the wrap-up at the cap
			}
			s.mu.Lock()
			s.n++
			n := s.n
			s.mu.Unlock()
			return testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call(fmt.Sprint("c", n), "current_time", fmt.Sprintf(`{"timezone":"Etc/GMT-%d"}`, n))}}
		},
		3: func(testkit.Recorded) testkit.Reply { return testkit.Reply{Text: "Summary written."} },
	}
	fake.SetDefault(&testkit.Reply{Func: s.reply})
	a.Say(routertest.Msg("c1", "u", "/plan choose a laptop"))
	got := a.Ch.Texts()
	if len(got) != 3 || !strings.Contains(got[0], "1. Gather\n2. Compare\n3. Write") || got[1] != "Facts gathered." ||
		!strings.Contains(got[2], "Step 1 of 3 (Gather) is done") {
		t.Fatalf("after step 1: %q", got)
	}
	a.Say(routertest.Press(a.Ch.Buttons()[0][0].Action)) // Continue
	got = a.Ch.Texts()
	if got[3] != "Compared half of them." || !strings.Contains(got[4], "Step 2 of 3 (Compare) hit its step limit") {
		t.Fatalf("after step 2: %q", got[3:])
	}
	a.Say(routertest.Msg("c1", "u", "skip"))
	got = a.Ch.Texts()
	if got[5] != "Summary written." || !strings.Contains(got[6], "Plan finished: choose a laptop\n1. Gather — done\n2. Compare — skipped\n3. Write — done") {
		t.Fatalf("after step 3: %q", got[5:])
	}
	// One shared history: step 3's request saw the earlier steps.
	reqs := fake.Requests()
	last := reqs[len(reqs)-1]
	var seen []string
	for _, m := range last.Messages {
		if m.Role == llm.RoleUser && strings.HasPrefix(m.Content, "[plan step") {
			seen = append(seen, m.Content[:18])
		}
	}
	if len(seen) != 3 {
		t.Fatalf("step 3 saw %q", seen)
	}
}

func TestPlanRetryWithSuggestionAndStop(t *testing.T) {
	a, fake := planRig(t, nil)
	var mu sync.Mutex
	var step1 []string
	s := &scriptedPlanModel{steps: map[int]func(testkit.Recorded) testkit.Reply{
		1: func(r testkit.Recorded) testkit.Reply {
			mu.Lock()
			defer mu.Unlock()
			step1 = append(step1, r.Messages[len(r.Messages)-1].Content)
			return testkit.Reply{Text: fmt.Sprintf("Gathered, try %d.", len(step1))}
		},
	}}
	fake.SetDefault(&testkit.Reply{Func: s.reply})
	a.Say(routertest.Msg("c1", "u", "/plan choose a laptop"))
	a.Say(routertest.Msg("c1", "u", "only look at ThinkPads"))
	if len(step1) != 2 || !strings.Contains(step1[1], "redo this step with this suggestion: only look at ThinkPads") {
		t.Fatalf("step 1 requests: %q", step1)
	}
	a.Say(routertest.Press(a.Ch.Buttons()[1][3].Action)) // Stop
	got := a.Ch.Texts()
	if last := got[len(got)-1]; !strings.Contains(last, "Plan stopped: choose a laptop\n1. Gather — done\n2. Compare — not run") {
		t.Fatalf("summary = %q", last)
	}
	a.Say(routertest.Press(a.Ch.Buttons()[1][0].Action)) // a late Continue: a no-op
	if n := len(a.Ch.Texts()); n != len(got) {
		t.Fatalf("a late button did something: %q", a.Ch.Texts()[len(got):])
	}
}

// Without an answer, a waiting plan continues after its timeout.
func TestPlanTimeoutContinues(t *testing.T) {
	a, fake := planRig(t, func(c *Config, _ *router.Config) { c.FeedbackTimeout = time.Nanosecond })
	s := &scriptedPlanModel{steps: map[int]func(testkit.Recorded) testkit.Reply{
		1: func(testkit.Recorded) testkit.Reply { return testkit.Reply{Text: "one"} },
		2: func(testkit.Recorded) testkit.Reply { return testkit.Reply{Text: "two"} },
		3: func(testkit.Recorded) testkit.Reply { return testkit.Reply{Text: "three"} },
	}}
	fake.SetDefault(&testkit.Reply{Func: s.reply})
	a.Say(routertest.Msg("c1", "u", "/plan do it"))
	for range 2 {
		a.Tick(time.Now())
	}
	got := a.Ch.Texts()
	if last := got[len(got)-1]; !strings.HasPrefix(last, "Plan finished: do it") {
		t.Fatalf("sent %q", got)
	}
}

// A skill with mode: plan runs its command as a plan (Prepared.Plan).
func TestPlanFromSkillMode(t *testing.T) {
	a, fake := planRig(t, func(_ *Config, rc *router.Config) {
		rc.Hooks.Prepare = func(_ context.Context, in channels.Inbound, _ int64) router.Prepared {
			return router.Prepared{Plan: strings.HasPrefix(in.Text, "/research")}
		}
	})
	s := &scriptedPlanModel{steps: map[int]func(testkit.Recorded) testkit.Reply{
		1: func(testkit.Recorded) testkit.Reply { return testkit.Reply{Text: "one"} },
	}}
	fake.SetDefault(&testkit.Reply{Func: s.reply})
	a.Say(routertest.Msg("c1", "u", "/research solar"))
	got := a.Ch.Texts()
	if len(got) < 3 || !strings.HasPrefix(got[0], "Plan for: /research solar") || got[1] != "one" {
		t.Fatalf("sent %q", got)
	}
	if r := fake.Requests()[0]; r.ForcedTool != "submit_plan" {
		t.Fatalf("first request forced %q", r.ForcedTool)
	}
}
