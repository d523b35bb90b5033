package reply

// The outbox: a reply the platform did not take (Telegram or Discord down,
// or rate limiting longer than the adapter waits) is kept in the store and
// delivered when the platform takes it again, in order within its chat,
// across restarts; after a maximum age it is dropped, loudly.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/store"
)

// Outbox defaults.
const (
	// DefaultReplyMaxAge is how long an undelivered reply is kept: a day
	// covers a platform outage and a night without anyone to restart the
	// gateway; an answer older than that is more confusing than useful.
	DefaultReplyMaxAge = 24 * time.Hour
	// DefaultOutboxMinBackoff and DefaultOutboxMaxBackoff bound the wait
	// between attempts: the adapters have already retried for several
	// seconds, and five minutes keeps a long outage to a few calls an hour
	// per chat with waiting replies.
	DefaultOutboxMinBackoff = 5 * time.Second
	DefaultOutboxMaxBackoff = 5 * time.Minute
	// maxLastError bounds the error kept with a waiting reply.
	maxLastError = 300
)

// OutboxStore is the store's outbox (Options.Outbox). Without it a reply
// the platform did not take is lost, as before.
type OutboxStore interface {
	EnqueueOutbox(ctx context.Context, it store.OutboxItem) (int64, error)
	PendingOutbox(ctx context.Context) ([]store.OutboxItem, error)
	OutboxWaiting(ctx context.Context, channel, chatKey string) (int, error)
	OutboxFor(ctx context.Context, inboxID int64) (int, error)
	ClaimOutbox(ctx context.Context, id int64, seen, next time.Time) (bool, error)
	RetryOutbox(ctx context.Context, id int64, attempts int, next time.Time, lastErr string) error
	DeliverOutbox(ctx context.Context, it store.OutboxItem, platformMsgID string) error
	DropOutbox(ctx context.Context, it store.OutboxItem, reason string) error
}

var _ OutboxStore = (*store.Store)(nil)

// OutboxConfig tunes the outbox; zero values take the defaults.
type OutboxConfig struct {
	MaxAge     time.Duration // a reply older than this is dropped (DefaultReplyMaxAge)
	MinBackoff time.Duration // the wait after the first failed attempt (DefaultOutboxMinBackoff)
	MaxBackoff time.Duration // the longest wait between attempts (DefaultOutboxMaxBackoff)
	// After waits for the next attempt; nil: time.After. Tests inject it
	// with Options.Now to run hours of backoff at once.
	After func(d time.Duration) <-chan time.Time
	// OnEvent observes what happens to replies (metrics); may be nil.
	OnEvent func(ev OutboxEvent)
}

// Outbox event kinds.
const (
	OutboxQueued    = "queued"    // a reply was kept for later
	OutboxDelivered = "delivered" // … and delivered late
	OutboxDropped   = "dropped"   // … and given up
)

// OutboxEvent is what happened to a reply in the outbox.
type OutboxEvent struct {
	Kind    string // OutboxQueued, OutboxDelivered or OutboxDropped
	Channel string
	Age     time.Duration // since the reply was kept (delivered, dropped)
}

// Outbox keeps and delivers the replies the platforms did not take.
type Outbox struct {
	s      *Sender
	shared bool // other replicas keep replies too (Config.Shared)
	store  OutboxStore
	cfg    OutboxConfig
	now    func() time.Time
	log    *slog.Logger
	wake   chan struct{}
	down   map[string]downProbe // by channel; the worker's own

	mu sync.Mutex
	// waiting counts the replies waiting per chat (chatKey): a reply to a
	// chat with some waits behind them. Loaded at Start; with a Cluster the
	// store is asked instead (other replicas keep replies too).
	waiting map[string]int
	// pending is the number of waiting replies: those found at start, plus
	// those kept since, less those delivered or dropped (the
	// switchboard_replies_pending gauge).
	pending atomic.Int64
}

func newOutbox(s *Sender, st OutboxStore, cfg OutboxConfig, now func() time.Time, shared bool) *Outbox {
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultReplyMaxAge
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultOutboxMinBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(DefaultOutboxMaxBackoff, cfg.MinBackoff)
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	if now == nil {
		now = time.Now
	}
	return &Outbox{s: s, shared: shared, store: st, cfg: cfg, now: now, log: s.log.With("part", "outbox"), wake: make(chan struct{}, 1),
		down: map[string]downProbe{}, waiting: map[string]int{}}
}

// Pending is the number of replies waiting in the outbox.
func (o *Outbox) Pending() int { return int(o.pending.Load()) }

// backoff is the wait after the given number of failed attempts.
func (o *Outbox) backoff(attempts int) time.Duration {
	d := o.cfg.MinBackoff
	for i := 1; i < attempts && d < o.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, o.cfg.MaxBackoff)
}

// retryWait is the wait after the given number of failed attempts, the
// last failing with err: the backoff, or the platform's retry_after
// (channels.UnavailableFor) when longer: an attempt inside a rate limit
// only makes it longer.
func (o *Outbox) retryWait(attempts int, err error) time.Duration {
	return max(o.backoff(attempts), channels.RetryAfter(err))
}

// Message is something the router sends to a chat on behalf of a message
// or a job: a text (a turn's reply, a reminder, a command's answer) or a
// file (send_file, send_photo, with Text its caption).
type Message struct {
	In    channels.Inbound // the chat, and the message answered (quoted in groups)
	Text  string
	File  *channels.OutboundFile
	Parts channels.Parts // the durable record of a text's parts, if any
	// What its delivery is recorded against: the inbox message it answers,
	// its turn, the scheduled run it belongs to (each 0 when none).
	InboxID, TurnID, RunID int64
	Log                    *slog.Logger
}

// Deliver sends a reply, or keeps it in the outbox: when replies to
// the chat already wait there (order within a chat holds), or when the
// platform is unavailable. A kept reply returns an error wrapping
// agent.ErrSendQueued. Replies to a requester waiting in this process (the
// HTTP API, the terminal) are never kept.
func (s *Sender) Deliver(ctx context.Context, rp Message) (string, error) {
	rp.Text = s.Text(rp.Text)
	if rp.File != nil {
		f := *rp.File
		f.Caption = s.Text(f.Caption)
		rp.File = &f
	}
	o := s.outbox
	if o == nil || s.cfg.InProcess(rp.In.Channel) {
		return s.sendReply(ctx, rp)
	}
	if o.waitingIn(ctx, rp.In.Channel, rp.In.ChatID) {
		return o.keep(ctx, rp, nil)
	}
	id, err := s.sendReply(ctx, rp)
	if err != nil && errors.Is(err, channels.ErrUnavailable) && ctx.Err() == nil {
		return o.keep(ctx, rp, err)
	}
	return id, err
}

// sendReply sends a reply now.
func (s *Sender) sendReply(ctx context.Context, rp Message) (string, error) {
	if rp.File == nil {
		return s.send(ctx, rp.In, rp.Text, rp.Parts)
	}
	fs, ok := s.cfg.Channel(rp.In.Channel).(channels.FileSender)
	if !ok {
		return "", errors.New("this chat does not take files")
	}
	return fs.SendFile(ctx, rp.In.ChatID, *rp.File)
}

// Load counts the replies a restart left waiting, before any turn runs.
func (o *Outbox) Load(ctx context.Context) {
	rows, err := o.store.PendingOutbox(ctx)
	if err != nil {
		o.log.Warn("could not read the waiting replies; new replies do not wait behind them", "err", err)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, it := range rows {
		o.waiting[chatKey(it.Channel, it.ChatKey)]++
	}
	o.pending.Store(int64(len(rows)))
}

// waitingIn reports whether replies to the chat wait in the outbox.
func (o *Outbox) waitingIn(ctx context.Context, channel, chat string) bool {
	if o.shared {
		n, err := o.store.OutboxWaiting(ctx, channel, chat)
		return err == nil && n > 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.waiting[chatKey(channel, chat)] > 0
}

// settled counts a reply delivered or dropped.
func (o *Outbox) settled(it store.OutboxItem) {
	o.pending.Add(-1)
	k := chatKey(it.Channel, it.ChatKey)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.waiting[k]--; o.waiting[k] <= 0 {
		delete(o.waiting, k)
	}
}

// keep stores a reply to deliver later; cause is the failed send, or nil
// when the reply waits behind others. It returns an error wrapping
// agent.ErrSendQueued; when the reply could not be stored, cause, or (with
// no cause) the outcome of sending it now rather than losing it.
func (o *Outbox) keep(ctx context.Context, rp Message, cause error) (string, error) {
	now := o.now()
	in := rp.In
	it := store.OutboxItem{InboxID: rp.InboxID, TurnID: rp.TurnID, ScheduleRunID: rp.RunID, Channel: in.Channel,
		ChatKey: in.ChatID, MessageID: in.MessageID, ReplyTo: outbound(in, rp.Text).ReplyTo, Text: rp.Text, NextAttemptAt: now}
	what := "reply"
	if f := rp.File; f != nil {
		it.ReplyTo, it.FilePath, it.FileURL, it.Photo, it.Text = "", f.Path, f.URL, f.Photo, f.Caption
		what = "file"
	}
	why := "replies to this chat are waiting"
	if cause != nil {
		it.Attempts, it.LastError, it.NextAttemptAt = 1, clip(cause.Error(), maxLastError), now.Add(o.retryWait(1, cause))
		why = "the platform did not take it"
	}
	log := rp.Log
	if log == nil {
		log = o.log.With("channel", in.Channel, "chat", in.ChatID)
	}
	id, err := o.store.EnqueueOutbox(context.WithoutCancel(ctx), it)
	if err != nil {
		log.Error("could not keep a "+what+" for later delivery", "err", err)
		if cause == nil { // the platform is up: send it now rather than lose it
			return o.s.sendReply(ctx, rp)
		}
		return "", cause
	}
	o.pending.Add(1)
	o.mu.Lock()
	o.waiting[chatKey(in.Channel, in.ChatID)]++
	o.mu.Unlock()
	log = log.With("outbox_id", id, "reason", why)
	if cause != nil {
		log = log.With("err", cause)
	}
	log.Warn(what + " kept for later delivery")
	if o.cfg.OnEvent != nil {
		o.cfg.OnEvent(OutboxEvent{Kind: OutboxQueued, Channel: in.Channel})
	}
	select {
	case o.wake <- struct{}{}:
	default:
	}
	if cause == nil {
		return "", fmt.Errorf("%w behind earlier replies to this chat", agent.ErrSendQueued)
	}
	return "", fmt.Errorf("%w: the platform did not take it (%w)", agent.ErrSendQueued, cause)
}

// Run delivers waiting replies until ctx ends: at start (those a restart
// left), when a reply is kept, and when the next one is due.
func (o *Outbox) Run(ctx context.Context) {
	for {
		wait, waiting := o.pass(ctx)
		var due <-chan time.Time
		if waiting || o.shared { // other replicas keep replies too: look now and then
			due = o.cfg.After(wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-o.wake:
		case <-due:
		}
	}
}

// pass tries every chat's waiting replies in order, up to the first one
// not yet due or failing again, and returns the wait until the next is
// due; waiting is false when none is left.
func (o *Outbox) pass(ctx context.Context) (wait time.Duration, waiting bool) {
	rows, err := o.store.PendingOutbox(ctx)
	if err != nil {
		if ctx.Err() == nil {
			o.log.Warn("could not read the waiting replies; trying again later", "err", err)
		}
		return o.cfg.MinBackoff, true
	}
	// One now for the whole pass: a chat that falls due while the pass
	// sends to another waits for the next pass, so the pass's decisions
	// (which chat probes a channel found down) hold together.
	now := o.now()
	byChat := map[string][]store.OutboxItem{}
	var order []string
	for _, it := range rows {
		k := chatKey(it.Channel, it.ChatKey)
		if byChat[k] == nil {
			order = append(order, k)
		}
		byChat[k] = append(byChat[k], it)
	}
	wait = o.cfg.MaxBackoff
	for _, k := range order {
		if ctx.Err() != nil {
			return wait, true
		}
		rows := byChat[k]
		ch := rows[0].Channel
		// A channel found down is probed by the chat that found it only
		// (each attempt costs the adapter's own retries, seconds); its
		// other chats wait while that chat's replies wait (or, once they
		// are gone, until the probe would have been due again).
		probe, isDown := o.down[ch]
		probing := byChat[probe.chat]
		skip := isDown && probe.chat != k && (len(probing) > 0 || now.Before(probe.until))
		due, ok, failed := o.drain(ctx, rows, !skip, now)
		switch {
		case skip && ok:
			next := probe.until
			if len(probing) > 0 && probing[0].NextAttemptAt.After(next) {
				next = probing[0].NextAttemptAt
			}
			due = max(due, next.Sub(now))
		case failed:
			o.down[ch] = downProbe{chat: k, until: now.Add(due)}
		case isDown && probe.chat == k && due == 0:
			delete(o.down, ch) // the probe went through: the channel is back
		}
		if ok {
			wait, waiting = min(wait, max(due, 0)), true
		}
	}
	if !waiting {
		clear(o.down)
	}
	return wait, waiting
}

// downProbe is a channel found down: chat's reply probes it again at until.
type downProbe struct {
	chat  string
	until time.Time
}

// drain delivers one chat's waiting replies in order (or, unless send,
// only drops those too old), as of the pass's now. It stops at the first one not due yet or
// failing, and returns how long until it is due; failed says the platform
// was unavailable.
func (o *Outbox) drain(ctx context.Context, rows []store.OutboxItem, send bool, now time.Time) (wait time.Duration, ok, failed bool) {
	for _, it := range rows {
		log := o.log.With("outbox_id", it.ID, "channel", it.Channel, "chat", it.ChatKey, "inbox_id", it.InboxID, "turn_id", it.TurnID)
		age := now.Sub(it.CreatedAt)
		if age > o.cfg.MaxAge {
			o.drop(ctx, log, it, age, fmt.Sprintf("not delivered within %s (%d attempts; last error: %s)", o.cfg.MaxAge, it.Attempts, it.LastError))
			continue
		}
		if wait := it.NextAttemptAt.Sub(now); wait > 0 || !send {
			return max(wait, 0), true, false
		}
		// Claimed by moving the next attempt on: another replica (or a
		// pass after a crash mid-send) leaves it alone until then.
		next := now.Add(o.backoff(it.Attempts + 1))
		if ok, err := o.store.ClaimOutbox(ctx, it.ID, it.NextAttemptAt, next); err != nil || !ok {
			if err != nil && ctx.Err() == nil {
				log.Warn("could not claim a waiting reply", "err", err)
			}
			return o.cfg.MinBackoff, true, false
		}
		id, err := o.send(ctx, it, log)
		switch {
		case err == nil:
			if err := o.store.DeliverOutbox(context.WithoutCancel(ctx), it, id); err != nil {
				log.Error("reply delivered late but not recorded", "err", err)
			}
			o.settled(it)
			log.Info("reply delivered late", "age", age.Round(time.Second), "attempts", it.Attempts+1)
			if o.cfg.OnEvent != nil {
				o.cfg.OnEvent(OutboxEvent{Kind: OutboxDelivered, Channel: it.Channel, Age: age})
			}
		case ctx.Err() != nil:
			return 0, false, false // stopping: it stays waiting
		case errors.As(err, new(unsendableError)):
			o.drop(ctx, log, it, age, err.Error())
		case errors.Is(err, channels.ErrUnavailable):
			next = now.Add(o.retryWait(it.Attempts+1, err))
			if rerr := o.store.RetryOutbox(ctx, it.ID, it.Attempts+1, next, clip(err.Error(), maxLastError)); rerr != nil {
				log.Warn("could not record a failed attempt", "err", rerr)
			}
			log.Warn("platform still unavailable; the reply keeps waiting", "attempts", it.Attempts+1,
				"next_attempt_in", next.Sub(now), "err", err)
			return next.Sub(now), true, true
		default:
			o.drop(ctx, log, it, age, "the platform refused it: "+clip(err.Error(), maxLastError))
		}
	}
	return 0, false, false
}

// send sends a waiting reply as its turn would have, marked with the
// message it answers (Discord's nonce is derived from it), with the record
// of its parts: the parts a failed attempt got through are not sent again
// (parts.go). A file in the workspace is looked up again: one gone (or
// now outside the workspace) is an unsendableError.
func (o *Outbox) send(ctx context.Context, it store.OutboxItem, log *slog.Logger) (string, error) {
	ch := o.s.cfg.Channel(it.Channel)
	if ch == nil {
		// Not (yet) registered in this process: try again later.
		return "", channels.Unavailable(fmt.Errorf("router: no channel %q", it.Channel))
	}
	var id string
	var err error
	if it.FilePath != "" || it.FileURL != "" {
		id, err = o.sendFile(ctx, ch, it)
	} else {
		text := o.s.Text(it.Text) // kept before a change of secrets or cap
		out := channels.Outbound{ChatID: it.ChatKey, Text: text, ReplyTo: it.ReplyTo}
		if it.InboxID != 0 {
			out.Parts = o.s.partsFor(ctx, it.InboxID, false, 0, text, log)
		}
		in := channels.Inbound{Channel: it.Channel, ChatID: it.ChatKey, MessageID: it.MessageID}
		id, err = ch.Send(channels.WithInbound(ctx, in), out)
	}
	if o.s.cfg.OnSend != nil {
		o.s.cfg.OnSend(it.Channel, err)
	}
	return id, err
}

// sendFile sends a waiting file.
func (o *Outbox) sendFile(ctx context.Context, ch channels.Channel, it store.OutboxItem) (string, error) {
	fs, ok := ch.(channels.FileSender)
	if !ok {
		return "", unsendableError{fmt.Errorf("channel %q no longer takes files", it.Channel)}
	}
	f := channels.OutboundFile{URL: it.FileURL, Caption: it.Text, Photo: it.Photo}
	if it.FilePath != "" {
		path, err := confined(o.s.cfg.FilesRoot, it.FilePath)
		if err != nil {
			return "", unsendableError{fmt.Errorf("the file to send is gone: %w", err)}
		}
		f.Path = path
	}
	return fs.SendFile(ctx, it.ChatKey, f)
}

// unsendableError is a waiting reply that can no longer be sent as it was
// kept (its file is gone, or its channel takes no files): it is dropped at
// once, with the reason.
type unsendableError struct{ err error }

func (e unsendableError) Error() string { return e.err.Error() }
func (e unsendableError) Unwrap() error { return e.err }

// drop gives a reply up, with an ERROR: never silently.
func (o *Outbox) drop(ctx context.Context, log *slog.Logger, it store.OutboxItem, age time.Duration, reason string) {
	if err := o.store.DropOutbox(context.WithoutCancel(ctx), it, reason); err != nil {
		log.Error("could not drop a reply", "err", err)
		return
	}
	o.settled(it)
	log.Error("reply dropped undelivered", "reason", reason, "age", age.Round(time.Second))
	if o.cfg.OnEvent != nil {
		o.cfg.OnEvent(OutboxEvent{Kind: OutboxDropped, Channel: it.Channel, Age: age})
	}
}
