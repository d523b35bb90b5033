package cluster

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/store"
)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// failing makes the store refuse heartbeats once down is set.
type failing struct {
	*store.Store
	down  atomic.Bool
	beats atomic.Int64
	slow  atomic.Int64 // this beat (1 = the first) hangs until its deadline
}

func (f *failing) Heartbeat(ctx context.Context, replica, info string) error {
	n := f.beats.Add(1)
	if f.down.Load() {
		return errors.New("connection refused")
	}
	if n == f.slow.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return f.Store.Heartbeat(ctx, replica, info)
}

func TestNewValidates(t *testing.T) {
	st := openStore(t)
	for _, c := range []Config{{}, {Store: st, TTL: 500 * time.Millisecond}} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
	r, err := New(Config{Store: st, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.ID() != DefaultID() || r.PollInterval() != 250*time.Millisecond {
		t.Errorf("defaults: id %q poll %s", r.ID(), r.PollInterval())
	}
}

// Start writes a heartbeat at once and keeps writing them; Stop hands the
// replica's chats and roles over at once.
func TestHeartbeatAndLeave(t *testing.T) {
	st := openStore(t)
	f := &failing{Store: st}
	r, err := New(Config{Store: f, ID: "r1", TTL: time.Second, Info: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	reps, err := st.Replicas(t.Context())
	if err != nil || len(reps) != 1 || reps[0].ID != "r1" || reps[0].Info != "v1" {
		t.Fatalf("replicas after Start: %+v %v", reps, err)
	}
	waitFor(t, "more heartbeats", func() bool { return f.beats.Load() >= 3 })
	if ok, err := r.AcquireChat(t.Context(), "tg", "1"); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	if err := r.Hold(t.Context(), "scheduler"); err != nil {
		t.Fatal(err)
	}
	s, err := r.Status(t.Context())
	if err != nil || s.Replica != "r1" || s.Chats != 1 || !slices.Equal(s.Roles, []string{"scheduler"}) || !s.Healthy {
		t.Fatalf("status %+v %v", s, err)
	}
	if err := r.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if leases, err := st.Leases(t.Context(), "r1"); err != nil || len(leases) != 0 {
		t.Fatalf("leases after Stop: %v %v", leases, err)
	}
	if ok, err := st.AcquireChat(t.Context(), "tg", "1", "r2", time.Hour); !ok || err != nil {
		t.Fatalf("another replica could not take the chat at once: %v %v", ok, err)
	}
}

// A replica that cannot write its heartbeat for half the TTL gives up
// (Lost) before its leases can pass to another replica.
func TestLostHeartbeat(t *testing.T) {
	st := openStore(t)
	f := &failing{Store: st}
	lost := make(chan time.Time, 1)
	const ttl = time.Second
	r, err := New(Config{Store: f, ID: "r1", TTL: ttl, Lost: func() { lost <- time.Now() }})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The last heartbeat that got through was written no later than now.
	f.down.Store(true)
	last := time.Now()
	var at time.Time
	select {
	case at = <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("Lost was not called")
	}
	if d := at.Sub(last); d >= ttl {
		t.Errorf("Lost after %s without a heartbeat; the lease (%s) had expired by then", d, ttl)
	}
	s, _ := r.Status(context.WithoutCancel(t.Context()))
	if s.Healthy {
		t.Errorf("status healthy after the heartbeat was lost: %+v", s)
	}
}

// Hold waits while a live replica holds the role and takes it once that
// replica's heartbeat is older than the TTL.
func TestHoldWaitsForALiveHolder(t *testing.T) {
	st := openStore(t)
	if err := st.Heartbeat(t.Context(), "other", ""); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.AcquireRole(t.Context(), "telegram-poller", "other", time.Hour); !ok || err != nil {
		t.Fatal(ok, err)
	}
	r, err := New(Config{Store: st, ID: "r1", TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.WithoutCancel(t.Context()))
	began := time.Now()
	if err := r.Hold(t.Context(), "telegram-poller"); err != nil {
		t.Fatal(err)
	}
	// "other" wrote its only heartbeat before r started: r may take the
	// role once that is a TTL old, not before.
	if d := time.Since(began); d < 500*time.Millisecond {
		t.Errorf("took the role after %s, while its holder's heartbeat was fresh", d)
	}
	// A role a live replica holds: waiting ends with ctx.
	if err := st.Heartbeat(t.Context(), "third", ""); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.AcquireRole(t.Context(), "busy", "third", time.Hour); !ok || err != nil {
		t.Fatal(ok, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := r.HoldAny(ctx, []string{"busy"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("HoldAny of a live replica's role: %v; want the context's error", err)
	}
	if i, err := r.HoldAny(t.Context(), []string{"telegram-poller", "discord-shard-1"}); err != nil || i != 0 {
		t.Errorf("HoldAny of a role it holds: %d %v", i, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		<-tick.C
	}
}

// One heartbeat that hangs until its deadline (a busy database) is tried
// again at once; the replica carries on.
func TestSlowHeartbeatIsRetried(t *testing.T) {
	st := openStore(t)
	f := &failing{Store: st}
	f.slow.Store(3)
	lost := make(chan struct{})
	r, err := New(Config{Store: f, ID: "r1", TTL: time.Second, Lost: func() { close(lost) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.WithoutCancel(t.Context()))
	waitFor(t, "heartbeats after the slow one", func() bool { return f.beats.Load() >= 6 })
	select {
	case <-lost:
		t.Fatal("one slow heartbeat made the replica give up")
	default:
	}
	if s, err := r.Status(t.Context()); err != nil || !s.Healthy {
		t.Fatalf("status after a slow heartbeat: %+v %v", s, err)
	}
}
