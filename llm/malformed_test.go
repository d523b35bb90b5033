package llm_test

import (
	"strings"
	"testing"
	"unicode"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// portalPage is what a captive portal or a misrouted proxy answers with 200.
const portalPage = "<!DOCTYPE html>\n<html><head><title>Sign in to Hotel WiFi</title></head>\n<body><form>…</form></body></html>\n"

// A 200 that is neither an event stream nor a JSON error is a transport
// error: retried like a 5xx and logged at WARN with the status and the
// start of the body, never taken for an empty reply.
func TestMalformedAnswerRetried(t *testing.T) {
	tests := []struct {
		name        string
		reply       testkit.Reply
		wantExcerpt string
	}{
		{
			name:        "html page",
			reply:       testkit.Reply{RawBody: []byte(portalPage), RawContentType: "text/html; charset=utf-8"},
			wantExcerpt: "<!DOCTYPE html> <html><head><title>Sign in to Hotel WiFi",
		},
		{
			name:        "event stream with data lines that are not JSON",
			reply:       testkit.Reply{RawBody: []byte("data: hello there\n\ndata: [DONE]\n\n"), RawContentType: "text/event-stream"},
			wantExcerpt: "data: hello there data: [DONE]",
		},
		{
			name:        "event stream without a data line",
			reply:       testkit.Reply{RawBody: []byte("upstream connect error or disconnect/reset before headers\n"), RawContentType: "text/event-stream"},
			wantExcerpt: "upstream connect error",
		},
		{
			name:        "json content type over a body that is not JSON",
			reply:       testkit.Reply{RawBody: []byte(`{"choices":[{"delta":`), RawContentType: "application/json"},
			wantExcerpt: `{"choices":[{"delta":`,
		},
		{
			name:        "json document instead of a stream",
			reply:       testkit.Reply{RawBody: []byte(`{"status":"maintenance"}`), RawContentType: "application/json"},
			wantExcerpt: `{"status":"maintenance"}`,
		},
		{
			name:        "no content type, plain text",
			reply:       testkit.Reply{RawBody: []byte("OK\n")},
			wantExcerpt: "OK",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.fake.Push(tt.reply, testkit.Reply{Text: "the real answer"})
			resp, _, err := h.complete(t, userSays("hi"))
			if err != nil {
				t.Fatalf("err = %v, want the answer after one retry", err)
			}
			if resp.Message.Content != "the real answer" {
				t.Errorf("content = %q, want the second reply", resp.Message.Content)
			}
			if got := h.fake.Calls(); got != 2 {
				t.Errorf("calls = %d, want 2", got)
			}
			if w := h.sleep.Waits(); len(w) != 1 || w[0] != backoff1 {
				t.Errorf("waits = %v, want [%v] like a 5xx", w, backoff1)
			}
			var warned bool
			for _, r := range h.logs.records(t) {
				if r["msg"] != "llm: retrying" {
					continue
				}
				msg, _ := r["err"].(string)
				if r["level"] != "WARN" || r["status"] != float64(200) || r["code"] != "malformed_response" {
					t.Errorf("retry logged %v, want WARN with status 200 and code malformed_response", r)
				}
				if !strings.Contains(msg, tt.wantExcerpt) {
					t.Errorf("retry logged err %q, want the body excerpt %q", msg, tt.wantExcerpt)
				}
				warned = true
			}
			if !warned {
				t.Errorf("no retry logged: %s", h.logs.String())
			}
		})
	}
}

func TestMalformedAnswerExhaustsRetries(t *testing.T) {
	h := newHarness(t, func(c *llm.Config) { c.FallbackModels = []string{"backup"} })
	page := testkit.Reply{RawBody: []byte(portalPage), RawContentType: "text/html"}
	h.fake.SetDefault(&page)
	_, _, err := h.complete(t, userSays("hi"))
	if err == nil {
		t.Fatal("succeeded on HTML pages only")
	}
	e := asError(t, err)
	if e.Status != 200 || e.Code != "malformed_response" || !e.Retryable || e.Model != "backup" {
		t.Errorf("err = %+v, want a retryable malformed_response from the fallback model", e)
	}
	if !strings.Contains(err.Error(), "status 200") || !strings.Contains(err.Error(), "Sign in to Hotel WiFi") {
		t.Errorf("err text %q does not name the status and the body", err)
	}
	// 4 attempts per model, then the fallback model, as for a 5xx.
	if got := h.fake.Calls(); got != 8 {
		t.Errorf("calls = %d, want 8", got)
	}
}

func TestMalformedAnswerExcerpt(t *testing.T) {
	body := "\x1b[31m" + apiKey + "\x00\x07 " + strings.Repeat("é", 300)
	h := newHarness(t, func(c *llm.Config) { c.MaxRetries = -1 })
	h.fake.Push(testkit.Reply{RawBody: []byte(body), RawContentType: "text/plain"})
	_, _, err := h.complete(t, userSays("hi"))
	e := asError(t, err)
	if strings.Contains(err.Error(), apiKey) || strings.Contains(h.logs.String(), apiKey) {
		t.Errorf("the API key leaked: %q", err)
	}
	_, quoted, ok := strings.Cut(e.Message, "body starts: ")
	if !ok {
		t.Fatalf("message %q quotes no body", e.Message)
	}
	if len(quoted) > 200+len("…") {
		t.Errorf("excerpt is %d bytes: %s", len(quoted), quoted)
	}
	for _, r := range e.Message {
		if !unicode.IsPrint(r) {
			t.Errorf("message %q holds the unprintable %U", e.Message, r)
		}
	}
}

// What is not malformed goes through as before.
func TestWellFormedAnswersNotMalformed(t *testing.T) {
	t.Run("event stream without a content type", func(t *testing.T) {
		h := newHarness(t, nil)
		h.fake.Push(testkit.Reply{RawBody: []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")})
		resp, _, err := h.complete(t, userSays("hi"))
		if err != nil || resp.Message.Content != "hi" {
			t.Fatalf("resp = %+v, err = %v", resp, err)
		}
	})
	t.Run("json error object with status 200", func(t *testing.T) {
		h := newHarness(t, func(c *llm.Config) { c.MaxRetries = -1 })
		h.fake.Push(testkit.Reply{RawBody: []byte(`{"error":{"message":"overloaded","type":"server_error"}}`), RawContentType: "application/json"})
		_, _, err := h.complete(t, userSays("hi"))
		if e := asError(t, err); e.Message != "overloaded" || e.Code == "malformed_response" {
			t.Errorf("err = %+v, want the server's error", e)
		}
	})
	t.Run("empty stream with its DONE", func(t *testing.T) {
		h := newHarness(t, nil)
		h.fake.Push(testkit.Reply{RawBody: []byte(": keep-alive\n\ndata: [DONE]\n\n"), RawContentType: "text/event-stream"})
		resp, _, err := h.complete(t, userSays("hi"))
		if err != nil || resp.Message.Content != "" || h.fake.Calls() != 1 {
			t.Fatalf("resp = %+v, err = %v, calls = %d", resp, err, h.fake.Calls())
		}
	})
}
