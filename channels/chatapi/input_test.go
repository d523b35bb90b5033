package chatapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// hugeBody is a chat request whose one user message is n bytes of "a",
// made as it is read (nothing held), counting the bytes read.
type hugeBody struct {
	prefix, suffix string
	n              int64 // bytes of "a" between them
	read           int64
}

func newHugeBody(n int64) *hugeBody {
	return &hugeBody{prefix: `{"model":"switchboard","user":"ada","messages":[{"role":"user","content":"`,
		suffix: `"}]}`, n: n}
}

func (b *hugeBody) size() int64 { return int64(len(b.prefix)) + b.n + int64(len(b.suffix)) }

func (b *hugeBody) Read(p []byte) (int, error) {
	i := 0
	for i < len(p) && b.read < b.size() {
		switch off := b.read; {
		case off < int64(len(b.prefix)):
			p[i] = b.prefix[off]
		case off < int64(len(b.prefix))+b.n:
			p[i] = 'a'
		default:
			p[i] = b.suffix[off-int64(len(b.prefix))-b.n]
		}
		i++
		b.read++
	}
	if i == 0 {
		return 0, io.EOF
	}
	return i, nil
}

// storedRows counts what the store holds of messages: inbox rows and
// transcript messages.
func (s *stack) storedRows() (inbox, messages int) {
	s.t.Helper()
	db := s.store.DB()
	if err := db.QueryRowContext(s.t.Context(), "SELECT count(*) FROM inbox").Scan(&inbox); err != nil {
		s.t.Fatal(err)
	}
	if err := db.QueryRowContext(s.t.Context(), "SELECT count(*) FROM messages").Scan(&messages); err != nil {
		s.t.Fatal(err)
	}
	return inbox, messages
}

// errorOf decodes an OpenAI-style error body.
func errorOf(t *testing.T, body string) (code, message string) {
	t.Helper()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e.Error.Code, e.Error.Message
}

// Issue 31, finding 4: a 15 MB chat request is refused with 413 naming the
// limit, before it is read whole (the body is not read past the byte
// limit), and nothing of it is stored.
func TestChatAPIRefusesHugeBody(t *testing.T) {
	s := newStack(t, "")
	body := newHugeBody(15_000_000)
	req := httptest.NewRequestWithContext(t.Context(), "POST", "/v1/chat/completions", body)
	rec := httptest.NewRecorder()
	s.api.Routes()["POST /v1/chat/completions"].ServeHTTP(rec, req)

	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413: %s", rec.Code, rec.Body)
	}
	code, msg := errorOf(t, rec.Body.String())
	if code != "request_too_large" || !strings.Contains(msg, fmt.Sprint(channels.DefaultMaxInputChars)) ||
		!strings.Contains(msg, "channels.max_input_chars") {
		t.Errorf("error %q: %q, want request_too_large naming the limit", code, msg)
	}
	// json.Decoder reads in growing chunks; MaxBytesReader stops one byte
	// past the limit. A little slack for the last chunk, far below 15 MB.
	if limit := s.api.MaxBodyBytes(); body.read > limit+64<<10 {
		t.Errorf("read %d bytes of the body, want at most about the limit %d", body.read, limit)
	}
	if inbox, messages := s.storedRows(); inbox != 0 || messages != 0 {
		t.Errorf("stored %d inbox rows and %d messages, want none", inbox, messages)
	}
	if n := len(s.fake.Requests()); n != 0 {
		t.Errorf("%d model calls, want none", n)
	}
}

// A last user message past channels.max_input_chars (characters, not
// bytes) in a body within the byte limit is refused with 413 too, stored
// nowhere; a message at the limit is answered.
func TestChatAPIRefusesLongMessage(t *testing.T) {
	s := newStack(t, "")
	limit := channels.DefaultMaxInputChars
	body, _ := json.Marshal(map[string]any{"user": "ada",
		"messages": []map[string]any{{"role": "user", "content": strings.Repeat("é", limit+1)}}})
	status, out := s.do("POST", "/v1/chat/completions", string(body), nil)
	if status != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413: %s", status, out)
	}
	want := fmt.Sprintf("the last user message is %d characters; the limit is %d", limit+1, limit)
	if code, msg := errorOf(t, out); code != "message_too_long" || !strings.Contains(msg, want) {
		t.Errorf("error %q: %q, want message_too_long saying %q", code, msg, want)
	}
	if inbox, messages := s.storedRows(); inbox != 0 || messages != 0 {
		t.Errorf("stored %d inbox rows and %d messages, want none", inbox, messages)
	}

	s.fake.Push(testkit.Reply{Text: "Read it all."})
	if got, _ := s.chat("ada", strings.Repeat("é", limit)); got != "Read it all." {
		t.Fatalf("a message at the limit: reply %q", got)
	}
	if inbox, _ := s.storedRows(); inbox != 1 {
		t.Errorf("%d inbox rows after the message at the limit, want 1", inbox)
	}
}

// Issue 31, finding 4: an answered message is stored once: its text is in
// the transcript, and its inbox row keeps only who wrote it (for the
// dashboard), not a second copy.
func TestAnsweredMessageStoredOnce(t *testing.T) {
	s := newStack(t, "")
	text := "stored-once " + strings.Repeat("x", 20_000)
	s.fake.Push(testkit.Reply{Text: "Noted."})
	if got, _ := s.chat("ada", text); got != "Noted." {
		t.Fatalf("reply %q", got)
	}
	db := s.store.DB()
	var payload []byte
	var status string
	if err := db.QueryRowContext(t.Context(), "SELECT payload, status FROM inbox").Scan(&payload, &status); err != nil {
		t.Fatal(err)
	}
	if status != "done" || strings.Contains(string(payload), "stored-once") || len(payload) > 1000 {
		t.Errorf("inbox row %s, %d bytes, holding the text: %v; want done without it", status, len(payload),
			strings.Contains(string(payload), "stored-once"))
	}
	var in channels.Inbound
	if err := json.Unmarshal(payload, &in); err != nil || in.UserID != "ada" || in.DisplayName != "ada" {
		t.Errorf("kept payload %s (%v), want who wrote it", payload, err)
	}
	var copies int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM messages WHERE content LIKE 'stored-once%'").Scan(&copies); err != nil {
		t.Fatal(err)
	}
	if copies != 1 {
		t.Errorf("%d transcript messages hold the text, want 1", copies)
	}
}
