package schedule

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/reply"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/store"
)

// guard bounds every wait of a test, so a bug fails the test instead of
// hanging it. It is never how a test synchronises.
const guard = 10 * time.Second

// fakeClock is a Clock whose time moves only by Set. Only the scheduler's
// loop makes timers, so a pending timer means the loop is asleep.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	arms    int           // timers made so far
	seen    int           // arms the test has waited for
	changed chan struct{} // closed and replaced whenever a timer is made
}

type fakeTimer struct {
	c  *fakeClock
	at time.Time
	ch chan time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t, changed: make(chan struct{})} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
	} else {
		c.timers = append(c.timers, t)
	}
	c.arms++
	close(c.changed)
	c.changed = make(chan struct{})
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	n := len(t.c.timers)
	t.c.timers = slices.DeleteFunc(t.c.timers, func(x *fakeTimer) bool { return x == t })
	return len(t.c.timers) < n
}

// Set moves the clock to now and fires the timers that are due; it reports
// whether any fired.
func (c *fakeClock) Set(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
	fired := false
	c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool {
		if t.at.After(now) {
			return false
		}
		t.ch <- now
		fired = true
		return true
	})
	return fired
}

// waitArm waits until the loop has made a timer it had not made when the
// test last waited, and is asleep on it: the pass before it is complete. It
// returns when the timer is due.
func (c *fakeClock) waitArm(t *testing.T) time.Time {
	t.Helper()
	deadline := time.After(guard)
	for {
		c.mu.Lock()
		if c.arms > c.seen && len(c.timers) > 0 {
			c.seen = c.arms
			at := c.timers[len(c.timers)-1].at
			c.mu.Unlock()
			return at
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatal("the scheduler's loop did not go back to sleep")
		}
	}
}

// fakeChannel records sends; it fails the next fail sends, and every send
// while down, as a platform that is unavailable.
type fakeChannel struct {
	mu     sync.Mutex
	sent   []channels.Outbound
	fail   int
	down   bool
	notify chan string
}

func (c *fakeChannel) setDown(down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = down
}

func newFakeChannel() *fakeChannel { return &fakeChannel{notify: make(chan string, 100)} }

func (c *fakeChannel) Name() string                                   { return "fake" }
func (c *fakeChannel) Run(ctx context.Context, _ channels.Sink) error { <-ctx.Done(); return nil }

func (c *fakeChannel) Send(_ context.Context, m channels.Outbound) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail > 0 {
		c.fail--
		return "", errors.New("fake: the platform is down")
	}
	if c.down {
		return "", channels.Unavailable(errors.New("fake: HTTP 502 Bad Gateway"))
	}
	c.sent = append(c.sent, m)
	c.notify <- m.Text
	return fmt.Sprintf("out-%d", len(c.sent)), nil
}

func (c *fakeChannel) failNext(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail = n
}

func (c *fakeChannel) texts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.sent {
		out = append(out, m.ChatID+": "+m.Text)
	}
	return out
}

// harness is the real store, agent, router and scheduler, with a fake
// clock, a fake channel and the scripted model server.
type harness struct {
	path    string
	clk     *fakeClock
	st      *store.Store
	ch      *fakeChannel
	llm     *testkit.FakeLLM
	rt      *router.Router
	sched   *Scheduler
	reports chan Report
	stopped bool
	// With setup.outbox: the router's outbox waits on timers that fire
	// once retry is closed, moving its clock an hour past the store's.
	retry  chan struct{}
	later  atomic.Int64 // nanoseconds
	outbox chan reply.OutboxEvent
}

type setup struct {
	jobs    []config.ScheduleJob
	zoneFor func(string) *time.Location
	llm     *testkit.FakeLLM // nil: a new one
	outbox  bool             // the router keeps replies the channel did not take
	sources []agent.Source   // more tools for the agent
	// interceptors for the router (approvals), on the harness's store
	interceptors func(*store.Store) []router.Interceptor
}

func berlin(t testing.TB) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// start wires everything on the database at path and starts it; the loop's
// first pass is complete when it returns.
func start(t *testing.T, path string, clk *fakeClock, s setup) *harness {
	t.Helper()
	ctx := t.Context()
	h := &harness{path: path, clk: clk, ch: newFakeChannel(), llm: s.llm, reports: make(chan Report, 100)}
	if h.llm == nil {
		h.llm = testkit.NewFakeLLM(t)
	}
	var err error
	if h.st, err = store.Open(ctx, path, store.WithClock(clk.Now)); err != nil {
		t.Fatal(err)
	}
	h.sched, err = New(Config{Store: h.st, Jobs: s.jobs, Location: berlin(t), ZoneFor: s.zoneFor, Clock: clk,
		MissedGrace: time.Hour, MaxFailures: 3, OnRun: func(r Report) { h.reports <- r }})
	if err != nil {
		t.Fatal(err)
	}
	model, err := llm.New(llm.Config{BaseURL: h.llm.URL, APIKey: "sk-test", Model: "fake-model", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(agent.Config{Model: model, Store: h.st, Now: clk.Now, Location: berlin(t),
		Sources: append([]agent.Source{agent.ChannelContext(), h.sched.Source()}, s.sources...)})
	if err != nil {
		t.Fatal(err)
	}
	rc := router.Config{Store: h.st, Agent: ag, Location: berlin(t)}
	if s.interceptors != nil {
		rc.Interceptors = s.interceptors(h.st)
	}
	if s.outbox {
		h.retry, h.outbox = make(chan struct{}), make(chan reply.OutboxEvent, 10)
		rc.Replies.Outbox, rc.Replies.Now = h.st, func() time.Time { return clk.Now().Add(time.Duration(h.later.Load())) }
		rc.Replies.OutboxConfig = reply.OutboxConfig{After: h.outboxAfter(t), OnEvent: func(ev reply.OutboxEvent) { h.outbox <- ev }}
	}
	if h.rt, err = router.New(rc); err != nil {
		t.Fatal(err)
	}
	h.rt.AddChannel(h.ch, router.Access{AllowAll: true})
	if err := h.rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.sched.Start(ctx, h.rt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.stop)
	clk.waitArm(t)
	return h
}

// stop shuts down like the service does: scheduler, router, store.
func (h *harness) stop() {
	if h.stopped {
		return
	}
	h.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	_ = h.sched.Stop(ctx)
	_ = h.rt.Shutdown(ctx)
	_ = h.st.Close()
}

// tick moves the clock to when, which must wake the loop, and waits for
// the loop's pass to complete.
func (h *harness) tick(t *testing.T, when time.Time) {
	t.Helper()
	if !h.clk.Set(when) {
		t.Fatalf("moving the clock to %s woke nothing", when)
	}
	h.clk.waitArm(t)
}

// sent waits for the next message the channel sends.
func (h *harness) sent(t *testing.T) string {
	t.Helper()
	select {
	case text := <-h.ch.notify:
		return text
	case <-time.After(guard):
		t.Fatalf("no message was sent; sent so far: %q", h.ch.texts())
	}
	return ""
}

// report waits for the next outcome the scheduler records.
func (h *harness) report(t *testing.T) Report {
	t.Helper()
	select {
	case r := <-h.reports:
		return r
	case <-time.After(guard):
		t.Fatal("the scheduler recorded no outcome")
	}
	return Report{}
}

// outboxAfter is the outbox's timer: it fires once h.retry is closed,
// with the outbox's clock an hour on (every waiting reply is due).
func (h *harness) outboxAfter(t *testing.T) func(time.Duration) <-chan time.Time {
	return func(time.Duration) <-chan time.Time {
		ch := make(chan time.Time, 1)
		go func() {
			select {
			case <-h.retry:
				h.later.Store(int64(time.Hour))
				ch <- time.Now()
			case <-t.Context().Done():
			}
		}()
		return ch
	}
}

// outboxEvent waits for the router's outbox to report kind.
func (h *harness) outboxEvent(t *testing.T, kind string) {
	t.Helper()
	for {
		select {
		case ev := <-h.outbox:
			if ev.Kind == kind {
				return
			}
		case <-time.After(guard):
			t.Fatalf("the outbox reported no %s", kind)
		}
	}
}

// quiet asserts that nothing more was sent or recorded.
func (h *harness) quiet(t *testing.T) {
	t.Helper()
	select {
	case text := <-h.ch.notify:
		t.Errorf("unexpected message %q", text)
	case r := <-h.reports:
		t.Errorf("unexpected outcome %+v", r)
	default:
	}
}

// job returns the stored job named name.
func (h *harness) job(t *testing.T, name string) store.Schedule {
	t.Helper()
	all, err := h.st.Schedules(t.Context(), store.ScheduleFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range all {
		if sc.Name == name {
			return sc
		}
	}
	t.Fatalf("no job %q", name)
	return store.Schedule{}
}

func (h *harness) runs(t *testing.T, id int64) []store.ScheduleRun {
	t.Helper()
	runs, err := h.st.ScheduleRuns(t.Context(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(runs) // oldest first
	return runs
}

func dbPath(t *testing.T) string { return filepath.Join(t.TempDir(), "switchboard.db") }

func reminder(name, spec, text string) config.ScheduleJob {
	return config.ScheduleJob{Name: name, Spec: spec, Channel: "fake", Chat: "c1", Kind: "reminder", Text: text}
}

func task(name, spec, prompt string) config.ScheduleJob {
	return config.ScheduleJob{Name: name, Spec: spec, Channel: "fake", Chat: "c1", Kind: "task", Prompt: prompt}
}

func equalTime(t *testing.T, what string, got *time.Time, want time.Time) {
	t.Helper()
	if got == nil || !got.Equal(want) {
		t.Errorf("%s = %v, want %s", what, got, want)
	}
}

var msgSeq int

// inbound is a user's message in a private chat of the fake channel.
func inbound(chat, user, text string) channels.Inbound {
	msgSeq++
	return channels.Inbound{Channel: "fake", ChatID: chat, ChatType: channels.DM, MessageID: fmt.Sprint(msgSeq),
		UserID: user, Text: text, Mentioned: true}
}

func agentInfo(channel, chat, user, text string) agent.TurnInfo {
	return agent.TurnInfo{Channel: channel, ChatKey: chat, ChatType: "dm", UserID: user, UserText: text, Step: 1}
}
