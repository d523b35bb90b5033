package reply_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/reply"
	"github.com/switchboard-gateway/switchboard/router"
)

// liveChannel is a fake channel with edits, drafts and deletes that logs
// every call, with its priority and the (virtual) time since the test
// began.
type liveChannel struct {
	*fakeChannel
	start  time.Time
	drafts bool // Draft works; otherwise it returns ErrNoDrafts

	mu        sync.Mutex
	ops       []liveOp
	failPrev  error // returned by every PriorityPreview call
	failFinal error // returned by edits at PriorityReply
	hangEdits bool  // preview edits wait for their context to end
	oneMsg    int   // Fits: texts up to this many bytes are one message (0: any)
}

type liveOp struct {
	kind, id, text string // kind: send, edit, draft, delete
	preview        bool   // made at PriorityPreview
	at             time.Duration
	err            error
}

func (o liveOp) String() string {
	p := "r"
	if o.preview {
		p = "p"
	}
	s := fmt.Sprintf("%s %s [%s] %q @%s", o.kind, o.id, p, o.text, o.at)
	if o.err != nil {
		s += " err"
	}
	return s
}

func newLiveChannel(drafts bool) *liveChannel {
	return &liveChannel{fakeChannel: newFakeChannel(), start: time.Now(), drafts: drafts}
}

// log records a call and returns the error it fails with.
func (c *liveChannel) log(ctx context.Context, kind, id, text string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	op := liveOp{kind: kind, id: id, text: text, at: time.Since(c.start),
		preview: channels.PriorityOf(ctx) == channels.PriorityPreview}
	switch {
	case op.preview && c.failPrev != nil:
		op.err = c.failPrev
	case kind == "draft" && !c.drafts:
		op.err = channels.ErrNoDrafts
	case kind == "edit" && !op.preview && c.failFinal != nil:
		op.err = c.failFinal
	}
	c.ops = append(c.ops, op)
	return op.err
}

func (c *liveChannel) Send(ctx context.Context, m channels.Outbound) (string, error) {
	c.fakeChannel.Mu.Lock()
	id := fmt.Sprintf("out-%d", len(c.fakeChannel.Sent)+1)
	c.fakeChannel.Mu.Unlock()
	if err := c.log(ctx, "send", id, m.Text); err != nil {
		return "", err
	}
	return c.fakeChannel.Send(ctx, m)
}

func (c *liveChannel) Edit(ctx context.Context, _, id, text string) error {
	if c.hangEdits && channels.PriorityOf(ctx) == channels.PriorityPreview {
		<-ctx.Done()
		c.log(ctx, "edit", id, text)
		return ctx.Err()
	}
	return c.log(ctx, "edit", id, text)
}

func (c *liveChannel) Draft(ctx context.Context, _ string, id int64, text string) error {
	return c.log(ctx, "draft", fmt.Sprint(id), text)
}

func (c *liveChannel) Fits(text string) bool { return c.oneMsg == 0 || len(text) <= c.oneMsg }

func (c *liveChannel) Delete(ctx context.Context, _, id string) error {
	return c.log(ctx, "delete", id, "")
}

// calls returns the calls made so far that succeeded (all: failed ones too).
func (c *liveChannel) calls(all bool) []liveOp {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []liveOp
	for _, op := range c.ops {
		if all || op.err == nil {
			out = append(out, op)
		}
	}
	return out
}

func (c *liveChannel) count(kind string) int {
	n := 0
	for _, op := range c.calls(false) {
		if op.kind == kind {
			n++
		}
	}
	return n
}

var (
	_ channels.Editor  = (*liveChannel)(nil)
	_ channels.Drafter = (*liveChannel)(nil)
	_ channels.Deleter = (*liveChannel)(nil)
	_ channels.Fitter  = (*liveChannel)(nil)
)

// scriptRunner is an agent whose turn is a script of events and sends,
// paced by the bubble's virtual clock; run counts the turns.
type scriptRunner struct {
	script func(ctx context.Context, t agent.Turn, run int) agent.Result
	runs   int
}

func (s *scriptRunner) Run(ctx context.Context, t agent.Turn) agent.Result {
	s.runs++
	t.OnEvent(agent.Event{Kind: agent.EventTurnStart})
	res := s.script(ctx, t, s.runs)
	t.OnEvent(agent.Event{Kind: agent.EventDone, StopReason: res.StopReason})
	return res
}

// stream emits text as deltas of kind (for call), one word every every.
func stream(t agent.Turn, kind agent.EventKind, call, text string, every time.Duration) {
	for w := range strings.SplitAfterSeq(text, " ") {
		t.OnEvent(agent.Event{Kind: kind, CallID: call, Text: w})
		elapse(every)
	}
}

// sendCall runs a send_message call of text as the loop does.
func sendCall(ctx context.Context, t agent.Turn, call, text string) {
	t.OnEvent(agent.Event{Kind: agent.EventToolStart, Tool: "send_message", CallID: call})
	_, _ = t.Chat.Send(ctx, text)
	t.OnEvent(agent.Event{Kind: agent.EventToolEnd, Tool: "send_message", CallID: call})
}

// runTool runs a tool call that takes d.
func runTool(t agent.Turn, tool, description, call string, d time.Duration) {
	t.OnEvent(agent.Event{Kind: agent.EventToolStart, Tool: tool, CallID: call, Text: description})
	elapse(d)
	t.OnEvent(agent.Event{Kind: agent.EventToolEnd, Tool: tool, CallID: call})
}

var endTurn = agent.Result{StopReason: agent.StopEndTurn, Delivered: true}

// liveRun runs one message of chatType on ch through a router with the
// tool progress line on and previews as preview, answered by script (in the
// test's synctest bubble).
func liveRun(t *testing.T, ch *liveChannel, chatType channels.ChatType, preview bool,
	script func(ctx context.Context, t agent.Turn, run int) agent.Result) {
	t.Helper()
	liveRunWith(t, ch, chatType, preview, true, script)
}

// liveRunWith is liveRun with the progress line as progress.
func liveRunWith(t *testing.T, ch *liveChannel, chatType channels.ChatType, preview, progress bool,
	script func(ctx context.Context, t agent.Turn, run int) agent.Result) {
	t.Helper()
	st := openWaitStore(t)
	cfg := router.Config{Store: st, Agent: &scriptRunner{script: script},
		Replies:   reply.Options{Preview: map[string]bool{"fake": preview}, ToolProgress: map[string]bool{"fake": progress}},
		NewTicker: func(time.Duration) router.Ticker { return stoppedTicker{} }}
	r, err := router.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.AddChannel(ch, everyone)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(context.Background())
	in := msg("c1", "u", "question")
	in.ChatType = chatType
	if err := r.Deliver(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	if err := r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
}

const answer = "The answer is forty-two, because that is what the book says, and the book is right about it."

// kinds lists the calls as "kind id [priority] text".
func kinds(ops []liveOp) []string {
	var out []string
	for _, op := range ops {
		p := "r"
		if op.preview {
			p = "p"
		}
		out = append(out, fmt.Sprintf("%s %s [%s] %s", op.kind, op.id, p, op.text))
	}
	return out
}

// In a group (no drafts) the reply grows in one message: first shown
// 200 ms after the first token, edited at most once a second, and the final
// reply, sent at PriorityReply, is an edit of it: one message, never two.
func TestPreviewOneEditedMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := newLiveChannel(true)
		liveRun(t, ch, channels.Group, true, func(ctx context.Context, tt agent.Turn, _ int) agent.Result {
			stream(tt, agent.EventTextDelta, "", answer, 150*time.Millisecond) // 18 words: 2.7 s
			tt.OnEvent(agent.Event{Kind: agent.EventUsage})
			_, _ = tt.Chat.Send(ctx, answer)
			return endTurn
		})
		ops := ch.calls(true)
		if ops[0].kind != "send" || !ops[0].preview || ops[0].at != 200*time.Millisecond || !strings.HasSuffix(ops[0].text, " …") {
			t.Fatalf("first call %v; want the preview sent 200 ms after the first token", ops[0])
		}
		last := ops[len(ops)-1]
		if last.kind != "edit" || last.id != "out-1" || last.preview || last.text != answer {
			t.Fatalf("last call %v; want the preview edited into the reply at reply priority", last)
		}
		if n := ch.count("send"); n != 1 {
			t.Fatalf("%d messages sent, want 1: %q", n, kinds(ops))
		}
		edits := ops[1 : len(ops)-1]
		if len(edits) < 2 {
			t.Fatalf("calls %q; want the preview edited as it grows", kinds(ops))
		}
		prev := ops[0].at
		for _, op := range edits {
			if op.kind != "edit" || !op.preview || op.at-prev < reply.PreviewEvery {
				t.Fatalf("calls %q; want preview edits at least %s apart", kinds(ops), reply.PreviewEvery)
			}
			prev = op.at
		}
	})
}

// In a private chat with drafts, each send_message call streams as its own
// draft, and each reply is then sent normally: no edits, nothing deleted.
func TestPreviewDraftsPerMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := newLiveChannel(true)
		first, second := "First of all, the weather is fine today.", "Second, the train leaves at ten sharp."
		liveRun(t, ch, channels.DM, true, func(ctx context.Context, tt agent.Turn, _ int) agent.Result {
			stream(tt, agent.EventReplyDelta, "a", first, 200*time.Millisecond)
			stream(tt, agent.EventReplyDelta, "b", second, 200*time.Millisecond)
			tt.OnEvent(agent.Event{Kind: agent.EventUsage})
			sendCall(ctx, tt, "a", first)
			sendCall(ctx, tt, "b", second)
			return endTurn
		})
		ops := ch.calls(true)
		var drafts []string
		ids := map[string]string{}
		for _, op := range ops {
			if op.kind == "draft" {
				if !op.preview {
					t.Errorf("draft %v not at preview priority", op)
				}
				ids[op.id] = op.text
				drafts = append(drafts, op.id)
			}
		}
		if len(ids) != 2 || drafts[0] == drafts[len(drafts)-1] {
			t.Fatalf("calls %q; want two drafts, one per message", kinds(ops))
		}
		if !strings.HasPrefix(ids[drafts[0]], "First") || !strings.HasPrefix(ids[drafts[len(drafts)-1]], "Second") {
			t.Fatalf("drafts %q", ids)
		}
		if got := ch.Texts(); !slices.Equal(got, []string{first, second}) {
			t.Fatalf("sent %q; want the two replies", got)
		}
		if ch.count("edit")+ch.count("delete") != 0 {
			t.Fatalf("calls %q; want no edits and no deletes with drafts", kinds(ops))
		}
	})
}

// A private chat where drafts are not available falls back to one edited
// message at once.
func TestPreviewNoDraftsFallsBackToEdits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := newLiveChannel(false)
		liveRun(t, ch, channels.DM, true, func(ctx context.Context, tt agent.Turn, _ int) agent.Result {
			stream(tt, agent.EventTextDelta, "", answer, 150*time.Millisecond)
			tt.OnEvent(agent.Event{Kind: agent.EventUsage})
			_, _ = tt.Chat.Send(ctx, answer)
			return endTurn
		})
		got := kinds(ch.calls(true))
		if len(got) < 4 || !strings.HasPrefix(got[0], "draft") || !strings.HasPrefix(got[1], "send out-1 [p] The") ||
			got[len(got)-1] != "edit out-1 [r] "+answer || ch.count("send") != 1 {
			t.Fatalf("calls %q; want a refused draft, then one message edited into the reply", got)
		}
	})
}

// The text of each send_message call streams into a message of its own,
// which that call's send then claims.
func TestPreviewReplyDeltasEachCallItsOwnMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := newLiveChannel(false)
		first, second := "First of all, the weather is fine today.", "Second, the train leaves at ten sharp."
		liveRun(t, ch, channels.Group, true, func(ctx context.Context, tt agent.Turn, _ int) agent.Result {
			stream(tt, agent.EventTextDelta, "", "Let me write two messages. ", 100*time.Millisecond)
			stream(tt, agent.EventReplyDelta, "a", first, 300*time.Millisecond)
			stream(tt, agent.EventReplyDelta, "b", second, 300*time.Millisecond)
			tt.OnEvent(agent.Event{Kind: agent.EventUsage})
			tt.OnEvent(agent.Event{Kind: agent.EventInterimText, Text: "Let me write two messages."})
			sendCall(ctx, tt, "a", first)
			sendCall(ctx, tt, "b", second)
			return endTurn
		})
		ops := ch.calls(true)
		var sends, finals []string
		for _, op := range ops {
			switch {
			case op.kind == "send":
				sends = append(sends, op.id+" "+op.text)
			case op.kind == "edit" && !op.preview:
				finals = append(finals, op.id+" "+op.text)
			}
		}
		if len(sends) != 3 || !strings.HasPrefix(sends[0], "out-1 Let me") || !strings.HasPrefix(sends[1], "out-2 First") ||
			!strings.HasPrefix(sends[2], "out-3 Second") {
			t.Fatalf("sends %q; want the interim text's preview, then one preview per call", sends)
		}
		if !slices.Equal(finals, []string{"out-2 " + first, "out-3 " + second}) {
			t.Fatalf("final edits %q; want each call's preview turned into its reply (calls %q)", finals, kinds(ops))
		}
		ch.fakeChannel.Mu.Lock()
		quotes := []bool{ch.Sent[0].ReplyTo != "", ch.Sent[1].ReplyTo != "", ch.Sent[2].ReplyTo != ""}
		ch.fakeChannel.Mu.Unlock()
		if !slices.Equal(quotes, []bool{true, false, false}) {
			t.Errorf("messages quoting the question: %v; want only the first", quotes)
		}
		if last := ops[len(ops)-1]; last.kind != "delete" || last.id != "out-1" {
			t.Fatalf("calls %q; want the taken-back interim preview deleted at the end", kinds(ops))
		}
	})
}

// Fragments of two send_message calls interleaved (as some servers stream
// parallel calls) stay apart: each reply gets its own whole text.
func TestPreviewInterleavedCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := newLiveChannel(false)
		first, second := "First of all, the weather is fine today.", "Second, the train leaves at ten sharp."
		liveRun(t, ch, channels.Group, true, func(ctx context.Context, tt agent.Turn, _ int) agent.Result {
			a, b := strings.SplitAfter(first, " "), strings.SplitAfter(second, " ")
			for i := range max(len(a), len(b)) {
				if i < len(a) {
					tt.OnEvent(agent.Event{Kind: agent.EventReplyDelta, CallID: "a", Text: a[i]})
				}
				if i < len(b) {
					tt.OnEvent(agent.Event{Kind: agent.EventReplyDelta, CallID: "b", Text: b[i]})
				}
				elapse(300 * time.Millisecond)
			}
			tt.OnEvent(agent.Event{Kind: agent.EventUsage})
			sendCall(ctx, tt, "a", first)
			sendCall(ctx, tt, "b", second)
			return endTurn
		})
		if got := chatHolds(ch.calls(false)); !slices.Equal(got, []string{first, second}) {
			t.Fatalf("the chat holds %q; want the two replies (calls %q)", got, kinds(ch.calls(true)))
		}
	})
}

// Preview calls that fail, are dropped by pacing or hang never block,
// lose or double the reply: it arrives once, whole.
func TestPreviewFailuresNeverCostTheReply(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*liveChannel)
		reply string
		// want: the messages the chat holds in the end (sends not deleted,
		// with the last text of each).
		want []string
	}{
		{"previews paced", func(c *liveChannel) { c.failPrev = channels.ErrPaced }, answer, []string{answer}},
		{"previews fail", func(c *liveChannel) { c.failPrev = errors.New("boom") }, answer, []string{answer}},
		{"final edit fails", func(c *liveChannel) { c.failFinal = errors.New("message to edit not found") }, answer, []string{answer}},
		{"preview edits hang", func(c *liveChannel) { c.hangEdits = true }, answer, []string{answer}},
		{"reply longer than one message", func(c *liveChannel) { c.oneMsg = len(answer) - 1 }, answer, []string{answer}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ch := newLiveChannel(false)
				tc.setup(ch)
				var took time.Duration
				liveRun(t, ch, channels.Group, true, func(ctx context.Context, tt agent.Turn, _ int) agent.Result {
					stream(tt, agent.EventTextDelta, "", tc.reply[:80], 100*time.Millisecond)
					tt.OnEvent(agent.Event{Kind: agent.EventUsage})
					began := time.Now()
					_, err := tt.Chat.Send(ctx, tc.reply)
					took = time.Since(began)
					if err != nil {
						t.Errorf("send: %v", err)
					}
					return endTurn
				})
				if took > 0 {
					t.Errorf("the reply waited %s for previews", took)
				}
				if got := chatHolds(ch.calls(false)); !slices.Equal(got, tc.want) {
					t.Errorf("the chat holds %q, want %q; calls %q", got, tc.want, kinds(ch.calls(true)))
				}
			})
		})
	}
}

// chatHolds replays successful calls: the texts of the messages left.
func chatHolds(ops []liveOp) []string {
	texts := map[string]string{}
	var ids []string
	for _, op := range ops {
		switch op.kind {
		case "send":
			ids = append(ids, op.id)
			texts[op.id] = op.text
		case "edit":
			texts[op.id] = op.text
		case "delete":
			ids = slices.DeleteFunc(ids, func(id string) bool { return id == op.id })
		}
	}
	var out []string
	for _, id := range ids {
		out = append(out, texts[id])
	}
	return out
}

// While tools run longer than 2 s the chat shows one line of what is
// happening, edited as the running tool changes, and the reply then takes
// that message over; tools that finish sooner show nothing.
func TestToolProgressLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := newLiveChannel(false)
		liveRun(t, ch, channels.Group, true, func(ctx context.Context, tt agent.Turn, _ int) agent.Result {
			tt.OnEvent(agent.Event{Kind: agent.EventUsage})
			runTool(tt, "current_time", "", "t0", 1500*time.Millisecond) // step 1: quick
			tt.OnEvent(agent.Event{Kind: agent.EventUsage})
			runTool(tt, "web_search", "", "t1", 3*time.Second) // step 2: slow
			runTool(tt, "weather", "Look up the weather for a city. Uses the met office.", "t2", 3*time.Second)
			tt.OnEvent(agent.Event{Kind: agent.EventUsage})
			stream(tt, agent.EventTextDelta, "", answer, 100*time.Millisecond)
			tt.OnEvent(agent.Event{Kind: agent.EventUsage})
			_, _ = tt.Chat.Send(ctx, answer)
			return endTurn
		})
		ops := ch.calls(true)
		got := kinds(ops)
		if len(got) < 3 || got[0] != "send out-1 [p] searching the web…" || got[1] != "edit out-1 [p] Look up the weather for a city…" {
			t.Fatalf("calls %q; want one progress line, edited as the tool changes", got)
		}
		if ops[0].at != 1500*time.Millisecond+2*time.Second || ops[1].at != 4500*time.Millisecond {
			t.Errorf("progress line shown at %s and changed at %s, want 2 s into the slow step and as its next tool starts",
				ops[0].at, ops[1].at)
		}
		if !strings.HasPrefix(got[2], "edit out-1 [p] The answer") || ops[2].at != 7500*time.Millisecond+reply.PreviewFirstAfter {
			t.Errorf("calls %q; want the reply's first words in the line's message 200 ms after its first token (at %s)", got, ops[2].at)
		}
		if ch.count("send") != 1 || got[len(got)-1] != "edit out-1 [r] "+answer {
			t.Fatalf("calls %q; want the line's message edited into the reply, and no other message", got)
		}
	})
}

// A progress line no reply takes over is deleted when the turn ends; in a
// private chat with drafts it is a draft, and nothing needs deleting.
func TestToolProgressLineRemoved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		drafts bool
		chat   channels.ChatType
		want   []string
	}{
		{"edited message", false, channels.Group, []string{"send out-1 [p] reading a web page…", "delete out-1 [r] "}},
		{"draft", true, channels.DM, []string{"draft * [p] reading a web page…"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ch := newLiveChannel(tc.drafts)
				liveRun(t, ch, tc.chat, false, func(ctx context.Context, tt agent.Turn, _ int) agent.Result {
					runTool(tt, "web_fetch", "", "t1", 5*time.Second)
					return agent.Result{StopReason: agent.StopEndTurn}
				})
				got := kinds(ch.calls(true))
				for i := range got {
					if strings.HasPrefix(got[i], "draft ") {
						got[i] = "draft *" + got[i][strings.Index(got[i], " ["):]
					}
				}
				if !slices.Equal(got, tc.want) {
					t.Fatalf("calls %q, want %q", got, tc.want)
				}
			})
		})
	}
}

// A stream cut by the model's outage leaves no half answer on screen: the
// preview says it was interrupted, and the answer comes whole when the
// message is tried again.
func TestPreviewModelUnavailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := newLiveChannel(false)
		liveRun(t, ch, channels.Group, true, func(ctx context.Context, tt agent.Turn, run int) agent.Result {
			if run == 1 {
				stream(tt, agent.EventTextDelta, "", "The first half of an answer", 300*time.Millisecond)
				return agent.Result{StopReason: agent.StopModelUnavailable,
					Err: &llm.Error{Model: "m", Status: 503, Message: "down", Retryable: true}}
			}
			_, _ = tt.Chat.Send(ctx, "The whole answer.")
			return endTurn
		})
		got := chatHolds(ch.calls(false))
		if len(got) != 3 || got[0] != "(interrupted: the language model stopped answering)" ||
			!strings.Contains(got[1], "unavailable right now") || got[2] != "The whole answer." {
			t.Fatalf("the chat holds %q; want the interrupted preview, the notice, the answer", got)
		}
	})
}

// The model's choice to stay silent (the no-reply marker) never shows.
func TestPreviewHidesNoReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := newLiveChannel(false)
		liveRun(t, ch, channels.Group, true, func(ctx context.Context, tt agent.Turn, _ int) agent.Result {
			for _, d := range []string{"NO", "_RE", "PLY"} {
				tt.OnEvent(agent.Event{Kind: agent.EventTextDelta, Text: d})
				elapse(time.Second)
			}
			tt.OnEvent(agent.Event{Kind: agent.EventUsage})
			return agent.Result{StopReason: agent.StopEndTurn}
		})
		if got := kinds(ch.calls(true)); len(got) != 0 {
			t.Fatalf("calls %q; want none", got)
		}
	})
}

// The model's text after a delivered send_message is never sent (the
// fallback sends nothing then), so it is never previewed either: no message
// shown and taken back (which a crash could leave in the chat).
func TestPreviewSkipsTextAfterDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := newLiveChannel(false)
		liveRun(t, ch, channels.Group, true, func(ctx context.Context, tt agent.Turn, _ int) agent.Result {
			sendCall(ctx, tt, "a", answer)
			stream(tt, agent.EventTextDelta, "", "final words that are never sent, streamed slowly", 300*time.Millisecond)
			tt.OnEvent(agent.Event{Kind: agent.EventUsage})
			return endTurn
		})
		if got := kinds(ch.calls(true)); !slices.Equal(got, []string{"send out-1 [r] " + answer}) {
			t.Fatalf("calls %q; want the reply alone", got)
		}
	})
}

// With previews and progress off, the reply just arrives.
func TestPreviewOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := newLiveChannel(false)
		liveRunWith(t, ch, channels.Group, false, false, func(ctx context.Context, tt agent.Turn, _ int) agent.Result {
			runTool(tt, "web_search", "", "t1", 3*time.Second)
			stream(tt, agent.EventTextDelta, "", answer, 100*time.Millisecond)
			_, _ = tt.Chat.Send(ctx, answer)
			return endTurn
		})
		if got := kinds(ch.calls(true)); !slices.Equal(got, []string{"send out-1 [r] " + answer}) {
			t.Fatalf("calls %q; want the reply alone", got)
		}
	})
}

// A preview never needs more than one message: a text longer than the
// channel's message shows its beginning and the cursor (a preview sent split
// would leave parts behind when the reply takes its place).
func TestPreviewFitsOneMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := newLiveChannel(false)
		ch.oneMsg = 40
		liveRun(t, ch, channels.Group, true, func(ctx context.Context, tt agent.Turn, _ int) agent.Result {
			stream(tt, agent.EventTextDelta, "", answer, 100*time.Millisecond)
			tt.OnEvent(agent.Event{Kind: agent.EventUsage})
			if _, err := tt.Chat.Send(ctx, answer); err != nil {
				t.Errorf("send: %v", err)
			}
			return endTurn
		})
		previews := 0
		for _, op := range ch.calls(true) {
			if !op.preview {
				continue
			}
			previews++
			if len(op.text) > ch.oneMsg || !strings.HasSuffix(op.text, " …") {
				t.Errorf("preview %v: want at most %d bytes, ending in the cursor", op, ch.oneMsg)
			}
		}
		if previews == 0 {
			t.Fatalf("no preview shown; calls %q", kinds(ch.calls(true)))
		}
		if got := chatHolds(ch.calls(false)); !slices.Equal(got, []string{answer}) {
			t.Errorf("the chat holds %q, want only the reply", got)
		}
	})
}
