package agent_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

func TestAllowedTools(t *testing.T) {
	all := []string{"a", "b", "c", "send_message"}
	tests := []struct {
		name     string
		rules    agent.ToolRules
		calls    []string
		want     []string
		wantStop bool
	}{
		{"no rules", agent.ToolRules{}, nil, all, false},
		{"allowlist", agent.ToolRules{Allow: []string{"a", "send_message"}}, nil, []string{"a", "send_message"}, false},
		{"empty allowlist is an explicit stop", agent.ToolRules{Allow: []string{}}, nil, nil, true},
		{"max_count reached", agent.ToolRules{MaxCount: map[string]int{"a": 2}}, []string{"a", "b", "a"}, []string{"b", "c", "send_message"}, false},
		{"max_count not reached", agent.ToolRules{MaxCount: map[string]int{"a": 2}}, []string{"a"}, all, false},
		{"children after the last call", agent.ToolRules{Children: map[string][]string{"a": {"b", "c"}}}, []string{"c", "a"}, []string{"b", "c"}, false},
		{"children only after their parent", agent.ToolRules{Children: map[string][]string{"a": {"b"}}}, []string{"a", "c"}, all, false},
		{"no children left is a stop", agent.ToolRules{Children: map[string][]string{"a": {}}}, []string{"a"}, nil, true},
		{"rules combine", agent.ToolRules{Allow: []string{"a", "b"}, MaxCount: map[string]int{"b": 1}}, []string{"b"}, []string{"a"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, stop := agent.AllowedTools(all, tt.rules, tt.calls)
			if !slices.Equal(got, tt.want) || stop != tt.wantStop {
				t.Fatalf("AllowedTools = %q, %v; want %q, %v", got, stop, tt.want, tt.wantStop)
			}
		})
	}
	if _, stop := agent.AllowedTools(nil, agent.ToolRules{Allow: []string{}}, nil); stop {
		t.Fatal("no tools available at all is not a rule stop")
	}
}

func TestMergeRules(t *testing.T) {
	a := agent.ToolRules{Allow: []string{"x"}, Terminal: []string{"t"}, MaxCount: map[string]int{"x": 3}}
	b := agent.ToolRules{Allow: []string{"y"}, RequiredBeforeExit: []string{"r"}, MaxCount: map[string]int{"x": 1},
		Children: map[string][]string{"x": {"y"}}}
	m := a.Merge(b)
	if !slices.Equal(m.Allow, []string{"x", "y"}) || !slices.Equal(m.Terminal, []string{"t"}) ||
		!slices.Equal(m.RequiredBeforeExit, []string{"r"}) || m.MaxCount["x"] != 1 || !slices.Equal(m.Children["x"], []string{"y"}) {
		t.Fatalf("merged = %+v", m)
	}
	if got := (agent.ToolRules{}).Merge(agent.ToolRules{Terminal: []string{"t"}}); got.Allow != nil {
		t.Fatal("merging unrestricted rules restricted the allowlist")
	}
	if got := (agent.ToolRules{Allow: []string{}}).Merge(agent.ToolRules{}); got.Allow == nil || len(got.Allow) != 0 {
		t.Fatal("an explicit empty allowlist was lost in a merge")
	}
}

// ruleSource offers fixed tools and rules.
type ruleSource struct {
	tools []*agent.Tool
	rules agent.ToolRules
}

func (r ruleSource) Name() string                         { return "rules" }
func (r ruleSource) Tools(agent.TurnInfo) []*agent.Tool   { return r.tools }
func (r ruleSource) Rules(agent.TurnInfo) agent.ToolRules { return r.rules }

func okTool(name string) *agent.Tool {
	return &agent.Tool{Name: name, Fn: func(context.Context, json.RawMessage) (string, error) { return name + " ok", nil }}
}

// Through the loop: a terminal tool ends the turn; a required tool is
// enforced with a hidden nudge; children and max_count shape the next step.
func TestRulesThroughTheLoop(t *testing.T) {
	t.Run("terminal", func(t *testing.T) {
		h := newHarness(t, func(c *agent.Config) {
			c.Sources = append(c.Sources, ruleSource{tools: []*agent.Tool{okTool("finish")}, rules: agent.ToolRules{Terminal: []string{"finish"}}})
		})
		h.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "send_message", `{"text":"all done"}`), testkit.Call("2", "finish", `{}`)}})
		res := h.run("do it")
		if res.StopReason != agent.StopToolRule || res.ModelCalls != 1 {
			t.Fatalf("result = %+v", res)
		}
		equal(t, "sent", h.chat.Sent(), []string{"all done"})
	})
	t.Run("required_before_exit", func(t *testing.T) {
		h := newHarness(t, func(c *agent.Config) {
			c.Sources = append(c.Sources, ruleSource{tools: []*agent.Tool{okTool("save")}, rules: agent.ToolRules{RequiredBeforeExit: []string{"save"}}})
		})
		h.fake.Push(testkit.Reply{Text: "done already"},
			testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "save", `{}`)}},
			testkit.Reply{Text: "saved and done"})
		res := h.run("work")
		if res.StopReason != agent.StopEndTurn || res.ModelCalls != 3 {
			t.Fatalf("result = %+v", res)
		}
		equal(t, "sent", h.chat.Sent(), []string{"saved and done"})
		equal(t, "transcript", h.transcript(), []string{"user: work", "assistant: done already",
			"system(hidden): Before you finish, you must call: save. Do that now.",
			"assistant call save{}", "tool [1]: save ok", "assistant: saved and done"})
	})
	t.Run("children and max_count", func(t *testing.T) {
		h := newHarness(t, func(c *agent.Config) {
			c.Sources = append(c.Sources, ruleSource{tools: []*agent.Tool{okTool("search"), okTool("open"), okTool("other")},
				rules: agent.ToolRules{Children: map[string][]string{"search": {"open", "send_message"}}, MaxCount: map[string]int{"search": 1}}})
		})
		h.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "search", `{}`)}},
			testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("2", "open", `{}`)}},
			testkit.Reply{Text: "found"})
		h.run("find")
		names := func(r testkit.Recorded) []string {
			var out []string
			for _, s := range r.Tools {
				out = append(out, s.Name)
			}
			return out
		}
		reqs := h.fake.Requests()
		equal(t, "step 1 tools", names(reqs[0]), []string{"current_time", "send_message", "open", "other", "search"})
		equal(t, "step 2 tools (children of search)", names(reqs[1]), []string{"send_message", "open"})
		equal(t, "step 3 tools (search used up)", names(reqs[2]), []string{"current_time", "send_message", "open", "other"})
	})
	t.Run("empty allowed set stops with a summary", func(t *testing.T) {
		h := newHarness(t, func(c *agent.Config) {
			c.Sources = append(c.Sources, ruleSource{rules: agent.ToolRules{Allow: []string{}}})
		})
		h.fake.Push(testkit.Reply{Text: "I can't use any tools here."})
		res := h.run("x")
		if res.StopReason != agent.StopToolRule || len(h.fake.Requests()[0].Tools) != 0 {
			t.Fatalf("result = %+v", res)
		}
		equal(t, "sent", h.chat.Sent(), []string{"I can't use any tools here."})
	})
}

// C16: the tool set is built by a pure function in a stable order; a name
// offered twice is reported, and the first source keeps it.
func TestBuildToolsOrderAndConflicts(t *testing.T) {
	a := agent.StaticSource{SourceName: "builtin", List: []*agent.Tool{okTool("zeta"), okTool("alpha")}}
	b := agent.StaticSource{SourceName: "skill:x", List: []*agent.Tool{okTool("beta"), okTool("alpha")}}
	for range 3 {
		ts := agent.BuildTools([]agent.Source{a, b}, agent.TurnInfo{}, nil)
		if got := ts.Names(); !slices.Equal(got, []string{"alpha", "zeta", "beta"}) {
			t.Fatalf("names = %q", got)
		}
		if len(ts.Conflicts) != 1 || ts.Conflicts[0] != "alpha: offered by builtin and skill:x; builtin wins" {
			t.Fatalf("conflicts = %q", ts.Conflicts)
		}
	}
	if ts := agent.BuildTools([]agent.Source{a, b}, agent.TurnInfo{}, map[string]bool{"beta": true}); !slices.Equal(ts.Names(), []string{"beta"}) {
		t.Fatalf("allow filter: %q", ts.Names())
	}
	if ts := agent.BuildTools([]agent.Source{a}, agent.TurnInfo{}, map[string]bool{}); len(ts.Names()) != 0 {
		t.Fatal("an empty allow set offered tools")
	}
}
