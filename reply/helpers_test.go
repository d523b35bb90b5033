package reply_test

// Helpers of the tests that run the reply side through a whole router
// (copies of router's own, which its package-internal tests keep).

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/store"
)

// fakeChannel records what the router sends and how often it types.
type fakeChannel struct {
	mu     sync.Mutex
	sent   []channels.Outbound
	typing int
	notify chan struct{} // receives after every send (buffered)
}

func newFakeChannel() *fakeChannel { return &fakeChannel{notify: make(chan struct{}, 100)} }

func (c *fakeChannel) Name() string                                   { return "fake" }
func (c *fakeChannel) Run(ctx context.Context, _ channels.Sink) error { <-ctx.Done(); return nil }
func (c *fakeChannel) Send(_ context.Context, m channels.Outbound) (string, error) {
	c.mu.Lock()
	c.sent = append(c.sent, m)
	n := len(c.sent)
	c.mu.Unlock()
	c.notify <- struct{}{}
	return fmt.Sprintf("out-%d", n), nil
}
func (c *fakeChannel) Typing(context.Context, string) error {
	c.mu.Lock()
	c.typing++
	c.mu.Unlock()
	return nil
}
func (c *fakeChannel) texts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.sent {
		out = append(out, m.Text)
	}
	return out
}

// fakeRunner is an agent that answers "echo: <text>" through the chat,
// optionally blocking until released or cancelled.
type fakeRunner struct {
	mu      sync.Mutex
	started chan string // the text of each turn as it starts
	release map[string]chan struct{}
	running int
	maxSeen int
	turns   []agent.Turn
}

func newFakeRunner() *fakeRunner {
	return &fakeRunner{started: make(chan string, 100), release: map[string]chan struct{}{}}
}

// hold makes the turn for text block until released.
func (f *fakeRunner) hold(text string) chan struct{} {
	ch := make(chan struct{})
	f.mu.Lock()
	f.release[text] = ch
	f.mu.Unlock()
	return ch
}

func (f *fakeRunner) Run(ctx context.Context, t agent.Turn) agent.Result {
	f.mu.Lock()
	f.running++
	f.maxSeen = max(f.maxSeen, f.running)
	f.turns = append(f.turns, t)
	wait := f.release[t.Input.Content]
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.running--; f.mu.Unlock() }()
	f.started <- t.Input.Content
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return agent.Result{StopReason: agent.StopCancelled}
		}
	}
	if _, err := t.Chat.Send(ctx, "echo: "+t.Input.Content); err != nil {
		return agent.Result{StopReason: agent.StopLLMError, Err: err}
	}
	return agent.Result{StopReason: agent.StopEndTurn, Delivered: true}
}

type env struct {
	r      *router.Router
	st     *store.Store
	ch     *fakeChannel
	runner *fakeRunner
	ctx    context.Context
}

// newEnvWith is newEnv with the router's configuration adjusted by mod.
func newEnvWith(t *testing.T, access router.Access, mod func(*router.Config)) *env {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{st: st, ch: newFakeChannel(), runner: newFakeRunner(), ctx: t.Context()}
	cfg := router.Config{Store: st, Agent: e.runner, NewTicker: func(time.Duration) router.Ticker { return stoppedTicker{} }}
	mod(&cfg)
	e.r, err = router.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.r.AddChannel(e.ch, access)
	if err := e.r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.r.Shutdown(context.Background()) })
	return e
}

type stoppedTicker struct{}

func (stoppedTicker) C() <-chan time.Time { return nil }
func (stoppedTicker) Stop()               {}

var msgSeq int

func msg(chat, user, text string) channels.Inbound {
	msgSeq++
	return channels.Inbound{Channel: "fake", ChatID: chat, ChatType: channels.DM, MessageID: fmt.Sprint(msgSeq),
		UserID: user, Text: text, Mentioned: true}
}

var everyone = router.Access{Users: []string{"*"}}

// startRouter starts a router with cfg on a fresh store, cfg.Agent as its
// runner and ch as its one channel, open to everyone; the store is closed
// when the test ends.
func startRouter(t *testing.T, cfg router.Config, ch channels.Channel) *router.Router {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg.Store = st
	if cfg.NewTicker == nil {
		cfg.NewTicker = func(time.Duration) router.Ticker { return stoppedTicker{} }
	}
	r, err := router.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.AddChannel(ch, everyone)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r
}

// elapse waits d: in a synctest bubble, a jump of the virtual clock.
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
