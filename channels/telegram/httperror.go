package telegram

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"
)

const (
	// maxErrorBody bounds what is read of a failed answer to tell a Bot API
	// error (a small JSON object) from a proxy's page.
	maxErrorBody = 64 << 10
	// excerptRunes is how much of such a page an error quotes.
	excerptRunes = 120
)

// httpError is an answer that did not come from the Bot API: a status
// outside 2xx with a body that is not JSON, such as the HTML page of a proxy
// or load balancer in front of Telegram answering 502. tgbotapi ignores the
// status and would report only "invalid character '<' looking for beginning
// of value"; this names the status and quotes the start of the page.
// Retrying treats it like a transport error (see retryDelay).
type httpError struct {
	StatusCode  int
	Status      string // "502 Bad Gateway"
	ContentType string
	Excerpt     string // the body's start, whitespace collapsed, token redacted
}

func (e *httpError) Error() string {
	ct := e.ContentType
	if ct == "" {
		ct = "no content type"
	}
	return fmt.Sprintf("HTTP %s (%s, not a Bot API answer): %q", e.Status, ct, e.Excerpt)
}

// checkAnswer passes a 2xx answer, and a failed one whose body is JSON (the
// Bot API's own errors: 400, 403, 429 with retry_after…), to tgbotapi as
// they are, so that it still returns its typed *tgbotapi.Error. A failed
// answer with any other body becomes an *httpError.
func checkAnswer(resp *http.Response, redact func(string) string) (*http.Response, error) {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	if err == nil && isJSONObject(body) {
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return resp, nil
	}
	status := resp.Status
	if status == "" {
		status = fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	e := &httpError{
		StatusCode:  resp.StatusCode,
		Status:      redact(status),
		ContentType: redact(resp.Header.Get("Content-Type")),
		Excerpt:     excerpt(body, redact),
	}
	if err != nil {
		return nil, fmt.Errorf("%w; reading the rest failed: %w", e, err)
	}
	return nil, e
}

func isJSONObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// excerpt is the start of body as one line of valid UTF-8, redacted before
// it is cut so that no part of a token survives.
func excerpt(body []byte, redact func(string) string) string {
	s := redact(strings.Join(strings.Fields(strings.ToValidUTF8(string(body), "\uFFFD")), " "))
	if utf8.RuneCountInString(s) <= excerptRunes {
		return s
	}
	return string([]rune(s)[:excerptRunes]) + "…"
}
