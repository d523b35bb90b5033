package learning

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
)

// recorder is a job that records its runs and can be held.
type recorder struct {
	mu    sync.Mutex
	runs  []Trigger
	hold  chan struct{} // when set, runs wait for it to close (or ctx)
	start chan Trigger  // receives each run as it starts (buffered)
	errs  []error       // ctx.Err() seen at the end of each run
}

func newRecorder() *recorder { return &recorder{start: make(chan Trigger, 100)} }

func (r *recorder) job(name string) Job {
	return Job{Name: name, Run: func(ctx context.Context, t Trigger) error {
		r.mu.Lock()
		r.runs = append(r.runs, t)
		hold := r.hold
		r.mu.Unlock()
		r.start <- t
		if hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
			}
		}
		r.mu.Lock()
		r.errs = append(r.errs, ctx.Err())
		r.mu.Unlock()
		return ctx.Err()
	}}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.runs)
}

func trig(user string, chat int64) Trigger { return Trigger{Channel: "tg", UserID: user, ChatID: chat} }

func TestRunnerCoalescesPerUserAndChat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rec.hold = make(chan struct{})
		r := NewRunner(Config{Jobs: []Job{rec.job("memory")}, EveryNTurns: 1, Workers: 2})
		r.Start(t.Context())
		defer r.Shutdown(t.Context())

		first := trig("ada", 1)
		first.TurnID = 10
		first.Skills = map[int64][]string{10: {"weather"}}
		r.Notify(first)
		<-rec.start
		// While ada's run is busy, four more turns: one more run, merged.
		for i := int64(11); i <= 14; i++ {
			t2 := trig("ada", 1)
			t2.TurnID = i
			if i == 12 {
				t2.Skills = map[int64][]string{12: {"translate"}}
			}
			if !r.Notify(t2) {
				t.Fatalf("Notify(turn %d) = false", i)
			}
		}
		r.Notify(trig("bob", 1)) // another user runs alongside
		synctest.Wait()
		if got := r.Stats(); got.Running != 2 || got.Queued != 1 || got.Coalesced != 3 {
			t.Fatalf("stats while busy = %+v; want 2 running (ada, bob), ada's next run queued, 3 merged", got)
		}
		close(rec.hold)
		if err := r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := rec.count(); n != 3 {
			t.Fatalf("%d runs, want 3 (ada twice, bob once)", n)
		}
		var ada []Trigger
		for _, tr := range rec.runs {
			if tr.UserID == "ada" {
				ada = append(ada, tr)
			}
		}
		if len(ada) != 2 {
			t.Fatalf("ada ran %d times, want 2", len(ada))
		}
		if second := ada[1]; second.TurnID != 14 || !maps.EqualFunc(second.Skills, map[int64][]string{12: {"translate"}}, slices.Equal) {
			t.Errorf("merged run = %+v; want the newest turn 14 and turn 12's skills", ada[1])
		}
	})
}

func TestRunnerGatesByFrequency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		r := NewRunner(Config{Jobs: []Job{rec.job("memory")}, EveryNTurns: 3})
		r.Start(t.Context())
		defer r.Shutdown(t.Context())
		for i := int64(1); i <= 7; i++ {
			tr := trig("ada", 1)
			tr.TurnID = i
			if i == 2 {
				tr.Skills = map[int64][]string{2: {"weather"}}
			}
			r.Notify(tr)
			synctest.Wait()
		}
		if err := r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := rec.count(); n != 2 {
			t.Fatalf("%d runs after 7 turns, want 2 (turns 3 and 6)", n)
		}
		if got := rec.runs[0]; got.TurnID != 3 || len(got.Skills[2]) != 1 {
			t.Errorf("first run = %+v; want turn 3 carrying the skills of gated turn 2", got)
		}
		if s := r.Stats(); s.Gated != 5 || s.Triggers != 7 {
			t.Errorf("stats = %+v; want 7 triggers, 5 gated", s)
		}
	})
}

func TestRunnerQueueIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rec.hold = make(chan struct{})
		r := NewRunner(Config{Jobs: []Job{rec.job("memory")}, EveryNTurns: 1, Workers: 1, QueueSize: 2})
		r.Start(t.Context())
		defer r.Shutdown(t.Context())
		r.Notify(trig("u0", 1))
		<-rec.start
		got := []bool{r.Notify(trig("u1", 1)), r.Notify(trig("u2", 1)), r.Notify(trig("u3", 1)), r.Notify(trig("u1", 1))}
		if want := []bool{true, true, false, true}; !slices.Equal(got, want) {
			t.Errorf("Notify results = %v, want %v (the third waiting user is dropped; a known one merges)", got, want)
		}
		close(rec.hold)
		if err := r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		if s := r.Stats(); s.Dropped != 1 || rec.count() != 3 {
			t.Errorf("dropped %d, runs %d; want 1 and 3", s.Dropped, rec.count())
		}
	})
}

// fakeTimers captures retries instead of waiting for them.
type fakeTimers struct {
	mu     sync.Mutex
	delays []time.Duration
	fns    []func()
}

func (f *fakeTimers) after(d time.Duration, fn func()) func() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delays = append(f.delays, d)
	f.fns = append(f.fns, fn)
	return func() bool { return true }
}

func (f *fakeTimers) fire(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	if len(f.fns) == 0 {
		f.mu.Unlock()
		t.Fatal("no retry scheduled")
	}
	fn := f.fns[0]
	f.fns = f.fns[1:]
	f.mu.Unlock()
	fn()
}

func TestRunnerContainsPanicsAndTimeoutsAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		ran := map[string]int{}
		mark := func(name string) {
			mu.Lock()
			ran[name]++
			mu.Unlock()
		}
		jobs := []Job{
			{Name: "panics", Run: func(context.Context, Trigger) error { mark("panics"); panic("boom") }},
			{Name: "slow", Run: func(ctx context.Context, _ Trigger) error { mark("slow"); <-ctx.Done(); return ctx.Err() }},
			{Name: "fails", Run: func(context.Context, Trigger) error { mark("fails"); return errors.New("model said no") }},
			{Name: "ok", Run: func(context.Context, Trigger) error { mark("ok"); return nil }},
			{Name: "skills", Wants: func(t Trigger) bool { return len(t.Skills) > 0 },
				Run: func(context.Context, Trigger) error { mark("skills"); return nil }},
		}
		timers := &fakeTimers{}
		r := NewRunner(Config{Jobs: jobs, EveryNTurns: 1, Timeout: 50 * time.Millisecond, RetryDelay: time.Minute, MaxRetries: 2,
			AfterFunc: timers.after})
		r.Start(t.Context())
		defer r.Shutdown(t.Context())

		r.Notify(trig("ada", 1))
		if err := r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		s := r.Stats()
		if s.Runs != 4 || s.Succeeded != 1 || s.Failed != 3 || s.Panics != 1 || s.TimedOut != 1 || s.Retries != 1 {
			t.Fatalf("stats = %+v; want 4 runs (skills not wanted), 1 ok, 3 failed: 1 panic, 1 timeout", s)
		}
		if want := map[string]uint64{"panics": 1, "slow": 1, "fails": 1}; !maps.Equal(s.Failures, want) {
			t.Errorf("failures by job = %v, want %v", s.Failures, want)
		}
		// The retry runs only the failed jobs, after the delay, doubling.
		timers.fire(t)
		if err := r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		timers.fire(t)
		if err := r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := maps.Clone(ran)
		mu.Unlock()
		if want := map[string]int{"panics": 3, "slow": 3, "fails": 3, "ok": 1}; !maps.Equal(got, want) {
			t.Errorf("runs by job = %v, want %v (two retries of the failed ones only)", got, want)
		}
		timers.mu.Lock()
		delays, left := slices.Clone(timers.delays), len(timers.fns)
		timers.mu.Unlock()
		if want := []time.Duration{time.Minute, 2 * time.Minute}; !slices.Equal(delays, want) || left != 0 {
			t.Errorf("retry delays = %v with %d pending, want %v and none after MaxRetries", delays, left, want)
		}
	})
}

func TestRunnerShutdownWaitsForRunningJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rec.hold = make(chan struct{})
		r := NewRunner(Config{Jobs: []Job{rec.job("memory")}, EveryNTurns: 1})
		r.Start(t.Context())
		r.Notify(trig("ada", 1))
		<-rec.start
		r.Notify(trig("bob", 2)) // runs alongside on the second worker
		synctest.Wait()
		r.Notify(trig("ada", 1)) // waits behind the running ada: dropped by the shutdown
		done := make(chan error, 1)
		go func() { done <- r.Shutdown(t.Context()) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Shutdown returned %v while a job was running", err)
		default:
		}
		if r.Notify(trig("carol", 3)) {
			t.Error("Notify accepted work during shutdown")
		}
		close(rec.hold)
		if err := <-done; err != nil {
			t.Fatalf("Shutdown = %v", err)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.errs) != 2 || rec.errs[0] != nil || rec.errs[1] != nil {
			t.Errorf("run results %v; want ada's and bob's running jobs to finish uncancelled, and ada's waiting run dropped", rec.errs)
		}
	})
}

func TestRunnerShutdownCancelsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		rec.hold = make(chan struct{}) // never closed: only cancellation ends it
		r := NewRunner(Config{Jobs: []Job{rec.job("memory")}, EveryNTurns: 1, Timeout: time.Hour})
		r.Start(t.Context())
		r.Notify(trig("ada", 1))
		<-rec.start
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := r.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown = %v, want the deadline", err)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.errs) != 1 || !errors.Is(rec.errs[0], context.Canceled) {
			t.Errorf("the job saw %v, want its context cancelled", rec.errs)
		}
		if s := r.Stats(); s.Failed != 0 {
			t.Errorf("a job cancelled by shutdown counted as failed: %+v", s)
		}
	})
}

// A pass runs at the Nth turn of a user in a chat, or once the chat has
// been quiet for IdleAfter, whichever comes first; a new message in the
// chat (from anyone) starts the pause again.
func TestRunnerRunsAtEveryNthTurnOrWhenTheChatPauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		r := NewRunner(Config{Jobs: []Job{rec.job("learn")}, EveryNTurns: 4, IdleAfter: 3 * time.Minute})
		r.Start(t.Context())
		defer r.Shutdown(t.Context())
		turn := func(user string, chat, id int64) {
			tr := trig(user, chat)
			tr.TurnID = id
			r.Notify(tr)
			synctest.Wait()
		}
		turn("ada", 1, 1)
		turn("ada", 1, 2)
		elapse(2 * time.Minute)
		turn("bob", 1, 3) // the chat is not quiet yet
		elapse(2*time.Minute + 59*time.Second)
		synctest.Wait()
		if n := rec.count(); n != 0 {
			t.Fatalf("%d runs before the chat paused, want 0", n)
		}
		elapse(time.Second)
		synctest.Wait()
		// Two workers run them, in either order.
		got := slices.SortedFunc(slices.Values(rec.runs), func(a, b Trigger) int { return strings.Compare(a.UserID, b.UserID) })
		if len(got) != 2 || got[0].UserID != "ada" || got[0].TurnID != 2 || got[1].UserID != "bob" {
			t.Fatalf("runs after the pause = %+v; want ada's (newest turn 2) and bob's", got)
		}

		// Four turns in a row: a run at the fourth, without waiting; then
		// no run at the next pause (nothing new).
		for id := int64(4); id <= 7; id++ {
			turn("ada", 1, id)
		}
		if n := rec.count(); n != 3 || rec.runs[2].TurnID != 7 {
			t.Fatalf("%d runs after four more turns (%+v), want a third at turn 7", n, rec.runs)
		}
		elapse(time.Hour)
		synctest.Wait()
		if n := rec.count(); n != 3 {
			t.Errorf("%d runs after a pause with nothing new, want 3", n)
		}
		// Another chat's messages do not delay this one's pause.
		turn("ada", 1, 8)
		elapse(2 * time.Minute)
		turn("cy", 2, 9)
		elapse(time.Minute)
		synctest.Wait()
		if n := rec.count(); n != 4 || rec.runs[3].TurnID != 8 {
			t.Errorf("runs = %+v; want ada's turn 8 learned 3 minutes after it", rec.runs)
		}
	})
}

// countWarnings is a slog handler that counts warnings.
type countWarnings struct {
	mu   sync.Mutex
	msgs []string
}

func (c *countWarnings) Enabled(context.Context, slog.Level) bool { return true }
func (c *countWarnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		c.mu.Lock()
		c.msgs = append(c.msgs, r.Message)
		c.mu.Unlock()
	}
	return nil
}
func (c *countWarnings) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *countWarnings) WithGroup(string) slog.Handler      { return c }

// A model that answers forced calls with text turns learning off after
// textOnlyLimit passes in a row: one warning, no retries, no further runs,
// and the reason in Stats and OnDisabled.
func TestRunnerTurnsLearningOffWhenTheModelCannotForceCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs, offs int
		var mu sync.Mutex
		model := &scripted{resp: llm.Response{Message: llm.Message{Content: "Sure! Here are the facts: none."}}}
		job := Job{Name: "learn", Run: func(ctx context.Context, _ Trigger) error {
			mu.Lock()
			runs++
			mu.Unlock()
			var out struct{}
			return Call(ctx, model, "sys", "prompt", llm.ToolSpec{Name: "learn"}, &out)
		}}
		logs := &countWarnings{}
		timers := &fakeTimers{}
		r := NewRunner(Config{Jobs: []Job{job}, EveryNTurns: 1, Logger: slog.New(logs), AfterFunc: timers.after,
			OnDisabled: func(error) { mu.Lock(); offs++; mu.Unlock() }})
		r.Start(t.Context())
		defer r.Shutdown(t.Context())
		for range 5 {
			r.Notify(trig("ada", 1))
			if err := r.Drain(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if runs != textOnlyLimit || offs != 1 {
			t.Errorf("%d runs and %d OnDisabled calls, want %d and 1", runs, offs, textOnlyLimit)
		}
		if len(logs.msgs) != 1 {
			t.Errorf("warnings %q, want exactly one", logs.msgs)
		}
		if s := r.Stats(); !errors.Is(s.Disabled, ErrNoCall) || s.Retries != 0 || len(timers.fns) != 0 {
			t.Errorf("stats = %+v with %d timers; want Disabled (ErrNoCall) and no retry", s, len(timers.fns))
		}
	})
}

// A model that answers one forced call with text, then makes the calls,
// keeps learning: only passes in a row turn it off.
func TestRunnerKeepsLearningWhenTheModelSlipsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		text := llm.Response{Message: llm.Message{Content: "Sure! Here are the facts: none."}}
		call := llm.Response{Message: llm.Message{ToolCalls: []llm.ToolCall{{Name: "learn", Arguments: `{}`}}}}
		// Two slips, a good pass, two slips: never textOnlyLimit in a row.
		answers := []llm.Response{text, text, call, text, text, call}
		var runs int
		model := &scripted{}
		job := Job{Name: "learn", Run: func(ctx context.Context, _ Trigger) error {
			model.resp = answers[runs%len(answers)]
			runs++
			var out struct{}
			return Call(ctx, model, "sys", "prompt", llm.ToolSpec{Name: "learn"}, &out)
		}}
		logs := &countWarnings{}
		r := NewRunner(Config{Jobs: []Job{job}, EveryNTurns: 1, Logger: slog.New(logs), AfterFunc: (&fakeTimers{}).after})
		r.Start(t.Context())
		defer r.Shutdown(t.Context())
		for range len(answers) {
			r.Notify(trig("ada", 1))
			if err := r.Drain(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if s := r.Stats(); s.Disabled != nil || s.Succeeded != 2 || runs != len(answers) {
			t.Errorf("after %d runs: stats = %+v; want learning on and 2 passes done", runs, s)
		}
		if len(logs.msgs) != 0 {
			t.Errorf("warnings %q, want none", logs.msgs)
		}
	})
}

// A server that refuses tool_choice is detected the same way.
func TestUnsupported(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("learning: learn: %w", ErrNoCall), true},
		{&llm.Error{Status: 400, Message: `"auto" tool choice requires --enable-auto-tool-choice`}, true},
		{&llm.Error{Status: 400, Message: "tool_choice is not supported"}, true},
		{&llm.Error{Status: 400, Message: "context length exceeded"}, false},
		{&llm.Error{Status: 500, Message: "tool server crashed"}, false},
		{errors.New("connection refused"), false},
	} {
		if got := Unsupported(c.err); got != c.want {
			t.Errorf("Unsupported(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// elapse lets d of the synctest bubble's virtual clock pass (no real time).
func elapse(d time.Duration) { <-time.After(d) }
