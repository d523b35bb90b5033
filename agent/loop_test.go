package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// A1: a tool call continues the turn; a reply without tool calls ends it.
func TestToolCallContinuesTextEnds(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c1", "current_time", `{}`)}},
		testkit.Reply{Text: "It is 15:04."},
	)
	res := h.run("what time is it?")
	if res.StopReason != agent.StopEndTurn || res.ModelCalls != 2 || res.Steps != 2 {
		t.Fatalf("result = %+v; want end_turn after 2 model calls and 2 steps", res)
	}
	equal(t, "sent", h.chat.Sent(), []string{"It is 15:04."})
	equal(t, "transcript", h.transcript(), []string{
		"user: what time is it?",
		"assistant call current_time{}",
		"tool [c1]: Wednesday, 2 December 2026 15:04:00 (UTC, UTC+00:00)",
		"assistant: It is 15:04.",
	})
	equal(t, "events", h.kinds(), []string{"turn_start", "usage", "tool_start", "tool_end", "usage", "done"})
	tr := h.turnRow(res.TurnID)
	if tr.Status != "completed" || tr.StopReason != "end_turn" || tr.Steps != 2 || tr.Usage.TotalTokens == 0 {
		t.Fatalf("turn row = %+v", tr)
	}
	// The second request carries the tool result right after its call.
	reqs := h.fake.Requests()
	last := reqs[1].Messages
	if n := len(last); last[n-1].Role != llm.RoleTool || last[n-1].ToolCallID != "c1" || last[n-2].ToolCalls[0].ID != "c1" {
		t.Fatalf("second request messages = %+v", last)
	}
}

// A2: the step cap stops the turn with max_steps after a summary call made
// without tools; every tool call has its result.
func TestStepCapSummarisesWithoutTools(t *testing.T) {
	h := newHarness(t, func(c *agent.Config) { c.MaxSteps = 3 })
	n := 0
	var mu sync.Mutex
	h.fake.SetDefault(&testkit.Reply{Func: func(r testkit.Recorded) testkit.Reply {
		if len(r.Tools) == 0 {
			return testkit.Reply{Text: "I looked up the time three times; still working on it."}
		}
		mu.Lock()
		n++
		id := n
		mu.Unlock()
		return testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call(fmt.Sprintf("c%d", id), "current_time", fmt.Sprintf(`{"timezone":"Etc/GMT-%d"}`, id))}}
	}})
	res := h.run("loop forever")
	if res.StopReason != agent.StopMaxSteps || res.ModelCalls != 4 {
		t.Fatalf("result = %+v; want max_steps after 4 model calls", res)
	}
	reqs := h.fake.Requests()
	if len(reqs[3].Tools) != 0 {
		t.Fatalf("the summary call offered %d tools; want none", len(reqs[3].Tools))
	}
	equal(t, "sent", h.chat.Sent(), []string{"I looked up the time three times; still working on it."})
	msgs, _ := h.store.Messages(t.Context(), h.session)
	assertValidTranscript(t, msgs)
	calls, results := 0, 0
	for _, m := range msgs {
		calls += len(m.ToolCalls)
		if m.Role == llm.RoleTool {
			results++
		}
	}
	if calls != 3 || results != 3 {
		t.Fatalf("stored %d calls and %d results; want 3 and 3", calls, results)
	}
}

// A3: the same call three times in a row gets an error result; a fourth
// stops the turn.
func TestRepeatGuard(t *testing.T) {
	var runs int
	var mu sync.Mutex
	tool := &agent.Tool{Name: "lookup", Description: "looks up", ConcurrencySafe: true,
		Fn: func(context.Context, json.RawMessage) (string, error) {
			mu.Lock()
			runs++
			mu.Unlock()
			return "nothing found", nil
		}}
	h := newHarness(t, withTools(tool))
	for i := range 4 {
		h.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call(fmt.Sprintf("c%d", i), "lookup", `{"q": "x"}`)}})
	}
	h.fake.Push(testkit.Reply{Text: "I could not find it."}) // the wrap-up
	res := h.run("find x")
	if res.StopReason != agent.StopToolRule {
		t.Fatalf("stop = %s; want tool_rule", res.StopReason)
	}
	if runs != 2 {
		t.Fatalf("tool ran %d times; want 2 (third refused, fourth stops)", runs)
	}
	msgs, _ := h.store.Messages(t.Context(), h.session)
	var results []string
	for _, m := range msgs {
		if m.Role == llm.RoleTool {
			results = append(results, m.Content)
		}
	}
	if len(results) != 4 || !strings.Contains(results[2], "3 times in a row") || !strings.Contains(results[3], "stopped") {
		t.Fatalf("results = %q", results)
	}
	equal(t, "sent", h.chat.Sent(), []string{"I could not find it."})
}

// A4: finish_reason=length stops with max_tokens_exceeded; the user still
// gets the partial text.
func TestLengthStopsWithPartialText(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(testkit.Reply{Text: "Here is a very long ans", FinishReason: "length"})
	res := h.run("write an essay")
	if res.StopReason != agent.StopMaxTokensExceeded || res.StopReason.Class() != "completed" {
		t.Fatalf("stop = %s", res.StopReason)
	}
	equal(t, "sent", h.chat.Sent(), []string{"Here is a very long ans"})
}

// A5: an empty reply is never stored or sent: one retry, then an apology.
func TestEmptyReply(t *testing.T) {
	t.Run("retry succeeds", func(t *testing.T) {
		h := newHarness(t)
		h.fake.Push(testkit.Reply{}, testkit.Reply{Text: "Hello!"})
		res := h.run("hi")
		if res.StopReason != agent.StopEndTurn || res.ModelCalls != 2 {
			t.Fatalf("result = %+v", res)
		}
		equal(t, "sent", h.chat.Sent(), []string{"Hello!"})
		equal(t, "transcript", h.transcript(), []string{"user: hi", "assistant: Hello!"})
	})
	t.Run("twice empty apologises", func(t *testing.T) {
		h := newHarness(t)
		h.fake.Push(testkit.Reply{}, testkit.Reply{Text: "  "})
		res := h.run("hi")
		if res.StopReason != agent.StopInvalidResponse || res.ModelCalls != 2 {
			t.Fatalf("result = %+v", res)
		}
		sent := h.chat.Sent()
		if len(sent) != 1 || !strings.Contains(sent[0], "Sorry") {
			t.Fatalf("sent = %q; want one apology", sent)
		}
		equal(t, "transcript", h.transcript(), []string{"user: hi"})
	})
}

// A6: cancellation inside a slow tool: the tool's context is cancelled, the
// stop reason is cancelled, nothing is sent and the transcript stays valid.
func TestCancelInsideSlowTool(t *testing.T) {
	started := make(chan struct{})
	h := newHarness(t, withTools(blockingTool("slow", started)))
	h.fake.Push(testkit.Reply{Text: "looking…", ToolCalls: []llm.ToolCall{testkit.Call("c1", "slow", `{}`)}})
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-started; cancel() }()
	tr := h.turn("do the slow thing")
	res := h.agent.Run(ctx, tr)
	if res.StopReason != agent.StopCancelled || res.StopReason.Class() != "cancelled" {
		t.Fatalf("stop = %s; want cancelled", res.StopReason)
	}
	if res.ModelCalls != 1 {
		t.Fatalf("model calls = %d; want 1 (checked before the next call)", res.ModelCalls)
	}
	if sent := h.chat.Sent(); len(sent) != 0 {
		t.Fatalf("sent %q after cancel", sent)
	}
	msgs, _ := h.store.Messages(t.Context(), h.session)
	assertValidTranscript(t, msgs)
	equal(t, "transcript", h.transcript(), []string{
		"user: do the slow thing", "assistant call slow{}: looking…", "tool [c1]: error: context canceled"})
	if tr := h.turnRow(res.TurnID); tr.Status != "cancelled" {
		t.Fatalf("turn status = %s", tr.Status)
	}
	if n := len(h.eventsOf(agent.EventDone)); n != 1 {
		t.Fatalf("%d done events; want exactly 1", n)
	}
}

// B8: an error in step 2 leaves the store exactly as after step 1.
func TestStepAtomicityOnModelError(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c1", "current_time", `{}`)}},
		testkit.Reply{Status: 400, ErrorCode: "invalid_request_error", ErrorMessage: "bad request"},
	)
	res := h.run("time?")
	if res.StopReason != agent.StopLLMError || res.Err == nil {
		t.Fatalf("result = %+v; want llm_error", res)
	}
	equal(t, "transcript", h.transcript(), []string{
		"user: time?", "assistant call current_time{}", "tool [c1]: Wednesday, 2 December 2026 15:04:00 (UTC, UTC+00:00)"})
	tr := h.turnRow(res.TurnID)
	if tr.Status != "failed" || tr.Steps != 1 || tr.StopReason != "llm_error" {
		t.Fatalf("turn row = %+v", tr)
	}
	sent := h.chat.Sent()
	if len(sent) != 1 || !strings.Contains(sent[0], "couldn't reach the language model") {
		t.Fatalf("user got %q; want one short error message", sent)
	}
}

// B9: an orphaned tool call from an interrupted turn gets a synthetic
// result before the next request.
func TestOrphanRepair(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	id, _, err := h.store.BeginTurn(ctx, store.TurnStart{ChatID: h.chatID, SessionID: h.session, Kind: "user"},
		[]llm.Message{{Role: llm.RoleUser, Content: "crashy"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.CommitStep(ctx, id, 1, []store.StepMessage{{Message: llm.Message{Role: llm.RoleAssistant,
		ToolCalls: []llm.ToolCall{{ID: "orphan", Name: "current_time", Arguments: "{}"}}}}}, llm.Usage{}); err != nil {
		t.Fatal(err)
	}
	h.fake.Push(testkit.Reply{Text: "ok"})
	if res := h.run("hello again"); res.StopReason != agent.StopEndTurn {
		t.Fatalf("stop = %s", res.StopReason)
	}
	msgs := h.fake.Requests()[0].Messages
	var roles []string
	for _, m := range msgs {
		roles = append(roles, string(m.Role))
	}
	equal(t, "request roles", roles, []string{"system", "user", "assistant", "tool", "user"})
	if msgs[3].ToolCallID != "orphan" || !strings.Contains(msgs[3].Content, "interrupted") {
		t.Fatalf("synthetic result = %+v", msgs[3])
	}
}

// B10 and C14: results in call order; contiguous safe calls run together,
// an unsafe call alone, and side effects keep their order.
func TestBatchesAndResultOrder(t *testing.T) {
	var mu sync.Mutex
	var log []string
	note := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	aStarted, bStarted := make(chan struct{}), make(chan struct{})
	safe := func(name string, mine, other chan struct{}) *agent.Tool {
		return &agent.Tool{Name: name, ConcurrencySafe: true, Fn: func(ctx context.Context, _ json.RawMessage) (string, error) {
			note(name + " start")
			close(mine)
			select { // proves parallelism: each waits for the other to start
			case <-other:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			note(name + " end")
			return name + " done", nil
		}}
	}
	plain := func(name string, safeFlag bool) *agent.Tool {
		return &agent.Tool{Name: name, ConcurrencySafe: safeFlag, Fn: func(context.Context, json.RawMessage) (string, error) {
			note(name + " start")
			note(name + " end")
			return name + " done", nil
		}}
	}
	h := newHarness(t, withTools(safe("a", aStarted, bStarted), safe("b", bStarted, aStarted), plain("c", false), plain("d", true)))
	h.fake.Push(
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "a", "{}"), testkit.Call("2", "b", "{}"), testkit.Call("3", "c", "{}"), testkit.Call("4", "d", "{}")}},
		testkit.Reply{Text: "all done"},
	)
	if res := h.run("go"); res.StopReason != agent.StopEndTurn {
		t.Fatalf("stop = %s", res.StopReason)
	}
	// a and b ran together (in either order); then c alone; then d.
	if len(log) != 8 || !strings.HasSuffix(log[0], "start") || !strings.HasSuffix(log[1], "start") {
		t.Fatalf("a and b did not run together: %q", log)
	}
	equal(t, "after the safe batch", log[4:], []string{"c start", "c end", "d start", "d end"})
	equal(t, "results in call order", h.transcript()[2:6], []string{
		"tool [1]: a done", "tool [2]: b done", "tool [3]: c done", "tool [4]: d done"})
}

// C12: unknown tool, invalid JSON, arguments failing the schema: not run,
// an error result that says what was wrong, and the loop goes on.
func TestBadToolCalls(t *testing.T) {
	ran := false
	tool := &agent.Tool{Name: "greet", Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
		Fn: func(context.Context, json.RawMessage) (string, error) { ran = true; return "hi", nil }}
	if err := tool.Compile(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call llm.ToolCall
		want []string
	}{
		{"unknown tool", testkit.Call("x", "fly", `{}`), []string{`unknown tool "fly"`, "available tools:", "current_time", "greet", "send_message"}},
		{"invalid json", testkit.Call("x", "greet", `{"name": `), []string{"not valid JSON"}},
		{"not an object", testkit.Call("x", "greet", `[1]`), []string{"must be a JSON object"}},
		{"schema failure", testkit.Call("x", "greet", `{"name": 42}`), []string{"do not match its schema"}},
		{"missing required", testkit.Call("x", "greet", `{}`), []string{"do not match its schema", "name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, withTools(tool))
			h.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{tt.call}}, testkit.Reply{Text: "sorry"})
			if res := h.run("go"); res.StopReason != agent.StopEndTurn || res.ModelCalls != 2 {
				t.Fatalf("result = %+v", res)
			}
			if ran {
				t.Fatal("the tool ran on bad input")
			}
			second := h.fake.Requests()[1].Messages
			result := second[len(second)-1]
			if result.Role != llm.RoleTool {
				t.Fatalf("last message = %+v", result)
			}
			for _, w := range tt.want {
				if !strings.Contains(result.Content, w) {
					t.Errorf("result %q lacks %q", result.Content, w)
				}
			}
		})
	}
}

// C13: a tool that errors or panics gives an error result; the turn goes on.
func TestToolErrorAndPanic(t *testing.T) {
	failing := &agent.Tool{Name: "fails", Fn: func(context.Context, json.RawMessage) (string, error) { return "", errBoom }}
	panicking := &agent.Tool{Name: "panics", Fn: func(context.Context, json.RawMessage) (string, error) { panic("kaboom") }}
	h := newHarness(t, withTools(failing, panicking))
	h.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "fails", "{}"), testkit.Call("2", "panics", "{}")}},
		testkit.Reply{Text: "both failed"})
	res := h.run("try")
	if res.StopReason != agent.StopEndTurn {
		t.Fatalf("stop = %s", res.StopReason)
	}
	tr := h.transcript()
	equal(t, "results", tr[2:4], []string{"tool [1]: error: boom", "tool [2]: error: tool panics crashed: kaboom"})
	ends := h.eventsOf(agent.EventToolEnd)
	if len(ends) != 2 || !ends[0].IsError || !ends[1].IsError {
		t.Fatalf("tool_end events = %+v", ends)
	}
}

// C15: two-layer truncation: a per-tool cap at execution, and a request-time
// cap of max(5000, 0.2 × window × 4) that leaves the stored copy intact.
func TestTwoLayerTruncation(t *testing.T) {
	big := strings.Repeat("x", 200_000)
	capped := &agent.Tool{Name: "capped", Fn: func(context.Context, json.RawMessage) (string, error) { return big, nil }}
	uncapped := &agent.Tool{Name: "uncapped", MaxResultChars: 1_000_000, Fn: func(context.Context, json.RawMessage) (string, error) { return big, nil }}
	h := newHarness(t, withTools(capped, uncapped), func(c *agent.Config) { c.ContextWindow = 128_000 * 3 })
	h.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "capped", "{}"), testkit.Call("2", "uncapped", "{}")}},
		testkit.Reply{Text: "ok"})
	h.run("big")
	msgs, _ := h.store.Messages(t.Context(), h.session)
	stored := map[string]string{}
	for _, m := range msgs {
		if m.Role == llm.RoleTool {
			stored[m.ToolCallID] = m.Content
		}
	}
	if !strings.HasPrefix(stored["1"], strings.Repeat("x", 50_000)+"\n\n[truncated: showing 50000 of 200000 characters]") {
		t.Fatalf("execution cap: stored %d chars", len(stored["1"]))
	}
	if stored["2"] != big {
		t.Fatalf("uncapped result stored with %d chars; want the whole 200000", len(stored["2"]))
	}
	req := h.fake.Requests()[1].Messages
	sentLen := map[string]int{}
	for _, m := range req {
		if m.Role == llm.RoleTool {
			sentLen[m.ToolCallID] = len(m.Content)
		}
	}
	// Window 384k tokens → cap 0.2 × 384000 × 4 = 307200 chars: both fit.
	if sentLen["2"] != 200_000 {
		t.Fatalf("request carried %d chars of the uncapped result; want 200000", sentLen["2"])
	}

	h2 := newHarness(t, withTools(uncapped), func(c *agent.Config) { c.ContextWindow = 128_000 })
	h2.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "uncapped", "{}")}}, testkit.Reply{Text: "ok"})
	h2.run("big")
	req = h2.fake.Requests()[1].Messages
	got := req[len(req)-1].Content
	if !strings.HasPrefix(got, strings.Repeat("x", 102_400)+"\n\n[truncated: showing 102400 of 200000") {
		t.Fatalf("request-time cap with a 128k window: got %d chars", len(got))
	}
	msgs, _ = h2.store.Messages(t.Context(), h2.session)
	if last := msgs[len(msgs)-2]; last.Content != big {
		t.Fatalf("stored copy was cut to %d chars", len(last.Content))
	}
}

// H25: send tool + fallback, the three cases.
func TestSendToolAndFallback(t *testing.T) {
	t.Run("send tool, then text: never both", func(t *testing.T) {
		h := newHarness(t)
		h.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "send_message", `{"text":"Hi Ada!"}`)}},
			testkit.Reply{Text: "I said hi."})
		res := h.run("hello")
		equal(t, "sent", h.chat.Sent(), []string{"Hi Ada!"})
		if !res.Delivered || res.Reply != "" {
			t.Fatalf("result = %+v", res)
		}
	})
	t.Run("text only: sent once by the fallback", func(t *testing.T) {
		h := newHarness(t)
		h.fake.Push(testkit.Reply{Text: "Hello Ada."})
		res := h.run("hello")
		equal(t, "sent", h.chat.Sent(), []string{"Hello Ada."})
		if res.Reply != "Hello Ada." {
			t.Fatalf("reply = %q", res.Reply)
		}
	})
	t.Run("no-reply marker: nothing sent", func(t *testing.T) {
		h := newHarness(t)
		h.fake.Push(testkit.Reply{Text: " NO_REPLY "})
		res := h.run("(chatter in a group)")
		if len(h.chat.Sent()) != 0 || res.Delivered || res.StopReason != agent.StopEndTurn {
			t.Fatalf("sent %q, result %+v", h.chat.Sent(), res)
		}
	})
	// A reply the chat keeps for later (the router's outbox) counts as
	// sent: the model is told it is queued and the fallback does not send
	// the final text again; the turn ends without an error.
	t.Run("queued send tool: sent, not again", func(t *testing.T) {
		h := newHarness(t)
		h.chat.Fail = fmt.Errorf("%w: HTTP 502", agent.ErrSendQueued)
		h.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "send_message", `{"text":"Hi Ada!"}`)}},
			testkit.Reply{Text: "I said hi."})
		res := h.run("hello")
		if !res.Delivered || res.Err != nil || res.StopReason != agent.StopEndTurn {
			t.Fatalf("result = %+v", res)
		}
		if got := h.fake.Requests()[1].Messages; !strings.HasPrefix(got[len(got)-1].Content, "queued: ") {
			t.Errorf("tool result = %q, want it to say queued", got[len(got)-1].Content)
		}
		if row := h.turnRow(res.TurnID); row.Error != "" || row.Status != store.TurnCompleted {
			t.Errorf("turn = %+v, want completed without error", row)
		}
	})
	t.Run("queued fallback: the turn ends without an error", func(t *testing.T) {
		h := newHarness(t)
		h.chat.Fail = fmt.Errorf("%w: HTTP 502", agent.ErrSendQueued)
		h.fake.Push(testkit.Reply{Text: "Hello Ada."})
		res := h.run("hello")
		if !res.Delivered || res.Err != nil {
			t.Fatalf("result = %+v", res)
		}
		if row := h.turnRow(res.TurnID); row.Error != "" || row.Status != store.TurnCompleted {
			t.Errorf("turn = %+v, want completed without error", row)
		}
	})
	t.Run("failed send tool: the fallback still answers", func(t *testing.T) {
		h := newHarness(t)
		h.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "send_message", `{"text":""}`)}},
			testkit.Reply{Text: "Hello."})
		h.run("hello")
		equal(t, "sent", h.chat.Sent(), []string{"Hello."})
	})
}

// H26: text that comes with tool calls is not sent; it is an event and
// stays in the turn's history.
func TestInterimTextNotSent(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(testkit.Reply{Text: "Let me check the clock.", ToolCalls: []llm.ToolCall{testkit.Call("1", "current_time", `{}`)}},
		testkit.Reply{Text: "It's 15:04."})
	h.run("time?")
	equal(t, "sent", h.chat.Sent(), []string{"It's 15:04."})
	ev := h.eventsOf(agent.EventInterimText)
	if len(ev) != 1 || ev[0].Text != "Let me check the clock." {
		t.Fatalf("interim events = %+v", ev)
	}
	second := h.fake.Requests()[1].Messages
	if second[2].Content != "Let me check the clock." || len(second[2].ToolCalls) != 1 {
		t.Fatalf("interim text not kept in the turn's history: %+v", second[2])
	}
}

// J30: a 5xx is retried with backoff and the turn completes; the user sees
// one reply. An unreachable model gives a short error and a failed turn.
func TestModelRetriesAndUnreachable(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(testkit.Reply{Status: 500}, testkit.Reply{Status: 429, RetryAfter: "2"}, testkit.Reply{Text: "finally"})
	res := h.run("hi")
	if res.StopReason != agent.StopEndTurn || h.fake.Calls() != 3 || res.ModelCalls != 1 {
		t.Fatalf("result = %+v, http calls %d", res, h.fake.Calls())
	}
	equal(t, "sent", h.chat.Sent(), []string{"finally"})
	if len(h.sleeps) != 2 || h.sleeps[1].Seconds() != 2 {
		t.Fatalf("backoff sleeps = %v; want two, the second honouring Retry-After: 2", h.sleeps)
	}

	h2 := newHarness(t)
	h2.fake.SetDefault(&testkit.Reply{Status: 503})
	res = h2.run("hi")
	if res.StopReason != agent.StopLLMError || res.StopReason.Class() != "failed" {
		t.Fatalf("stop = %s", res.StopReason)
	}
	if tr := h2.turnRow(res.TurnID); tr.Status != "failed" || !strings.Contains(tr.Error, "503") {
		t.Fatalf("turn row = %+v", tr)
	}
	sent := h2.chat.Sent()
	if len(sent) != 1 || !strings.Contains(sent[0], "HTTP 503") {
		t.Fatalf("sent = %q", sent)
	}
}

// J31: a per-turn token budget stops the turn between steps.
func TestTurnBudget(t *testing.T) {
	h := newHarness(t, func(c *agent.Config) { c.TurnTokenBudget = 100 })
	h.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "current_time", `{}`)},
		Usage: &llm.Usage{PromptTokens: 90, CompletionTokens: 20, TotalTokens: 110}})
	res := h.run("time?")
	if res.StopReason != agent.StopBudgetExceeded || res.ModelCalls != 1 {
		t.Fatalf("result = %+v", res)
	}
	sent := h.chat.Sent()
	if len(sent) != 1 || !strings.Contains(sent[0], "budget") {
		t.Fatalf("sent = %q", sent)
	}
}

// J31: the per-user daily budget counts earlier turns of the day.
func TestUserDailyBudget(t *testing.T) {
	h := newHarness(t, func(c *agent.Config) { c.UserDailyTokenBudget = 150 })
	h.fake.Push(testkit.Reply{Text: "one", Usage: &llm.Usage{TotalTokens: 100}}, testkit.Reply{Text: "two", Usage: &llm.Usage{TotalTokens: 100}})
	if res := h.run("first"); res.StopReason != agent.StopEndTurn {
		t.Fatalf("first: %s", res.StopReason)
	}
	if res := h.run("second"); res.StopReason != agent.StopEndTurn {
		t.Fatalf("second: %s", res.StopReason)
	}
	res := h.run("third")
	if res.StopReason != agent.StopBudgetExceeded || res.ModelCalls != 0 {
		t.Fatalf("third: %+v", res)
	}
}

// A7: exactly one terminal event per turn, for every way a turn can end.
func TestExactlyOneDoneEvent(t *testing.T) {
	scripts := map[string][]testkit.Reply{
		"end_turn":   {{Text: "hi"}},
		"llm_error":  {{Status: 401}},
		"max_tokens": {{Text: "par", FinishReason: "length"}},
		"empty":      {{}, {}},
	}
	for name, replies := range scripts {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.fake.Push(replies...)
			h.run("x")
			kinds := h.kinds()
			if kinds[0] != "turn_start" || kinds[len(kinds)-1] != "done" || len(h.eventsOf(agent.EventDone)) != 1 {
				t.Fatalf("events = %q", kinds)
			}
		})
	}
}

// A turn interrupted after its final answer was stored (a crash before the
// answer reached the user) is resumed by delivering that stored answer, not
// by asking the model again: a second answer would differ from the one in
// the history, and could be sent twice.
func TestResumeAfterStoredAnswerDeliversIt(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	user := llm.Message{Role: llm.RoleUser, Content: "what is the answer?"}
	turnID, _, err := h.store.BeginTurn(ctx, store.TurnStart{ChatID: h.chatID, SessionID: h.session,
		UserID: "u1", Channel: "test", Kind: "user"}, []llm.Message{user})
	if err != nil {
		t.Fatal(err)
	}
	const answer = "The stored answer."
	if _, err := h.store.CommitStep(ctx, turnID, 1, []store.StepMessage{{Message: llm.Message{Role: llm.RoleAssistant, Content: answer}}}, llm.Usage{}); err != nil {
		t.Fatal(err)
	}
	h.fake.SetDefault(&testkit.Reply{Text: "A different, new answer."})
	res := h.run(user.Content, func(tr *agent.Turn) { tr.ResumeTurnID = turnID })
	if res.StopReason != agent.StopEndTurn || res.Err != nil {
		t.Fatalf("result = %+v; want end_turn", res)
	}
	if n := h.fake.Calls(); n != 0 {
		t.Errorf("the model was asked %d times, want 0: the answer was stored", n)
	}
	equal(t, "sent", h.chat.Sent(), []string{answer})
	equal(t, "transcript", h.transcript(), []string{"user: what is the answer?", "assistant: " + answer})
}

// A resumed turn counts the steps it took before the interruption: a turn
// cut off after three of its three allowed steps does not get three more.
func TestResumeKeepsStepCount(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	user := llm.Message{Role: llm.RoleUser, Content: "keep going"}
	turnID, _, err := h.store.BeginTurn(ctx, store.TurnStart{ChatID: h.chatID, SessionID: h.session,
		UserID: "u1", Channel: "test", Kind: "user"}, []llm.Message{user})
	if err != nil {
		t.Fatal(err)
	}
	for step := 1; step <= 3; step++ {
		id := fmt.Sprintf("call_%d", step)
		msgs := []store.StepMessage{
			{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id, Name: "get_time", Arguments: "{}"}}}},
			{Message: llm.Message{Role: llm.RoleTool, ToolCallID: id, Name: "get_time", Content: "12:00"}},
		}
		if _, err := h.store.CommitStep(ctx, turnID, step, msgs, llm.Usage{}); err != nil {
			t.Fatal(err)
		}
	}
	h.fake.SetDefault(&testkit.Reply{Text: "Summary of where I got to."})
	res := h.run(user.Content, func(tr *agent.Turn) { tr.ResumeTurnID = turnID; tr.MaxSteps = 3 })
	if res.StopReason != agent.StopMaxSteps {
		t.Fatalf("stop reason = %s (steps %d); want max_steps: three steps were taken before the restart", res.StopReason, res.Steps)
	}
}

// The skills a turn engaged travel with it to its EventDone (the after-turn
// skill review reads them there).
func TestDoneEventCarriesTheTurnsSkills(t *testing.T) {
	h := newHarness(t)
	h.fake.Push(testkit.Reply{Text: "sunny"})
	res := h.run("weather?", func(tr *agent.Turn) { tr.Skills = []string{"weather"} })
	if res.StopReason != agent.StopEndTurn {
		t.Fatalf("stop = %s", res.StopReason)
	}
	done := h.eventsOf(agent.EventDone)
	if len(done) != 1 || !slices.Equal(done[0].Skills, []string{"weather"}) || done[0].TurnID != res.TurnID {
		t.Fatalf("done events = %+v; want one with skills [weather] for turn %d", done, res.TurnID)
	}
}

// A 200 that is not JSON or an event stream (a captive portal's page) is a
// failed model call, not an empty answer: retried, and once retries run out
// the turn ends llm_error with the outage notice, never "rephrase".
func TestMalformedModelAnswer(t *testing.T) {
	page := testkit.Reply{RawBody: []byte("<html><title>Sign in</title></html>"), RawContentType: "text/html"}
	t.Run("then a good reply", func(t *testing.T) {
		h := newHarness(t)
		h.fake.Push(page, testkit.Reply{Text: "Hello!"})
		res := h.run("hi")
		if res.StopReason != agent.StopEndTurn || res.Err != nil {
			t.Fatalf("result = %+v; want end_turn", res)
		}
		if sent := h.chat.Sent(); len(sent) != 1 || sent[0] != "Hello!" {
			t.Fatalf("user got %q; want the good reply", sent)
		}
		if n := h.fake.Calls(); n != 2 {
			t.Fatalf("model calls = %d; want 2 (one retry)", n)
		}
	})
	t.Run("only malformed", func(t *testing.T) {
		h := newHarness(t)
		h.fake.SetDefault(&page)
		res := h.run("hi")
		if res.StopReason != agent.StopLLMError || res.Err == nil {
			t.Fatalf("result = %+v; want llm_error", res)
		}
		sent := h.chat.Sent()
		if len(sent) != 1 || !strings.Contains(sent[0], "couldn't reach the language model") || strings.Contains(sent[0], "rephrase") {
			t.Fatalf("user got %q; want the outage notice", sent)
		}
		if n := h.fake.Calls(); n != 3 {
			t.Fatalf("model calls = %d; want 3 (MaxRetries 2)", n)
		}
	})
}

// A turn that holds on an outage stops when the model is unavailable after
// the client's retries: no reply, its committed step kept, the turn left
// running and its message pending. Resumed once the model answers, it goes
// on from there (the tool call is not run again). A model that refuses the
// request is no outage: that turn fails with the short error as before.
func TestModelUnavailableHoldsTheTurn(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	inboxID, _, err := h.store.Intake(ctx, store.InboxItem{Channel: "test", ChatKey: "chat-1", MessageID: "m1", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	hold := func(tr *agent.Turn) { tr.InboxID, tr.HoldOnOutage = inboxID, true }
	h.fake.Push(
		testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c1", "current_time", `{}`)}},
		testkit.Reply{Status: 503}, testkit.Reply{CutStream: true}, testkit.Reply{Status: 502, HTMLBody: true},
	)
	res := h.run("time?", hold)
	if res.StopReason != agent.StopModelUnavailable || !llm.Unavailable(res.Err) || res.InboxDone {
		t.Fatalf("result = %+v; want model_unavailable", res)
	}
	if sent := h.chat.Sent(); len(sent) != 0 {
		t.Fatalf("user got %q; want nothing yet", sent)
	}
	if tr := h.turnRow(res.TurnID); tr.Status != store.TurnRunning || tr.Steps != 1 {
		t.Fatalf("turn row = %+v; want running with its step", tr)
	}
	if pending, err := h.store.PendingInbox(ctx); err != nil || len(pending) != 1 {
		t.Fatalf("pending = %+v, %v; want the message", pending, err)
	}

	h.fake.Push(testkit.Reply{Text: "It is 15:04."})
	res = h.run("time?", hold, func(tr *agent.Turn) { tr.ResumeTurnID = res.TurnID })
	if res.StopReason != agent.StopEndTurn || res.Err != nil || !res.InboxDone {
		t.Fatalf("resumed result = %+v; want end_turn", res)
	}
	equal(t, "sent", h.chat.Sent(), []string{"It is 15:04."})
	equal(t, "transcript", h.transcript(), []string{
		"user: time?", "assistant call current_time{}", "tool [c1]: Wednesday, 2 December 2026 15:04:00 (UTC, UTC+00:00)",
		"assistant: It is 15:04."})

	h.fake.Push(testkit.Reply{Status: 400, ErrorMessage: "bad request"})
	res = h.run("again", func(tr *agent.Turn) { tr.HoldOnOutage = true })
	if res.StopReason != agent.StopLLMError {
		t.Fatalf("a refused request: %+v; want llm_error", res)
	}
}

// A send_message call's text is emitted as reply deltas while it streams,
// decoded from the partial JSON, before the call runs; the text of two
// calls streamed interleaved stays apart; a call of another tool, and a
// send_message call where the tool is not offered, emit none.
func TestReplyDeltas(t *testing.T) {
	h := newHarness(t)
	first := `{"text":"Line one\nwith \"quotes\" and \ud83d\ude00 — done."}`
	h.fake.Push(testkit.Reply{ArgPieces: 7, ToolCalls: []llm.ToolCall{
		testkit.Call("s1", "send_message", first),
		testkit.Call("t1", "current_time", `{}`),
		testkit.Call("s2", "send_message", `{"text":"Second."}`),
	}}, testkit.Reply{Text: "done"})
	h.run("hello")

	got := map[string]string{}
	var order []string
	h.mu.Lock()
	for _, e := range h.events {
		switch e.Kind {
		case agent.EventReplyDelta:
			if e.Tool != "send_message" || e.Step != 1 {
				t.Errorf("reply delta %+v", e)
			}
			if got[e.CallID] == "" {
				order = append(order, "delta "+e.CallID)
			}
			got[e.CallID] += e.Text
		case agent.EventToolStart:
			order = append(order, "start "+e.CallID)
		}
	}
	h.mu.Unlock()
	equal(t, "sent", h.chat.Sent(), []string{"Line one\nwith \"quotes\" and 😀 — done.", "Second."})
	if got["s1"] != h.chat.Sent()[0] || got["s2"] != "Second." || len(got) != 2 {
		t.Errorf("reply deltas joined = %q", got)
	}
	equal(t, "order", order, []string{"delta s1", "delta s2", "start s1", "start t1", "start s2"})

	h2 := newHarness(t)
	h2.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("s1", "send_message", `{"text":"not offered"}`)}},
		testkit.Reply{Text: "ok"})
	h2.run("hello", func(tr *agent.Turn) { tr.Allow = map[string]bool{"current_time": true} })
	if n := len(h2.eventsOf(agent.EventReplyDelta)); n != 0 {
		t.Errorf("%d reply deltas for a send_message the step did not offer", n)
	}
}

// A tool_start event carries the tool's description, which chats show as
// the tool's progress line.
func TestToolStartCarriesDescription(t *testing.T) {
	lookup := &agent.Tool{Name: "lookup", Description: "Look up the weather for a city.",
		Fn: func(context.Context, json.RawMessage) (string, error) { return "sunny", nil }}
	h := newHarness(t, withTools(lookup))
	h.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "lookup", "{}")}}, testkit.Reply{Text: "sunny"})
	h.run("weather?")
	starts := h.eventsOf(agent.EventToolStart)
	if len(starts) != 1 || starts[0].Tool != "lookup" || starts[0].Text != "Look up the weather for a city." {
		t.Fatalf("tool_start events = %+v", starts)
	}
}

// Issue 30: a panicking tool's stack reaches the log (at ERROR, with the
// tool's name), while the model still gets only the error result.
func TestToolPanicStackIsLogged(t *testing.T) {
	panicking := &agent.Tool{Name: "panics", Fn: func(context.Context, json.RawMessage) (string, error) { panic("kaboom") }}
	var logs testkit.SyncBuffer
	h := newHarness(t, withTools(panicking), func(c *agent.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	h.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("1", "panics", "{}")}},
		testkit.Reply{Text: "it failed"})
	if res := h.run("try"); res.StopReason != agent.StopEndTurn {
		t.Fatalf("stop = %s", res.StopReason)
	}
	equal(t, "result", h.transcript()[2:3], []string{"tool [1]: error: tool panics crashed: kaboom"})
	out := logs.String()
	for _, want := range []string{"level=ERROR", `msg="tool panicked"`, "tool=panics", "kaboom",
		"runtime/debug.Stack", "TestToolPanicStackIsLogged"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}
