package matrix

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"maunium.net/go/mautrix"

	"github.com/switchboard-gateway/switchboard/channels"
)

// Retries of one call.
const (
	maxLimitedAttempts   = 5 // M_LIMIT_EXCEEDED waited on at most this often
	maxTransientAttempts = 3 // a 5xx or a lost connection tried this often
	firstBackoff         = 500 * time.Millisecond
)

// do runs call, waiting out M_LIMIT_EXCEEDED (its retry_after_ms, up to
// MaxRateLimitWait) and trying a 5xx or a lost connection again; what
// still fails that way is channels.ErrUnavailable (the outbox keeps the
// reply). A preview's call (channels.PriorityPreview) is not made to wait
// on a rate limit: it returns channels.ErrPaced. Other refusals are
// returned wrapped, secrets removed.
func (a *Adapter) do(ctx context.Context, what string, call func() error) error {
	backoff := firstBackoff
	for attempt := 1; ; attempt++ {
		err := call()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("matrix: %s: %w", what, ctx.Err())
		}
		wait, limited := rateLimit(err)
		switch {
		case limited && channels.PriorityOf(ctx) == channels.PriorityPreview:
			return fmt.Errorf("matrix: %s: %w", what, channels.ErrPaced)
		case limited && (wait > a.o.MaxRateLimitWait || attempt >= maxLimitedAttempts):
			return channels.UnavailableFor(a.wrap(err, "matrix: %s: rate limited for %s", what, wait), wait)
		case limited:
			a.log.Debug("matrix: rate limited; waiting", "call", what, "wait", wait)
			if err := a.o.Sleep(ctx, wait); err != nil {
				return fmt.Errorf("matrix: %s: %w", what, err)
			}
		case transient(err) && attempt < maxTransientAttempts:
			if err := a.o.Sleep(ctx, backoff); err != nil {
				return fmt.Errorf("matrix: %s: %w", what, err)
			}
			backoff *= 2
		case transient(err):
			return channels.Unavailable(a.wrap(err, "matrix: %s", what))
		default:
			return a.wrap(err, "matrix: %s", what)
		}
	}
}

// rateLimit reports whether err is M_LIMIT_EXCEEDED (or a 429) and how
// long the homeserver asked to wait (retry_after_ms, else Retry-After,
// else one second).
func rateLimit(err error) (time.Duration, bool) {
	var he mautrix.HTTPError
	if !errors.As(err, &he) {
		return 0, false
	}
	limited := (he.RespError != nil && he.RespError.ErrCode == mautrix.MLimitExceeded.ErrCode) || he.IsStatus(http.StatusTooManyRequests)
	if !limited {
		return 0, false
	}
	if he.RespError != nil {
		if ms, ok := he.RespError.ExtraData["retry_after_ms"].(float64); ok && ms >= 0 {
			return time.Duration(ms) * time.Millisecond, true
		}
	}
	if he.Response != nil {
		if s, err := strconv.Atoi(he.Response.Header.Get("Retry-After")); err == nil && s >= 0 {
			return time.Duration(s) * time.Second, true
		}
	}
	return time.Second, true
}

// transient reports whether err is the homeserver's trouble or the way's
// (a 5xx, a connection lost or refused), worth another try later.
func transient(err error) bool {
	var he mautrix.HTTPError
	if errors.As(err, &he) {
		if he.Response != nil {
			return he.Response.StatusCode >= 500
		}
		return he.WrappedError != nil && !errors.Is(he.WrappedError, context.Canceled)
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// wrap is err with a prefix, secrets removed from its text; errors.Is and
// errors.As still see err.
func (a *Adapter) wrap(err error, format string, args ...any) error {
	return &redactedError{msg: a.secret.Replace(fmt.Sprintf(format, args...) + ": " + err.Error()), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
