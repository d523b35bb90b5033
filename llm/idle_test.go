package llm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// A server that goes silent (before its headers, or in the middle of its
// stream) ends the attempt after llm.stream_idle_timeout, well inside the
// request timeout, and the attempt is retried; a slow stream that keeps
// sending is not cut, however long it takes in all.
func TestStreamIdleTimeout(t *testing.T) {
	const idle = 150 * time.Millisecond
	tests := []struct {
		name    string
		first   testkit.Reply
		wantErr bool // the first attempt ends with stream_idle
	}{
		{"silent before the headers", testkit.Reply{Block: make(chan struct{})}, true},
		{"silent in the stream", testkit.Reply{Text: "never said", ChunkDelay: time.Minute}, true},
		{"slow but steady", testkit.Reply{Text: "one two three four five six seven eight", ChunkDelay: idle / 3}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *llm.Config) {
				c.RequestTimeout = 10 * time.Second
				c.StreamIdleTimeout = idle
			})
			h.fake.Push(tc.first, testkit.Reply{Text: "second try"})
			start := time.Now()
			resp, _, err := h.complete(t, userSays("hi"))
			took := time.Since(start)
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if !tc.wantErr {
				if resp.Message.Content != tc.first.Text || h.fake.Calls() != 1 {
					t.Fatalf("content %q after %d calls; want the slow stream whole in one", resp.Message.Content, h.fake.Calls())
				}
				return
			}
			if resp.Message.Content != "second try" || h.fake.Calls() != 2 {
				t.Fatalf("content %q after %d calls; want the retry's answer", resp.Message.Content, h.fake.Calls())
			}
			if took > 5*time.Second {
				t.Errorf("took %s: the idle attempt was not cut at %s", took, idle)
			}
			if logs := h.logs.String(); !strings.Contains(logs, "stream_idle") || !strings.Contains(logs, "llm.stream_idle_timeout") {
				t.Errorf("the retry's log does not name the idle timeout:\n%s", logs)
			}
		})
	}
	t.Run("the error when every attempt hangs", func(t *testing.T) {
		h := newHarness(t, func(c *llm.Config) {
			c.RequestTimeout, c.StreamIdleTimeout, c.MaxRetries = 10*time.Second, idle, -1
		})
		h.fake.Push(testkit.Reply{Block: make(chan struct{})})
		_, _, err := h.complete(t, userSays("hi"))
		if e := asError(t, err); e.Code != "stream_idle" || !e.Retryable || !llm.Unavailable(err) {
			t.Errorf("err = %+v (%v); want a retryable stream_idle error", e, err)
		}
	})
}
