package gateway

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/store"
)

// earlyChannels are the chat channels Build began to build before the
// store was open (Options.EarlyChannels): what their builds do on the
// network (Telegram's getMe and first long poll, Matrix's login) runs
// while the store opens and the router is built, instead of after. Serve
// runs them; nothing reaches the router before it has started, as ever
// (the supervisor's run gate). A build that uses the store (BuildEnv's
// State, the inbox) waits for it (lateInbox).
type earlyChannels struct {
	specs  []channelSpec
	inbox  *lateInbox
	cancel context.CancelFunc // ends what the early builds started
}

// startChannelsEarly starts building the enabled chat channels, when
// Options.EarlyChannels asks for it and the store is SQLite: replicas
// sharing a PostgreSQL store learn from the store which channels they
// may run (their leases), so theirs wait for it. It runs after the
// instance lock is held: a second process on the store never reaches a
// platform.
func (g *Gateway) startChannelsEarly(ctx context.Context) {
	if !g.opts.EarlyChannels || g.cfg.Store.Driver == config.StorePostgres {
		return
	}
	inbox := &lateInbox{ready: make(chan struct{})}
	// The monitor is made after this (wire): the counters are read when
	// a channel counts, which is after Build (a send, a delivery status).
	paced := func(channel, outcome string) { g.mon.metrics.Paced(channel, outcome) }
	status := func(channel, s string) { g.mon.metrics.DeliveryStatus(channel, s) }
	specs := channelSpecs(g.cfg, g.log, inbox, nil, paced, status)
	if len(specs) == 0 {
		return
	}
	// A channel lives as long as the process serves, not as long as Build:
	// stop and Close end it.
	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	for i := range specs {
		specs[i].build = buildNow(ectx, specs[i].build)
	}
	g.early = &earlyChannels{specs: specs, inbox: inbox, cancel: cancel}
}

// buildNow starts build under ctx at once and returns a build whose first
// call takes that result (or gives up when its own ctx ends first); later
// calls (the supervisor rebuilding a channel that failed) build anew.
func buildNow(ctx context.Context, build func(context.Context) (channels.Channel, error)) func(context.Context) (channels.Channel, error) {
	var (
		ch    channels.Channel
		err   error
		taken atomic.Bool
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ch, err = build(ctx)
	}()
	return func(rctx context.Context) (channels.Channel, error) {
		if taken.Swap(true) {
			return build(rctx)
		}
		select {
		case <-done:
			return ch, err
		case <-rctx.Done():
			return nil, rctx.Err()
		}
	}
}

// lateInbox is the store for channels built before it was open: a call
// waits until it is, or until its ctx ends.
type lateInbox struct {
	ready chan struct{} // closed by set
	st    *store.Store
}

func (l *lateInbox) set(st *store.Store) {
	l.st = st
	close(l.ready)
}

// later runs f on the store once it is open, or fails when ctx ends first.
func later[T any](ctx context.Context, l *lateInbox, f func(*store.Store) (T, error)) (T, error) {
	select {
	case <-l.ready:
		return f(l.st)
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

func (l *lateInbox) LatestInbound(ctx context.Context, channel string) (map[string]string, error) {
	return later(ctx, l, func(st *store.Store) (map[string]string, error) { return st.LatestInbound(ctx, channel) })
}

func (l *lateInbox) LatestInboundAt(ctx context.Context, channel, chat string) (time.Time, error) {
	return later(ctx, l, func(st *store.Store) (time.Time, error) { return st.LatestInboundAt(ctx, channel, chat) })
}

func (l *lateInbox) SetDeliveryStatus(ctx context.Context, channel, platformMsgID, status, errText string, at time.Time) (bool, error) {
	return later(ctx, l, func(st *store.Store) (bool, error) {
		return st.SetDeliveryStatus(ctx, channel, platformMsgID, status, errText, at)
	})
}

func (l *lateInbox) ChannelState(ctx context.Context, channel, key string) (string, bool, error) {
	var ok bool
	v, err := later(ctx, l, func(st *store.Store) (string, error) {
		v, found, err := st.ChannelState(ctx, channel, key)
		ok = found
		return v, err
	})
	return v, ok, err
}

func (l *lateInbox) SetChannelState(ctx context.Context, channel, key, value string) error {
	_, err := later(ctx, l, func(st *store.Store) (struct{}, error) {
		return struct{}{}, st.SetChannelState(ctx, channel, key, value)
	})
	return err
}

func (l *lateInbox) DeleteChannelState(ctx context.Context, channel, key string) error {
	_, err := later(ctx, l, func(st *store.Store) (struct{}, error) { return struct{}{}, st.DeleteChannelState(ctx, channel, key) })
	return err
}
