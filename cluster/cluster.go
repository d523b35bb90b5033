// Package cluster lets several gateway processes (replicas) share one
// PostgreSQL store. Each replica writes a heartbeat; a replica owns a chat
// while it holds the chat's lease, and holds roles (the Telegram poller, the
// scheduler, a Discord shard) the same way. A lease lives as long as its
// owner's heartbeat is fresh (younger than the TTL), so the chats and roles
// of a replica that dies pass to the others after at most one TTL.
//
// A replica whose last written heartbeat is three quarters of the TTL old
// stops (Lost is called), before anyone may take its leases over: two
// replicas never run a turn for the same chat at once.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/store"
)

// Store is what a replica needs from the database (*store.Store).
type Store interface {
	Heartbeat(ctx context.Context, replica, info string) error
	RetireReplica(ctx context.Context, replica string) error
	AcquireChat(ctx context.Context, channel, chat, owner string, ttl time.Duration) (bool, error)
	ReleaseChat(ctx context.Context, channel, chat, owner string) (bool, error)
	AcquireRole(ctx context.Context, role, owner string, ttl time.Duration) (bool, error)
	Leases(ctx context.Context, owner string) ([]store.Lease, error)
	ClaimableRefs(ctx context.Context, owner string, ttl time.Duration, limit int) ([]store.InboxItem, error)
	PendingInboxOf(ctx context.Context, channel, chat string) ([]store.InboxItem, error)
	InboxStatus(ctx context.Context, id int64) (string, error)
}

// Config configures a Replica.
type Config struct {
	Store Store
	// ID names the replica; empty: <hostname>-<pid>.
	ID string
	// TTL is how long a lease outlives its owner's last heartbeat.
	TTL time.Duration
	// Poll is how often the router looks for claimable messages.
	Poll time.Duration
	// Info is stored with the heartbeat (version, channels), for operators.
	Info string
	// Lost is called once if no heartbeat could be written for three
	// quarters of the TTL; nil: the process exits with status 1 (after logging why), so
	// that its supervisor restarts it and the other replicas take over.
	Lost   func()
	Logger *slog.Logger
	// Now is the clock for the heartbeat deadline; nil: time.Now.
	Now func() time.Time
}

// Replica is this process's membership in the cluster.
type Replica struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	lastOK time.Time
	roles  []string
	stop   context.CancelFunc
	done   chan struct{}
	lost   sync.Once
}

// DefaultID is <hostname>-<pid>: unique among processes that run at once.
func DefaultID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "replica"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// New returns a replica; Start joins it to the cluster.
func New(cfg Config) (*Replica, error) {
	if cfg.Store == nil {
		return nil, errors.New("cluster: a store is required")
	}
	if cfg.TTL < time.Second {
		return nil, fmt.Errorf("cluster: lease TTL %s is under 1s", cfg.TTL)
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.ID == "" {
		cfg.ID = DefaultID()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Replica{cfg: cfg, log: cfg.Logger.With("component", "cluster", "replica", cfg.ID)}, nil
}

// ID is the replica's name.
func (r *Replica) ID() string { return r.cfg.ID }

// TTL is the lease expiry.
func (r *Replica) TTL() time.Duration { return r.cfg.TTL }

// PollInterval is how often to look for claimable messages.
func (r *Replica) PollInterval() time.Duration { return r.cfg.Poll }

// Start writes the first heartbeat (an error if the store refuses it) and
// keeps writing one every quarter TTL until Stop.
func (r *Replica) Start(ctx context.Context) error {
	if err := r.cfg.Store.Heartbeat(ctx, r.cfg.ID, r.cfg.Info); err != nil {
		return fmt.Errorf("cluster: join as %s: %w", r.cfg.ID, err)
	}
	r.mu.Lock()
	r.lastOK = r.cfg.Now()
	lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.stop, r.done = stop, make(chan struct{})
	r.mu.Unlock()
	go r.beat(lctx)
	r.log.Info("joined the cluster", "lease_ttl", r.cfg.TTL)
	return nil
}

// beat writes a heartbeat every quarter TTL. A failed or slow one is tried
// again at once (each try may take an eighth of the TTL); the replica gives
// up only when its last written heartbeat is three quarters of the TTL old,
// a quarter before anyone may take its leases.
func (r *Replica) beat(ctx context.Context) {
	defer close(r.done)
	every, try := r.cfg.TTL/4, r.cfg.TTL/8
	wait := every
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		// The row gets a time no earlier than this, so the lease lasts at
		// least a TTL from here.
		began := r.cfg.Now()
		hctx, cancel := context.WithTimeout(ctx, try)
		err := r.cfg.Store.Heartbeat(hctx, r.cfg.ID, r.cfg.Info)
		cancel()
		r.mu.Lock()
		if err == nil {
			r.lastOK = began
		}
		silent := r.cfg.Now().Sub(r.lastOK)
		r.mu.Unlock()
		switch {
		case err == nil:
			wait = every
		case ctx.Err() != nil:
			return
		case silent >= r.cfg.TTL*3/4:
			r.log.Error("could not write a heartbeat for most of the lease TTL: stopping before another replica takes this one's chats",
				"silent", silent.Round(time.Millisecond), "err", err)
			r.lost.Do(r.onLost)
			return
		default:
			r.log.Warn("heartbeat failed; retrying", "silent", silent.Round(time.Millisecond), "err", err)
			wait = min(r.cfg.TTL/20, 100*time.Millisecond)
		}
	}
}

func (r *Replica) onLost() {
	if r.cfg.Lost != nil {
		r.cfg.Lost()
		return
	}
	os.Exit(1)
}

// Stop ends the heartbeat and hands the replica's chats and roles over at
// once (a graceful shutdown, after the router has stopped).
func (r *Replica) Stop(ctx context.Context) error {
	r.mu.Lock()
	stop, done := r.stop, r.done
	r.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	<-done
	if err := r.cfg.Store.RetireReplica(ctx, r.cfg.ID); err != nil {
		return fmt.Errorf("cluster: leave: %w", err)
	}
	r.log.Info("left the cluster")
	return nil
}

// AcquireChat takes the chat for this replica; false: another live replica
// owns it.
func (r *Replica) AcquireChat(ctx context.Context, channel, chat string) (bool, error) {
	return r.cfg.Store.AcquireChat(ctx, channel, chat, r.cfg.ID, r.cfg.TTL)
}

// ReleaseChat gives the chat up unless messages of it are pending (then it
// returns false and the replica keeps it).
func (r *Replica) ReleaseChat(ctx context.Context, channel, chat string) (bool, error) {
	return r.cfg.Store.ReleaseChat(ctx, channel, chat, r.cfg.ID)
}

// Claimable returns pending messages of chats this replica owns or may
// take: their ID, Channel and ChatKey, not their content.
func (r *Replica) Claimable(ctx context.Context) ([]store.InboxItem, error) {
	return r.cfg.Store.ClaimableRefs(ctx, r.cfg.ID, r.cfg.TTL, 0)
}

// PendingOf returns a chat's pending messages, oldest first.
func (r *Replica) PendingOf(ctx context.Context, channel, chat string) ([]store.InboxItem, error) {
	return r.cfg.Store.PendingInboxOf(ctx, channel, chat)
}

// InboxPending reports whether the message is still to be processed.
func (r *Replica) InboxPending(ctx context.Context, id int64) (bool, error) {
	st, err := r.cfg.Store.InboxStatus(ctx, id)
	if err != nil {
		return false, err
	}
	return st == store.InboxPending, nil
}

// Hold blocks until this replica holds role (checking every quarter TTL),
// or ctx ends. A role is kept until the replica stops or dies.
func (r *Replica) Hold(ctx context.Context, role string) error {
	_, err := r.HoldAny(ctx, []string{role})
	return err
}

// HoldAny blocks until this replica holds one of roles (the first free one
// in order) and returns its index, or ctx ends.
func (r *Replica) HoldAny(ctx context.Context, roles []string) (int, error) {
	if len(roles) == 0 {
		return -1, errors.New("cluster: no roles to hold")
	}
	logged := false
	for {
		for i, role := range roles {
			ok, err := r.cfg.Store.AcquireRole(ctx, role, r.cfg.ID, r.cfg.TTL)
			if err == nil && ok {
				r.mu.Lock()
				if !slices.Contains(r.roles, role) {
					r.roles = append(r.roles, role)
					slices.Sort(r.roles)
				}
				r.mu.Unlock()
				r.log.Info("took a role", "role", role)
				return i, nil
			}
			if ctx.Err() != nil {
				return -1, ctx.Err()
			}
			if err != nil {
				r.log.Warn("could not claim a role; retrying", "role", role, "err", err)
			}
		}
		if !logged {
			r.log.Info("waiting for a role another replica holds", "roles", roles)
			logged = true
		}
		t := time.NewTimer(r.cfg.TTL / 4)
		select {
		case <-ctx.Done():
			t.Stop()
			return -1, ctx.Err()
		case <-t.C:
		}
	}
}

// Status is what /readyz shows of the replica.
type Status struct {
	Replica   string   `json:"replica"`
	Roles     []string `json:"roles"`
	Chats     int      `json:"chats"` // chats whose lease it holds
	Heartbeat string   `json:"heartbeat_age"`
	Healthy   bool     `json:"healthy"` // the last heartbeat is younger than a quarter TTL plus a margin
}

// Status reports the replica's roles and leases.
func (r *Replica) Status(ctx context.Context) (Status, error) {
	r.mu.Lock()
	st := Status{Replica: r.cfg.ID, Roles: slices.Clone(r.roles)}
	age := r.cfg.Now().Sub(r.lastOK)
	r.mu.Unlock()
	if st.Roles == nil {
		st.Roles = []string{}
	}
	st.Heartbeat = age.Round(time.Millisecond).String()
	st.Healthy = age < r.cfg.TTL/2 // a beat is due every quarter
	leases, err := r.cfg.Store.Leases(ctx, r.cfg.ID)
	if err != nil {
		return st, fmt.Errorf("cluster: leases: %w", err)
	}
	for _, l := range leases {
		if l.Role == "" {
			st.Chats++
		}
	}
	return st, nil
}
