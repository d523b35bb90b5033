package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/switchboard-gateway/switchboard/channels"
)

// Backoff of /sync after a failure.
const (
	syncFirstBackoff = time.Second
	syncMaxBackoff   = 30 * time.Second
	// maxPending bounds the encrypted events kept waiting for their keys.
	maxPending = 1000
	// pendingTTL is how long an encrypted event waits for its keys.
	pendingTTL = 24 * time.Hour
	// askKeysAfter is how long an encrypted event waits for its keys to
	// come by themselves (they usually follow the message within a batch
	// or two) before the sender's devices are asked for them.
	askKeysAfter = 5 * time.Second
)

// pendingEvent is an encrypted event that could not be decrypted yet: it
// is kept (in State too) and tried again after each batch, so it is
// answered once its keys arrive, even after a restart.
type pendingEvent struct {
	Event     json.RawMessage `json:"event"`
	Since     time.Time       `json:"since"`
	Requested bool            `json:"requested"`
}

// Run reads /sync and hands each batch's messages to sink, then stores
// the batch's token: a crash replays the batch, never loses it. It
// reconnects with backoff and returns nil when ctx ends, an error when
// the token is refused.
func (a *Adapter) Run(ctx context.Context, sink channels.Sink) error {
	if !a.running.CompareAndSwap(false, true) {
		return errors.New("matrix: run: already running")
	}
	defer a.running.Store(false)
	defer a.connected.Store(false)
	since, _, err := a.state.GetState(ctx, keySince)
	if err != nil {
		return fmt.Errorf("matrix: read the sync token: %w", err)
	}
	if err := a.loadPending(ctx); err != nil {
		return err
	}
	backoff := syncFirstBackoff
	for ctx.Err() == nil {
		timeout := a.o.SyncTimeout
		if since == "" {
			timeout = 0 // the first sync: state only, answered nothing
		}
		resp, err := a.cli.FullSyncRequest(ctx, mautrix.ReqSync{Timeout: int(timeout.Milliseconds()), Since: since})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			a.connected.Store(false)
			if errors.Is(err, mautrix.MUnknownToken) {
				return a.wrap(err, "matrix: sync: the access token was refused")
			}
			a.log.Warn("matrix: sync failed; trying again", "err", a.redact(err), "in", backoff)
			if err := a.o.Sleep(ctx, backoff); err != nil {
				return nil
			}
			backoff = min(backoff*2, syncMaxBackoff)
			continue
		}
		backoff = syncFirstBackoff
		a.connected.Store(true)
		if err := a.batch(ctx, sink, resp, since); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := a.state.SetState(ctx, keySince, resp.NextBatch); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("matrix: keep the sync token: %w", err)
		}
		since = resp.NextBatch
	}
	return nil
}

// batch handles one /sync answer: the crypto and room state first (keys
// that came with it), then invites, then each room's timeline in order,
// each message delivered before the next, then the encrypted events that
// waited for keys. Deliver is tried until it succeeds or ctx ends.
func (a *Adapter) batch(ctx context.Context, sink channels.Sink, resp *mautrix.RespSync, since string) error {
	if err := a.syncer.ProcessResponse(ctx, resp, since); err != nil {
		return fmt.Errorf("matrix: sync: %w", err)
	}
	for roomID, room := range resp.Rooms.Invite {
		a.invite(ctx, roomID, room)
	}
	first := since == ""
	for roomID, room := range resp.Rooms.Join {
		events := room.Timeline.Events
		if room.Timeline.Limited && !first && room.Timeline.PrevBatch != "" {
			gap, err := a.gap(ctx, roomID, room.Timeline.PrevBatch, since)
			if err != nil {
				return err // the token stays: the next sync tries again
			}
			events = append(gap, events...)
		}
		for _, evt := range events {
			evt.RoomID = roomID
			if first || string(evt.Sender) == a.o.UserID || !a.admits(string(evt.Sender)) {
				continue // history before the bot's first sync; the bot's own; a stranger's
			}
			in, ok := a.event(ctx, evt)
			if !ok {
				continue
			}
			if err := a.deliver(ctx, sink, in); err != nil {
				return err
			}
		}
	}
	return a.retryPending(ctx, sink)
}

// gapPages bounds the pages of /messages read to fill one room's gap
// (gapPageSize events each): a bot away for longer answers the newest
// messages and logs what it skipped.
const (
	gapPages    = 20
	gapPageSize = 100
)

// gap reads the events of a room that a limited /sync timeline left out:
// those between the stored token (since) and the timeline's prev_batch,
// by /messages backwards, returned oldest first. Without it a room that got
// more events than the sync's timeline holds while the bot was away (or
// between a crash and the restart) would lose the older messages.
func (a *Adapter) gap(ctx context.Context, roomID id.RoomID, from, since string) ([]*event.Event, error) {
	var back []*event.Event
	for page := 0; ; page++ {
		if page == gapPages {
			a.log.Warn("matrix: a room's gap is longer than what is read; the older messages are not answered",
				"room", roomID, "read", len(back))
			break
		}
		resp, err := a.cli.Messages(ctx, roomID, from, since, mautrix.DirectionBackward, nil, gapPageSize)
		if err != nil {
			return nil, a.wrap(err, "matrix: read the messages a sync left out in %s", roomID)
		}
		for _, evt := range resp.Chunk {
			// As the syncer prepares a timeline's events (its class, the
			// parsed content); one that does not parse is nothing to answer.
			evt.RoomID, evt.Type.Class = roomID, event.MessageEventType
			if evt.StateKey != nil {
				evt.Type.Class = event.StateEventType
			}
			if err := evt.Content.ParseRaw(evt.Type); err != nil {
				a.log.Warn("matrix: an event of a room's gap does not parse; skipped", "room", roomID, "event", evt.ID, "err", err)
				continue
			}
			back = append(back, evt)
		}
		if resp.End == "" || len(resp.Chunk) == 0 {
			break
		}
		from = resp.End
	}
	slices.Reverse(back)
	return back, nil
}

// admits reports whether user may reach the bot (Options.Admit).
func (a *Adapter) admits(user string) bool { return a.o.Admit != nil && a.o.Admit(user) }

// deliver hands in to sink, trying again with backoff while the store
// fails, until ctx ends.
func (a *Adapter) deliver(ctx context.Context, sink channels.Sink, in channels.Inbound) error {
	backoff := syncFirstBackoff
	for {
		err := sink.Deliver(ctx, in)
		if err == nil || ctx.Err() != nil {
			return ctx.Err()
		}
		a.log.Warn("matrix: message not stored; trying again", "room", in.ChatID, "event", in.MessageID, "err", err)
		if err := a.o.Sleep(ctx, backoff); err != nil {
			return err
		}
		backoff = min(backoff*2, syncMaxBackoff)
	}
}

// event turns a timeline event into an Inbound: messages (decrypted
// first), and reactions that answer a question. ok is false for anything
// else and for an encrypted event whose keys have not arrived (kept
// pending).
func (a *Adapter) event(ctx context.Context, evt *event.Event) (channels.Inbound, bool) {
	switch evt.Type {
	case event.EventEncrypted:
		dec, err := a.decrypt(ctx, evt)
		if err != nil {
			return channels.Inbound{}, false
		}
		return a.event(ctx, dec)
	case event.EventMessage:
		return a.message(ctx, evt)
	case event.EventReaction:
		return a.reaction(ctx, evt)
	case event.EventRedaction:
		// As a deletion on Telegram, Discord or Slack: what was taken in
		// stays (a turn that ran is not undone), and a redaction is no
		// message to answer.
		a.log.Debug("matrix: an event was redacted; what was taken in stays", "room", evt.RoomID, "event", evt.ID, "redacts", evt.Redacts)
		return channels.Inbound{}, false
	}
	return channels.Inbound{}, false // state, calls …: nothing to answer
}

// decrypt decrypts evt; without the keys yet it keeps evt pending.
func (a *Adapter) decrypt(ctx context.Context, evt *event.Event) (*event.Event, error) {
	if a.crypto == nil {
		a.mu.Lock()
		warn := !a.warned[string(evt.RoomID)]
		a.warned[string(evt.RoomID)] = true
		a.mu.Unlock()
		if warn {
			a.log.Warn("matrix: an encrypted message cannot be read: encryption is off", "room", evt.RoomID, "fix", "set channels.matrix.encryption: true")
		}
		return nil, errors.New("encryption is off")
	}
	dec, err := a.crypto.decrypt(ctx, evt)
	if err == nil {
		return dec, nil
	}
	if a.crypto.noSession(err) {
		a.keepPending(ctx, evt)
	} else {
		a.log.Warn("matrix: an encrypted message could not be decrypted", "room", evt.RoomID, "event", evt.ID, "err", err)
	}
	return nil, err
}

// keepPending keeps evt until its keys arrive.
func (a *Adapter) keepPending(ctx context.Context, evt *event.Event) {
	raw, err := json.Marshal(evt)
	if err != nil {
		return
	}
	a.mu.Lock()
	if _, ok := a.pending[string(evt.ID)]; ok || len(a.pending) >= maxPending {
		a.mu.Unlock()
		return
	}
	p := &pendingEvent{Event: raw, Since: time.Now()}
	a.pending[string(evt.ID)] = p
	a.mu.Unlock()
	a.savePending(ctx, string(evt.ID), p)
	a.log.Info("matrix: waiting for the keys of an encrypted message", "room", evt.RoomID, "event", evt.ID)
}

func (a *Adapter) savePending(ctx context.Context, eventID string, p *pendingEvent) {
	b, _ := json.Marshal(p)
	if err := a.state.SetState(ctx, keyPending+eventID, string(b)); err != nil {
		a.log.Warn("matrix: could not keep an encrypted message waiting for its keys", "event", eventID, "err", err)
	}
	if err := a.addIndex(ctx, keyPending, eventID); err != nil {
		a.log.Warn("matrix: could not keep an encrypted message waiting for its keys", "event", eventID, "err", err)
	}
}

// loadPending reads the events kept waiting by an earlier run.
func (a *Adapter) loadPending(ctx context.Context) error {
	ids, err := a.index(ctx, keyPending)
	if err != nil {
		return fmt.Errorf("matrix: read the encrypted messages waiting for keys: %w", err)
	}
	for _, eventID := range ids {
		v, ok, err := a.state.GetState(ctx, keyPending+eventID)
		if err != nil {
			return fmt.Errorf("matrix: read an encrypted message waiting for keys: %w", err)
		}
		var p pendingEvent
		if !ok || json.Unmarshal([]byte(v), &p) != nil {
			continue
		}
		a.mu.Lock()
		a.pending[eventID] = &p
		a.mu.Unlock()
	}
	return nil
}

// retryPending tries the waiting events again (keys may have come with
// this batch), delivers those it can read, asks the sender's devices for
// the keys of those still waiting (once), and forgets those too old.
func (a *Adapter) retryPending(ctx context.Context, sink channels.Sink) error {
	if a.crypto == nil {
		return nil
	}
	a.mu.Lock()
	ids := make([]string, 0, len(a.pending))
	for id := range a.pending {
		ids = append(ids, id)
	}
	a.mu.Unlock()
	for _, eventID := range ids {
		a.mu.Lock()
		p := a.pending[eventID]
		a.mu.Unlock()
		var evt event.Event
		if p == nil || json.Unmarshal(p.Event, &evt) != nil {
			a.dropPending(ctx, eventID)
			continue
		}
		evt.Type.Class = event.MessageEventType
		if err := evt.Content.ParseRaw(evt.Type); err != nil {
			a.dropPending(ctx, eventID)
			continue
		}
		dec, err := a.crypto.decrypt(ctx, &evt)
		switch {
		case err == nil:
			if in, ok := a.event(ctx, dec); ok {
				if err := a.deliver(ctx, sink, in); err != nil {
					return err
				}
			}
			a.dropPending(ctx, eventID)
		case !a.crypto.noSession(err) || time.Since(p.Since) > pendingTTL:
			a.log.Warn("matrix: gave up on an encrypted message", "room", evt.RoomID, "event", eventID, "err", err)
			a.dropPending(ctx, eventID)
		case !p.Requested && time.Since(p.Since) > askKeysAfter:
			a.crypto.requestKeys(ctx, &evt)
			p.Requested = true
			a.savePending(ctx, eventID, p)
		}
	}
	return nil
}

func (a *Adapter) dropPending(ctx context.Context, eventID string) {
	a.mu.Lock()
	delete(a.pending, eventID)
	a.mu.Unlock()
	_ = a.state.DeleteState(ctx, keyPending+eventID)
	_ = a.removeIndex(ctx, keyPending, eventID)
}

// index is the list kept under prefix+"index" (State has no listing).
func (a *Adapter) index(ctx context.Context, prefix string) ([]string, error) {
	v, ok, err := a.state.GetState(ctx, prefix+"index")
	if err != nil || !ok || v == "" {
		return nil, err
	}
	return strings.Split(v, "\n"), nil
}

func (a *Adapter) addIndex(ctx context.Context, prefix, item string) error {
	list, err := a.index(ctx, prefix)
	if err != nil {
		return err
	}
	for _, x := range list {
		if x == item {
			return nil
		}
	}
	return a.state.SetState(ctx, prefix+"index", strings.Join(append(list, item), "\n"))
}

func (a *Adapter) removeIndex(ctx context.Context, prefix, item string) error {
	list, err := a.index(ctx, prefix)
	if err != nil {
		return err
	}
	out := list[:0]
	for _, x := range list {
		if x != item {
			out = append(out, x)
		}
	}
	return a.state.SetState(ctx, prefix+"index", strings.Join(out, "\n"))
}

// invite joins a room an allowed user invited the bot to, and declines
// the others' invites (nothing of theirs reaches the model).
func (a *Adapter) invite(ctx context.Context, roomID id.RoomID, room *mautrix.SyncInvitedRoom) {
	var inviter id.UserID
	direct := false
	for _, evt := range room.State.Events {
		if evt.Type == event.StateMember && evt.GetStateKey() == a.o.UserID {
			inviter = evt.Sender
			if m := evt.Content.AsMember(); m != nil {
				direct = m.IsDirect
			}
		}
	}
	if inviter == "" || !a.admits(string(inviter)) {
		a.log.Info("matrix: declined an invite", "room", roomID, "from", inviter)
		err := a.do(ctx, "decline the invite to "+string(roomID), func() error {
			_, err := a.cli.LeaveRoom(ctx, roomID)
			return err
		})
		if err != nil {
			a.log.Warn("matrix: could not decline an invite", "room", roomID, "err", err)
		}
		return
	}
	err := a.do(ctx, "join "+string(roomID), func() error {
		_, err := a.cli.JoinRoomByID(ctx, roomID)
		return err
	})
	if err != nil {
		a.log.Warn("matrix: could not join a room", "room", roomID, "from", inviter, "err", err)
		return
	}
	if direct {
		if err := a.state.SetState(ctx, keyDMPrefix+string(roomID), string(inviter)); err != nil {
			a.log.Warn("matrix: could not keep a DM", "room", roomID, "err", err)
		}
	}
	a.log.Info("matrix: joined a room", "room", roomID, "from", inviter, "direct", direct)
}
