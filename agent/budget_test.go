package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// summariser is a fake model for the budget's tests: a summary request
// gets "summary #k" (k counts them) and is kept; a conversation request
// gets a short answer, or a call to lookup when the user asks for one.
type summariser struct {
	mu    sync.Mutex
	calls []testkit.Recorded // the summary requests
}

func isSummaryCall(r testkit.Recorded) bool {
	return len(r.Messages) > 0 && strings.HasPrefix(r.Messages[0].Content, "You compress chat transcripts")
}

func (s *summariser) reply(r testkit.Recorded) testkit.Reply {
	if isSummaryCall(r) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.calls = append(s.calls, r)
		return testkit.Reply{Text: fmt.Sprintf("summary #%d", len(s.calls))}
	}
	last := r.Messages[len(r.Messages)-1]
	if last.Role == llm.RoleUser && strings.Contains(last.Content, "look it up") {
		return testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call(fmt.Sprintf("c%d", len(r.Messages)), "lookup", `{}`)}}
	}
	head, _, _ := strings.Cut(last.Content, " ")
	return testkit.Reply{Text: "noted " + head + ": " + strings.Repeat("a", 150)}
}

func (s *summariser) requests() []testkit.Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]testkit.Recorded(nil), s.calls...)
}

// withSummariser makes h's model a summariser.
func withSummariser(h *harness) *summariser {
	s := &summariser{}
	h.fake.SetDefault(&testkit.Reply{Func: s.reply})
	return s
}

// lookupTool returns a result of size characters.
func lookupTool(size int) *agent.Tool {
	return &agent.Tool{Name: "lookup", Fn: func(context.Context, json.RawMessage) (string, error) {
		return "found " + strings.Repeat("r", size), nil
	}}
}

func withBudget(tokens int) option { return func(c *agent.Config) { c.HistoryBudget = tokens } }

// stableOf is the part of a system message before the dynamic tail.
func stableOf(sys string) string {
	stable, _, _ := strings.Cut(sys, "\n\n# Context\n")
	return stable
}

// summaryOf is the rolling summary in a system message ("" without one).
func summaryOf(sys string) string {
	_, s, _ := strings.Cut(stableOf(sys), agent.SummaryTitle+"\n")
	return s
}

// turnRequests are the conversation's requests (not the summaries').
func turnRequests(h *harness) []testkit.Recorded {
	var out []testkit.Recorded
	for _, r := range h.fake.Requests() {
		if !isSummaryCall(r) {
			out = append(out, r)
		}
	}
	return out
}

// assertPaired fails unless every tool call in msgs is followed by its
// result and every result follows its call.
func assertPaired(t *testing.T, what string, msgs []llm.Message) {
	t.Helper()
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role == llm.RoleTool {
			t.Fatalf("%s: message %d is a tool result without its call", what, i)
		}
		for k, c := range m.ToolCalls {
			if i+1+k >= len(msgs) || msgs[i+1+k].ToolCallID != c.ID {
				t.Fatalf("%s: call %s at %d is not followed by its result", what, c.ID, i)
			}
		}
		i += len(m.ToolCalls)
	}
}

// E budget: no request carries more history (messages after the system
// prompt, and the summary) than agent.history_budget; earlier tool results
// are stubbed, older turns folded; a call never leaves without its result,
// in the request or in what the summariser reads.
func TestHistoryBudgetCutsAtTheConfiguredSize(t *testing.T) {
	const budget = 1500
	h := newHarness(t, withBudget(budget), withTools(lookupTool(800)))
	sum := withSummariser(h)
	for i := range 40 {
		text := fmt.Sprintf("question %d %s", i, strings.Repeat("q", 200))
		if i%3 == 0 {
			text += " look it up"
		}
		if res := h.run(text); res.StopReason != agent.StopEndTurn {
			t.Fatalf("turn %d: %s (%v)", i, res.StopReason, res.Err)
		}
	}
	reqs := turnRequests(h)
	largest, stubs := 0, 0
	for i, r := range reqs {
		history := agent.EstimateTokens(r.Messages[1:], nil) + len(summaryOf(r.Messages[0].Content))/4
		if history > budget {
			t.Fatalf("request %d carries %d tokens of history; the budget is %d", i, history, budget)
		}
		largest = max(largest, history)
		assertPaired(t, fmt.Sprintf("request %d", i), r.Messages[1:])
		for _, m := range r.Messages {
			if strings.HasPrefix(m.Content, "[earlier tool result omitted") {
				stubs++
			}
		}
	}
	folds := sum.requests()
	if len(folds) == 0 || stubs == 0 {
		t.Fatalf("%d folds, %d stubbed results: the budget never cut", len(folds), stubs)
	}
	if largest < budget*2/3 {
		t.Fatalf("the history never came near the budget (at most %d of %d tokens): it cut too early", largest, budget)
	}
	for i, r := range folds {
		lines := strings.Split(r.Messages[1].Content, "\n")
		for k, l := range lines {
			if strings.HasPrefix(l, "[assistant called] lookup") && (k+1 >= len(lines) || !strings.HasPrefix(lines[k+1], "[tool lookup result]")) {
				t.Fatalf("fold %d has a call without its result:\n%s", i, r.Messages[1].Content)
			}
		}
		if strings.HasPrefix(lines[0], "[tool ") {
			t.Fatalf("fold %d starts with a result whose call is in another chunk", i)
		}
	}
}

// seedTurns stores n turns directly (no model calls): a user message
// "fact-NNN …" and an answer "reply-NNN …", every fourth one with a call to
// lookup and its result between them.
func seedTurns(t *testing.T, h *harness, n int) {
	t.Helper()
	ctx := t.Context()
	for i := range n {
		id, _, err := h.store.BeginTurn(ctx, store.TurnStart{ChatID: h.chatID, SessionID: h.session, Kind: "user"},
			[]llm.Message{{Role: llm.RoleUser, Content: fmt.Sprintf("fact-%03d %s", i, strings.Repeat("f", 120))}})
		if err != nil {
			t.Fatal(err)
		}
		var steps [][]store.StepMessage
		if i%4 == 0 {
			c := testkit.Call(fmt.Sprintf("seed%d", i), "lookup", `{}`)
			steps = append(steps, []store.StepMessage{{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{c}}},
				{Message: llm.Message{Role: llm.RoleTool, ToolCallID: c.ID, Name: "lookup", Content: fmt.Sprintf("result-%03d %s", i, strings.Repeat("r", 300))}}})
		}
		steps = append(steps, []store.StepMessage{{Message: llm.Message{Role: llm.RoleAssistant,
			Content: fmt.Sprintf("reply-%03d %s", i, strings.Repeat("a", 120))}}})
		for s, msgs := range steps {
			if _, err := h.store.CommitStep(ctx, id, s+1, msgs, llm.Usage{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.store.FinishTurn(ctx, id, store.TurnEnd{StopReason: "end_turn", Status: store.TurnCompleted}); err != nil {
			t.Fatal(err)
		}
	}
}

// transcriptOf is the transcript a summary request folds (without the
// summary so far).
func transcriptOf(r testkit.Recorded) string {
	in := r.Messages[1].Content
	if _, then, ok := strings.Cut(in, "\n\nThen:\n"); ok && strings.HasPrefix(in, "Summary so far:\n") {
		return then
	}
	return in
}

// E budget / the fold fix: a fold over a history far larger than the
// summariser's input (2 × the window in characters) reads it in chunks that
// each fit, and every message reaches exactly one summary call, the oldest
// too; a call and its result are never in different chunks.
func TestFoldCoversEveryMessageInChunks(t *testing.T) {
	const window = 3000
	h := newHarness(t, func(c *agent.Config) { c.ContextWindow = window }, withTools(lookupTool(10)))
	sum := withSummariser(h)
	const seeded = 200
	seedTurns(t, h, seeded) // about 60,000 characters: ten times the summariser's input
	if res := h.run("what do you know?"); res.StopReason != agent.StopEndTurn {
		t.Fatalf("stop = %s (%v)", res.StopReason, res.Err)
	}
	folds := sum.requests()
	if len(folds) < 5 {
		t.Fatalf("%d summary calls; a history ten times the input needs more chunks", len(folds))
	}
	seen := map[string]int{}
	for i, r := range folds {
		part := transcriptOf(r)
		if len(part) > 2*window {
			t.Fatalf("summary call %d reads %d characters of transcript; the input is %d", i, len(part), 2*window)
		}
		if i > 0 && !strings.HasPrefix(r.Messages[1].Content, fmt.Sprintf("Summary so far:\nsummary #%d\n", i)) {
			t.Fatalf("summary call %d does not build on the summary before it:\n%.80s", i, r.Messages[1].Content)
		}
		lines := strings.Split(part, "\n")
		if strings.HasPrefix(lines[0], "[tool ") || strings.HasPrefix(lines[len(lines)-1], "[assistant called]") {
			t.Fatalf("summary call %d splits a call from its result", i)
		}
		for _, l := range lines {
			for _, p := range []string{"fact-", "reply-", "result-"} {
				if _, rest, ok := strings.Cut(l, p); ok && len(rest) >= 3 {
					seen[p+rest[:3]]++
				}
			}
		}
	}
	// The last keepTurns (2) seeded turns stay verbatim; all before them
	// are folded, each exactly once.
	for i := range seeded - 2 {
		keys := []string{fmt.Sprintf("fact-%03d", i), fmt.Sprintf("reply-%03d", i)}
		if i%4 == 0 {
			keys = append(keys, fmt.Sprintf("result-%03d", i))
		}
		for _, k := range keys {
			if seen[k] != 1 {
				t.Fatalf("%s reached %d summary calls; want exactly 1", k, seen[k])
			}
		}
	}
	_, upTo, ok, err := h.store.LatestSummary(t.Context(), h.session)
	msgs, _ := h.store.Messages(t.Context(), h.session)
	var lastFolded int64
	for _, m := range msgs {
		if strings.HasPrefix(m.Content, fmt.Sprintf("reply-%03d", seeded-3)) {
			lastFolded = m.ID
		}
	}
	if err != nil || !ok || upTo != lastFolded {
		t.Fatalf("stored summary covers up to message %d (%v, %v); want %d", upTo, ok, err, lastFolded)
	}
}

// stableChanges counts the consecutive turn requests whose stable part
// (prefix and summary) differs, and checks that each carries the summary
// the model wrote last, byte for byte.
func stableChanges(t *testing.T, reqs []testkit.Recorded, folds []testkit.Recorded) int {
	t.Helper()
	changes := 0
	for i := 1; i < len(reqs); i++ {
		if stableOf(reqs[i].Messages[0].Content) != stableOf(reqs[i-1].Messages[0].Content) {
			changes++
		}
	}
	last := summaryOf(reqs[len(reqs)-1].Messages[0].Content)
	if want := fmt.Sprintf("summary #%d", len(folds)); last != want {
		t.Fatalf("the last request carries the summary %q; want %q", last, want)
	}
	return changes
}

// E budget: the prompt's stable part (static prefix and summary) is reused
// byte for byte from turn to turn; it changes only when a chunk is folded,
// and folds leave room for many turns before the next.
func TestSummaryReusedByteForByteUntilNextFold(t *testing.T) {
	h := newHarness(t, withBudget(1200))
	sum := withSummariser(h)
	for i := range 60 {
		if res := h.run(fmt.Sprintf("message %d %s", i, strings.Repeat("m", 200))); res.StopReason != agent.StopEndTurn {
			t.Fatalf("turn %d: %s (%v)", i, res.StopReason, res.Err)
		}
	}
	reqs, folds := turnRequests(h), sum.requests()
	if len(folds) < 2 {
		t.Fatalf("%d folds in 60 turns; want at least 2", len(folds))
	}
	changes := stableChanges(t, reqs, folds)
	if changes != len(folds) {
		t.Fatalf("the stable part changed %d times for %d folds", changes, len(folds))
	}
	if share := float64(len(reqs)-1-changes) / float64(len(reqs)-1); share < 0.8 {
		t.Fatalf("only %.0f%% of consecutive requests share their stable part", 100*share)
	}
	for _, r := range reqs {
		if !strings.HasPrefix(r.Messages[0].Content, h.agent.Prefix()) {
			t.Fatal("a request does not start with the static prefix")
		}
	}
}

// E budget: after a restart, the stored summary and the boundary it covers
// are used as they are: the same bytes in the prompt, no message before the
// boundary sent or folded again, none after it lost.
func TestRestartKeepsSummaryAndBoundary(t *testing.T) {
	h := newHarness(t, withBudget(1200))
	sum := withSummariser(h)
	i := 0
	say := func() {
		t.Helper()
		if i == 200 {
			t.Fatal("200 turns and no fold")
		}
		if res := h.run(fmt.Sprintf("m%03d %s", i, strings.Repeat("m", 200))); res.StopReason != agent.StopEndTurn {
			t.Fatalf("turn %d: %s (%v)", i, res.StopReason, res.Err)
		}
		i++
	}
	for len(sum.requests()) == 0 {
		say()
	}
	say()
	text, upTo, _, err := h.store.LatestSummary(t.Context(), h.session)
	if err != nil {
		t.Fatal(err)
	}
	before := turnRequests(h)
	stableBefore := stableOf(before[len(before)-1].Messages[0].Content)

	restarted, err := agent.New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.agent = restarted
	say()
	reqs := turnRequests(h)
	r := reqs[len(reqs)-1]
	if got := stableOf(r.Messages[0].Content); got != stableBefore || summaryOf(got) != text {
		t.Fatalf("after the restart the stable part changed:\n%q\nwant\n%q", got, stableBefore)
	}
	if len(sum.requests()) != 1 {
		t.Fatalf("%d summary calls: the restart folded again", len(sum.requests()))
	}
	msgs, _ := h.store.Messages(t.Context(), h.session)
	sent := map[string]bool{}
	for _, m := range r.Messages[1:] {
		sent[m.Content] = true
	}
	for _, m := range msgs[:len(msgs)-1] { // the last is the answer to r
		if folded := m.ID <= upTo; folded == sent[m.Content] {
			t.Fatalf("message %d (%.8q, folded %v) sent %v after the restart", m.ID, m.Content, folded, sent[m.Content])
		}
	}
	// The next fold starts right after the boundary.
	for len(sum.requests()) == 1 {
		say()
	}
	next := sum.requests()[1].Messages[1].Content
	var firstAfter string
	for _, m := range msgs {
		if m.ID > upTo {
			firstAfter = m.Content
			break
		}
	}
	if !strings.HasPrefix(next, "Summary so far:\n"+text+"\n\nThen:\n[user] "+firstAfter[:4]) {
		t.Fatalf("the next fold does not continue from the boundary (%q):\n%.200s", firstAfter[:4], next)
	}
}
