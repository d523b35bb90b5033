// Package routertest runs a router for the tests of the packages that plug
// into it (approvals, plans, delegate): a fake channel with buttons, a
// sweep the test ticks, and messages to deliver.
package routertest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/router"
)

// Channel is a fake channel named "fake" with buttons: it records what the
// router sends and asks.
type Channel struct {
	mu      sync.Mutex
	sent    []channels.Outbound
	buttons [][]channels.Button
}

// Name implements channels.Channel.
func (c *Channel) Name() string { return "fake" }

// Run implements channels.Channel.
func (c *Channel) Run(ctx context.Context, _ channels.Sink) error { <-ctx.Done(); return nil }

// Send implements channels.Channel.
func (c *Channel) Send(_ context.Context, m channels.Outbound) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, m)
	return fmt.Sprintf("out-%d", len(c.sent)), nil
}

// Ask implements channels.Asker.
func (c *Channel) Ask(ctx context.Context, m channels.Outbound, b []channels.Button) (string, error) {
	c.mu.Lock()
	c.buttons = append(c.buttons, b)
	c.mu.Unlock()
	return c.Send(ctx, m)
}

// Typing implements channels.Typer.
func (c *Channel) Typing(context.Context, string) error { return nil }

// Texts returns the texts sent so far, questions included.
func (c *Channel) Texts() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.sent {
		out = append(out, m.Text)
	}
	return out
}

// Buttons returns the buttons of each question asked so far.
func (c *Channel) Buttons() [][]channels.Button {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]channels.Button(nil), c.buttons...)
}

var (
	_ channels.Channel = (*Channel)(nil)
	_ channels.Asker   = (*Channel)(nil)
	_ channels.Typer   = (*Channel)(nil)
)

var seq atomic.Int64

// Msg is a direct message from user in chat of the fake channel.
func Msg(chat, user, text string) channels.Inbound {
	return channels.Inbound{Channel: "fake", ChatID: chat, ChatType: channels.DM, MessageID: fmt.Sprint(seq.Add(1)),
		UserID: user, Text: text, Mentioned: true}
}

// Press is user u pressing a button with action in chat c1.
func Press(action string) channels.Inbound {
	return channels.Inbound{Channel: "fake", ChatID: "c1", ChatType: channels.DM, MessageID: fmt.Sprint("cb", seq.Add(1)),
		UserID: "u", Action: action, Mentioned: true}
}

// manualTicker is a ticker the test drives (the interceptors' sweep).
type manualTicker struct{ c chan time.Time }

func (m manualTicker) C() <-chan time.Time { return m.c }
func (m manualTicker) Stop()               {}

type stoppedTicker struct{}

func (stoppedTicker) C() <-chan time.Time { return nil }
func (stoppedTicker) Stop()               {}

// Rig is a started router with the fake channel, open to everyone.
type Rig struct {
	t      *testing.T
	Router *router.Router
	Ch     *Channel
	// Ticks drives the sweep: the sweep has handled a tick once it takes
	// the next.
	Ticks   chan time.Time
	stopped bool
}

// Start starts a router with cfg (its NewTicker is set) and the fake
// channel; the router is shut down at the end of the test, or by Stop.
func Start(t *testing.T, cfg router.Config) *Rig {
	t.Helper()
	rig := &Rig{t: t, Ch: &Channel{}, Ticks: make(chan time.Time)}
	cfg.NewTicker = func(d time.Duration) router.Ticker {
		if d == time.Minute {
			return manualTicker{c: rig.Ticks}
		}
		return stoppedTicker{}
	}
	var err error
	if rig.Router, err = router.New(cfg); err != nil {
		t.Fatal(err)
	}
	rig.Router.AddChannel(rig.Ch, router.Access{Users: []string{"*"}})
	if err := rig.Router.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rig.Stop)
	return rig
}

// Stop shuts the router down (once).
func (r *Rig) Stop() {
	if r.stopped {
		return
	}
	r.stopped = true
	_ = r.Router.Shutdown(context.Background())
}

// Say delivers in and waits until the router is idle.
func (r *Rig) Say(in channels.Inbound) {
	r.t.Helper()
	if err := r.Router.Deliver(r.t.Context(), in); err != nil {
		r.t.Fatal(err)
	}
	if err := r.Router.Drain(r.t.Context()); err != nil {
		r.t.Fatal(err)
	}
}

// Tick makes the sweep run once and waits until the router is idle.
func (r *Rig) Tick(now time.Time) {
	r.t.Helper()
	r.Ticks <- now
	r.Ticks <- now // the sweep handled the first tick once it takes the second
	if err := r.Router.Drain(r.t.Context()); err != nil {
		r.t.Fatal(err)
	}
}
