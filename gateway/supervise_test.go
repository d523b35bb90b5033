package gateway

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/httpapi"
	"github.com/switchboard-gateway/switchboard/router"
)

// supHost records the channels the supervisor registers.
type supHost struct {
	channels.SinkFunc
	mu    sync.Mutex
	added map[string]router.Access
}

func (h *supHost) AddChannel(ch channels.Channel, access router.Access) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.added[ch.Name()] = access
}

func (h *supHost) access(name string) (router.Access, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.added[name]
	return a, ok
}

// supChannel runs until ctx ends, or fails its first drops runs at once.
type supChannel struct {
	name    string
	mu      sync.Mutex
	drops   int
	running chan struct{} // receives once per Run that keeps running
}

func (c *supChannel) Name() string { return c.name }

func (c *supChannel) Run(ctx context.Context, _ channels.Sink) error {
	c.mu.Lock()
	drop := c.drops > 0
	if drop {
		c.drops--
	}
	c.mu.Unlock()
	if drop {
		return errors.New(c.name + ": connection reset")
	}
	c.running <- struct{}{}
	<-ctx.Done()
	return nil
}

func (c *supChannel) Send(context.Context, channels.Outbound) (string, error) { return "1", nil }

func statusOf(s *supervisor, name string) httpapi.ChannelStatus {
	for _, c := range s.statuses() {
		if c.Name == name {
			return c
		}
	}
	return httpapi.ChannelStatus{}
}

// One channel fails to start twice and then drops once; it is retried with
// a doubling, capped backoff and reported, while the other serves on.
func TestSupervisorRetriesAFailingChannel(t *testing.T) {
	host := &supHost{added: map[string]router.Access{}}
	sup := newSupervisor(host, slog.New(slog.DiscardHandler))
	sup.maxWait = 3 * time.Second
	waits := make(chan time.Duration)
	proceed := make(chan struct{})
	sup.wait = func(ctx context.Context, d time.Duration) error {
		select {
		case waits <- d:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-proceed:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	restarts := 0
	sup.onRestart = func(name string) {
		if name == "flaky" {
			restarts++
		}
	}

	good := &supChannel{name: "good", running: make(chan struct{}, 1)}
	flaky := &supChannel{name: "flaky", drops: 1, running: make(chan struct{}, 1)}
	buildFails := 2
	var mu sync.Mutex
	specs := []channelSpec{
		{name: "good", access: router.Access{Users: []string{"1"}},
			build: func(context.Context) (channels.Channel, error) { return good, nil }},
		{name: "flaky", access: router.Access{Users: []string{"2"}},
			build: func(context.Context) (channels.Channel, error) {
				mu.Lock()
				defer mu.Unlock()
				if buildFails > 0 {
					buildFails--
					return nil, errors.New("flaky: getMe: platform is down")
				}
				return flaky, nil
			}},
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	run := make(chan struct{})
	sup.start(ctx, specs, run)
	// start returns after the first attempts: the good channel is
	// registered, the flaky one is not, and nothing runs yet.
	if _, ok := host.access("good"); !ok {
		t.Fatal("the good channel was not registered before the router started")
	}
	if _, ok := host.access("flaky"); ok {
		t.Fatal("a channel that failed to build was registered")
	}
	close(run)
	<-good.running

	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
	for i, w := range want {
		if d := <-waits; d != w {
			t.Fatalf("wait %d = %s, want %s", i, d, w)
		}
		st := statusOf(sup, "flaky")
		if st.State != httpapi.StateRetrying || st.Restarts != i+1 || st.NextRetry.IsZero() {
			t.Fatalf("flaky while waiting (%d) = %+v", i, st)
		}
		if g := statusOf(sup, "good"); g.State != httpapi.StateConnected {
			t.Fatalf("good while flaky retries = %+v", g)
		}
		proceed <- struct{}{}
	}
	<-flaky.running
	if st := statusOf(sup, "flaky"); st.State != httpapi.StateConnected || st.LastError != "flaky: connection reset" || st.Restarts != 3 {
		t.Fatalf("flaky after recovering = %+v", st)
	}
	if restarts != 3 {
		t.Fatalf("onRestart calls = %d, want 3", restarts)
	}
	if up := sup.up(); !up["good"] || !up["flaky"] {
		t.Fatalf("up = %v", up)
	}

	// A reload of the allowlists reaches the router.
	sup.setAccess("flaky", router.Access{Users: []string{"2", "3"}})
	if a, _ := host.access("flaky"); len(a.Users) != 2 {
		t.Fatalf("access after setAccess = %+v", a)
	}

	cancel()
	sup.stopped()
	for _, c := range sup.statuses() {
		if c.State != httpapi.StateStopped {
			t.Fatalf("%s after shutdown = %+v", c.Name, c)
		}
	}
}

// halfChannel runs but says it is not connected.
type halfChannel struct{ supChannel }

func (*halfChannel) Connected() bool { return false }

// A channel that says it is not connected is reported as starting.
func TestSupervisorAsksTheAdapter(t *testing.T) {
	host := &supHost{added: map[string]router.Access{}}
	sup := newSupervisor(host, slog.New(slog.DiscardHandler))
	ch := &halfChannel{supChannel{name: "half", running: make(chan struct{}, 1)}}
	ctx, cancel := context.WithCancel(t.Context())
	run := make(chan struct{})
	sup.start(ctx, []channelSpec{{name: "half", build: func(context.Context) (channels.Channel, error) { return ch, nil }}}, run)
	close(run)
	<-ch.running
	if st := statusOf(sup, "half"); st.State != httpapi.StateStarting {
		t.Fatalf("state = %q, want starting", st.State)
	}
	cancel()
	sup.stopped()
}

// A gated channel (the Telegram poller among replicas) is built and
// registered at once, so replies go out through it, but runs only once its
// gate opens; meanwhile it is on standby.
func TestSupervisorStandbyUntilGateOpens(t *testing.T) {
	host := &supHost{added: map[string]router.Access{}}
	sup := newSupervisor(host, slog.New(slog.DiscardHandler))
	ch := &supChannel{name: "telegram", running: make(chan struct{}, 1)}
	gateEntered := make(chan struct{})
	open := make(chan struct{})
	spec := channelSpec{name: "telegram", access: router.Access{Users: []string{"1"}},
		build: func(context.Context) (channels.Channel, error) { return ch, nil },
		gate: func(ctx context.Context) error {
			close(gateEntered)
			select {
			case <-open:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}}
	ctx, cancel := context.WithCancel(t.Context())
	run := make(chan struct{})
	close(run)
	sup.start(ctx, []channelSpec{spec}, run)
	<-gateEntered
	if _, ok := host.access("telegram"); !ok {
		t.Fatal("a channel on standby is not registered for sending")
	}
	if st := statusOf(sup, "telegram").State; st != httpapi.StateStandby {
		t.Fatalf("state while gated = %q; want standby", st)
	}
	select {
	case <-ch.running:
		t.Fatal("the channel ran before its gate opened")
	default:
	}
	close(open)
	<-ch.running
	if st := statusOf(sup, "telegram").State; st != httpapi.StateConnected {
		t.Fatalf("state after the gate opened = %q", st)
	}
	cancel()
	sup.stopped()
}

// standbyChannel runs but waits for a part another replica serves.
type standbyChannel struct {
	supChannel
	standby atomic.Bool
}

func (c *standbyChannel) Connected() bool { return !c.standby.Load() }
func (c *standbyChannel) Standby() bool   { return c.standby.Load() }

// A running channel that waits for a Discord shard another replica serves
// is reported on standby (ready), not starting.
func TestSupervisorReportsAdapterStandby(t *testing.T) {
	host := &supHost{added: map[string]router.Access{}}
	sup := newSupervisor(host, slog.New(slog.DiscardHandler))
	ch := &standbyChannel{supChannel: supChannel{name: "discord", running: make(chan struct{}, 1)}}
	ch.standby.Store(true)
	ctx, cancel := context.WithCancel(t.Context())
	run := make(chan struct{})
	close(run)
	sup.start(ctx, []channelSpec{{name: "discord", build: func(context.Context) (channels.Channel, error) { return ch, nil }}}, run)
	<-ch.running
	if st := statusOf(sup, "discord").State; st != httpapi.StateStandby {
		t.Errorf("state while waiting for a shard = %q; want standby", st)
	}
	ch.standby.Store(false)
	if st := statusOf(sup, "discord").State; st != httpapi.StateConnected {
		t.Errorf("state with a shard = %q; want connected", st)
	}
	cancel()
	sup.stopped()
}
