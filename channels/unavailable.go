package channels

import "errors"

// ErrUnavailable marks a send the platform did not take for a reason on its
// side or on the way to it (a 5xx, a transport error, a rate limit longer
// than the adapter waits out) after the adapter's own retries: the same
// message is likely to go through later. A send refused for good (a chat
// that does not exist, a bot that was blocked, a malformed message) is not
// marked. Adapters mark such errors with Unavailable; callers test them
// with errors.Is(err, ErrUnavailable).
var ErrUnavailable = errors.New("platform unavailable")

// Unavailable marks err as ErrUnavailable, keeping its text and its chain
// (errors.As still finds the adapter's own error types). nil stays nil.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return unavailableError{err}
}

type unavailableError struct{ err error }

func (e unavailableError) Error() string   { return e.err.Error() }
func (e unavailableError) Unwrap() []error { return []error{e.err, ErrUnavailable} }
