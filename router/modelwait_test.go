package router

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// downRunner is an agent whose turns find the model unavailable while down
// is set (as the real one does with Turn.HoldOnOutage), and otherwise
// answer "echo: <text>".
type downRunner struct {
	mu         sync.Mutex
	down       bool
	retryAfter time.Duration // the server's Retry-After while down
	runs       []string
	holds      []bool // Turn.HoldOnOutage of each run
}

func (f *downRunner) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *downRunner) Run(ctx context.Context, t agent.Turn) agent.Result {
	f.mu.Lock()
	f.runs = append(f.runs, t.Input.Content)
	f.holds = append(f.holds, t.HoldOnOutage)
	down, after := f.down, f.retryAfter
	f.mu.Unlock()
	if down {
		return agent.Result{StopReason: agent.StopModelUnavailable,
			Err: &llm.Error{Model: "m", Status: 503, Message: "upstream connect error", RetryAfter: after, Retryable: true}}
	}
	if _, err := t.Chat.Send(ctx, "echo: "+t.Input.Content); err != nil {
		return agent.Result{StopReason: agent.StopLLMError, Err: err}
	}
	return agent.Result{StopReason: agent.StopEndTurn, Delivered: true}
}

func (f *downRunner) ran() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.runs)
}

// chatTexts returns what was sent to chat on c.
func chatTexts(c *fakeChannel, chat string) []string {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	var out []string
	for _, m := range c.Sent {
		if m.ChatID == chat {
			out = append(out, m.Text)
		}
	}
	return out
}

// answered is a ModelAnswered hook the test closes.
type answered struct {
	mu sync.Mutex
	ch chan struct{}
}

func (a *answered) wait() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ch == nil {
		a.ch = make(chan struct{})
	}
	return a.ch
}

func (a *answered) fire() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ch != nil {
		close(a.ch)
		a.ch = nil
	}
}

// A message whose turn finds the model unavailable stays pending: its chat
// is told once, it is tried again after a growing wait (the chat's next
// message waiting behind it) while other chats go on, and it is answered,
// once, as soon as a model call succeeds elsewhere.
func TestModelUnavailableWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openWaitStore(t)
		runner := &downRunner{down: true}
		back := &answered{}
		r, ch := startWaitRouter(t, Config{Store: st, Agent: runner, ModelWait: ModelWait{Answered: back.wait}})
		defer r.Shutdown(context.Background())
		start := time.Now()
		for _, m := range []struct{ chat, text string }{{"c1", "first"}, {"c1", "second"}, {"c2", "elsewhere"}} {
			if err := r.Deliver(t.Context(), msg(m.chat, "u", m.text)); err != nil {
				t.Fatal(err)
			}
		}
		// 20 s of outage: tries at 0, 1, 3, 7 and 15 s; the next would be
		// at 31 s.
		elapse(20 * time.Second)
		synctest.Wait()
		for _, c := range []string{"c1", "c2"} {
			got := chatTexts(ch, c)
			if len(got) != 1 || !strings.Contains(got[0], "the language model is unavailable right now. I'll answer your message when it's back") {
				t.Fatalf("%s holds %q during the outage, want one notice", c, got)
			}
		}
		if w := r.ModelWaits(); w.Waiting != 2 || w.Held != 2 || w.Answered != 0 {
			t.Errorf("model waits during the outage = %+v, want 2 waiting", w)
		}
		if runs := runner.ran(); slices.Contains(runs, "second") || len(runs) != 10 {
			t.Errorf("turns during the outage: %q, want first and elsewhere 5 times each", runs)
		}
		pending, err := st.PendingInbox(t.Context())
		if err != nil || len(pending) != 3 {
			t.Errorf("pending messages = %d, %v; want all 3", len(pending), err)
		}

		// The model is back: a call succeeds elsewhere, and the waiting
		// messages are tried at once rather than at 31 s.
		runner.setDown(false)
		back.fire()
		if err := r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 20*time.Second {
			t.Errorf("answered after %s, want 20s (woken when the model answered)", d)
		}
		if got := chatTexts(ch, "c1"); len(got) != 3 || got[1] != "echo: first" || got[2] != "echo: second" {
			t.Errorf("c1 holds %q, want the notice, then the answers in order", got)
		}
		if got := chatTexts(ch, "c2"); len(got) != 2 || got[1] != "echo: elsewhere" {
			t.Errorf("c2 holds %q, want the notice, then the answer", got)
		}
		if w := r.ModelWaits(); w.Waiting != 0 || w.Held != 2 || w.Answered != 2 || w.GivenUp != 0 {
			t.Errorf("model waits after = %+v, want 2 held and answered", w)
		}
		if pending, err := st.PendingInbox(t.Context()); err != nil || len(pending) != 0 {
			t.Errorf("pending messages = %+v, %v; want none", pending, err)
		}
		runner.mu.Lock()
		defer runner.mu.Unlock()
		if slices.Contains(runner.holds, false) {
			t.Errorf("a chat message's turn did not hold on an outage: %v", runner.holds)
		}
	})
}

// A message that waited ModelOutageMaxAge for the model is given up: the
// user is told, the message is done, and it is counted; the chat's next
// message gets its own notice.
func TestModelUnavailableGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openWaitStore(t)
		runner := &downRunner{down: true}
		r, ch := startWaitRouter(t, Config{Store: st, Agent: runner, ModelWait: ModelWait{MaxAge: 2 * time.Minute}})
		defer r.Shutdown(context.Background())
		start := time.Now()
		if err := r.Deliver(t.Context(), msg("c1", "u", "lost cause")); err != nil {
			t.Fatal(err)
		}
		if err := r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 2*time.Minute {
			t.Errorf("given up after %s, want 2m", d)
		}
		got := chatTexts(ch, "c1")
		if len(got) != 2 || !strings.Contains(got[0], "unavailable right now") ||
			!strings.Contains(got[1], "has been unavailable for 2 minutes, so I couldn't answer this message") {
			t.Fatalf("c1 holds %q, want the notice, then the message given up", got)
		}
		if w := r.ModelWaits(); w.Waiting != 0 || w.Held != 1 || w.GivenUp != 1 {
			t.Errorf("model waits = %+v, want 1 given up", w)
		}
		if pending, err := st.PendingInbox(t.Context()); err != nil || len(pending) != 0 {
			t.Errorf("pending messages = %+v, %v; want none", pending, err)
		}
		if err := r.Deliver(t.Context(), msg("c1", "u", "still there?")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := chatTexts(ch, "c1"); len(got) != 3 || !strings.Contains(got[2], "unavailable right now") {
			t.Errorf("c1 holds %q, want a new notice for the next message", got)
		}
	})
}

// A server that asks for a longer wait (Retry-After, over the client's
// budget) gets it: the message is not tried again before.
func TestModelUnavailableHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openWaitStore(t)
		runner := &downRunner{down: true, retryAfter: 5 * time.Minute}
		r, ch := startWaitRouter(t, Config{Store: st, Agent: runner})
		defer r.Shutdown(context.Background())
		if err := r.Deliver(t.Context(), msg("c1", "u", "later")); err != nil {
			t.Fatal(err)
		}
		elapse(5*time.Minute - time.Second)
		synctest.Wait()
		if runs := runner.ran(); len(runs) != 1 {
			t.Fatalf("tried %d times within the server's Retry-After, want once", len(runs))
		}
		runner.setDown(false)
		if err := r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := chatTexts(ch, "c1"); len(got) != 2 || got[1] != "echo: later" {
			t.Errorf("c1 holds %q, want the notice and the answer", got)
		}
	})
}

// turnDownRunner is a downRunner that begins a turn in the store, as the
// agent does, and resumes it when asked.
type turnDownRunner struct {
	downRunner
	st *store.Store
}

func (f *turnDownRunner) Run(ctx context.Context, t agent.Turn) agent.Result {
	res := f.downRunner.Run(ctx, t)
	id := t.ResumeTurnID
	if id == 0 {
		var err error
		id, _, err = f.st.BeginTurn(ctx, store.TurnStart{ChatID: t.ChatID, SessionID: t.SessionID, InboxID: t.InboxID,
			Channel: t.Channel, Kind: "user"}, []llm.Message{t.Input})
		if err != nil {
			return agent.Result{StopReason: agent.StopStoreError, Err: err}
		}
	}
	res.TurnID = id
	return res
}

// The maximum age counts from the message's first attempt, across a
// restart: a message that waited 90 s of a 2-minute maximum before the
// restart is given up 30 s after it, not 2 minutes.
func TestModelOutageMaxAgeAcrossRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openWaitStore(t)
		runner := &turnDownRunner{downRunner: downRunner{down: true}, st: st}
		start := func() (*Router, *fakeChannel) {
			return startWaitRouter(t, Config{Store: st, Agent: runner, ModelWait: ModelWait{MaxAge: 2 * time.Minute}})
		}
		r1, _ := start()
		if err := r1.Deliver(t.Context(), msg("c1", "u", "patience")); err != nil {
			t.Fatal(err)
		}
		elapse(90 * time.Second) // the outage goes on
		if err := r1.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if pending, err := st.PendingInbox(t.Context()); err != nil || len(pending) != 1 {
			t.Fatalf("pending after the stop = %d, %v; want 1", len(pending), err)
		}

		r2, ch := start()
		defer r2.Shutdown(context.Background())
		restarted := time.Now()
		if err := r2.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(restarted); d != 30*time.Second {
			t.Errorf("given up %s after the restart, want 30s (2m from the first attempt)", d)
		}
		got := chatTexts(ch, "c1")
		if len(got) != 2 || !strings.Contains(got[1], "has been unavailable for 2 minutes") {
			t.Fatalf("c1 holds %q after the restart, want the notice, then the message given up", got)
		}
		if w := r2.ModelWaits(); w.GivenUp != 1 {
			t.Errorf("model waits = %+v, want 1 given up", w)
		}
		if pending, err := st.PendingInbox(t.Context()); err != nil || len(pending) != 0 {
			t.Errorf("pending at the end = %d, %v; want 0", len(pending), err)
		}
	})
}

// turnReads is the real store, counting its reads of a message's turn.
type turnReads struct {
	*store.Store
	n atomic.Int64
}

func (c *turnReads) TurnForInbox(ctx context.Context, inboxID int64) (store.Turn, bool, error) {
	c.n.Add(1)
	return c.Store.TurnForInbox(ctx, inboxID)
}

// A replayed message's turn is read once per attempt: the wait for the
// model starts from the turn the attempt read (heldSince), not from a
// second read of it.
func TestReplayedTurnReadOncePerAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openWaitStore(t)
		runner := &turnDownRunner{downRunner: downRunner{down: true}, st: st}
		r1, _ := startWaitRouter(t, Config{Store: st, Agent: runner, ModelWait: ModelWait{MaxAge: 2 * time.Minute}})
		if err := r1.Deliver(t.Context(), msg("c1", "u", "patience")); err != nil {
			t.Fatal(err)
		}
		elapse(90 * time.Second)
		if err := r1.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		before := len(runner.ran())

		reads := &turnReads{Store: st}
		r2, _ := startWaitRouter(t, Config{Store: reads, Agent: runner, ModelWait: ModelWait{MaxAge: 2 * time.Minute}})
		defer r2.Shutdown(context.Background())
		if err := r2.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		attempts := len(runner.ran()) - before
		if attempts == 0 {
			t.Fatal("the replayed message was not tried after the restart")
		}
		if n := reads.n.Load(); n != int64(attempts) {
			t.Errorf("the replayed message's turn was read %d times in %d attempts, want once per attempt", n, attempts)
		}
	})
}

// elapse lets d of a synctest bubble's virtual clock pass: the timer fires
// once every other goroutine of the bubble is durably blocked, so what the
// router does until then has happened, and no real time goes by.
func elapse(d time.Duration) { <-time.After(d) }

// openWaitStore opens a database in the test's directory, closed when the
// test ends.
func openWaitStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// startWaitRouter starts a router with cfg (no ticker) and one fake
// channel everyone may use.
func startWaitRouter(t *testing.T, cfg Config) (*Router, *fakeChannel) {
	t.Helper()
	cfg.NewTicker = func(time.Duration) Ticker { return stoppedTicker{} }
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ch := newFakeChannel()
	r.AddChannel(ch, everyone)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r, ch
}
