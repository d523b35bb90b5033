package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// bigTool returns a distinct large result per call.
func bigTool(size int) *agent.Tool {
	n := 0
	return &agent.Tool{Name: "fetch", Fn: func(context.Context, json.RawMessage) (string, error) {
		n++
		return fmt.Sprintf("page %d: %s", n, strings.Repeat(string(rune('a'+n%26)), size)), nil
	}}
}

// seedToolTurns runs n earlier turns that each fetch a large page.
func seedToolTurns(t *testing.T, h *harness, n int) {
	t.Helper()
	for i := range n {
		h.fake.Push(testkit.Reply{Text: "fetching", ToolCalls: []llm.ToolCall{testkit.Call(fmt.Sprintf("s%d", i), "fetch", fmt.Sprintf(`{"n":%d}`, i))}},
			testkit.Reply{Text: fmt.Sprintf("summary of page %d", i)})
		if res := h.run(fmt.Sprintf("fetch page %d", i)); res.StopReason != agent.StopEndTurn {
			t.Fatalf("seed turn %d: %s (%v)", i, res.StopReason, res.Err)
		}
	}
}

// F20/F21: a context-length error from the provider triggers compaction and
// a retry; the cheap layer is enough.
func TestReactiveCompactionOnContextLengthError(t *testing.T) {
	h := newHarness(t, withTools(bigTool(3000)))
	seedToolTurns(t, h, 2)
	before := h.fake.Calls()
	h.fake.Push(testkit.Reply{Status: 400, ErrorCode: "context_length_exceeded"}, testkit.Reply{Text: "fits now"})
	res := h.run("and now?")
	if res.StopReason != agent.StopEndTurn || h.fake.Calls()-before != 2 {
		t.Fatalf("result = %+v after %d calls", res, h.fake.Calls()-before)
	}
	starts, ends := h.eventsOf(agent.EventCompactionStart), h.eventsOf(agent.EventCompactionEnd)
	if len(starts) != 1 || len(ends) != 1 || ends[0].Layer != 1 || ends[0].TokensAfter >= ends[0].TokensBefore {
		t.Fatalf("compaction events = %+v / %+v", starts, ends)
	}
	retry := h.fake.Requests()[h.fake.Calls()-1].Messages
	for _, m := range retry[:len(retry)-1] {
		if m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0 && m.Content != "" {
			t.Fatalf("layer 1 kept text beside an earlier tool call: %+v", m)
		}
	}
	equal(t, "sent", h.chat.Sent()[len(h.chat.Sent())-1:], []string{"fits now"})
}

// F21: with big old tool results, layer 2 suffices and no summary call is
// made (proactive: the estimate exceeds 90% of the window, with the
// latest earlier turns' results, which are whole until layer 2).
func TestProactiveCompactionStubsOldResults(t *testing.T) {
	h := newHarness(t, withTools(bigTool(4800)), func(c *agent.Config) { c.ContextWindow = 3000 })
	seedToolTurns(t, h, 3)
	before := h.fake.Calls()
	h.fake.Push(testkit.Reply{Text: "ok"})
	res := h.run("what did we read?")
	if res.StopReason != agent.StopEndTurn {
		t.Fatalf("stop = %s (%v)", res.StopReason, res.Err)
	}
	if n := h.fake.Calls() - before; n != 1 {
		t.Fatalf("%d model calls; want 1 (no summary call)", n)
	}
	var maxLayer int
	for _, e := range h.eventsOf(agent.EventCompactionEnd) {
		maxLayer = max(maxLayer, e.Layer)
	}
	if maxLayer != 2 {
		t.Fatalf("highest layer = %d; want 2", maxLayer)
	}
	req := h.fake.Requests()[h.fake.Calls()-1]
	if got := agent.EstimateTokens(req.Messages, req.Tools); got > 2700 {
		t.Fatalf("request estimate %d tokens exceeds 90%% of 3000", got)
	}
	stubs := 0
	for _, m := range req.Messages {
		if strings.HasPrefix(m.Content, "[earlier tool result omitted") {
			stubs++
		}
	}
	if stubs == 0 {
		t.Fatal("no stubbed tool results in the request")
	}
	// The stored copies are intact.
	msgs, _ := h.store.Messages(t.Context(), h.session)
	for _, m := range msgs {
		if m.Role == llm.RoleTool && len(m.Content) < 4800 {
			t.Fatalf("stored result was modified: %d chars", len(m.Content))
		}
	}
}

// F21/F22: when cheap layers are not enough, old turns are folded into a
// model-written summary that is stored and used by later turns; tool calls
// are never separated from their results.
func TestSummaryFoldsOldTurns(t *testing.T) {
	h := newHarness(t, func(c *agent.Config) { c.ContextWindow = 3000 })
	h.fake.SetDefault(&testkit.Reply{Func: func(r testkit.Recorded) testkit.Reply {
		if strings.Contains(r.Messages[0].Content, "compress chat transcripts") {
			return testkit.Reply{Text: "The user asked numbered questions and got long answers."}
		}
		last := r.Messages[len(r.Messages)-1].Content
		return testkit.Reply{Text: "answer to " + last[:11] + strings.Repeat("z", 1800)}
	}})
	for i := range 6 {
		if res := h.run(fmt.Sprintf("question %d %s", i, strings.Repeat("q", 200))); res.StopReason != agent.StopEndTurn {
			t.Fatalf("turn %d: %s (%v)", i, res.StopReason, res.Err)
		}
	}
	var summaries []testkit.Recorded
	for _, r := range h.fake.Requests() {
		if len(r.Tools) == 0 && strings.Contains(r.Messages[0].Content, "compress chat transcripts") {
			summaries = append(summaries, r)
		}
	}
	if len(summaries) == 0 {
		t.Fatal("no summary call was made")
	}
	text, upTo, ok, err := h.store.LatestSummary(t.Context(), h.session)
	if err != nil || !ok || upTo == 0 || text == "" {
		t.Fatalf("stored summary = %q up to %d (%v, %v)", text, upTo, ok, err)
	}
	// A later turn starts from the stored summary.
	h.run("next question")
	req := h.fake.Requests()[h.fake.Calls()-1]
	if !strings.Contains(req.Messages[0].Content, "Earlier in this conversation (summary)") {
		t.Fatalf("summary not in the system prompt:\n%s", req.Messages[0].Content)
	}
	if strings.Contains(req.Messages[1].Content, "question 0 ") {
		t.Fatal("folded turns are still sent")
	}
	if got := agent.EstimateTokens(req.Messages, req.Tools); got > 2700 {
		t.Fatalf("request estimate %d exceeds 90%% of the window", got)
	}
}

// F22: a system prompt that alone exceeds the window stops the turn with
// context_overflow before any model call.
func TestContextOverflow(t *testing.T) {
	h := newHarness(t, func(c *agent.Config) { c.ContextWindow = 200 })
	res := h.run("hi")
	if res.StopReason != agent.StopContextOverflow || res.ModelCalls != 0 {
		t.Fatalf("result = %+v", res)
	}
	sent := h.chat.Sent()
	if len(sent) != 1 || !strings.Contains(sent[0], "/new") {
		t.Fatalf("sent = %q", sent)
	}
}

// F22: the repair invariant on random transcripts: every call is followed
// by exactly one result, no result lacks its call, other messages keep order.
func TestRepairOrphansProperty(t *testing.T) {
	seed := uint64(1)
	rnd := func(n int) int { seed = seed*6364136223846793005 + 1442695040888963407; return int(seed>>33) % n }
	for iter := range 500 {
		var msgs []llm.Message
		for i := range 3 + rnd(12) {
			switch rnd(4) {
			case 0:
				msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: fmt.Sprint("u", i)})
			case 1:
				var calls []llm.ToolCall
				for j := range 1 + rnd(3) {
					calls = append(calls, llm.ToolCall{ID: fmt.Sprintf("c%d_%d", i, j), Name: "t"})
				}
				msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, ToolCalls: calls})
				for _, c := range calls {
					if rnd(3) > 0 {
						msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: c.ID})
					}
				}
			case 2:
				msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: fmt.Sprint("stray", i)})
			default:
				msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: fmt.Sprint("a", i)})
			}
		}
		out := agent.RepairOrphans(msgs)
		for i := 0; i < len(out); i++ {
			m := out[i]
			if m.Role == llm.RoleTool {
				t.Fatalf("iter %d: result without its call at %d: %+v", iter, i, out)
			}
			for k, c := range m.ToolCalls {
				r := out[i+1+k]
				if r.Role != llm.RoleTool || r.ToolCallID != c.ID {
					t.Fatalf("iter %d: call %s not followed by its result", iter, c.ID)
				}
			}
			i += len(m.ToolCalls)
		}
		if again := agent.RepairOrphans(out); len(again) != len(out) {
			t.Fatalf("iter %d: repair is not idempotent", iter)
		}
	}
}

// G24: the static prefix is byte-identical over 3 steps and 2 turns; a date
// change alters only the tail.
func TestPromptPrefixStable(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "current_time", `{}`)}},
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("2", "current_time", `{"timezone":"Europe/Berlin"}`)}},
		testkit.Reply{Text: "one"},
		testkit.Reply{Text: "two"},
	)
	h.run("first")
	h.run("second")
	h.now = h.now.Add(24 * time.Hour)
	h.fake.Push(testkit.Reply{Text: "three"})
	h.run("third, a day later")
	prefix := h.agent.Prefix()
	reqs := h.fake.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d requests", len(reqs))
	}
	var tails []string
	for i, r := range reqs {
		sys := r.Messages[0].Content
		tail, ok := strings.CutPrefix(sys, prefix+"\n\n")
		if !ok {
			t.Fatalf("request %d: system prompt does not start with the static prefix", i)
		}
		tails = append(tails, tail)
	}
	for i := 1; i < 4; i++ {
		if tails[i] != tails[0] {
			t.Fatalf("the tail changed within the same day: %q vs %q", tails[0], tails[i])
		}
	}
	if tails[4] == tails[0] || !strings.Contains(tails[4], "Thursday, 3 December 2026") {
		t.Fatalf("the tail did not follow the date: %q", tails[4])
	}
	if p := (agent.Prompt{Prefix: prefix}).PrefixHash(); p != (agent.Prompt{Prefix: h.agent.Prefix()}).PrefixHash() {
		t.Fatal("prefix hash not stable")
	}
}

// Issue 32: every request carries the tool results of the latest earlier
// turn (resultTurns) whole and older large results as stubs, without any
// budget or window pressure (no compaction layer, no summary call); a
// result turns into its stub once, so consecutive requests share every
// message before the result that just aged, and the stored copies stay
// whole.
func TestOldToolResultsStubbedByAge(t *testing.T) {
	h := newHarness(t, withTools(bigTool(2000)))
	seedToolTurns(t, h, 5)
	h.fake.Push(testkit.Reply{Text: "ok"})
	if res := h.run("what did we read?"); res.StopReason != agent.StopEndTurn {
		t.Fatalf("stop = %s (%v)", res.StopReason, res.Err)
	}
	if evs := h.eventsOf(agent.EventCompactionEnd); len(evs) != 0 {
		t.Fatalf("compaction ran: %+v", evs)
	}
	reqs := h.fake.Requests()
	results := func(r testkit.Recorded) []string {
		var out []string
		for _, m := range r.Messages {
			if m.Role == llm.RoleTool {
				out = append(out, m.Content)
			}
		}
		return out
	}
	last := results(reqs[len(reqs)-1])
	if len(last) != 5 {
		t.Fatalf("%d tool results in the last request; want 5", len(last))
	}
	for i, c := range last {
		stub := strings.HasPrefix(c, "[earlier tool result omitted: ")
		if whole := strings.HasPrefix(c, fmt.Sprintf("page %d: ", i+1)) && len(c) > 2000; stub == whole || stub != (i < 4) {
			t.Fatalf("result %d of 5 is %.40q; want a stub for the first 4, whole for the last", i+1, c)
		}
	}
	// The request before (the second step of the fifth seeded turn) had
	// results 1 to 3 stubbed, 4 whole: the two requests differ first at
	// result 4.
	prev, cur := reqs[len(reqs)-2].Messages, reqs[len(reqs)-1].Messages
	for i := 1; i < len(prev); i++ {
		if prev[i].Content != cur[i].Content {
			if prev[i].Role != llm.RoleTool || !strings.HasPrefix(prev[i].Content, "page 4: ") {
				t.Fatalf("the requests differ first at message %d (%.30q), not at the result that aged", i, prev[i].Content)
			}
			break
		}
	}
	msgs, _ := h.store.Messages(t.Context(), h.session)
	for _, m := range msgs {
		if m.Role == llm.RoleTool && len(m.Content) < 2000 {
			t.Fatalf("a stored result was modified: %d chars", len(m.Content))
		}
	}
}
