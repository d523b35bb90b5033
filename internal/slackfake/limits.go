package slackfake

import (
	"maps"
	"math"
	"net/http"
	"time"

	"golang.org/x/time/rate"
)

// Rate is a token bucket: PerMinute calls a minute, Burst at once.
type Rate struct {
	PerMinute float64
	Burst     int
}

// Slack's Web API rate tiers ("Rate limits", docs.slack.dev): Tier 1
// "1+ per minute", Tier 2 "20+", Tier 3 "50+", Tier 4 "100+", each
// allowing "sporadic bursts". The bursts are the fake's choice.
var (
	Tier1 = Rate{PerMinute: 1, Burst: 5}
	Tier2 = Rate{PerMinute: 20, Burst: 10}
	Tier3 = Rate{PerMinute: 50, Burst: 15}
	Tier4 = Rate{PerMinute: 100, Burst: 30}
)

// Limits are the rate limits the fake enforces: past them a call is
// answered 429 with Retry-After (the whole seconds until the bucket has a
// token again, at least 1) and has no effect. A call refused for its
// contents gives its token back.
type Limits struct {
	// Methods maps a method to its workspace-wide bucket.
	Methods map[string]Rate
	// PostPerChannel is chat.postMessage's special tier: "1 message per
	// second per channel, allowing for short bursts".
	PostPerChannel Rate
}

// DefaultLimits are Slack's documented tiers for the methods the fake
// serves; a new fake enforces them. Its Methods map is shared: derive
// other limits with With, Scaled or Clone.
var DefaultLimits = Limits{
	Methods: map[string]Rate{
		"auth.test":                    {PerMinute: 600, Burst: 100}, // "special": hundreds per minute
		"apps.connections.open":        Tier1,
		"chat.update":                  Tier3,
		"chat.delete":                  Tier3,
		"reactions.add":                Tier3,
		"users.info":                   Tier4,
		"conversations.info":           Tier3,
		"files.getUploadURLExternal":   Tier4,
		"files.completeUploadExternal": Tier4,
		"assistant.threads.setStatus":  Tier3,
	},
	PostPerChannel: Rate{PerMinute: 60, Burst: 3},
}

// NoLimits turns the rate limits off, for tests that check contents.
var NoLimits = Limits{}

// Clone returns a copy of l whose Methods map is its own: DefaultLimits'
// map is shared, so change a clone (or use With), never it.
func (l Limits) Clone() Limits {
	l.Methods = maps.Clone(l.Methods)
	return l
}

// With returns a copy of l with method limited to r.
func (l Limits) With(method string, r Rate) Limits {
	l = l.Clone()
	if l.Methods == nil {
		l.Methods = map[string]Rate{}
	}
	l.Methods[method] = r
	return l
}

// Scaled returns a copy of l with every rate multiplied by k (bursts
// unchanged).
func (l Limits) Scaled(k float64) Limits {
	l = l.Clone()
	l.PostPerChannel.PerMinute *= k
	for m, r := range l.Methods {
		r.PerMinute *= k
		l.Methods[m] = r
	}
	return l
}

// SetLimits replaces the rate limits (with a copy of l), every bucket full.
func (f *Fake) SetLimits(l Limits) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setLimitsLocked(l.Clone())
}

func (f *Fake) setLimitsLocked(l Limits) {
	f.limits = l
	f.buckets = map[string]*rate.Limiter{}
}

// NoLimits turns the rate limits off (SetLimits(NoLimits)).
func (f *Fake) NoLimits() { f.SetLimits(NoLimits) }

// admitLocked takes a token from the buckets a call is subject to and
// returns a function that gives it back, or takes none and returns the
// wait to announce with 429. f.mu must be held.
func (f *Fake) admitLocked(method, channel string) (undo func(), retry time.Duration) {
	var buckets []*rate.Limiter
	if r, ok := f.limits.Methods[method]; ok {
		if b := f.bucketLocked(method, r); b != nil {
			buckets = append(buckets, b)
		}
	}
	if method == "chat.postMessage" && channel != "" {
		if b := f.bucketLocked(method+"/"+channel, f.limits.PostPerChannel); b != nil {
			buckets = append(buckets, b)
		}
	}
	now := time.Now()
	taken := make([]*rate.Reservation, len(buckets))
	var wait time.Duration
	for i, b := range buckets {
		taken[i] = b.ReserveN(now, 1)
		wait = max(wait, taken[i].DelayFrom(now))
	}
	undo = func() {
		for _, r := range taken {
			r.CancelAt(now)
		}
	}
	if wait > 0 {
		undo()
		secs := time.Duration(max(1, math.Ceil(wait.Seconds()))) * time.Second
		f.throttled = append(f.throttled, Throttle{Method: method, Channel: channel, RetryAfter: secs, Time: now})
		f.notify()
		return nil, secs
	}
	return undo, 0
}

func (f *Fake) bucketLocked(key string, r Rate) *rate.Limiter {
	if r.PerMinute <= 0 {
		return nil
	}
	b, ok := f.buckets[key]
	if !ok {
		b = rate.NewLimiter(rate.Limit(r.PerMinute/60), max(r.Burst, 1))
		f.buckets[key] = b
	}
	return b
}

// retryAfterHeader is d in whole seconds, at least 1, for Retry-After.
func retryAfterHeader(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", itoa(max(1, int(math.Ceil(d.Seconds())))))
}
