package router

import (
	"context"
	"sync"

	"github.com/switchboard-gateway/switchboard/channels"
)

// notices remembers which chats were told of a condition that holds their
// messages (the store takes no writes, the model is unavailable), so that
// each chat is told once, until one of its messages goes through.
type notices struct {
	what string // the condition, for the log: "the store takes no writes"
	mu   sync.Mutex
	told map[string]bool // chat key → told
}

// tell sends text to the chat of in unless it was told already. A send
// that fails leaves the chat untold: its next held message tries again.
func (n *notices) tell(ctx context.Context, r *Router, in channels.Inbound, text string) {
	key := chatKey(in.Channel, in.ChatID)
	n.mu.Lock()
	if n.told == nil {
		n.told = map[string]bool{}
	}
	told := n.told[key]
	n.told[key] = true
	n.mu.Unlock()
	if told {
		return
	}
	if _, err := r.Send(ctx, in, text); err != nil {
		r.log.Warn("could not tell the user that "+n.what, "channel", in.Channel, "chat", in.ChatID, "err", err)
		n.reset(key)
	}
}

// reset forgets that the chat of key was told: its next held message
// tells it again.
func (n *notices) reset(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.told, key)
}
