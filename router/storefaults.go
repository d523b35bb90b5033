package router

import (
	"context"
	"errors"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/store"
)

// When the store fails a message, the message stays pending. If the store
// cannot take writes for now (store.Unavailable: a full disk, a read-only
// file), the chat is told once, and the message is tried again after a
// growing wait, at the head of its chat's queue so that the chat's order
// holds, while other chats go on. Other store errors leave it pending until
// a restart, and the user is told that it failed.
const (
	firstStoreRetry = time.Second
	maxStoreRetry   = 30 * time.Second
)

// afterProcess follows up on a message process handled: a success resets
// the chat's retry wait and notice; a store failure is handled as above, a
// model that is unavailable as modelwait.go says.
func (r *Router) afterProcess(ctx context.Context, key string, q *chatQueue, it item, err error) {
	if err == nil {
		r.mu.Lock()
		q.retry = 0
		r.mu.Unlock()
		r.storeNotices.reset(key)
		r.modelAnswered(key, it)
		return
	}
	if mo, ok := errors.AsType[*modelOutage](err); ok {
		r.waitForModel(ctx, key, q, it, mo) // modelwait.go
		return
	}
	log := r.log.With("channel", it.in.Channel, "chat", it.in.ChatID, "inbox_id", it.inboxID)
	why, transient := store.Unavailable(err)
	if !transient {
		log.Error("the store failed the message; it stays pending until a restart", "err", err)
		if _, serr := r.Send(ctx, it.in, "Sorry, something went wrong on my side while saving our conversation, so I couldn't answer this message."); serr != nil {
			log.Warn("could not tell the user", "err", serr)
		}
		return
	}
	r.mu.Lock()
	wait := max(q.retry, firstStoreRetry)
	q.retry = min(2*wait, maxStoreRetry)
	r.mu.Unlock()
	log.Error("the store takes no writes; the message stays pending and is tried again", "reason", why, "wait", wait, "err", err)
	r.tellUnavailable(ctx, it.in, why)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		if r.base.Err() == nil { // /stop; at shutdown it stays pending for the restart
			_ = r.cfg.Store.FinishInbox(context.WithoutCancel(ctx), it.inboxID, store.InboxSkipped)
		}
		return
	}
	r.retryFirst(q, it) // a turn may have begun: it is looked for next time
}

// retryFirst puts a held message back at the head of its chat's queue, so
// that the chat's order holds; it is no longer fresh, as its turn may have
// begun.
func (r *Router) retryFirst(q *chatQueue, it item) {
	it.fresh = false
	r.mu.Lock()
	q.items = append([]item{it}, q.items...)
	r.mu.Unlock()
}

// tellUnavailable tells the chat, once until one of its messages succeeds,
// that the store takes no writes and why.
func (r *Router) tellUnavailable(ctx context.Context, in channels.Inbound, why string) {
	r.storeNotices.tell(ctx, r, in, "Sorry, I can't answer right now: my "+why+". I'll reply once that's fixed; if no reply comes, please send your message again later.")
}
