package channels

import (
	"errors"
	"time"
)

// ErrUnavailable marks a send the platform did not take for a reason on its
// side or on the way to it (a 5xx, a transport error, a rate limit longer
// than the adapter waits out) after the adapter's own retries: the same
// message is likely to go through later. A send refused for good (a chat
// that does not exist, a bot that was blocked, a malformed message) is not
// marked. Adapters mark such errors with Unavailable (UnavailableFor when
// the platform said how long to wait); callers test them with
// errors.Is(err, ErrUnavailable).
var ErrUnavailable = errors.New("platform unavailable")

// Unavailable marks err as ErrUnavailable, keeping its text and its chain
// (errors.As still finds the adapter's own error types). nil stays nil.
func Unavailable(err error) error {
	return UnavailableFor(err, 0)
}

// UnavailableFor is Unavailable for a platform that asked to be left alone
// for wait (a rate limit's retry_after): RetryAfter reports it, and the
// outbox makes no attempt before it has passed.
func UnavailableFor(err error, wait time.Duration) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrUnavailable) && (wait <= 0 || RetryAfter(err) >= wait) {
		return err
	}
	return unavailableError{err: err, wait: max(wait, 0)}
}

// RetryAfter is how long the platform asked to wait before the next
// attempt, for an error marked with UnavailableFor (0: it did not say).
func RetryAfter(err error) time.Duration {
	var u unavailableError
	if errors.As(err, &u) {
		return u.wait
	}
	return 0
}

type unavailableError struct {
	err  error
	wait time.Duration
}

func (e unavailableError) Error() string   { return e.err.Error() }
func (e unavailableError) Unwrap() []error { return []error{e.err, ErrUnavailable} }
