package tgfake

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"golang.org/x/time/rate"
)

// Limits are the flood limits the fake enforces, each a token bucket (a
// rate and a burst): past them a call is answered 429 "Too Many Requests:
// retry after N" with parameters.retry_after N (seconds until the emptiest
// bucket has a token again, rounded up), and has no effect. A refused call
// takes no token.
//
// Telegram documents the limits in the Bot FAQ ("My bot is hitting limits"):
// in one chat "avoid sending more than one message per second. We may allow
// short bursts that go over this limit"; "not more than 30 messages per
// second or so" for the bot as a whole; "not able to send more than 20
// messages per minute to the same group". DefaultLimits models them as:
//
//   - per bot: 30/s, burst 30 (the "or so"; a bot that waits 1 s may send
//     30 at once);
//   - per chat: 1/s, burst 3 (the "short bursts");
//   - per group (a chat with a negative id: group, supergroup, channel;
//     forum topics share their group's buckets): 20/min, burst 5. A group
//     message takes a token from its chat's bucket too.
//
// Which calls count: every accepted call that puts a message in a chat or changes
// one: sendMessage, sendPhoto, sendDocument, editMessageText and
// sendMessageDraft. sendChatAction and setMessageReaction do not count (they
// are not messages; Telegram documents no limit for them, and typing and
// reactions are what an adapter is expected to drop first, not what gets it
// throttled). Reads (getUpdates, getMe, getFile), answerCallbackQuery and
// setup calls (setMyCommands, setWebhook…) never count.
type Limits struct {
	PerBot     rate.Limit // messages per second for the bot; 0: unlimited
	BotBurst   int
	PerChat    rate.Limit // messages per second in one chat; 0: unlimited
	ChatBurst  int
	PerGroup   rate.Limit // messages per second in one group; 0: unlimited
	GroupBurst int
}

// DefaultLimits are Telegram's documented limits (see Limits). A new fake
// enforces them.
var DefaultLimits = Limits{
	PerBot: 30, BotBurst: 30,
	PerChat: 1, ChatBurst: 3,
	PerGroup: rate.Every(3 * time.Second), GroupBurst: 5, // 20 per minute
}

// NoLimits turns the flood limits off.
var NoLimits = Limits{}

// Scaled returns l with every rate multiplied by k (bursts unchanged): a
// test that sends a lot quickly can use DefaultLimits.Scaled(10) with an
// adapter paced ten times faster than Telegram's limits.
func (l Limits) Scaled(k float64) Limits {
	l.PerBot *= rate.Limit(k)
	l.PerChat *= rate.Limit(k)
	l.PerGroup *= rate.Limit(k)
	return l
}

// SetLimits replaces the flood limits, with every bucket full.
func (f *Fake) SetLimits(l Limits) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limits = l
	f.botBucket = newBucket(l.PerBot, l.BotBurst)
	f.chatBuckets = map[int64]*rate.Limiter{}
	f.groupBuckets = map[int64]*rate.Limiter{}
}

// Throttle is a call the fake refused with 429 because of its Limits.
type Throttle struct {
	Method     string
	ChatID     int64
	RetryAfter int
	Time       time.Time
}

// Throttled returns the calls refused because of the Limits, in order.
// Failures armed with FailNext are not among them.
func (f *Fake) Throttled() []Throttle {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.throttled)
}

// limitedMethods are the calls that count against the Limits (lower case).
var limitedMethods = map[string]bool{
	"sendmessage": true, "sendphoto": true, "senddocument": true,
	"editmessagetext": true, "sendmessagedraft": true,
}

// newBucket is a full token bucket, or nil for no limit.
func newBucket(r rate.Limit, burst int) *rate.Limiter {
	if r <= 0 {
		return nil
	}
	return rate.NewLimiter(r, max(burst, 1))
}

// admitLocked takes a token from every bucket a call of method (lower case)
// in chat is subject to and returns a function that gives them back (for
// a call refused for its contents), or takes none and returns the 429 to
// answer. f.mu must be held.
func (f *Fake) admitLocked(method string, chat int64) (undo func(), _ *apiError) {
	if !limitedMethods[method] || chat == 0 {
		return func() {}, nil
	}
	buckets := make([]*rate.Limiter, 0, 3)
	if f.botBucket != nil {
		buckets = append(buckets, f.botBucket)
	}
	if b := bucketOf(f.chatBuckets, chat, f.limits.PerChat, f.limits.ChatBurst); b != nil {
		buckets = append(buckets, b)
	}
	if chat < 0 {
		if b := bucketOf(f.groupBuckets, chat, f.limits.PerGroup, f.limits.GroupBurst); b != nil {
			buckets = append(buckets, b)
		}
	}
	now := time.Now()
	var wait time.Duration
	for _, b := range buckets {
		if t := b.TokensAt(now); t < 1 {
			wait = max(wait, time.Duration((1-t)/float64(b.Limit())*float64(time.Second)))
		}
	}
	if wait > 0 {
		secs := max(1, int(math.Ceil(wait.Seconds())))
		f.throttled = append(f.throttled, Throttle{Method: method, ChatID: chat, RetryAfter: secs, Time: now})
		return nil, &apiError{code: http.StatusTooManyRequests,
			description: fmt.Sprintf("Too Many Requests: retry after %d", secs), retryAfter: secs}
	}
	taken := make([]*rate.Reservation, len(buckets))
	for i, b := range buckets {
		taken[i] = b.ReserveN(now, 1)
	}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, r := range taken {
			r.CancelAt(now)
		}
	}, nil
}

func bucketOf(m map[int64]*rate.Limiter, chat int64, r rate.Limit, burst int) *rate.Limiter {
	if r <= 0 {
		return nil
	}
	b, ok := m[chat]
	if !ok {
		b = newBucket(r, burst)
		m[chat] = b
	}
	return b
}
