package llm

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Error is a failed model call, after any retries.
type Error struct {
	Model      string        // the model the failing attempt asked for
	Status     int           // HTTP status; 0 for transport errors, timeouts and errors inside a stream
	Code       string        // the server's error code, e.g. "rate_limit_exceeded"; "timeout" for an attempt that timed out
	Message    string        // the server's message or the transport error, with the API key redacted
	RetryAfter time.Duration // what the server asked us to wait (Retry-After), if it said
	Retryable  bool          // whether the failure was of a kind worth retrying

	cause error
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("llm: ")
	if e.Model != "" {
		fmt.Fprintf(&b, "model %s: ", e.Model)
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, "status %d: ", e.Status)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, "%s: ", e.Code)
	}
	b.WriteString(e.Message)
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

// Unwrap returns the underlying error, for errors.Is/As (e.g.
// context.DeadlineExceeded, *openai.APIError). Its Error text is redacted
// like Message; the fields of the go-openai errors further down the chain
// are not, so print the *Error, not what errors.As digs out.
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether the error means the request did not fit the model's
// context window, for errors.Is(err, ErrContextLength).
func (e *Error) Is(target error) bool {
	return target == ErrContextLength && e.ContextLength()
}

// ContextLength reports whether the server said the request was too long
// for the model.
func (e *Error) ContextLength() bool {
	if e.Code == "context_length_exceeded" {
		return true
	}
	msg := strings.ToLower(e.Message)
	for _, s := range contextLengthPhrases {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// contextLengthPhrases are how OpenAI-compatible servers (OpenAI, vLLM,
// llama.cpp, Anthropic's compatibility layer, proxies) say the prompt was
// too long when they do not send the code.
var contextLengthPhrases = []string{
	"maximum context length",
	"context length",
	"context_length",
	"too many tokens",
	"prompt is too long",
}

// retryableStatus reports whether an HTTP status is worth another attempt.
func retryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// parseRetryAfter reads a Retry-After value: delay-seconds (fractions
// accepted) or an HTTP date. It returns 0 when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 || secs > 1e6 {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// redactedError carries an error whose text had the API key removed while
// keeping the original reachable for errors.Is/As.
type redactedError struct {
	text string
	err  error
}

func (r *redactedError) Error() string { return r.text }
func (r *redactedError) Unwrap() error { return r.err }

// redactor removes a secret from text.
type redactor string

const redactedMark = "[REDACTED]"

func (key redactor) String(s string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, string(key), redactedMark)
}

func (key redactor) Err(err error) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	if red := key.String(text); red != text {
		return &redactedError{text: red, err: err}
	}
	return err
}

// errorsAs is errors.As with the target allocated, to keep call sites short.
func errorsAs[T error](err error) (T, bool) {
	var t T
	ok := errors.As(err, &t)
	return t, ok
}

// Unavailable reports whether err says the model server could not be
// reached or did not answer properly, after the client's retries: a
// connection refused or dropped, a timeout, a 408, 429 or 5xx, a stream
// that broke or did not decode. Such a failure says nothing about the
// request, so the same request may well succeed later; a refusal of the
// request (400, 401, a context too long, a quota used up) is not one.
func Unavailable(err error) bool {
	e, ok := errorsAs[*Error](err)
	return ok && e.Retryable
}
