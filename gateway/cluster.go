package gateway

import (
	"context"
	"log/slog"
	"sync"

	"github.com/switchboard-gateway/switchboard/cluster"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/store"
)

// roleScheduler is held by one replica at a time (the channels name their
// own roles, such as Telegram's poller).
const roleScheduler = "scheduler"

// ReplicaID is this process's name among replicas sharing a PostgreSQL
// store, or "" on SQLite (one process owns the file).
func ReplicaID(cfg *config.Config) string {
	if cfg.Store.Driver != config.StorePostgres {
		return ""
	}
	if cfg.Cluster.ReplicaID != "" {
		return cfg.Cluster.ReplicaID
	}
	return cluster.DefaultID()
}

// newReplica makes this process's membership in the cluster, or nil when
// the store is not shared.
func newReplica(cfg *config.Config, version, id string, st *store.Store, log *slog.Logger) (*cluster.Replica, error) {
	if id == "" {
		return nil, nil
	}
	return cluster.New(cluster.Config{Store: st, ID: id, TTL: cfg.Cluster.LeaseTTL, Poll: cfg.Cluster.PollInterval,
		Info: "switchboard " + version, Logger: log})
}

// startScheduler runs the scheduler: at once for a single process; among
// replicas, once this one holds the scheduler role (whichever replica is
// alive fires each due job; the store's claim makes it fire once). The
// returned function stops waiting for the role; call it before sched.Stop.
func (g *Gateway) startScheduler(ctx context.Context) (stopWaiting func()) {
	if g.replica == nil {
		if err := g.sched.Start(ctx, g.router); err != nil {
			g.log.Error("scheduled jobs are off", "err", err)
		}
		return func() {}
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := g.replica.Hold(wctx, roleScheduler); err != nil {
			return // stopping
		}
		if err := g.sched.Start(wctx, g.router); err != nil {
			g.log.Error("scheduled jobs are off", "err", err)
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// clusterStatus is /readyz's view of the replica; nil for a single process.
func (g *Gateway) clusterStatus() func(ctx context.Context) (cluster.Status, error) {
	if g.replica == nil {
		return nil
	}
	return g.replica.Status
}
