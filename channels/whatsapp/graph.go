package whatsapp

// The Graph API client: JSON calls with the access token, Meta's error
// answers as *APIError, and the retry rule every send follows.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
)

const (
	// maxAttempts bounds the tries of one Graph API call (rate limits,
	// 5xx, network); the outbox takes over after them.
	maxAttempts = 5
	// firstBackoff and maxBackoff shape the wait after a temporary error.
	firstBackoff = 500 * time.Millisecond
	maxBackoff   = 8 * time.Second
	// maxAnswer caps a Graph API answer read (they are small JSON).
	maxAnswer = 1 << 20
)

// Graph API error codes the adapter acts on (Meta's "Error codes" page
// for the Cloud API).
const (
	codeReEngagement = 131047 // outside the 24-hour window: a template only
	codeThroughput   = 130429 // the number's messages per second
	codePairRate     = 131056 // too many messages to one user
	codeSpamRate     = 131048 // the number is restricted for quality
	codeAppRate      = 4      // the app's calls per hour
	codeAppRateBiz   = 80007  // the WhatsApp account's calls per hour
	codeToken        = 190    // expired or revoked token
	codeGeneric      = 131000 // "something went wrong": temporary
	codeServiceDown  = 131016 // service unavailable
	codeServerDown   = 133004 // server temporarily unavailable
	codeTemporary1   = 1      // API unknown: temporary
	codeTemporary2   = 2      // API service: temporary
)

// APIError is an error answer of the Graph API.
type APIError struct {
	Status  int    // HTTP status
	Code    int    // error.code
	Subcode int    // error.error_subcode
	Title   string // error.error_user_title or the type
	Message string // error.message
	Details string // error.error_data.details
	// RetryAfter is the wait the answer asked for (Retry-After), if any.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("graph api: HTTP %d", e.Status)
	if e.Code != 0 {
		s += fmt.Sprintf(", code %d", e.Code)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Details != "" && e.Details != e.Message {
		s += " (" + e.Details + ")"
	}
	return s
}

// rateLimited reports an answer that asks to slow down.
func (e *APIError) rateLimited() bool {
	switch e.Code {
	case codeThroughput, codePairRate, codeSpamRate, codeAppRate, codeAppRateBiz:
		return true
	}
	return e.Status == http.StatusTooManyRequests
}

// temporary reports an answer worth asking again after a while.
func (e *APIError) temporary() bool {
	switch e.Code {
	case codeGeneric, codeServiceDown, codeServerDown, codeTemporary1, codeTemporary2:
		return true
	}
	return e.Status >= 500
}

// graphAnswer is the envelope of an error answer.
type graphAnswer struct {
	Error *struct {
		Message   string `json:"message"`
		Type      string `json:"type"`
		Code      int    `json:"code"`
		Subcode   int    `json:"error_subcode"`
		UserTitle string `json:"error_user_title"`
		Data      struct {
			Details string `json:"details"`
		} `json:"error_data"`
	} `json:"error"`
}

// call makes one Graph API request: body (JSON unless it is a
// *multipartBody) to base/version/path, the answer's JSON into out.
func (a *Adapter) call(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	ctype := ""
	switch b := body.(type) {
	case nil:
	case *multipartBody:
		rd, ctype = bytes.NewReader(b.data), b.contentType
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return fmt.Errorf("encode %s: %w", path, err)
		}
		rd, ctype = bytes.NewReader(data), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+"/"+strings.TrimPrefix(path, "/"), rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return safeError{err, a.redact(err.Error())}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return apiError(resp, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}

// apiError reads an error answer.
func apiError(resp *http.Response, data []byte) *APIError {
	e := &APIError{Status: resp.StatusCode}
	var ans graphAnswer
	if json.Unmarshal(data, &ans) == nil && ans.Error != nil {
		e.Code, e.Subcode, e.Message, e.Details = ans.Error.Code, ans.Error.Subcode, ans.Error.Message, ans.Error.Data.Details
		e.Title = ans.Error.UserTitle
		if e.Title == "" {
			e.Title = ans.Error.Type
		}
	} else {
		e.Message = strings.TrimSpace(string(data[:min(len(data), 200)]))
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// retry runs call until it succeeds or fails for good; attempt decides
// each failure (see verdict).
func (a *Adapter) retry(ctx context.Context, op string, call func() error) error {
	t := tries{max: maxAttempts, backoff: firstBackoff, maxWait: a.maxWait}
	for {
		err := call()
		if err == nil {
			return nil
		}
		wait, final := t.verdict(ctx, err)
		var ae *APIError
		if final != nil && errors.As(final, &ae) && ae.Code == codeToken {
			a.log.Error("whatsapp: Meta refused the access token; replies wait in the outbox until it is renewed (channels.whatsapp.access_token)", "op", op, "err", a.redact(err.Error()))
		}
		if final != nil {
			return final
		}
		a.log.Warn("whatsapp: retrying", "op", op, "attempt", t.n, "wait", wait, "err", a.redact(err.Error()))
		if serr := a.sleep(ctx, wait); serr != nil {
			return channels.Unavailable(err)
		}
	}
}

// tries is the state of one call's retries.
type tries struct {
	n, max           int
	backoff, maxWait time.Duration
}

// verdict decides a failed try: the wait before the next one, or the
// error to return. A rate limit waits (Retry-After, else the backoff)
// unless the call is a preview (channels.PriorityPreview: ErrPaced) or
// the wait is longer than MaxRateLimitWait; a 5xx, a temporary code or a
// lost connection backs off exponentially. An error still worth retrying
// when the tries run out is marked channels.ErrUnavailable, so the outbox
// keeps the reply, as is a refused token (190), at once; Meta's refusals
// of the message (a policy, a bad request) return at once, unmarked.
func (t *tries) verdict(ctx context.Context, err error) (time.Duration, error) {
	t.n++
	if ctx.Err() != nil {
		return 0, err
	}
	var ae *APIError
	if errors.As(err, &ae) && (ae.Code == codeToken || ae.Status == http.StatusUnauthorized) {
		// Not the message's fault: kept (the outbox) until the operator
		// renews the token, and not asked again now.
		return 0, channels.Unavailable(err)
	}
	wait, limited, again := retryWait(err, t.backoff)
	t.backoff = min(2*t.backoff, maxBackoff)
	if limited && channels.PriorityOf(ctx) == channels.PriorityPreview {
		return 0, fmt.Errorf("%w: %w", channels.ErrPaced, err)
	}
	if !again {
		return 0, err
	}
	if t.n >= t.max || (limited && wait > t.maxWait) {
		return 0, channels.Unavailable(err)
	}
	return wait, nil
}

// retryWait says whether err is worth another try, and after how long.
func retryWait(err error, backoff time.Duration) (wait time.Duration, rateLimited, ok bool) {
	var ae *APIError
	if errors.As(err, &ae) {
		switch {
		case ae.rateLimited() && ae.RetryAfter > 0:
			return ae.RetryAfter, true, true
		case ae.rateLimited():
			return backoff, true, true
		}
		return backoff, false, ae.temporary()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return 0, false, false
	}
	var ne net.Error
	// A timeout, a connection lost on the way (a reset, an EOF), or refused.
	return backoff, false, errors.As(err, &ne) || isTransport(err)
}

// isTransport reports whether err is a failure on the way to Meta rather
// than an answer from it.
func isTransport(err error) bool {
	s := err.Error()
	for _, m := range []string{"connection reset", "connection refused", "EOF", "broken pipe", "no such host", "timeout", "dial tcp"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// wrap adds context to err, with the secrets removed from its text and
// its chain kept (errors.Is, errors.As).
func (a *Adapter) wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return safeError{err, a.redact("whatsapp: " + fmt.Sprintf(format, args...) + ": " + err.Error())}
}

// safeError is an error whose text had the secrets removed.
type safeError struct {
	error
	text string
}

func (e safeError) Error() string { return e.text }
func (e safeError) Unwrap() error { return e.error }
