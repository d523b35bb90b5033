package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/registry"
	"github.com/switchboard-gateway/switchboard/store"
)

// greetEvery is how often the gateway looks for users approved by pairing
// that it has not greeted yet: an approval may come from another process
// (`switchboard pairing approve`) or replica, so the store is asked; a
// few seconds is soon enough for a person waiting for an answer, and one
// small query.
const greetEvery = 5 * time.Second

// PairingGreeting is what a user approved by pairing is told in the
// private chat where they got their code.
const PairingGreeting = "The operator approved your request: you can talk to me now."

// greeter tells users the operator admitted by pairing that they may talk
// to the bot now (store.GreetingsOwed): the loop of pairing closes.
type greeter interface {
	GreetingsOwed(ctx context.Context) ([]store.ApprovedUser, error)
	ClaimGreeting(ctx context.Context, channel, userID string) (bool, error)
}

var _ greeter = (*store.Store)(nil)

// startGreeter runs the greetings while some chat platform takes pairing
// requests, until ctx ends or the returned stop is called (which waits).
func (g *Gateway) startGreeter(ctx context.Context) (stop func()) {
	pairing := false
	for _, name := range registry.Names() {
		if g.cfg.Channels.Enabled(name) && channelAccess(g.cfg, name).Pairing {
			pairing = true
		}
	}
	if !pairing {
		return func() {}
	}
	gctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			g.greet(gctx, g.store)
			select {
			case <-gctx.Done():
				return
			case <-time.After(greetEvery):
			}
		}
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

// greet sends each owed greeting once: claimed in the store first, so two
// replicas never both send it. A greeting the platform does not take now
// waits in the outbox like a reply; one that fails outright is logged (the
// user is admitted all the same).
func (g *Gateway) greet(ctx context.Context, st greeter) {
	owed, err := st.GreetingsOwed(ctx)
	if err != nil {
		if ctx.Err() == nil {
			g.log.Warn("could not read the greetings owed to approved users", "err", err)
		}
		return
	}
	for _, u := range owed {
		if ok, err := st.ClaimGreeting(ctx, u.Channel, u.UserID); err != nil || !ok {
			continue
		}
		in := channels.Inbound{Channel: u.Channel, ChatID: u.ChatKey, UserID: u.UserID, UserName: u.Username, ChatType: channels.DM}
		log := g.log.With("channel", u.Channel, "user_id", u.UserID)
		if _, err := g.router.Send(ctx, in, PairingGreeting); err != nil && !errors.Is(err, agent.ErrSendQueued) {
			log.Warn("could not greet a user approved by pairing; they are admitted all the same", "err", err)
			continue
		}
		log.Info("greeted a user approved by pairing")
	}
}
