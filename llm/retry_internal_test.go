package llm

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"2", 2 * time.Second},
		{" 7 ", 7 * time.Second},
		{"1.5", 1500 * time.Millisecond},
		{"0", 0},
		{"-3", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestCapturedRetryAfterPrefersMilliseconds(t *testing.T) {
	now := time.Now()
	tests := []struct {
		h    captured
		want time.Duration
	}{
		{captured{retryAfterMS: "250", retryAfterSecs: "1"}, 250 * time.Millisecond},
		{captured{retryAfterMS: "junk", retryAfterSecs: "3"}, 3 * time.Second},
		{captured{}, 0},
	}
	for _, tt := range tests {
		if got := tt.h.retryAfter(now); got != tt.want {
			t.Errorf("%+v: got %v, want %v", tt.h, got, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		jitter float64
		want   []time.Duration // attempts 1…
	}{
		{0, []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}},
		{1, []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 20 * time.Second, 20 * time.Second}},
	}
	for _, tt := range tests {
		c := &Client{cfg: Config{Rand: func() float64 { return tt.jitter }}}
		for i, want := range tt.want {
			if got := c.backoff(i + 1); got != want {
				t.Errorf("jitter %v attempt %d: got %v, want %v", tt.jitter, i+1, got, want)
			}
		}
		if got := c.backoff(100); got > backoffCap || got < backoffCap/2 {
			t.Errorf("attempt 100: %v outside [cap/2, cap]", got)
		}
	}
}

func TestErrorIsContextLength(t *testing.T) {
	tests := []struct {
		e    *Error
		want bool
	}{
		{&Error{Status: 400, Code: "context_length_exceeded"}, true},
		{&Error{Status: 400, Message: "Input exceeds CONTEXT_LENGTH"}, true},
		{&Error{Status: 400, Message: "invalid tool schema"}, false},
		{&Error{Status: 429, Code: "rate_limit_exceeded", Message: "slow down"}, false},
	}
	for _, tt := range tests {
		wrapped := fmt.Errorf("agent: step 3: %w", tt.e)
		if got := errors.Is(wrapped, ErrContextLength); got != tt.want {
			t.Errorf("%v: errors.Is = %v, want %v", tt.e, got, tt.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"<html><head><title>502 Bad Gateway</title></head><body>…</body></html>", "502 Bad Gateway"},
		{"upstream   connect error\n or disconnect", "upstream connect error or disconnect"},
	}
	for _, tt := range tests {
		if got := summarize([]byte(tt.in)); got != tt.want {
			t.Errorf("summarize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := summarize(make([]byte, 1000)); len(got) > 210 {
		t.Errorf("long body not truncated: %d bytes", len(got))
	}
}
