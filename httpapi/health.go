package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/cluster"
	"github.com/switchboard-gateway/switchboard/internal/httpjson"
)

// Check is one readiness check's result.
type Check struct {
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Readiness is the body of /readyz.
type Readiness struct {
	Ready    bool             `json:"ready"`
	Checks   map[string]Check `json:"checks"`
	Channels map[string]Check `json:"channels,omitempty"`
	// Cluster is this replica's id, roles and chat leases, when replicas
	// share the store.
	Cluster *cluster.Status `json:"cluster,omitempty"`
}

// probeState remembers the last model probe, so /readyz polled every few
// seconds does not hammer the model server.
type probeState struct {
	mu   sync.Mutex
	at   time.Time
	err  error
	busy chan struct{} // non-nil while a probe runs; closed when it ends
}

// healthz answers "ok" and nothing more: it needs no token and passes the
// Host check, so it must tell a stranger (or a web page) nothing. A caller
// with the token gets the version and uptime as JSON.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if s.opts.Token == "" {
		writeOK(w)
		return
	}
	if c, _ := s.checkBearer(r); c != credOK {
		writeOK(w)
		return
	}
	httpjson.Write(w, http.StatusOK, map[string]any{
		"status":         "ok",
		"version":        s.opts.Version,
		"uptime_seconds": int(s.opts.Now().Sub(s.started).Seconds()),
	})
}

func writeOK(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, "ok")
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	rd := s.Ready(r.Context())
	code := http.StatusOK
	if !rd.Ready {
		code = http.StatusServiceUnavailable
	}
	httpjson.Write(w, code, rd)
}

// Ready runs the readiness checks: the store accepts writes, every enabled
// channel is connected, the model answered recently, and the server is not
// shutting down.
func (s *Server) Ready(ctx context.Context) Readiness {
	rd := Readiness{Ready: true, Checks: map[string]Check{}}
	set := func(name string, c Check) {
		rd.Checks[name] = c
		rd.Ready = rd.Ready && c.OK
	}
	if s.draining.Load() {
		set("shutdown", Check{OK: false, Detail: "shutting down: finishing running turns"})
	}
	if s.opts.Serving != nil && !s.opts.Serving() {
		set("startup", Check{OK: false, Detail: "starting: reloading unfinished messages"})
	}

	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	err := s.opts.Store.Ping(pctx)
	cancel()
	if err != nil {
		set("store", Check{Detail: err.Error()})
	} else {
		set("store", Check{OK: true})
	}

	if s.opts.Channels != nil {
		rd.Channels = map[string]Check{}
		var down []string
		for _, c := range s.opts.Channels() {
			ok := c.State == StateConnected || c.State == StateStandby
			detail := c.State
			if c.LastError != "" && !ok {
				detail += ": " + c.LastError
			}
			rd.Channels[c.Name] = Check{OK: ok, Detail: detail}
			if !ok {
				down = append(down, c.Name)
			}
		}
		sort.Strings(down)
		if len(down) > 0 {
			set("channels", Check{Detail: fmt.Sprintf("not connected: %v", down)})
		} else {
			set("channels", Check{OK: true})
		}
	}

	if s.opts.Model != nil {
		set("model", s.modelCheck(ctx))
	}
	if s.opts.Cluster != nil {
		st, err := s.opts.Cluster(ctx)
		rd.Cluster = &st
		switch {
		case err != nil:
			set("cluster", Check{Detail: err.Error()})
		case !st.Healthy:
			set("cluster", Check{Detail: "no heartbeat for " + st.Heartbeat + ": this replica's chats may pass to another"})
		default:
			set("cluster", Check{OK: true, Detail: fmt.Sprintf("replica %s: %d chats, roles %v", st.Replica, st.Chats, st.Roles)})
		}
	}
	return rd
}

// modelCheck fails when the last modelFailures chat completions failed for
// want of the model server within ModelWindow (the probe cannot tell
// otherwise: only a completion that succeeds can). Otherwise it passes when
// a model call succeeded within ModelWindow and none failed since, and
// probes the model server (at most every 30s) when none did.
func (s *Server) modelCheck(ctx context.Context) Check {
	now := s.opts.Now()
	h := s.opts.Model.Health()
	if stall := s.opts.ModelStall; stall > 0 && h.InFlight > 0 && now.Sub(h.Quiet) > stall {
		return Check{Detail: fmt.Sprintf("%d chat completion(s) in flight and none finished or streamed anything for %s (more than %s): the model server hangs",
			h.InFlight, now.Sub(h.Quiet).Round(time.Second), stall)}
	}
	if h.Unavailable >= modelFailures && now.Sub(h.LastFailure) <= s.opts.ModelWindow {
		return Check{Detail: fmt.Sprintf("the last %d chat completions failed, the last %s: %s", h.Unavailable, ago(now, h.LastFailure), h.LastError)}
	}
	if !h.LastOK.IsZero() && now.Sub(h.LastOK) <= s.opts.ModelWindow && !h.LastFailure.After(h.LastOK) {
		return Check{OK: true, Detail: "last answered " + ago(now, h.LastOK)}
	}
	if s.opts.Probe == nil {
		if h.LastFailure.After(h.LastOK) {
			return Check{Detail: "last call failed " + ago(now, h.LastFailure) + ": " + h.LastError}
		}
		return Check{Detail: "no model call yet"}
	}
	err := s.probeModel(ctx, h.LastFailure)
	if err != nil {
		return Check{Detail: "probe failed: " + err.Error()}
	}
	return Check{OK: true, Detail: "probe answered"}
}

// probeModel runs the probe unless one ran within probeEvery and after the
// last failed model call, sharing one probe among concurrent callers.
func (s *Server) probeModel(ctx context.Context, lastFailure time.Time) error {
	p := &s.probe
	p.mu.Lock()
	if !p.at.IsZero() && s.opts.Now().Sub(p.at) < probeEvery && p.at.After(lastFailure) {
		err := p.err
		p.mu.Unlock()
		return err
	}
	if p.busy != nil {
		busy := p.busy
		p.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return ctx.Err()
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.err
	}
	busy := make(chan struct{})
	p.busy = busy
	p.mu.Unlock()

	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	err := s.opts.Probe(pctx)
	cancel()
	if err != nil {
		s.opts.Model.Failed(err)
	} else {
		s.opts.Model.Succeeded()
	}
	p.mu.Lock()
	p.at, p.err, p.busy = s.opts.Now(), err, nil
	p.mu.Unlock()
	close(busy)
	return err
}

func ago(now, t time.Time) string {
	return now.Sub(t).Round(time.Second).String() + " ago"
}
