package router

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
)

// Access is a channel's admission rule; it lives in package channels, where
// each channel's configuration section builds it.
type Access = channels.Access

// pairingTTL is how long a pairing code stays valid: long enough for an
// operator to notice, short enough that a leaked code soon goes stale.
const pairingTTL = time.Hour

// pairings is the part of the store the gate needs.
type pairings interface {
	IsApproved(ctx context.Context, channel, userID string) (bool, error)
	PairingCodeIn(ctx context.Context, channel, chatKey, userID, username, newCode string, ttl time.Duration) (string, bool, error)
}

// gate admits the authors of messages: by the channels' Access rules, or
// approved by the operator after pairing; it gives strangers a pairing code
// where the channel allows pairing, and otherwise refuses them.
type gate struct {
	store pairings
	send  func(ctx context.Context, in channels.Inbound, text string) (string, error)

	mu      sync.Mutex
	rules   map[string]Access // by channel
	refused map[string]bool   // users told they are refused (once per process)
}

func newGate(st pairings, send func(context.Context, channels.Inbound, string) (string, error)) *gate {
	return &gate{store: st, send: send, rules: map[string]Access{}, refused: map[string]bool{}}
}

// set sets a channel's rule.
func (g *gate) set(channel string, a Access) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rules[channel] = a
}

// admit reports whether the author of in may use the bot here; a stranger
// is refused or given a pairing code (not admitted, err nil). err is set
// when the store failed.
func (g *gate) admit(ctx context.Context, in channels.Inbound, log *slog.Logger) (bool, error) {
	g.mu.Lock()
	acc := g.rules[in.Channel]
	g.mu.Unlock()
	if acc.Allows(in) {
		return true, nil
	}
	if in.UserID == "" {
		// No author (a Telegram update without from): nothing to admit,
		// pair or approve, or one approval would admit every such sender.
		g.anonymous(in, log)
		return false, nil
	}
	approved, err := g.store.IsApproved(ctx, in.Channel, in.UserID)
	if err != nil {
		return false, fmt.Errorf("router: access check: %w", err)
	}
	if approved && acc.AllowsPlace(in) {
		return true, nil
	}
	if acc.Pairing && in.ChatType == channels.DM {
		return false, g.pair(ctx, in, log)
	}
	g.refuse(ctx, in, log)
	return false, nil
}

// admin reports whether the author of in is an operator on its channel.
func (g *gate) admin(in channels.Inbound) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rules[in.Channel].IsAdmin(in)
}

// refuse tells a refused user once (per process) who they are, and the log
// tells the operator how to admit them.
func (g *gate) refuse(ctx context.Context, in channels.Inbound, log *slog.Logger) {
	key := in.Channel + "\x00" + in.UserID
	g.mu.Lock()
	seen := g.refused[key]
	g.refused[key] = true
	g.mu.Unlock()
	if seen {
		return
	}
	log.Warn("refused a user who is not on the allowlist",
		"username", in.UserName, "hint", fmt.Sprintf("to admit them, add %q to channels.%s.allow_users", in.UserID, in.Channel))
	text := fmt.Sprintf("Sorry, I only talk to people on my allowlist. Your user id is %s; ask the operator to add it.", in.UserID)
	if _, err := g.send(ctx, in, text); err != nil {
		log.Warn("could not send refusal", "err", err)
	}
}

// anonymous refuses a message without an author, logging it once per
// channel (per process) and answering nothing.
func (g *gate) anonymous(in channels.Inbound, log *slog.Logger) {
	key := in.Channel + "\x00anonymous"
	g.mu.Lock()
	seen := g.refused[key]
	g.refused[key] = true
	g.mu.Unlock()
	if !seen {
		log.Warn("refused a message without a user id (no pairing, no reply); later ones are refused silently")
	}
}

// pair gives an unknown user a one-time code to ask the operator for
// access, once per code: the store's pending pairing row says the code was
// already given (fresh is false), so a stranger repeating messages gets one
// reply an hour, across restarts.
func (g *gate) pair(ctx context.Context, in channels.Inbound, log *slog.Logger) error {
	code, fresh, err := g.store.PairingCodeIn(ctx, in.Channel, in.ChatID, in.UserID, in.UserName, newPairingCode(), pairingTTL)
	if err != nil {
		return fmt.Errorf("router: pairing: %w", err)
	}
	if !fresh {
		return nil
	}
	log.Warn("pairing requested by an unknown user", "username", in.UserName,
		"hint", "to admit them, run: switchboard pairing approve "+code)
	text := fmt.Sprintf("I don't know you yet. Your pairing code is %s (valid for an hour). Ask the operator to run: switchboard pairing approve %s", code, code)
	if _, err := g.send(ctx, in, text); err != nil {
		log.Warn("could not send pairing code", "err", err)
	}
	return nil
}

// newPairingCode returns 8 characters without look-alikes (0/O, 1/I).
func newPairingCode() string {
	const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
