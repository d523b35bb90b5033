package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/waitfor"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"golang.org/x/time/rate"

	"github.com/switchboard-gateway/switchboard/channels"
)

// Pacing is the adapter's outbound rate limiting: token buckets (rate and
// burst) for the bot, for each chat and for each group. Every call that
// writes to a chat draws from the bot's bucket: messages and their parts,
// files, edits, drafts, typing indicators and reactions. Those that put or
// change a message in the chat (all but typing and reactions, which are not
// messages: Telegram's per-chat limits are about messages) also draw from
// their chat's and group's buckets.
//
// A call of channels.PriorityReply waits (until its ctx ends) for a token in
// every bucket it draws from, in its chat's order: calls to one chat go out
// one at a time, in the order they came (a reply in several parts goes out
// whole, its retries included, before the next call to that chat). A call
// of channels.PriorityPreview, and every typing indicator and reaction, is
// never made to wait: it is dropped with channels.ErrPaced when its chat is
// busy or when taking its token would leave a bucket with less than its
// reserve, so that previews never take the token a reply is about to need.
// A 429 that still comes back is honoured as before pacing (a reply is
// retried after retry_after), and previews to its chat are dropped until
// then. A request Telegram did not take (429, 5xx, transport error) leaves
// its tokens to the next request to its chat (its retry, say).
//
// A rate of 0 means no bucket of that kind.
type Pacing struct {
	PerBot       rate.Limit // calls per second for the whole bot
	BotBurst     int
	BotReserve   int        // tokens previews leave to replies
	PerChat      rate.Limit // calls per second in one chat
	ChatBurst    int
	ChatReserve  int
	PerGroup     rate.Limit // calls per second in one group (a chat with a negative id); its topics share it
	GroupBurst   int
	GroupReserve int
	// MaxInFlight caps the bot's requests between taking their tokens and
	// Telegram's answer (0: no cap). Requests paced apart can be delayed
	// on their way (a busy host, network jitter) and arrive together;
	// with at most MaxInFlight of them on the way, what arrives in any
	// interval is at most MaxInFlight more than the buckets let out in
	// it, so bursts smaller than Telegram's by MaxInFlight keep any
	// delay from pushing a burst over Telegram's limit.
	MaxInFlight int
	// PreviewPerBot caps what previews (drafts, preview edits, progress
	// lines, typing, reactions) take of the bot's rate, so that when many
	// chats stream at once the bot's bucket stays full for their replies.
	PreviewPerBot rate.Limit
	PreviewBurst  int
}

// DefaultPacing keeps under Telegram's documented limits ("My bot is
// hitting limits", Bot FAQ: about 30 messages per second per bot, one per
// second in a chat with short bursts allowed, 20 per minute in a group),
// with smaller bursts than Telegram tolerates so that a request delayed on
// its way cannot push a burst over them:
//   - per bot: 30/s, burst 25, 5 left to replies (a sixth of a second's);
//   - per chat: 1/s, burst 2, 1 left to replies: a preview goes only when
//     the chat has been quiet for a second, and a reply right after it
//     still goes at once;
//   - per group: 20/min, burst 3, 1 left to replies;
//   - at most 5 requests on their way at once: Telegram tolerates bursts of
//     about 30, 5 more than ours (see MaxInFlight). At 30 requests a
//     second that is room for a sixth of a second of latency each, above
//     the Bot API's usual tens of milliseconds;
//   - previews take at most 10 of the bot's 30 a second (burst 5): when
//     many chats stream at once, the bot's bucket refills for their
//     replies.
var DefaultPacing = Pacing{
	PerBot: 30, BotBurst: 25, BotReserve: 5, MaxInFlight: 5,
	PreviewPerBot: 10, PreviewBurst: 5,
	PerChat: 1, ChatBurst: 2, ChatReserve: 1,
	PerGroup: rate.Every(3 * time.Second), GroupBurst: 3, GroupReserve: 1,
}

// NoPacing turns outbound pacing off (a Bot API server without limits).
var NoPacing = Pacing{}

// Scaled returns p with every rate multiplied by k (bursts and reserves
// unchanged).
func (p Pacing) Scaled(k float64) Pacing {
	p.PerBot *= rate.Limit(k)
	p.PerChat *= rate.Limit(k)
	p.PerGroup *= rate.Limit(k)
	p.PreviewPerBot *= rate.Limit(k)
	return p
}

// PacingStats counts what outbound pacing did.
type PacingStats struct {
	Waited  int64 // calls that waited for a token or for their chat's turn
	Dropped int64 // preview calls dropped with channels.ErrPaced
}

// PacingStats returns what outbound pacing did since the adapter started.
func (a *Adapter) PacingStats() PacingStats {
	return PacingStats{Waited: a.pace.waited.Load(), Dropped: a.pace.dropped.Load()}
}

// pacer implements Pacing.
type pacer struct {
	cfg Pacing
	bot *rate.Limiter // nil: no limit
	// previews is the share of the bot's rate previews may take (nil: all).
	previews *rate.Limiter
	waited   atomic.Int64
	dropped  atomic.Int64
	onPaced  func(outcome string)

	mu      sync.Mutex
	slots   chan struct{} // the bot's places on the way (MaxInFlight); nil: no cap
	chats   map[int64]*chatPace
	sweepAt int // sweep idle chats when the map reaches this size
}

// minSweep is the number of chats kept before idle ones are forgotten.
const minSweep = 1024

// chatPace is one chat's buckets and the queue of calls waiting for it.
type chatPace struct {
	chat, group *rate.Limiter   // nil: no limit (group: not a group)
	busy        bool            // a call holds the chat's turn
	queue       []chan struct{} // calls waiting for the turn, in order
	until       time.Time       // a 429 asked to wait until then
	// credit: the chat's last message request did not count (Telegram
	// did not take it), so the next one (its retry, or the next call)
	// goes on its tokens. Only the holder of the turn uses it.
	credit bool
}

func newPacer(cfg Pacing, onPaced func(outcome string)) *pacer {
	if onPaced == nil {
		onPaced = func(string) {}
	}
	p := &pacer{cfg: cfg, bot: bucket(cfg.PerBot, cfg.BotBurst), previews: bucket(cfg.PreviewPerBot, cfg.PreviewBurst), onPaced: onPaced,
		chats: map[int64]*chatPace{}, sweepAt: minSweep}
	if cfg.MaxInFlight > 0 {
		p.slots = make(chan struct{}, cfg.MaxInFlight)
	}
	return p
}

// acquire takes one of the bot's MaxInFlight places for a request: a
// reply waits for it (ctx-aware), a preview gets it only if one is free.
func (t *paced) acquire(ctx context.Context) error {
	if t.p.slots == nil || t.slot {
		return nil
	}
	select {
	case t.p.slots <- struct{}{}:
		t.slot = true
		return nil
	default:
	}
	if t.preview {
		t.p.drop()
		return channels.ErrPaced
	}
	t.waited()
	select {
	case t.p.slots <- struct{}{}:
		t.slot = true
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release gives the request's place back (see acquire).
func (t *paced) release() {
	if t.slot {
		t.slot = false
		<-t.p.slots
	}
}

// wait and drop count a call that waited or was dropped.
func (p *pacer) wait() { p.waited.Add(1); p.onPaced("waited") }
func (p *pacer) drop() { p.dropped.Add(1); p.onPaced("dropped") }

// bucket is a full token bucket, or nil for none.
func bucket(r rate.Limit, burst int) *rate.Limiter {
	if r <= 0 {
		return nil
	}
	return rate.NewLimiter(r, max(burst, 1))
}

// lacking is how long until b holds 1+reserve tokens (0: it does now).
func lacking(b *rate.Limiter, now time.Time, reserve int) time.Duration {
	if b == nil {
		return 0
	}
	need := float64(1+reserve) - b.TokensAt(now)
	if need <= 0 {
		return 0
	}
	return time.Duration(need / float64(b.Limit()) * float64(time.Second))
}

// paced is a call's hold on its chat's turn (see Pacing).
type paced struct {
	p        *pacer
	c        *chatPace
	preview  bool
	cosmetic bool // typing or a reaction: the bot's bucket only
	counted  bool // counted as a call that waited
	slot     bool // holds one of the bot's MaxInFlight places
}

// waited counts the call as one that waited, once.
func (t *paced) waited() {
	if !t.counted {
		t.counted = true
		t.p.wait()
	}
}

// enter takes chat's turn for a call of priority prio: a reply waits for
// it in order; a preview gets it only if nobody holds or waits for it.
// Call leave when done.
func (p *pacer) enter(ctx context.Context, chat int64, prio channels.Priority) (*paced, error) {
	preview := prio == channels.PriorityPreview
	p.mu.Lock()
	c := p.chatLocked(chat)
	if !c.busy {
		c.busy = true
		p.mu.Unlock()
		return &paced{p: p, c: c, preview: preview}, nil
	}
	if preview {
		p.mu.Unlock()
		p.drop()
		return nil, channels.ErrPaced
	}
	turn := make(chan struct{})
	c.queue = append(c.queue, turn)
	p.mu.Unlock()
	select {
	case <-turn:
		t := &paced{p: p, c: c}
		t.waited()
		return t, nil
	case <-ctx.Done():
		p.mu.Lock()
		for i, q := range c.queue {
			if q == turn {
				c.queue = append(c.queue[:i], c.queue[i+1:]...)
				p.mu.Unlock()
				return nil, ctx.Err()
			}
		}
		p.mu.Unlock()
		(&paced{p: p, c: c}).leave() // the turn came as ctx ended: pass it on
		return nil, ctx.Err()
	}
}

// leave hands the chat's turn to the next call waiting for it.
func (t *paced) leave() {
	p, c := t.p, t.c
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(c.queue) > 0 {
		next := c.queue[0]
		c.queue = c.queue[1:]
		close(next)
		return
	}
	c.busy = false
}

// chatLocked returns the pacing state of chat, creating it. p.mu is held.
func (p *pacer) chatLocked(chat int64) *chatPace {
	if c, ok := p.chats[chat]; ok {
		return c
	}
	if len(p.chats) >= p.sweepAt {
		p.sweepLocked()
	}
	c := &chatPace{chat: bucket(p.cfg.PerChat, p.cfg.ChatBurst)}
	if chat < 0 {
		c.group = bucket(p.cfg.PerGroup, p.cfg.GroupBurst)
	}
	p.chats[chat] = c
	return c
}

// sweepLocked forgets chats nobody uses whose buckets are full again:
// forgetting them loses nothing.
func (p *pacer) sweepLocked() {
	now := time.Now()
	full := func(b *rate.Limiter) bool { return b == nil || b.TokensAt(now) >= float64(b.Burst()) }
	for id, c := range p.chats {
		if !c.busy && len(c.queue) == 0 && now.After(c.until) && full(c.chat) && full(c.group) {
			delete(p.chats, id)
		}
	}
	p.sweepAt = max(minSweep, 2*len(p.chats))
}

// admit takes a token from every bucket the next request draws from: a
// reply waits for them (ctx-aware), a preview gets them only above the
// reserves and while no 429 holds the chat, or ErrPaced.
func (t *paced) admit(ctx context.Context) error {
	p, c, cfg := t.p, t.c, t.p.cfg
	if t.preview {
		now := time.Now()
		p.mu.Lock()
		held := now.Before(c.until)
		p.mu.Unlock()
		short := lacking(p.bot, now, cfg.BotReserve) > 0 || lacking(p.previews, now, 0) > 0
		if !t.cosmetic {
			short = short || lacking(c.chat, now, cfg.ChatReserve) > 0 || lacking(c.group, now, cfg.GroupReserve) > 0
		}
		if held || short {
			p.drop()
			return channels.ErrPaced
		}
		if err := t.acquire(ctx); err != nil {
			return err
		}
		if t.cosmetic {
			take(now, p.bot, p.previews)
		} else {
			take(now, p.bot, p.previews, c.chat, c.group)
		}
		return nil
	}
	// The chat's own buckets first (only the holder of the turn draws from
	// them), then a place in the bot's queue; the chat's tokens are taken
	// when the request really goes out.
	waited := false
	for {
		now := time.Now()
		d := max(lacking(c.chat, now, 0), lacking(c.group, now, 0))
		if d <= 0 {
			break
		}
		waited = true
		if err := waitfor.Sleep(ctx, d); err != nil {
			return err
		}
	}
	// A place on the way before the bot's token (see Pacing.MaxInFlight);
	// not while waiting for the chat's own buckets, which would hold up
	// other chats.
	if err := t.acquire(ctx); err != nil {
		return err
	}
	if p.bot != nil {
		r := p.bot.Reserve()
		if d := r.Delay(); d > 0 {
			waited = true
			if err := waitfor.Sleep(ctx, d); err != nil {
				r.Cancel()
				return err
			}
		}
	}
	if waited {
		t.waited()
	}
	take(time.Now(), c.chat, c.group)
	return nil
}

// take takes a token now from each bucket (nil: none).
func take(now time.Time, buckets ...*rate.Limiter) {
	for _, b := range buckets {
		if b != nil {
			b.AllowN(now, 1)
		}
	}
}

// untaken reports an answer meaning Telegram did not take the request, so
// that it did not count against its limits: a transport error, an answer
// not from the Bot API, 429 or 5xx.
func untaken(err error) bool {
	if err == nil {
		return false
	}
	e, ok := asAPIError(err)
	return !ok || e.Code == http.StatusTooManyRequests || e.Code >= 500
}

// throttled notes a 429: previews to the chat are dropped until its
// retry_after has passed. (Replies are retried after it by withRetry, as
// before pacing.)
func (t *paced) throttled(err error) {
	e, ok := asAPIError(err)
	if !ok || e.RetryAfter <= 0 {
		return
	}
	until := time.Now().Add(time.Duration(e.RetryAfter) * time.Second)
	t.p.mu.Lock()
	if until.After(t.c.until) {
		t.c.until = until
	}
	t.p.mu.Unlock()
}

// outbound takes chat's turn for a message call with the priority in ctx
// (see Pacing). Call leave when done.
func (a *Adapter) outbound(ctx context.Context, chat chatRef) (*paced, error) {
	t, err := a.pace.enter(ctx, chat.id, channels.PriorityOf(ctx))
	if err != nil {
		return nil, fmt.Errorf("telegram: chat %s: %w", chat, err)
	}
	return t, nil
}

// cosmetic takes chat's turn for a typing indicator or a reaction: always
// a preview, drawing from the bot's bucket only.
func (a *Adapter) cosmetic(ctx context.Context, chat chatRef) (*paced, error) {
	t, err := a.pace.enter(ctx, chat.id, channels.PriorityPreview)
	if err != nil {
		return nil, fmt.Errorf("telegram: chat %s: %w", chat, err)
	}
	t.cosmetic = true
	return t, nil
}

// call is Adapter.call paced: it waits for (or, for a preview, tries to
// take) the tokens of its chat first. A preview answered 429 returns an
// error that is also channels.ErrPaced, which is not retried.
func (t *paced) call(ctx context.Context, a *Adapter, method string, p tgbotapi.Params) ([]byte, error) {
	return t.do(ctx, method, func() ([]byte, error) { return a.call(ctx, method, p) })
}

// upload is Adapter.upload paced, like call.
func (t *paced) upload(ctx context.Context, a *Adapter, method string, p tgbotapi.Params, files []tgbotapi.RequestFile) ([]byte, error) {
	return t.do(ctx, method, func() ([]byte, error) { return a.upload(ctx, method, p, files) })
}

func (t *paced) do(ctx context.Context, method string, fn func() ([]byte, error)) ([]byte, error) {
	c := t.c
	defer t.release()
	if c.credit && !t.preview { // (typing and reactions are previews)
		c.credit = false // the tokens of the last request, which did not count
		if err := t.acquire(ctx); err != nil {
			return nil, fmt.Errorf("telegram: %s: %w", method, err)
		}
	} else if err := t.admit(ctx); err != nil {
		return nil, fmt.Errorf("telegram: %s: %w", method, err)
	}
	raw, err := fn()
	if !t.cosmetic {
		c.credit = untaken(err)
	}
	if e, ok := asAPIError(err); ok && e.Code == http.StatusTooManyRequests {
		t.throttled(err)
		if t.preview {
			t.p.drop()
			return nil, fmt.Errorf("%w: %w", channels.ErrPaced, err)
		}
	}
	return raw, err
}

// isPaced reports a call dropped by pacing: never retried.
func isPaced(err error) bool { return errors.Is(err, channels.ErrPaced) }
