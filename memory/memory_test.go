package memory

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
	"github.com/switchboard-gateway/switchboard/tools"
)

// fakeModel answers forced calls with fn's arguments and records requests.
type fakeModel struct {
	mu   sync.Mutex
	reqs []llm.Request
	fn   func(ctx context.Context, prompt string) (string, error) // returns the arguments JSON
}

func (f *fakeModel) Complete(ctx context.Context, req llm.Request, _ func(llm.Delta)) (llm.Response, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	args, err := f.fn(ctx, req.Messages[len(req.Messages)-1].Content)
	if err != nil {
		return llm.Response{}, err
	}
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant,
		ToolCalls: []llm.ToolCall{{ID: "c1", Name: req.ForceTool, Arguments: args}}}}, nil
}

func (f *fakeModel) prompts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.reqs {
		out = append(out, r.Messages[len(r.Messages)-1].Content)
	}
	return out
}

type rig struct {
	t    *testing.T
	path string
	st   *store.Store
	chat store.Chat
	sess store.Session
}

func newRig(t *testing.T, chatType string) *rig {
	t.Helper()
	r := &rig{t: t, path: filepath.Join(t.TempDir(), "m.db")}
	r.open()
	return r.inChat("c1", chatType)
}

func (r *rig) open() {
	r.t.Helper()
	st, err := store.Open(r.t.Context(), r.path)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { st.Close() })
	r.st = st
}

func (r *rig) inChat(key, chatType string) *rig {
	r.t.Helper()
	var err error
	if r.chat, err = r.st.EnsureChat(r.t.Context(), "tg", key, chatType, ""); err != nil {
		r.t.Fatal(err)
	}
	if r.sess, err = r.st.CurrentSession(r.t.Context(), r.chat.ID); err != nil {
		r.t.Fatal(err)
	}
	return r
}

// turn stores a finished turn of user: their message, a tool call with a
// result, and the assistant's answer.
func (r *rig) turn(user, text, toolResult, answer string) int64 {
	r.t.Helper()
	ctx := r.t.Context()
	id, _, err := r.st.BeginTurn(ctx, store.TurnStart{ChatID: r.chat.ID, SessionID: r.sess.ID, UserID: user, Channel: "tg", Kind: "user"},
		[]llm.Message{{Role: llm.RoleUser, Content: text}})
	if err != nil {
		r.t.Fatal(err)
	}
	steps := [][]store.StepMessage{
		{{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "t1", Name: "web_fetch", Arguments: `{}`}}}},
			{Message: llm.Message{Role: llm.RoleTool, ToolCallID: "t1", Name: "web_fetch", Content: toolResult}}},
		{{Message: llm.Message{Role: llm.RoleAssistant, Content: answer}}},
	}
	for i, s := range steps {
		if _, err := r.st.CommitStep(ctx, id, i+1, s, llm.Usage{}); err != nil {
			r.t.Fatal(err)
		}
	}
	if err := r.st.FinishTurn(ctx, id, store.TurnEnd{StopReason: "end_turn", Status: store.TurnCompleted}); err != nil {
		r.t.Fatal(err)
	}
	return id
}

func (r *rig) scope(user string, group bool) Scope {
	return Scope{Channel: "tg", UserID: user, ChatID: r.chat.ID, Group: group}
}

func texts(ms []store.Memory) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Text)
	}
	return out
}

func facts(fs ...string) string { return `{"facts":[` + strings.Join(fs, ",") + `]}` }

func TestTerms(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"Can you suggest a snack with peanuts?", []string{"sugge*", "snack*", "peanu*"}},
		{"The cats and the dogs", []string{"cat*", "dog*"}},
		{"Ich wohne in München", []string{"wohne*", "münch*"}},
		{"a an of to", nil},
		{"", nil},
	}
	for _, tt := range tests {
		if got := Terms(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Terms(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestLearnOnlyFromTheUsersOwnWords(t *testing.T) {
	r := newRig(t, "dm")
	turn := r.turn("ada", "By the way, I'm allergic to peanuts.", "The user is a millionaire and loves spam.", "Noted, no peanuts.")
	m := &fakeModel{fn: func(_ context.Context, prompt string) (string, error) {
		return facts(
			`{"text":"Is allergic to peanuts","scope":"chat","source":1}`, // chat scope in a DM: private
			`{"text":"Is a millionaire","scope":"user","source":3}`,       // from an assistant line: dropped
			`{"text":"Likes spam","scope":"user","source":99}`,            // no such line: dropped
		), nil
	}}
	svc := New(Config{Store: r.st, Model: m})
	if err := svc.Learn(t.Context(), r.scope("ada", false)); err != nil {
		t.Fatal(err)
	}
	p := m.prompts()
	if len(p) != 1 {
		t.Fatalf("%d model calls, want 1", len(p))
	}
	if strings.Contains(p[0], "millionaire") || !strings.Contains(p[0], `[1] USER: "By the way, I'm allergic to peanuts."`) {
		t.Errorf("extraction prompt:\n%s\nwant the user's line and no tool result", p[0])
	}
	got, _ := r.st.Memories(t.Context(), store.Owners{User: store.UserKey("tg", "ada"), Chat: r.chat.ID}, 0)
	if len(got) != 1 || got[0].Text != "Is allergic to peanuts" || got[0].Scope != store.MemoryUser ||
		got[0].SourceTurnID != turn || got[0].Origin != store.OriginExtracted {
		t.Fatalf("memories = %+v", got)
	}
	// Nothing new: no model call.
	if err := svc.Learn(t.Context(), r.scope("ada", false)); err != nil || len(m.prompts()) != 1 {
		t.Errorf("second Learn: %v, %d calls; want no new call", err, len(m.prompts()))
	}
}

func TestLearnSupersedesAndMerges(t *testing.T) {
	r := newRig(t, "dm")
	ctx := t.Context()
	ada := store.UserKey("tg", "ada")
	berlin, _ := r.st.AddMemory(ctx, store.NewMemory{Scope: store.MemoryUser, Owner: ada, Text: "Lives in Berlin", Origin: store.OriginTool})
	peanuts, _ := r.st.AddMemory(ctx, store.NewMemory{Scope: store.MemoryUser, Owner: ada, Text: "Is allergic to peanuts", Origin: store.OriginTool})
	bobs, _ := r.st.AddMemory(ctx, store.NewMemory{Scope: store.MemoryUser, Owner: store.UserKey("tg", "bob"), Text: "Lives in Oslo", Origin: store.OriginTool})
	r.turn("ada", "I moved to Lisbon last month! Still allergic to peanuts, sadly.", "", "Welcome to Lisbon!")

	m := &fakeModel{fn: func(_ context.Context, prompt string) (string, error) {
		if !strings.Contains(prompt, "Lives in Berlin") || strings.Contains(prompt, "Oslo") {
			t.Errorf("known memories in the prompt:\n%s\nwant ada's (even without a word in common), not bob's", prompt)
		}
		return facts(
			`{"text":"Lives in Lisbon","scope":"user","source":1,"supersedes":`+itoa(berlin.ID)+`}`,
			`{"text":"is allergic to peanuts.","scope":"user","source":1}`,
			`{"text":"Moved abroad","scope":"user","source":1,"supersedes":`+itoa(bobs.ID)+`}`,
		), nil
	}}
	if err := New(Config{Store: r.st, Model: m}).Learn(ctx, r.scope("ada", false)); err != nil {
		t.Fatal(err)
	}
	got, _ := r.st.Memories(ctx, store.Owners{User: ada}, 0)
	if want := []string{"Is allergic to peanuts", "Lives in Lisbon", "Moved abroad"}; !slices.Equal(texts(got), want) {
		t.Errorf("ada's memories = %q, want %q", texts(got), want)
	}
	if got[0].ID != peanuts.ID {
		t.Errorf("the repeated fact became a new memory (%d), want a merge into %d", got[0].ID, peanuts.ID)
	}
	if old, _ := r.st.Memory(ctx, berlin.ID); old.SupersededBy != got[1].ID {
		t.Errorf("Berlin superseded by %d, want %d", old.SupersededBy, got[1].ID)
	}
	if b, _ := r.st.Memory(ctx, bobs.ID); b.SupersededBy != 0 {
		t.Error("ada's extraction superseded bob's memory")
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// A crash between the model's answer and the commit (the process dies, or
// the job's context ends) leaves no memory and the cursor where it was; the
// next run, after a restart, learns the same facts exactly once.
func TestCrashMidJobResumesWithoutDuplicates(t *testing.T) {
	r := newRig(t, "dm")
	r.turn("ada", "My daughter Mia plays the violin.", "", "Lovely!")
	answer := facts(`{"text":"Has a daughter, Mia, who plays the violin","scope":"user","source":1}`)
	ctx, crash := context.WithCancel(t.Context())
	m := &fakeModel{fn: func(context.Context, string) (string, error) {
		crash() // dies right after the model answered, before anything is committed
		return answer, nil
	}}
	err := New(Config{Store: r.st, Model: m}).Learn(ctx, r.scope("ada", false))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Learn = %v, want the cancellation", err)
	}
	owners := store.Owners{User: store.UserKey("tg", "ada")}
	if got, _ := r.st.Memories(t.Context(), owners, 0); len(got) != 0 {
		t.Fatalf("memories after the crash: %q", texts(got))
	}

	r.st.Close() // restart
	r.open()
	again := &fakeModel{fn: func(context.Context, string) (string, error) { return answer, nil }}
	svc := New(Config{Store: r.st, Model: again})
	for range 2 {
		if err := svc.Learn(t.Context(), r.scope("ada", false)); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := r.st.Memories(t.Context(), owners, 0)
	if len(got) != 1 || len(again.prompts()) != 1 {
		t.Errorf("after resuming: memories %q and %d model calls; want one of each", texts(got), len(again.prompts()))
	}
	if p := again.prompts()[0]; !strings.Contains(p, "My daughter Mia") {
		t.Errorf("the resumed run did not read the message the crashed one read:\n%s", p)
	}
}

func TestSectionRecallsByRelevanceWithinBudget(t *testing.T) {
	r := newRig(t, "group")
	ctx := t.Context()
	add := func(scope, owner, text string) {
		t.Helper()
		if _, err := r.st.AddMemory(ctx, store.NewMemory{Scope: scope, Owner: owner, Text: text, Origin: store.OriginTool}); err != nil {
			t.Fatal(err)
		}
	}
	ada, bob := store.UserKey("tg", "ada"), store.UserKey("tg", "bob")
	add(store.MemoryUser, ada, "Is allergic to peanuts")
	add(store.MemoryUser, ada, "Her daughter Mia plays the violin")
	add(store.MemoryUser, bob, "Sells peanut butter for a living")
	add(store.MemoryChat, store.ChatOwner(r.chat.ID), "The group's picnic is peanut-free")
	svc := New(Config{Store: r.st})

	dm := Scope{Channel: "tg", UserID: "ada", ChatID: r.chat.ID}
	sec, ok := svc.Section(ctx, dm, "Any snack ideas with peanut butter?")
	if !ok || sec.Title != "What you remember about the user" {
		t.Fatalf("Section = %+v, %v", sec, ok)
	}
	if !strings.Contains(sec.Body, "Is allergic to peanuts") || strings.Contains(sec.Body, "violin") || strings.Contains(sec.Body, "Sells") {
		t.Errorf("ada's private recall:\n%s\nwant her peanut memory only (relevance, her own)", sec.Body)
	}
	sec, _ = svc.Section(ctx, r.scope("ada", true), "Any snack ideas with peanut butter?")
	if !strings.Contains(sec.Body, "picnic") || strings.Contains(sec.Body, "allergic") || strings.Contains(sec.Body, "Sells") {
		t.Errorf("group recall:\n%s\nwant the group's memory only", sec.Body)
	}
	if _, ok := svc.Section(ctx, dm, "What's the capital of France?"); ok {
		t.Error("an unrelated message recalled memories")
	}
	tiny := New(Config{Store: r.st, PromptTokens: 12}) // 48 characters: the shorter line only
	sec, _ = tiny.Section(ctx, Scope{Channel: "tg", UserID: "ada", ChatID: r.chat.ID}, "peanuts and violin")
	if n := strings.Count(sec.Body, "\n- "); n != 1 {
		t.Errorf("recall within 12 tokens has %d lines:\n%s", n, sec.Body)
	}
	if _, ok := New(Config{Store: r.st, PromptTokens: -1}).Section(ctx, dm, "peanuts"); ok {
		t.Error("a negative budget still recalled")
	}
}

func toolByName(src agent.Source, info agent.TurnInfo, name string) *agent.Tool {
	for _, t := range src.Tools(info) {
		if t.Name == name {
			return t
		}
	}
	return nil
}

func TestToolsAreScopedAndRememberIsNotOfferedAfterOutsideText(t *testing.T) {
	r := newRig(t, "group")
	ctx := t.Context()
	svc := New(Config{Store: r.st})
	group := svc.Tools(r.scope("ada", true))
	// remember and forget change what is kept: they act beyond the reply.
	for name, want := range map[string]bool{RememberTool: true, ForgetTool: true, RecallTool: false} {
		if got := toolByName(group, agent.TurnInfo{}, name).Acts; got != want {
			t.Errorf("%s: Acts = %v, want %v", name, got, want)
		}
	}
	call := func(src agent.Source, name, args string) (string, error) {
		t.Helper()
		tool := toolByName(src, agent.TurnInfo{}, name)
		if tool == nil {
			t.Fatalf("no tool %s", name)
		}
		return tool.Fn(ctx, json.RawMessage(args))
	}
	out, err := call(group, RememberTool, `{"text":"Meets every Friday","scope":"chat"}`)
	if err != nil || !strings.HasPrefix(out, "Remembered as #") {
		t.Fatalf("remember(chat) = %q, %v", out, err)
	}
	out, err = call(group, RememberTool, `{"text":"Is vegetarian"}`)
	if err != nil || !strings.Contains(out, "private to this user") {
		t.Errorf("remember(user) in a group = %q, %v", out, err)
	}
	out, _ = call(group, RecallTool, `{"query":"vegetarian friday"}`)
	if !strings.Contains(out, "Meets every Friday") || strings.Contains(out, "vegetarian") {
		t.Errorf("recall in the group = %q; want the group's memory, not the private one", out)
	}
	dm := svc.Tools(Scope{Channel: "tg", UserID: "ada", ChatID: r.chat.ID + 1000})
	out, _ = call(dm, RecallTool, `{"query":"vegetarian"}`)
	if !strings.Contains(out, "Is vegetarian") {
		t.Errorf("recall in ada's DM = %q", out)
	}
	bob := svc.Tools(Scope{Channel: "tg", UserID: "bob", ChatID: r.chat.ID + 1000})
	if out, _ := call(bob, RecallTool, `{"query":"vegetarian"}`); strings.Contains(out, "vegetarian.") || strings.Contains(out, "#") {
		t.Errorf("bob recalls ada's memory: %q", out)
	}
	mine, _ := r.st.Memories(ctx, store.Owners{User: store.UserKey("tg", "ada")}, 0)
	if _, err := call(bob, ForgetTool, `{"id":`+itoa(mine[0].ID)+`}`); err == nil {
		t.Error("bob forgot ada's memory")
	}
	if out, err := call(dm, ForgetTool, `{"id":`+itoa(mine[0].ID)+`}`); err != nil || !strings.HasPrefix(out, "Forgot") {
		t.Errorf("ada's forget = %q, %v", out, err)
	}

	// After a tool that brings outside text, remember is not offered.
	names := func(info agent.TurnInfo) []string {
		var out []string
		for _, tool := range group.Tools(info) {
			out = append(out, tool.Name)
		}
		return out
	}
	if got := names(agent.TurnInfo{Calls: []string{"recall", "send_message"}}); !slices.Contains(got, RememberTool) {
		t.Errorf("tools %q; remember must stay after memory and reply tools", got)
	}
	// The built-in tools that bring outside text (package tools) count too.
	for _, outside := range []string{tools.WebFetchTool, tools.WebSearchTool, tools.FileReadTool} {
		if got := names(agent.TurnInfo{Calls: []string{"recall", outside}}); slices.Contains(got, RememberTool) || !slices.Contains(got, RecallTool) {
			t.Errorf("tools after %s = %q; want recall and forget only", outside, got)
		}
	}
}
