package router

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/store"
)

// owner decides which chats this process answers, the one seam between the
// router's work loop and replicas: local (this process owns every chat) or
// leased (the chats' leases with other replicas, cluster.go).
type owner interface {
	// start resumes the messages stored but not finished before a restart.
	start(ctx context.Context) error
	// pin readies the chat for a message about to be stored; unpin once
	// it is.
	pin(ctx context.Context, in channels.Inbound) (unpin func(), err error)
	// stored hands on a message stored just now (fresh).
	stored(ctx context.Context, id int64, in channels.Inbound, log *slog.Logger) error
	// idle is called, under Router.mu, when q has no items left; it may
	// release the lock meanwhile (and items may be queued then).
	idle(q *chatQueue)
	// next is called, under Router.mu, with the item just taken off q;
	// retake says ready must take the chat again before it runs.
	next(q *chatQueue, it item) (retake bool)
	// ready reports whether the item may run now (false: skip it).
	ready(ctx context.Context, q *chatQueue, it item, retake bool) bool
	// done is called after the item ran (or was skipped).
	done(q *chatQueue, it item)
	// dropped is called for an item /stop took off its queue.
	dropped(it item)
}

// newOwner returns the owner for a Router: leased with a Cluster, else
// local.
func newOwner(r *Router, c Cluster) owner {
	if c == nil {
		return local{r}
	}
	return newLeased(r, c)
}

// local is the owner of a process that answers every chat itself.
type local struct{ r *Router }

// start queues the pending messages, oldest first, and records the turns a
// crash left running without one as cancelled.
func (o local) start(ctx context.Context) error {
	r := o.r
	pending, err := r.cfg.Store.PendingInbox(ctx)
	if err != nil {
		return fmt.Errorf("router: load pending messages: %w", err)
	}
	pendingIDs := map[int64]bool{}
	for _, it := range pending {
		var in channels.Inbound
		if err := json.Unmarshal(it.Payload, &in); err != nil {
			r.log.Error("stored message unreadable; skipping it", "inbox_id", it.ID, "err", err)
			_ = r.cfg.Store.FinishInbox(ctx, it.ID, store.InboxSkipped)
			continue
		}
		pendingIDs[it.ID] = true
		r.log.Info("resuming unfinished message", "inbox_id", it.ID, "channel", in.Channel, "chat", in.ChatID)
		r.enqueue(item{inboxID: it.ID, in: in})
	}
	// Turns left running by a crash and not tied to a pending message can
	// not be resumed: record them as failed so the history stays honest.
	running, err := r.cfg.Store.RunningTurns(ctx)
	if err != nil {
		return fmt.Errorf("router: load running turns: %w", err)
	}
	for _, t := range running {
		if t.InboxID != 0 && pendingIDs[t.InboxID] {
			continue
		}
		_ = r.cfg.Store.FinishTurn(ctx, t.ID, store.TurnEnd{StopReason: string(agent.StopCancelled),
			Status: store.TurnCancelled, Steps: t.Steps, Error: "interrupted by a restart"})
	}
	return nil
}

func (local) pin(context.Context, channels.Inbound) (func(), error) { return func() {}, nil }

// stored dispatches the message at once.
func (o local) stored(ctx context.Context, id int64, in channels.Inbound, _ *slog.Logger) error {
	_, err := o.r.dispatch(ctx, id, in, true)
	return err
}

func (local) idle(*chatQueue)                                    {}
func (local) next(*chatQueue, item) bool                         { return false }
func (local) ready(context.Context, *chatQueue, item, bool) bool { return true }
func (local) done(*chatQueue, item)                              {}
func (local) dropped(item)                                       {}
