package skills_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/skills"
	"github.com/switchboard-gateway/switchboard/store"
)

// rig runs the real loop with skills from a folder, the scripted model
// through go-openai, and a real SQLite file.
type rig struct {
	t       *testing.T
	dir     string
	fake    *testkit.FakeLLM
	watcher *skills.Watcher
	agent   *agent.Agent
	store   *store.Store
	chat    *testkit.RecordingChat
	session int64
	chatID  int64
	env     skills.Env
}

func newRig(t *testing.T, files map[string]string, env skills.Env) *rig {
	t.Helper()
	r := &rig{t: t, dir: t.TempDir(), fake: testkit.NewFakeLLM(t), chat: &testkit.RecordingChat{}, env: env}
	for name, body := range files {
		r.write(name, body)
	}
	var err error
	r.store, err = store.Open(t.Context(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.store.Close() })
	model, err := llm.New(llm.Config{BaseURL: r.fake.URL, Model: "fake-model", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	r.env.Model = model
	r.watcher = skills.NewWatcher(os.DirFS(r.dir), nil, r.env, nil)
	r.agent, err = agent.New(agent.Config{Model: model, Store: r.store,
		Sources: []agent.Source{agent.Builtin(nil, nil), agent.ChannelContext()}})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := r.store.EnsureChat(t.Context(), "console", "c", "dm", "")
	s, _ := r.store.CurrentSession(t.Context(), c.ID)
	r.chatID, r.session = c.ID, s.ID
	return r
}

func (r *rig) write(name, body string) {
	r.t.Helper()
	path := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// run answers text in a chat of the given type, as the router would.
func (r *rig) run(chatType, text string) agent.Result {
	r.t.Helper()
	reg := r.watcher.Current()
	if p := reg.Problems(); len(p) > 0 {
		r.t.Fatalf("skill problems: %v", p)
	}
	turn := reg.ForTurn("console", chatType, text)
	return r.agent.Run(r.t.Context(), agent.Turn{ChatID: r.chatID, SessionID: r.session, Channel: "console",
		ChatType: chatType, UserID: "u", Input: llm.Message{Role: llm.RoleUser, Content: text}, Chat: r.chat,
		Sources: []agent.Source{turn}, Sections: turn.Sections(), MaxSteps: turn.MaxSteps(), Catalogue: reg.Catalogue(0)})
}

func toolNames(rec testkit.Recorded) []string {
	var out []string
	for _, t := range rec.Tools {
		out = append(out, t.Name)
	}
	return out
}

func TestTriggerAddsToolsOnMatchingTurnOnly(t *testing.T) {
	r := newRig(t, map[string]string{"w.yaml": `name: weather
description: Weather.
activation: triggers
triggers: [weather]
instructions: Use get_weather.
define_tools:
  - name: get_weather
    kind: prompt
    prompt: "Weather in {city}?"
    parameters: {type: object, properties: {city: {type: string}}}
`}, skills.Env{})
	r.fake.Push(testkit.Reply{Text: "hi"}, testkit.Reply{Text: "sunny"}, testkit.Reply{Text: "bye"})
	r.run("dm", "hello")
	r.run("dm", "what's the weather?")
	r.run("dm", "thanks")
	reqs := r.fake.Requests()
	for i, want := range []bool{false, true, false} {
		if got := slices.Contains(toolNames(reqs[i]), "get_weather"); got != want {
			t.Errorf("turn %d offered get_weather = %v; want %v (tools %v)", i+1, got, want, toolNames(reqs[i]))
		}
	}
	if !strings.Contains(reqs[1].Messages[0].Content, "# Skill: weather\nUse get_weather.") {
		t.Errorf("the triggered skill's instructions are not in the prompt tail:\n%s", reqs[1].Messages[0].Content)
	}
}

func TestDMOnlySkillAbsentInGroup(t *testing.T) {
	r := newRig(t, map[string]string{"p.yaml": `name: private
description: Private helper.
chat_types: [dm]
instructions: Only in private.
`}, skills.Env{})
	r.fake.Push(testkit.Reply{Text: "a"}, testkit.Reply{Text: "b"})
	r.run("dm", "x")
	r.run("group", "y")
	reqs := r.fake.Requests()
	if !slices.Contains(toolNames(reqs[0]), skills.UseSkillTool) {
		t.Fatalf("use_skill missing in a DM: %v", toolNames(reqs[0]))
	}
	if slices.Contains(toolNames(reqs[1]), skills.UseSkillTool) {
		t.Fatalf("a DM-only skill can be loaded in a group: %v", toolNames(reqs[1]))
	}
}

func TestUseSkillAddsToolsNextStep(t *testing.T) {
	r := newRig(t, map[string]string{"n.yaml": `name: notes
description: Notes.
instructions: Take notes with note_it.
define_tools:
  - name: note_it
    kind: prompt
    prompt: "Rewrite as a note: {text}"
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
`}, skills.Env{})
	r.fake.Push(
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "use_skill", `{"name":"notes"}`)}},
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("2", "note_it", `{"text":"buy milk"}`)}},
		testkit.Reply{Text: "NOTE: buy milk"}, // the prompt tool's sub-call
		testkit.Reply{Text: "Noted."},
	)
	res := r.run("dm", "remember to buy milk")
	if res.StopReason != agent.StopEndTurn {
		t.Fatalf("stop %s: %v", res.StopReason, res.Err)
	}
	reqs := r.fake.Requests()
	if slices.Contains(toolNames(reqs[0]), "note_it") || !slices.Contains(toolNames(reqs[1]), "note_it") {
		t.Fatalf("tools step 1 %v, step 2 %v", toolNames(reqs[0]), toolNames(reqs[1]))
	}
	result := reqs[1].Messages[len(reqs[1].Messages)-1]
	if result.Role != llm.RoleTool || !strings.Contains(result.Content, "Take notes with note_it.") {
		t.Fatalf("use_skill result = %+v", result)
	}
	if sub := reqs[2]; len(sub.Tools) != 0 || sub.Messages[len(sub.Messages)-1].Content != "Rewrite as a note: buy milk" {
		t.Fatalf("prompt tool sub-call = %+v", sub.Messages)
	}
}

func TestSkillToolRules(t *testing.T) {
	r := newRig(t, map[string]string{"f.yaml": `name: forms
description: Forms.
activation: always
instructions: Fill the form, then submit it.
define_tools:
  - name: submit
    kind: prompt
    prompt: "Submit {x}"
    parameters: {type: object, properties: {x: {type: string}}}
  - name: finish
    kind: prompt
    prompt: "Finish"
tool_rules:
  required_before_exit: [submit]
  terminal: [finish]
`}, skills.Env{})
	r.fake.Push(
		testkit.Reply{Text: "done!"}, // not allowed yet: nudged
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "submit", `{"x":"form"}`)}},
		testkit.Reply{Text: "submitted"}, // sub-call of submit
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("2", "send_message", `{"text":"Submitted."}`), testkit.Call("3", "finish", `{}`)}},
		testkit.Reply{Text: "finished"}, // sub-call of finish
	)
	res := r.run("dm", "fill it")
	if res.StopReason != agent.StopToolRule {
		t.Fatalf("stop %s (%v); want tool_rule from the terminal tool", res.StopReason, res.Err)
	}
	if sent := r.chat.Sent(); !slices.Equal(sent, []string{"Submitted."}) {
		t.Fatalf("sent %q", sent)
	}
	if n := r.fake.Calls(); n != 5 {
		t.Fatalf("%d model calls; want 5 (the terminal tool ends the turn)", n)
	}
}

func TestHTTPSkillTool(t *testing.T) {
	var mu sync.Mutex
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		mu.Lock()
		got = req.Clone(context.Background())
		mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"temp": 21})
	}))
	defer srv.Close()
	r := newRig(t, map[string]string{"w.yaml": `name: weather
description: Weather.
activation: always
instructions: Use get_weather.
define_tools:
  - name: get_weather
    kind: http
    url: ` + srv.URL + `/v1/weather?q={city}
    headers: {X-Key: "${WEATHER_KEY}"}
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
`}, skills.Env{Grants: map[string]config.SkillGrant{"weather": {Hosts: []string{srv.Listener.Addr().String()}, Env: []string{"WEATHER_KEY"}}}, Getenv: func(k string) string {
		if k == "WEATHER_KEY" {
			return "k-123456"
		}
		return ""
	}})
	r.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "get_weather", `{"city":"São Paulo & Rio"}`)}},
		testkit.Reply{Text: "21 degrees"})
	r.run("dm", "weather?")
	mu.Lock()
	defer mu.Unlock()
	if got == nil || got.URL.Path != "/v1/weather" || got.URL.Query().Get("q") != "São Paulo & Rio" || got.Header.Get("X-Key") != "k-123456" {
		t.Fatalf("request = %+v", got)
	}
	res := r.fake.Requests()[1].Messages
	if last := res[len(res)-1]; !strings.Contains(last.Content, `{"temp":21}`) {
		t.Fatalf("tool result = %q", last.Content)
	}
}

func TestCommandSkillTool(t *testing.T) {
	skill := `name: files
description: Files.
activation: always
instructions: Read files with read_file.
define_tools:
  - name: read_file
    kind: command
    argv: [cat, "{path}"]
    parameters: {type: object, properties: {path: {type: string}}, required: [path]}
`
	t.Run("disabled", func(t *testing.T) {
		r := newRig(t, map[string]string{"f.yaml": skill}, skills.Env{})
		r.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "read_file", `{"path":"a.txt"}`)}}, testkit.Reply{Text: "can't"})
		r.run("dm", "read a.txt")
		msgs := r.fake.Requests()[1].Messages
		if last := msgs[len(msgs)-1]; !strings.Contains(last.Content, "command tools are disabled") {
			t.Fatalf("result = %q", last.Content)
		}
	})
	t.Run("enabled stays in the workspace", func(t *testing.T) {
		ws := t.TempDir()
		os.WriteFile(filepath.Join(ws, "a.txt"), []byte("inside"), 0o644)
		secret := filepath.Join(filepath.Dir(ws), "secret.txt")
		os.WriteFile(secret, []byte("outside"), 0o644)
		r := newRig(t, map[string]string{"f.yaml": skill}, skills.Env{Command: skills.CommandPolicy{Enabled: true, Workspace: ws, Timeout: 5 * time.Second}})
		r.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "read_file", `{"path":"a.txt"}`)}},
			testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("2", "read_file", `{"path":"../secret.txt"}`)}},
			testkit.Reply{Text: "ok"})
		r.run("dm", "read")
		reqs := r.fake.Requests()
		first := reqs[1].Messages[len(reqs[1].Messages)-1].Content
		second := reqs[2].Messages[len(reqs[2].Messages)-1].Content
		if !strings.Contains(first, "inside") || strings.Contains(second, "outside") || !strings.HasPrefix(second, "error:") {
			t.Fatalf("inside: %q\noutside: %q", first, second)
		}
	})
}

// The static prefix is byte-identical over 3 steps and 2 turns; editing a
// skill file changes the next turn's catalogue without a restart.
func TestPrefixStableAndHotReload(t *testing.T) {
	r := newRig(t, map[string]string{"a.yaml": "name: alpha\ndescription: First.\ninstructions: x\n"}, skills.Env{})
	r.fake.Push(
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "current_time", `{}`)}},
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("2", "current_time", `{"timezone":"UTC"}`)}},
		testkit.Reply{Text: "one"}, testkit.Reply{Text: "two"}, testkit.Reply{Text: "three"})
	r.run("dm", "first")
	r.run("dm", "second")
	prefix := func(i int) string {
		sys := r.fake.Requests()[i].Messages[0].Content
		p, _, _ := strings.Cut(sys, "\n\n# Context")
		return p
	}
	for i := 1; i < 4; i++ {
		if prefix(i) != prefix(0) {
			t.Fatalf("prefix changed at request %d", i)
		}
	}
	if !strings.Contains(prefix(0), "- alpha: First.") {
		t.Fatalf("catalogue missing:\n%s", prefix(0))
	}
	r.write("a.yaml", "name: alpha\ndescription: Second version.\ninstructions: x\n")
	r.run("dm", "third")
	if p := prefix(4); p == prefix(0) || !strings.Contains(p, "- alpha: Second version.") {
		t.Fatalf("edit not visible in the next turn:\n%s", p)
	}
}
