package gateway

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/waitfor"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/httpapi"
	"github.com/switchboard-gateway/switchboard/router"
)

// Restart backoff of a channel that failed to start or dropped.
const (
	// restartMin is the first wait: a blip (a DNS hiccup, a restart of the
	// platform's edge) is usually over by then.
	restartMin = time.Second
	// restartMax caps the wait, so a channel whose outage ended is back
	// within two minutes without hammering the platform meanwhile.
	restartMax = 2 * time.Minute
	// stableAfter is how long a run must last for the next failure to
	// start the backoff from restartMin again.
	stableAfter = 5 * time.Minute
)

// channelSpec is an enabled channel: how to make its adapter and who may
// use it.
type channelSpec struct {
	name   string
	access router.Access
	// live is the access the adapter reads (BuildEnv.Access); a reload
	// sets it with the router's.
	live *atomic.Pointer[router.Access]
	// build makes the adapter; it may contact the platform (Telegram's
	// getMe) and fail, and is then retried like a failed Run.
	build func(ctx context.Context) (channels.Channel, error)
	// gate, if set, runs once before the channel first runs and blocks
	// until this process may run it (the Telegram poller role among
	// replicas); meanwhile the channel is on standby: built, so replies can
	// be sent through it, but not receiving.
	gate func(ctx context.Context) error
}

// channelHost is the part of the router the supervisor needs.
type channelHost interface {
	AddChannel(ch channels.Channel, access router.Access)
	channels.Sink
}

// supervisor runs each channel on its own: one that fails to start or
// drops is retried with a capped exponential backoff and reported, while
// the others keep serving.
type supervisor struct {
	host       channelHost
	log        *slog.Logger
	onRestart  func(name string) // metrics; may be nil
	wait       func(ctx context.Context, d time.Duration) error
	now        func() time.Time
	minWait    time.Duration
	maxWait    time.Duration
	stableTime time.Duration

	mu    sync.Mutex
	state map[string]*channelState
	wg    sync.WaitGroup
}

type channelState struct {
	status httpapi.ChannelStatus
	ch     channels.Channel // nil until built
	access router.Access
	live   *atomic.Pointer[router.Access] // nil: the adapter reads none
}

func newSupervisor(host channelHost, log *slog.Logger) *supervisor {
	return &supervisor{host: host, log: log, wait: waitfor.Sleep, now: time.Now,
		minWait: restartMin, maxWait: restartMax, stableTime: stableAfter, state: map[string]*channelState{}}
}

// start builds every channel concurrently and returns once each first
// attempt has succeeded or failed. Channels that were built are registered
// with the host. The channels run (and failed ones are retried) only after
// run is closed, which the caller does once the router has started.
func (s *supervisor) start(ctx context.Context, specs []channelSpec, run <-chan struct{}) {
	var first sync.WaitGroup
	for _, sp := range specs {
		s.mu.Lock()
		s.state[sp.name] = &channelState{access: sp.access, live: sp.live,
			status: httpapi.ChannelStatus{Name: sp.name, State: httpapi.StateStarting, Since: s.now()}}
		s.mu.Unlock()
		first.Add(1)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.supervise(ctx, sp, first.Done, run)
		}()
	}
	first.Wait()
}

// supervise is one channel's life: build, run, and on failure wait and
// try again, until ctx ends.
func (s *supervisor) supervise(ctx context.Context, sp channelSpec, built func(), run <-chan struct{}) {
	log := s.log.With("channel", sp.name)
	backoff := s.minWait
	var ch channels.Channel
	once := sync.OnceFunc(built)
	defer once()
	for ctx.Err() == nil {
		var err error
		if ch == nil {
			s.set(sp.name, httpapi.StateStarting, "", time.Time{})
			if ch, err = sp.build(ctx); err != nil {
				ch = nil
			} else {
				s.mu.Lock()
				st := s.state[sp.name]
				st.ch = ch
				access := st.access
				s.mu.Unlock()
				s.host.AddChannel(ch, access)
			}
		}
		once()
		select {
		case <-run:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		if err == nil && sp.gate != nil {
			s.set(sp.name, httpapi.StateStandby, "", time.Time{})
			log.Info("channel on standby: another replica runs it")
			if err = sp.gate(ctx); ctx.Err() != nil {
				break
			}
			if err == nil {
				sp.gate = nil // held for good
			}
		}
		began := s.now()
		if err == nil {
			s.set(sp.name, stateRunning, "", time.Time{})
			log.Info("channel started")
			err = ch.Run(ctx, s.host)
			if ctx.Err() != nil {
				break
			}
			if err == nil {
				err = errors.New("the channel stopped without an error")
			}
		}
		if s.now().Sub(began) >= s.stableTime {
			backoff = s.minWait
		}
		next := s.now().Add(backoff)
		s.set(sp.name, httpapi.StateRetrying, err.Error(), next)
		if s.onRestart != nil {
			s.onRestart(sp.name)
		}
		log.Error("channel failed; retrying", "err", err, "retry_in", backoff)
		if s.wait(ctx, backoff) != nil {
			break
		}
		backoff = min(backoff*2, s.maxWait)
	}
	s.set(sp.name, httpapi.StateStopped, "", time.Time{})
}

// stateRunning is a channel's state while its Run goes on; statuses reports
// it as httpapi.StateConnected, StateStarting or StateStandby, as the
// adapter says.
const stateRunning = "running"

// set records a channel's state. stateRunning is stored as is and reported
// as connected or starting, as the adapter says (see statuses).
func (s *supervisor) set(name, state, errMsg string, next time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state[name]
	if st.status.State != state {
		st.status.Since = s.now()
	}
	st.status.State, st.status.NextRetry = state, next
	if errMsg != "" {
		st.status.LastError = errMsg
		st.status.Restarts++
	}
}

// setAccess changes who may use a channel (a reload of the allowlists).
func (s *supervisor) setAccess(name string, access router.Access) {
	s.mu.Lock()
	st := s.state[name]
	if st == nil {
		s.mu.Unlock()
		return
	}
	st.access = access
	if st.live != nil {
		st.live.Store(&access)
	}
	ch := st.ch
	s.mu.Unlock()
	if ch != nil {
		s.host.AddChannel(ch, access)
	}
}

// statuses reports every channel, sorted by name.
func (s *supervisor) statuses() []httpapi.ChannelStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]httpapi.ChannelStatus, 0, len(s.state))
	for _, st := range s.state {
		c := st.status
		if c.State == stateRunning {
			c.State = httpapi.StateConnected
			if cc, ok := st.ch.(channels.Connecter); ok && !cc.Connected() {
				c.State = httpapi.StateStarting
				if sb, ok := st.ch.(channels.Standbyer); ok && sb.Standby() {
					c.State = httpapi.StateStandby
				}
			}
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// up reports which channels are connected, for the metrics.
func (s *supervisor) up() map[string]bool {
	m := map[string]bool{}
	for _, c := range s.statuses() {
		m[c.Name] = c.State == httpapi.StateConnected
	}
	return m
}

// stopped blocks until every channel has stopped (after ctx ended).
func (s *supervisor) stopped() { s.wg.Wait() }
