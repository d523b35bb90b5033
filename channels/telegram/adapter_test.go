package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/internal/tghtml"
)

const testToken = "123:AAH-secret_token-XYZ"

// ---- helpers ----

// sleeper records backoff waits. By default it returns at once; with block
// it waits for ctx (a loop that would otherwise spin).
type sleeper struct {
	mu    sync.Mutex
	waits []time.Duration
	block bool
	calls chan time.Duration
}

func newSleeper() *sleeper { return &sleeper{calls: make(chan time.Duration, 100)} }

func (s *sleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	block := s.block
	s.mu.Unlock()
	select {
	case s.calls <- d:
	default:
	}
	if block {
		<-ctx.Done()
	}
	return ctx.Err()
}

func (s *sleeper) recorded() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

type env struct {
	fake  *tgfake.Fake
	a     *Adapter
	sleep *sleeper
	logs  *testkit.SyncBuffer
}

// newEnv starts a fake and an adapter on it. Every test also checks that the
// token never reached the logs.
func newEnv(t *testing.T, setup func(*tgfake.Fake, *Options)) *env {
	t.Helper()
	f := tgfake.New(t, testToken)
	logs := &testkit.SyncBuffer{}
	t.Cleanup(func() {
		if strings.Contains(logs.String(), testToken) {
			t.Errorf("the token leaked into the logs:\n%s", logs.String())
		}
	})
	sl := newSleeper()
	o := Options{
		Token:       testToken,
		APIEndpoint: f.URL,
		Logger:      slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Sleep:       sl.sleep,
		// The first poll in Run, so that what a test pushes after New
		// comes in one batch; firstpoll_test.go covers New's poll.
		PollOnRun: true,
	}
	if setup != nil {
		setup(f, &o)
	}
	a, err := New(t.Context(), o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &env{fake: f, a: a, sleep: sl, logs: logs}
}

// recvSink records deliveries; fail, if set, decides the answer.
type recvSink struct {
	got  chan channels.Inbound
	fail func(channels.Inbound) error
}

func newSink() *recvSink { return &recvSink{got: make(chan channels.Inbound, 100)} }

func (s *recvSink) Deliver(_ context.Context, in channels.Inbound) error {
	if s.fail != nil {
		if err := s.fail(in); err != nil {
			return err
		}
	}
	s.got <- in
	return nil
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (s *recvSink) next(t *testing.T) channels.Inbound {
	t.Helper()
	select {
	case in := <-s.got:
		return in
	case <-waitCtx(t).Done():
		t.Fatal("no message delivered")
		return channels.Inbound{}
	}
}

// run starts a.Run and, at cleanup, cancels it and checks it returned nil.
func (e *env) run(t *testing.T, s channels.Sink) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.a.Run(ctx, s) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Run did not return after cancel")
		}
	}
	t.Cleanup(stop)
	return stop
}

// ---- receiving ----

func TestPrivateMessageDelivered(t *testing.T) {
	e := newEnv(t, nil)
	s := newSink()
	e.run(t, s)
	upd, msg := e.fake.PushText(42, 42, "ada", "hello **there**")
	in := s.next(t)
	want := channels.Inbound{
		Channel: "telegram", ChatID: "42", ChatType: channels.DM, MessageID: itoa(msg),
		UserID: "42", UserName: "ada", DisplayName: "Ada 42", Text: "hello **there**", Mentioned: true,
	}
	in.Time = time.Time{}
	if !equalInbound(in, want) {
		t.Errorf("delivered\n%+v\nwant\n%+v", in, want)
	}
	if err := e.fake.WaitOffset(waitCtx(t), upd+1); err != nil {
		t.Fatalf("offset not confirmed after delivery: %v", err)
	}
	if n := e.fake.Pending(); n != 0 {
		t.Errorf("pending updates = %d, want 0", n)
	}
	if got := e.fake.Calls("deleteWebhook"); got != 0 {
		t.Errorf("deleteWebhook calls = %d; want none while no webhook is set", got)
	}
	if got := e.a.BotUsername(); got != "switchboard_bot" {
		t.Errorf("BotUsername = %q", got)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func equalInbound(a, b channels.Inbound) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func TestGroupMentionGating(t *testing.T) {
	e := newEnv(t, nil)
	s := newSink()
	e.run(t, s)
	e.fake.PushText(-100, 42, "ada", "talking among ourselves", tgfake.InGroup("Engines"))
	e.fake.PushText(-100, 42, "ada", "@switchboard_bot what time is it?", tgfake.InGroup("Engines"))

	first := s.next(t)
	if first.Mentioned || first.ChatType != channels.Group || first.ChatTitle != "Engines" {
		t.Errorf("plain group message: Mentioned=%v ChatType=%q ChatTitle=%q; want false, group, Engines",
			first.Mentioned, first.ChatType, first.ChatTitle)
	}
	second := s.next(t)
	if !second.Mentioned || second.Text != "what time is it?" {
		t.Errorf("mention: Mentioned=%v Text=%q; want true and the mention stripped", second.Mentioned, second.Text)
	}
}

func TestReplyToBotIsMentioned(t *testing.T) {
	e := newEnv(t, nil)
	id, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "-100", Text: "The answer is 4."})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	s := newSink()
	e.run(t, s)
	botMsg, _ := strconv.Atoi(id)
	e.fake.PushText(-100, 42, "ada", "why?", tgfake.InGroup("Engines"),
		tgfake.ReplyToBot(botMsg, "The answer is 4."), tgfake.WithQuote("answer"))
	in := s.next(t)
	if !in.Mentioned {
		t.Error("reply to the bot: Mentioned = false, want true")
	}
	if in.Quote == nil || !in.Quote.FromBot || in.Quote.MessageID != id || in.Quote.Text != "answer" {
		t.Errorf("Quote = %+v, want the quoted part of the bot's message %s", in.Quote, id)
	}

	// a reply to another user is not addressed to the bot
	other := e.fake.NewMessage(-100, 7, "charles", "my engine", tgfake.InGroup("Engines"))
	e.fake.PushText(-100, 42, "ada", "nice", tgfake.InGroup("Engines"), tgfake.ReplyTo(other))
	in = s.next(t)
	if in.Mentioned || in.Quote == nil || in.Quote.FromBot || in.Quote.Author != "@charles" || in.Quote.Text != "my engine" {
		t.Errorf("reply to a user: Mentioned=%v Quote=%+v; want not mentioned, quote of @charles", in.Mentioned, in.Quote)
	}
}

func TestForumTopicIsSeparateChat(t *testing.T) {
	e := newEnv(t, nil)
	s := newSink()
	e.run(t, s)
	e.fake.PushText(-1009, 42, "ada", "in general", tgfake.InGroup("Forum"))
	e.fake.PushText(-1009, 42, "ada", "in topic", tgfake.InGroup("Forum"), tgfake.InTopic(7))
	general, topic := s.next(t), s.next(t)
	if general.ChatID != "-1009" || topic.ChatID != "-1009:topic:7" {
		t.Fatalf("ChatIDs = %q, %q; want -1009 and -1009:topic:7", general.ChatID, topic.ChatID)
	}
	if topic.Quote != nil || topic.Mentioned {
		t.Errorf("topic creation message was taken for a reply: Quote=%+v Mentioned=%v", topic.Quote, topic.Mentioned)
	}
	if _, err := e.a.Send(t.Context(), channels.Outbound{ChatID: topic.ChatID, Text: "answer in topic"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if err := e.a.Typing(t.Context(), topic.ChatID); err != nil {
		t.Fatalf("Typing: %v", err)
	}
	sent := e.fake.Sent()
	if len(sent) != 1 || sent[0].ChatID != -1009 || sent[0].MessageThreadID != 7 {
		t.Errorf("sent = %+v, want one message to chat -1009 thread 7", sent)
	}
	if reqs := e.fake.Requests("sendChatAction"); len(reqs) != 1 || reqs[0].Get("message_thread_id") != "7" {
		t.Errorf("sendChatAction requests = %v, want thread 7", reqs)
	}
}

func TestOffsetAdvancesOnlyAfterDelivery(t *testing.T) {
	e := newEnv(t, nil)
	upd, msg := e.fake.PushText(42, 42, "ada", "keep me")
	var (
		mu       sync.Mutex
		attempts int
	)
	s := newSink()
	s.fail = func(in channels.Inbound) error {
		mu.Lock()
		defer mu.Unlock()
		attempts++
		// Whenever we are asked to deliver, Telegram must not have been
		// told that this update is done.
		for _, o := range e.fake.Offsets() {
			if o > upd {
				t.Errorf("offset %d (> update %d) sent before delivery succeeded", o, upd)
			}
		}
		if attempts == 1 {
			return errors.New("database is locked")
		}
		return nil
	}
	e.run(t, s)
	in := s.next(t)
	if in.MessageID != itoa(msg) {
		t.Errorf("delivered message %s, want %d", in.MessageID, msg)
	}
	mu.Lock()
	if attempts != 2 {
		t.Errorf("Deliver attempts = %d, want 2 (one failure, one retry of the same update)", attempts)
	}
	mu.Unlock()
	if err := e.fake.WaitOffset(waitCtx(t), upd+1); err != nil {
		t.Fatalf("offset after successful delivery: %v", err)
	}
	if w := e.sleep.recorded(); len(w) == 0 || w[0] != time.Second {
		t.Errorf("backoff waits = %v, want a 1s wait after the failed delivery", w)
	}
	if !strings.Contains(e.logs.String(), "delivery failed") {
		t.Error("the failed delivery was not logged")
	}
}

func TestMalformedAndForeignUpdatesAreSkipped(t *testing.T) {
	e := newEnv(t, nil)
	bad1 := e.fake.PushUpdate(map[string]any{"message": "not an object"})
	bad2 := e.fake.PushUpdate(map[string]any{"message": map[string]any{"message_id": "x", "chat": 5}})
	post := e.fake.PushUpdate(map[string]any{"channel_post": map[string]any{
		"message_id": 1, "date": 1, "chat": map[string]any{"id": -1007, "type": "channel", "title": "News"}, "text": "post"}})
	noChat := e.fake.PushUpdate(map[string]any{"message": map[string]any{"message_id": 3, "date": 1, "text": "orphan"}})
	service := e.fake.PushUpdate(map[string]any{"message": map[string]any{"message_id": 4, "date": 1,
		"chat": map[string]any{"id": -100, "type": "supergroup"}, "new_chat_title": "Renamed"}})
	upd, _ := e.fake.PushText(42, 42, "ada", "still alive")
	s := newSink()
	e.run(t, s)
	if in := s.next(t); in.Text != "still alive" {
		t.Errorf("delivered %q, want the good message", in.Text)
	}
	if err := e.fake.WaitOffset(waitCtx(t), upd+1); err != nil {
		t.Fatal(err)
	}
	select {
	case in := <-s.got:
		t.Errorf("unexpected delivery %+v", in)
	default:
	}
	logs := e.logs.String()
	for _, want := range []string{"malformed update", "without a message", "kind=channel_post", "without a chat", "without content"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q", want)
		}
	}
	_, _, _, _, _ = bad1, bad2, post, noChat, service
}

func TestEditedMessagePolicy(t *testing.T) {
	e := newEnv(t, nil)
	s := newSink()
	e.run(t, s)
	m := e.fake.NewMessage(42, 42, "ada", "helo")
	e.fake.PushMessage(m)
	orig := s.next(t)
	m["text"] = "hello"
	e.fake.PushEdited(m)
	ed := s.next(t)
	if ed.ChatID != orig.ChatID || !strings.HasPrefix(ed.MessageID, orig.MessageID+":edit:") || ed.Text != "(edited) hello" {
		t.Errorf("edit delivered as %q %q, want MessageID %s:edit:<date> and text \"(edited) hello\"", ed.MessageID, ed.Text, orig.MessageID)
	}
}

func TestPhotoDownload(t *testing.T) {
	e := newEnv(t, nil)
	png := []byte("\x89PNG\r\n\x1a\n-fake-png-data")
	e.fake.AddFile("small", "photos/s.jpg", []byte("thumb"))
	e.fake.AddFile("large", "photos/l.jpg", png)
	s := newSink()
	e.run(t, s)
	e.fake.PushText(42, 42, "ada", "what is this?", tgfake.WithPhoto("small", "large"))
	in := s.next(t)
	if in.Text != "what is this?" || len(in.Attachments) != 1 {
		t.Fatalf("got text %q and %d attachments, want the caption and one photo", in.Text, len(in.Attachments))
	}
	att := in.Attachments[0]
	if att.Kind != channels.Image || !bytes.Equal(att.Data, png) || att.MIME != "image/png" {
		t.Errorf("attachment = %s %q %d bytes, want the largest size as image/png", att.Kind, att.MIME, len(att.Data))
	}
}

func TestDownloadCap(t *testing.T) {
	e := newEnv(t, func(_ *tgfake.Fake, o *Options) { o.MaxDownloadBytes = 8 })
	e.fake.AddFile("big", "voice/v.ogg", []byte("0123456789abcdef"))
	s := newSink()
	e.run(t, s)
	// the message claims no size: the cap must hold on the download itself
	m := e.fake.NewMessage(42, 42, "ada", "", tgfake.WithVoice("big", 0))
	delete(m["voice"].(map[string]any), "file_size")
	e.fake.PushMessage(m)
	in := s.next(t)
	if len(in.Attachments) != 1 || in.Attachments[0].Data != nil || !strings.Contains(in.Attachments[0].Note, "larger than 8 bytes") {
		t.Errorf("attachments = %+v, want an undownloaded voice note with a note", in.Attachments)
	}
}

func TestSmallTextDocumentInlined(t *testing.T) {
	e := newEnv(t, nil)
	body := "name: switchboard\nport: 8080\n"
	e.fake.AddFile("doc1", "documents/config.yaml", []byte(body))
	s := newSink()
	e.run(t, s)
	e.fake.PushText(42, 42, "ada", "check this", tgfake.WithDocument("doc1", "config.yaml", "application/x-yaml", len(body)))
	in := s.next(t)
	if len(in.Attachments) != 1 {
		t.Fatalf("got %d attachments, want 1", len(in.Attachments))
	}
	att := in.Attachments[0]
	if att.Kind != channels.File || att.Name != "config.yaml" || att.Text != body || string(att.Data) != body {
		t.Errorf("attachment = %+v, want the document inlined as Text", att)
	}
}

func TestRunStopsPromptlyDuringLongPoll(t *testing.T) {
	e := newEnv(t, func(_ *tgfake.Fake, o *Options) { o.PollTimeout = 30 * time.Second })
	stop := e.run(t, newSink())
	if err := e.fake.WaitCalls(waitCtx(t), "getUpdates", 1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	stop() // fails the test if Run does not return nil within 5 s
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Run took %v to stop during a 30 s long poll", d)
	}
}

func TestConflictIsLoggedAndRetried(t *testing.T) {
	e := newEnv(t, func(f *tgfake.Fake, _ *Options) { // the first poll is New's
		f.FailNext("getUpdates", http.StatusConflict, "", 0)
		f.FailNext("getUpdates", http.StatusTooManyRequests, "", 7)
	})
	s := newSink()
	e.run(t, s)
	e.fake.PushText(42, 42, "ada", "after the conflict")
	if in := s.next(t); in.Text != "after the conflict" {
		t.Errorf("delivered %q", in.Text)
	}
	if !strings.Contains(e.logs.String(), "another process polls with this token") {
		t.Error("409 conflict not logged clearly")
	}
	if w := e.sleep.recorded(); len(w) < 2 || w[0] != time.Second || w[1] != 7*time.Second {
		t.Errorf("waits = %v, want 1s backoff after 409, then retry_after 7s", w)
	}
}

func TestUnauthorizedStopsRun(t *testing.T) {
	e := newEnv(t, func(f *tgfake.Fake, _ *Options) { // the first poll is New's
		f.FailNext("getUpdates", http.StatusUnauthorized, "Unauthorized", 0)
	})
	err := e.a.Run(t.Context(), newSink())
	if err == nil || !strings.Contains(err.Error(), "token was rejected") {
		t.Fatalf("Run = %v, want a token error", err)
	}
	if strings.Contains(err.Error(), testToken) {
		t.Errorf("error contains the token: %v", err)
	}
}

// ---- webhook ----

func TestWebhook(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hook := "http://" + ln.Addr().String() + "/tg/hook"
	e := newEnv(t, func(_ *tgfake.Fake, o *Options) {
		o.Webhook = &WebhookOptions{URL: hook, Listener: ln, SecretToken: "s3cret-Token_1"}
	})
	var fail sync.Map
	s := newSink()
	s.fail = func(in channels.Inbound) error {
		if _, ok := fail.Load(in.Text); ok {
			return errors.New("store unavailable")
		}
		return nil
	}
	e.run(t, s)
	if err := e.fake.WaitWebhook(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	if u, secret := e.fake.Webhook(); u != hook || secret != "s3cret-Token_1" {
		t.Errorf("webhook = %q %q, want %q with the secret", u, secret, hook)
	}
	if e.fake.Calls("deleteWebhook") != 0 {
		t.Error("deleteWebhook called in webhook mode")
	}

	// wrong or missing secret: 403, nothing delivered
	for _, secret := range []string{"", "wrong"} {
		body, _ := json.Marshal(map[string]any{"update_id": 1, "message": e.fake.NewMessage(42, 42, "eve", "forged")})
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, hook, bytes.NewReader(body))
		if secret != "" {
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("secret %q: status %d, want 403", secret, resp.StatusCode)
		}
	}

	// correct secret: delivered before the 200
	status, err := e.fake.PostWebhook(t.Context(), map[string]any{"message": e.fake.NewMessage(42, 42, "ada", "via hook")})
	if err != nil || status != http.StatusOK {
		t.Fatalf("PostWebhook = %d, %v; want 200", status, err)
	}
	select {
	case in := <-s.got:
		if in.Text != "via hook" {
			t.Errorf("delivered %q, want %q (the forged ones must not arrive)", in.Text, "via hook")
		}
	default:
		t.Fatal("200 answered before the message was delivered")
	}

	// Deliver fails: 500 so that Telegram retries
	fail.Store("unstored", true)
	status, err = e.fake.PostWebhook(t.Context(), map[string]any{"message": e.fake.NewMessage(42, 42, "ada", "unstored")})
	if err != nil || status != http.StatusInternalServerError {
		t.Errorf("PostWebhook with failing sink = %d, %v; want 500", status, err)
	}
}

// ---- sending ----

func TestSendLongReplyInTwoValidMessages(t *testing.T) {
	e := newEnv(t, nil)
	word := "lorem ipsum dolor sit amet "
	text := strings.Repeat(word, 6000/len(word)+1)[:6000]
	id, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: text, ReplyTo: "77"})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	sent := e.fake.Sent()
	if len(sent) != 2 {
		t.Fatalf("sent %d messages, want 2", len(sent))
	}
	var joined string
	for i, m := range sent {
		if m.ParseMode != "HTML" {
			t.Errorf("part %d parse_mode = %q, want HTML", i, m.ParseMode)
		}
		if n := tghtml.UTF16Len(m.Text); n > 4096 {
			t.Errorf("part %d has %d units", i, n)
		}
		joined += m.Text
	}
	if dropSpace(joined) != dropSpace(text) {
		t.Error("the two parts do not add up to the text")
	}
	if sent[0].ReplyTo != 77 || !sent[0].AllowNoReply || sent[1].ReplyTo != 0 {
		t.Errorf("reply: part 1 %d/%v, part 2 %d; want the first part to reply to 77 allowing no reply",
			sent[0].ReplyTo, sent[0].AllowNoReply, sent[1].ReplyTo)
	}
	if id != itoa(sent[1].MessageID) {
		t.Errorf("Send returned %q, want the last message id %d", id, sent[1].MessageID)
	}
}

func TestSendCodeBlockAsHTML(t *testing.T) {
	e := newEnv(t, nil)
	md := "Here:\n\n```go\nif a < b && c > d {\n\treturn\n}\n```\n\n**done**"
	if _, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: md}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	sent := e.fake.Sent()
	if len(sent) != 1 {
		t.Fatalf("sent %d messages, want 1", len(sent))
	}
	want := "Here:\n\n<pre><code class=\"language-go\">if a &lt; b &amp;&amp; c &gt; d {\n\treturn\n}</code></pre>\n\n<b>done</b>"
	if sent[0].Text != want || sent[0].ParseMode != "HTML" {
		t.Errorf("sent %q (%s)\nwant %q", sent[0].Text, sent[0].ParseMode, want)
	}
}

func TestSendHonoursRetryAfter(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.FailNext("sendMessage", http.StatusTooManyRequests, "", 3)
	if _, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: "hi"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got := e.sleep.recorded(); len(got) != 1 || got[0] != 3*time.Second {
		t.Errorf("waits = %v, want [3s] from retry_after", got)
	}
	if n := len(e.fake.Sent()); n != 1 {
		t.Errorf("recorded %d messages, want exactly 1", n)
	}
	if n := e.fake.Calls("sendMessage"); n != 2 {
		t.Errorf("sendMessage calls = %d, want 2", n)
	}
}

func TestDeleteMessage(t *testing.T) {
	e := newEnv(t, nil)
	id, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: "reading a web page…"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.a.Delete(t.Context(), "42", id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if d := e.fake.Deleted(); len(d) != 1 || itoa(d[0].MessageID) != id || d[0].ChatID != 42 || d[0].Text != "reading a web page…" {
		t.Errorf("deleted = %+v, want message %s", d, id)
	}
	if err := e.a.Delete(t.Context(), "42", id); err == nil {
		t.Error("delete of a deleted message: no error")
	}
	if !e.a.Fits(strings.Repeat("word ", 790)) || e.a.Fits(strings.Repeat("word ", 900)) {
		t.Error("Fits: want 3,950 characters in one message, 4,500 not")
	}
}

func TestSendRetriesServerErrorsBounded(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.FailNext("sendMessage", http.StatusInternalServerError, "", 0)
	e.fake.FailNextRaw("sendMessage", http.StatusBadGateway, "<html><body>502 Bad Gateway</body></html>")
	if _, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: "hi"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got := e.sleep.recorded(); len(got) != 2 || got[0] != time.Second || got[1] != 2*time.Second {
		t.Errorf("waits = %v, want [1s 2s]", got)
	}
	for range maxAttempts {
		e.fake.FailNext("sendMessage", http.StatusInternalServerError, "", 0)
	}
	_, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: "hi again"})
	if err == nil {
		t.Fatal("Send succeeded after only failures")
	}
	if n := e.fake.Calls("sendMessage"); n != 2+1+maxAttempts {
		t.Errorf("sendMessage calls = %d, want %d (bounded attempts)", n, 3+maxAttempts)
	}
}

// A proxy's HTML page with a 5xx is reported with its status and the start
// of the page, not as tgbotapi's JSON decode error, and retried as before.
// A page that echoes the request URL does not leak the token.
func TestSendNamesStatusOfAProxyPage(t *testing.T) {
	e := newEnv(t, nil)
	page := "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<p>POST /bot" + testToken + "/sendMessage</p>\r\n" +
		"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
	for range maxAttempts {
		e.fake.FailNextRaw("sendMessage", http.StatusBadGateway, page)
	}
	_, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: "hi"})
	if err == nil {
		t.Fatal("Send succeeded after only 502 pages")
	}
	const want = `telegram: send part 1/1 to chat 42: telegram: sendMessage: HTTP 502 Bad Gateway (text/html, not a Bot API answer): ` +
		`"<html> <head><title>502 Bad Gateway</title></head> <body> <p>POST /bot<redacted>/sendMessage</p> <center><h1>502 Bad Gat…"`
	if err.Error() != want {
		t.Errorf("Send error:\n%v\nwant\n%s", err, want)
	}
	var he *httpError
	if !errors.As(err, &he) || he.StatusCode != http.StatusBadGateway {
		t.Errorf("Send error %v is not an *httpError with status 502", err)
	}
	if n := e.fake.Calls("sendMessage"); n != maxAttempts {
		t.Errorf("sendMessage calls = %d, want %d (retried as a server error)", n, maxAttempts)
	}
	if got := e.sleep.recorded(); !slices.Equal(got, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}) {
		t.Errorf("waits = %v, want [1s 2s 4s]", got)
	}
	logs := e.logs.String()
	if n := strings.Count(logs, "call failed, retrying"); n != maxAttempts-1 || !strings.Contains(logs, "HTTP 502 Bad Gateway") || strings.Contains(logs, "invalid character") {
		t.Errorf("the retries are not logged with the status:\n%s", logs)
	}
}

// The Bot API's own errors keep going to tgbotapi, even with an HTML
// content type or a 5xx status: the caller still gets a *tgbotapi.Error
// with its code and retry_after.
func TestJSONErrorsStayTyped(t *testing.T) {
	tests := []struct {
		status     int
		body       string
		wantCode   int
		retryAfter int
	}{
		{http.StatusTooManyRequests, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 61","parameters":{"retry_after":61}}`, 429, 61},
		{http.StatusBadRequest, ` {"ok":false,"error_code":400,"description":"Bad Request: chat not found"}` + "\n", 400, 0},
		{http.StatusBadGateway, `{"ok":false,"error_code":502,"description":"Bad Gateway"}`, 502, 0},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			e := newEnv(t, nil)
			for range maxAttempts {
				e.fake.FailNextRaw("sendMessage", tt.status, tt.body)
			}
			_, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: "hi"})
			var apiErr *tgbotapi.Error
			if !errors.As(err, &apiErr) || apiErr.Code != tt.wantCode || apiErr.RetryAfter != tt.retryAfter {
				t.Fatalf("Send = %v, want a *tgbotapi.Error %d retry_after %d", err, tt.wantCode, tt.retryAfter)
			}
		})
	}
}

// The poll loop logs a proxy's 502 page with its status and backs off as
// for any server error, then delivers once the server answers again.
func TestPollNamesStatusOfAProxyPage(t *testing.T) {
	e := newEnv(t, func(f *tgfake.Fake, _ *Options) { // the first poll is New's
		f.FailNextRaw("getUpdates", http.StatusBadGateway, "<html><body><h1>502 Bad Gateway</h1></body></html>")
		f.FailNextRaw("getUpdates", http.StatusServiceUnavailable, "Service Unavailable")
	})
	s := newSink()
	e.run(t, s)
	e.fake.PushText(42, 42, "ada", "after the outage")
	if in := s.next(t); in.Text != "after the outage" {
		t.Errorf("delivered %q", in.Text)
	}
	if w := e.sleep.recorded(); len(w) < 2 || w[0] != time.Second || w[1] != 2*time.Second {
		t.Errorf("waits = %v, want the 1s, 2s backoff", w)
	}
	logs := e.logs.String()
	for _, want := range []string{
		`HTTP 502 Bad Gateway (text/html, not a Bot API answer): \"<html><body><h1>502 Bad Gateway</h1></body></html>\"`,
		`HTTP 503 Service Unavailable (text/html, not a Bot API answer): \"Service Unavailable\"`,
	} {
		if !logHasLine(logs, "getUpdates failed, retrying", want) {
			t.Errorf("no getUpdates failure logged with %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "invalid character") {
		t.Errorf("the log still shows the decode error:\n%s", logs)
	}
}

func logHasLine(logs string, texts ...string) bool {
	for line := range strings.Lines(logs) {
		if !slices.ContainsFunc(texts, func(s string) bool { return !strings.Contains(line, s) }) {
			return true
		}
	}
	return false
}

func TestSendDoesNotRetryBadRequest(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.FailNext("sendMessage", http.StatusForbidden, "", 0)
	_, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: "hi"})
	var apiErr *tgbotapi.Error
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusForbidden {
		t.Fatalf("Send = %v, want a 403 *tgbotapi.Error", err)
	}
	if n := e.fake.Calls("sendMessage"); n != 1 {
		t.Errorf("sendMessage calls = %d, want 1", n)
	}
}

func TestSendFallsBackToPlainText(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.FailNext("sendMessage", http.StatusBadRequest, `Bad Request: can't parse entities: Unsupported start tag "x" at byte offset 0`, 0)
	if _, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: "**bold** & `code`"}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	sent := e.fake.Sent()
	if len(sent) != 1 || sent[0].ParseMode != "" || sent[0].Text != "bold & code" {
		t.Errorf("sent %+v, want one plain-text message %q", sent, "bold & code")
	}
}

func TestSendEmptyIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	for _, text := range []string{"", "  \n ", "```\n```"} {
		if _, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: text}); err == nil {
			t.Errorf("Send(%q) succeeded, want an error", text)
		}
	}
	if n := e.fake.Calls("sendMessage"); n != 0 {
		t.Errorf("sendMessage calls = %d, want 0", n)
	}
}

func TestCommandsRegistered(t *testing.T) {
	e := newEnv(t, nil)
	var names []string
	for _, c := range e.fake.Commands() {
		names = append(names, c.Command)
	}
	if got := strings.Join(names, ","); got != "start,help,new,stop,status" {
		t.Errorf("commands = %s", got)
	}
}

func TestWorksWithoutOptionalMethods(t *testing.T) {
	e := newEnv(t, func(f *tgfake.Fake, _ *Options) {
		f.Disable("setMyCommands")
		f.Disable("sendChatAction")
		f.Disable("setMessageReaction")
	})
	for range 3 {
		if err := e.a.Typing(t.Context(), "42"); err != nil {
			t.Fatalf("Typing: %v", err)
		}
	}
	if n := e.fake.Calls("sendChatAction"); n != 1 {
		t.Errorf("sendChatAction calls = %d, want 1 (then disabled)", n)
	}
	id, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: "still works"})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	for range 2 {
		if err := e.a.React(t.Context(), "42", id, "👍"); !errors.Is(err, ErrReactionsUnsupported) {
			t.Errorf("React = %v, want ErrReactionsUnsupported", err)
		}
	}
	if n := e.fake.Calls("setMessageReaction"); n != 1 {
		t.Errorf("setMessageReaction calls = %d, want 1", n)
	}
	s := newSink()
	e.run(t, s)
	e.fake.PushText(42, 42, "ada", "hello")
	if in := s.next(t); in.Text != "hello" {
		t.Errorf("delivered %q", in.Text)
	}
	logs := e.logs.String()
	for _, want := range []string{"could not register bot commands", "typing indicator disabled", "reactions disabled"} {
		if n := strings.Count(logs, want); n != 1 {
			t.Errorf("log %q appears %d times, want once", want, n)
		}
	}
}

func TestTypingSendsChatAction(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.FailNext("sendChatAction", http.StatusForbidden, "", 0) // blocked by one user: not a reason to disable
	if err := e.a.Typing(t.Context(), "42"); err != nil {
		t.Fatalf("Typing: %v", err)
	}
	if err := e.a.Typing(t.Context(), "43"); err != nil {
		t.Fatalf("Typing: %v", err)
	}
	reqs := e.fake.Requests("sendChatAction")
	if len(reqs) != 2 || reqs[1].Get("chat_id") != "43" || reqs[1].Get("action") != "typing" {
		t.Errorf("requests = %v, want a second typing action for chat 43", reqs)
	}
}

func TestReact(t *testing.T) {
	e := newEnv(t, nil)
	id, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: "rate me"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.a.React(t.Context(), "42", id, "❤️"); err != nil {
		t.Fatalf("React: %v", err)
	}
	if r := e.fake.Reactions(); len(r) != 1 || r[0].Emoji[0] != "❤" || itoa(r[0].MessageID) != id {
		t.Errorf("reactions = %+v, want ❤ on %s", r, id)
	}
	err = e.a.React(t.Context(), "42", id, "🦄")
	if err == nil || !strings.Contains(err.Error(), "does not allow this emoji") {
		t.Errorf("React(🦄) = %v, want an explanation", err)
	}
	err = e.a.React(t.Context(), "42", "99999", "👍")
	if err == nil || errors.Is(err, ErrReactionsUnsupported) {
		t.Errorf("React on an unknown message = %v, want a plain error", err)
	}
	if n := strings.Count(e.logs.String(), "reaction failed"); n != 1 {
		t.Errorf("reaction failures logged %d times, want once", n)
	}
}

func TestEdit(t *testing.T) {
	e := newEnv(t, nil)
	id, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.a.Edit(t.Context(), "42", id, "**final**"); err != nil {
		t.Fatalf("Edit: %v", err)
	}
	if err := e.a.Edit(t.Context(), "42", id, "**final**"); err != nil {
		t.Errorf("Edit with unchanged text = %v, want nil", err)
	}
	edits := e.fake.Edits()
	if len(edits) != 1 || edits[0].Text != "<b>final</b>" || edits[0].ParseMode != "HTML" {
		t.Errorf("edits = %+v", edits)
	}
	if err := e.a.Edit(t.Context(), "42", "4242", "x"); err == nil {
		t.Error("editing an unknown message succeeded")
	}
}

func TestSendFile(t *testing.T) {
	e := newEnv(t, nil)
	path := filepath.Join(t.TempDir(), "report.csv")
	if err := os.WriteFile(path, []byte("a,b\n1,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.a.SendFile(t.Context(), "42", channels.OutboundFile{Path: path, Caption: "the **report**"}); err != nil {
		t.Fatalf("SendFile(path): %v", err)
	}
	if _, err := e.a.SendFile(t.Context(), "42", channels.OutboundFile{URL: "https://example.com/cat.jpg", Photo: true}); err != nil {
		t.Fatalf("SendFile(url): %v", err)
	}
	sent := e.fake.Sent()
	if len(sent) != 2 {
		t.Fatalf("sent %d, want 2", len(sent))
	}
	if d := sent[0]; d.Method != "sendDocument" || d.FileName != "report.csv" || string(d.FileData) != "a,b\n1,2\n" || d.Text != "the <b>report</b>" {
		t.Errorf("document = %+v", d)
	}
	if p := sent[1]; p.Method != "sendPhoto" || p.FileRef != "https://example.com/cat.jpg" {
		t.Errorf("photo = %+v", p)
	}
	if _, err := e.a.SendFile(t.Context(), "42", channels.OutboundFile{}); err == nil {
		t.Error("SendFile without Path or URL succeeded")
	}
}

// ---- the token stays secret ----

func TestTokenNeverInErrors(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close() // nothing listens there any more

	_, err := New(t.Context(), Options{Token: testToken, APIEndpoint: deadURL, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		t.Fatal("New against a dead server succeeded")
	}
	var ue *url.Error
	if strings.Contains(err.Error(), testToken) || (errors.As(err, &ue) && strings.Contains(ue.URL, testToken)) {
		t.Errorf("New error leaks the token: %v", err)
	}
	if !strings.Contains(err.Error(), "<redacted>") {
		t.Errorf("New error = %v, want the URL with the token redacted", err)
	}

	// An adapter whose server goes away: Send, Typing, React, Edit and Run.
	// New's first poll (to the server still there) ends with this update,
	// so the loop's next poll meets the dead server.
	e := newEnv(t, func(f *tgfake.Fake, _ *Options) { f.PushText(42, 42, "ada", "before it went away") })
	e.a.bot.SetAPIEndpoint(deadURL + "/bot%s/%s")
	_, err = e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: "hi"})
	if err == nil || strings.Contains(err.Error(), testToken) {
		t.Errorf("Send error = %v, want an error without the token", err)
	}
	if errors.As(err, &ue) && strings.Contains(ue.URL, testToken) {
		t.Errorf("the *url.Error in the chain holds the token: %q", ue.URL)
	}
	if err := e.a.Edit(t.Context(), "42", "1", "x"); err == nil || strings.Contains(err.Error(), testToken) {
		t.Errorf("Edit error = %v", err)
	}
	if err := e.a.React(t.Context(), "42", "1", "👍"); err == nil || strings.Contains(err.Error(), testToken) {
		t.Errorf("React error = %v", err)
	}
	_ = e.a.Typing(t.Context(), "42")
	_, err = e.a.download(t.Context(), "f", 0, 10)
	if err == nil || strings.Contains(err.Error(), testToken) {
		t.Errorf("download error = %v", err)
	}
	e.sleep.block = true
	for len(e.sleep.calls) > 0 { // forget the waits of the retries above
		<-e.sleep.calls
	}
	e.run(t, newSink())
	select { // wait until the poll loop failed and logged at least once
	case <-e.sleep.calls:
	case <-waitCtx(t).Done():
		t.Fatal("the poll loop never backed off")
	}
	if !strings.Contains(e.logs.String(), "getUpdates failed") || !strings.Contains(e.logs.String(), "<redacted>") {
		t.Errorf("poll failure not logged with a redacted URL:\n%s", e.logs.String())
	}
	// newEnv's cleanup checks the logs for the token
}

func TestFileDownloadErrorRedacted(t *testing.T) {
	e := newEnv(t, nil)
	// getFile answers a path the file route does not serve: the download fails
	e.fake.AddFile("ghost", "photos/ghost.jpg", []byte("x"))
	e.a.fileURL = "http://127.0.0.1:1/file/bot" // nothing listens on port 1
	_, err := e.a.download(t.Context(), "ghost", 0, 100)
	if err == nil {
		t.Fatal("download succeeded")
	}
	if strings.Contains(err.Error(), testToken) || !strings.Contains(err.Error(), "<redacted>") {
		t.Errorf("download error = %v, want the token redacted", err)
	}
}

func TestShutdownConfirmsDeliveredUpdates(t *testing.T) {
	e := newEnv(t, nil)
	upd, _ := e.fake.PushText(42, 42, "ada", "last words")
	ctx, cancel := context.WithCancel(t.Context())
	s := newSink()
	s.fail = func(channels.Inbound) error {
		cancel() // shut down right after this delivery: no further poll will confirm it
		return nil
	}
	if err := e.a.Run(ctx, s); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if in := s.next(t); in.Text != "last words" {
		t.Fatalf("delivered %q", in.Text)
	}
	offs := e.fake.Offsets()
	if len(offs) == 0 || offs[len(offs)-1] != upd+1 {
		t.Errorf("offsets = %v, want a final confirmation of %d", offs, upd+1)
	}
	if n := e.fake.Pending(); n != 0 {
		t.Errorf("pending = %d, want 0: a restart would see the update again", n)
	}
}

// ---- buttons ----

var approveDeny = []channels.Button{{Label: "Approve", Action: "approve:12"}, {Label: "Deny", Action: "deny:12"}}

var approveDenyRow = [][]tgfake.InlineButton{{
	{Text: "Approve", CallbackData: "approve:12"}, {Text: "Deny", CallbackData: "deny:12"},
}}

// callbackOf returns the fake's record of the press pushed as update upd.
func callbackOf(t *testing.T, f *tgfake.Fake, upd int) tgfake.Callback {
	t.Helper()
	for _, c := range f.Callbacks() {
		if c.UpdateID == upd {
			return c
		}
	}
	t.Fatalf("no callback query in update %d", upd)
	return tgfake.Callback{}
}

func TestAskShowsButtonsAndPressArrivesOnce(t *testing.T) {
	e := newEnv(t, nil)
	s := newSink()
	e.run(t, s)
	e.fake.PushText(-1009, 42, "ada", "clean up, please", tgfake.InGroup("Forum"), tgfake.InTopic(7))
	asked := s.next(t)

	id, err := e.a.Ask(t.Context(), channels.Outbound{ChatID: asked.ChatID, Text: "Run **rm -rf build**?"}, approveDeny)
	if err != nil {
		t.Fatalf("Ask: %v", err)
	}
	sent := e.fake.Sent()
	if len(sent) != 1 || sent[0].MessageThreadID != 7 || sent[0].Text != "Run <b>rm -rf build</b>?" || itoa(sent[0].MessageID) != id {
		t.Fatalf("sent = %+v, want one HTML message in topic 7 with id %s", sent, id)
	}
	if got := sent[0].Buttons(); !reflect.DeepEqual(got, approveDenyRow) {
		t.Errorf("buttons = %+v, want %+v", got, approveDenyRow)
	}

	// Another member of the group presses Approve.
	upd := e.fake.PushCallback(-1009, 43, "charles", sent[0].MessageID, "approve:12")
	cb := callbackOf(t, e.fake, upd)
	in := s.next(t)
	if in.Time.IsZero() {
		t.Error("press without a time")
	}
	in.Time = time.Time{}
	want := channels.Inbound{
		Channel: "telegram", ChatID: "-1009:topic:7", ChatType: channels.Group, ChatTitle: "Forum / Topic",
		MessageID: "cb:" + cb.ID, UserID: "43", UserName: "charles", DisplayName: "Charles 43",
		Mentioned: true, Action: "approve:12",
		Quote: &channels.Quote{MessageID: id, Author: "@switchboard_bot", Text: "Run rm -rf build?", FromBot: true},
	}
	if !equalInbound(in, want) {
		t.Errorf("press delivered as\n%+v\nwant\n%+v", in, want)
	}
	if in.ChatID != asked.ChatID || in.ChatTitle != asked.ChatTitle {
		t.Errorf("press in chat %q %q, the question was asked in %q %q", in.ChatID, in.ChatTitle, asked.ChatID, asked.ChatTitle)
	}
	if err := e.fake.WaitAnswered(waitCtx(t), cb.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.fake.WaitOffset(waitCtx(t), upd+1); err != nil {
		t.Fatal(err)
	}

	// Exactly once: the next delivery is the next message, not the press again.
	e.fake.PushText(-1009, 42, "ada", "thanks", tgfake.InGroup("Forum"), tgfake.InTopic(7))
	if next := s.next(t); next.Text != "thanks" || next.Action != "" {
		t.Errorf("after the press came %+v, want the text message", next)
	}
	if a := e.fake.CallbackAnswers(); len(a) != 1 || a[0].CallbackQueryID != cb.ID {
		t.Errorf("answers = %+v, want one for %s", a, cb.ID)
	}
	for _, r := range e.fake.Requests("getUpdates") {
		if !strings.Contains(r.Get("allowed_updates"), `"callback_query"`) {
			t.Fatalf("getUpdates allowed_updates = %s, want callback_query among them", r.Get("allowed_updates"))
		}
	}
}

func TestPressAnsweredOnlyAfterDelivery(t *testing.T) {
	e := newEnv(t, nil)
	id, err := e.a.Ask(t.Context(), channels.Outbound{ChatID: "42", Text: "Deploy?"}, approveDeny)
	if err != nil {
		t.Fatal(err)
	}
	msgID, _ := strconv.Atoi(id)
	upd := e.fake.PushCallback(42, 42, "ada", msgID, "deny:12")
	var (
		mu       sync.Mutex
		attempts int
	)
	s := newSink()
	s.fail = func(in channels.Inbound) error {
		mu.Lock()
		defer mu.Unlock()
		attempts++
		if n := len(e.fake.CallbackAnswers()); n != 0 {
			t.Errorf("delivery attempt %d: the press was already answered %d times", attempts, n)
		}
		if attempts == 1 {
			return errors.New("database is locked")
		}
		return nil
	}
	e.run(t, s)
	in := s.next(t)
	cb := callbackOf(t, e.fake, upd)
	if in.Action != "deny:12" || in.MessageID != "cb:"+cb.ID || in.ChatType != channels.DM {
		t.Errorf("delivered %+v", in)
	}
	if err := e.fake.WaitAnswered(waitCtx(t), cb.ID); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if attempts != 2 {
		t.Errorf("delivery attempts = %d, want 2", attempts)
	}
	if n := e.fake.Calls("answerCallbackQuery"); n != 1 {
		t.Errorf("answerCallbackQuery calls = %d, want 1 (not for the failed delivery)", n)
	}
}

func TestAskSplitsWithButtonsOnLastPart(t *testing.T) {
	e := newEnv(t, nil)
	word := "lorem ipsum dolor sit amet "
	text := strings.Repeat(word, 6000/len(word)+1)[:6000]
	id, err := e.a.Ask(t.Context(), channels.Outbound{ChatID: "42", Text: text, ReplyTo: "77"}, approveDeny)
	if err != nil {
		t.Fatalf("Ask: %v", err)
	}
	sent := e.fake.Sent()
	if len(sent) != 2 {
		t.Fatalf("sent %d messages, want 2", len(sent))
	}
	if sent[0].Buttons() != nil || sent[0].ReplyTo != 77 {
		t.Errorf("first part: buttons %+v, reply to %d; want no buttons, reply to 77", sent[0].Buttons(), sent[0].ReplyTo)
	}
	if got := sent[1].Buttons(); !reflect.DeepEqual(got, approveDenyRow) || sent[1].ReplyTo != 0 {
		t.Errorf("last part: buttons %+v, reply to %d; want the buttons and no reply", got, sent[1].ReplyTo)
	}
	if id != itoa(sent[1].MessageID) {
		t.Errorf("Ask returned %s, want the last part's id %d", id, sent[1].MessageID)
	}
}

func TestAskKeepsButtonsInPlainTextFallback(t *testing.T) {
	e := newEnv(t, nil)
	e.fake.FailNext("sendMessage", http.StatusBadRequest, `Bad Request: can't parse entities: Unsupported start tag "x" at byte offset 0`, 0)
	if _, err := e.a.Ask(t.Context(), channels.Outbound{ChatID: "42", Text: "**Deploy**?"}, approveDeny); err != nil {
		t.Fatal(err)
	}
	sent := e.fake.Sent()
	if len(sent) != 1 || sent[0].ParseMode != "" || !reflect.DeepEqual(sent[0].Buttons(), approveDenyRow) {
		t.Errorf("sent %+v, want one plain-text message with the buttons", sent)
	}
}

func TestAskRefusesBadButtons(t *testing.T) {
	e := newEnv(t, nil)
	tests := []struct {
		name    string
		buttons []channels.Button
		wantErr string
	}{
		{"action over 64 bytes", []channels.Button{{Label: "Go", Action: strings.Repeat("a", 65)}}, "65 bytes, Telegram allows at most 64"},
		{"64 characters but 66 bytes", []channels.Button{{Label: "Go", Action: strings.Repeat("é", 33)}}, "66 bytes"},
		{"no action", []channels.Button{{Label: "Go"}}, "has no action"},
		{"no label", []channels.Button{{Label: " ", Action: "go"}}, "has no label"},
		{"same action twice", []channels.Button{{Label: "Yes", Action: "go"}, {Label: "Sure", Action: "go"}}, "used twice"},
		{"no buttons", nil, "no buttons"},
	}
	for _, tt := range tests {
		_, err := e.a.Ask(t.Context(), channels.Outbound{ChatID: "42", Text: "Deploy?"}, tt.buttons)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: Ask = %v, want an error with %q", tt.name, err, tt.wantErr)
		}
	}
	if n := e.fake.Calls("sendMessage"); n != 0 {
		t.Errorf("sendMessage calls = %d, want 0: nothing is sent with bad buttons", n)
	}
	longest := strings.Repeat("é", 32) // 64 bytes
	if _, err := e.a.Ask(t.Context(), channels.Outbound{ChatID: "42", Text: "Deploy?"}, []channels.Button{{Label: "Go", Action: longest}}); err != nil {
		t.Fatalf("Ask with a 64-byte action: %v", err)
	}
	if b := e.fake.Sent()[0].Buttons(); len(b) != 1 || b[0][0].CallbackData != longest {
		t.Errorf("buttons = %+v, want the 64-byte action as callback_data", b)
	}
}

func TestPressAnswerFailureIsLoggedNotFatal(t *testing.T) {
	e := newEnv(t, nil)
	id, err := e.a.Ask(t.Context(), channels.Outbound{ChatID: "42", Text: "Deploy?"}, approveDeny)
	if err != nil {
		t.Fatal(err)
	}
	msgID, _ := strconv.Atoi(id)
	e.fake.FailNext("answerCallbackQuery", http.StatusBadRequest, "Bad Request: query is too old and response timeout expired or query ID is invalid", 0)
	e.fake.FailNextRaw("answerCallbackQuery", http.StatusBadGateway, "<html>502 Bad Gateway</html>")
	s := newSink()
	e.run(t, s)
	e.fake.PushCallback(42, 42, "ada", msgID, "approve:12")
	e.fake.PushCallback(42, 42, "ada", msgID, "deny:12")
	upd, _ := e.fake.PushText(42, 42, "ada", "still there?")
	for _, want := range []string{"approve:12", "deny:12"} {
		if in := s.next(t); in.Action != want {
			t.Errorf("delivered action %q, want %q", in.Action, want)
		}
	}
	if in := s.next(t); in.Text != "still there?" {
		t.Errorf("delivered %+v, want the text after the presses", in)
	}
	if err := e.fake.WaitOffset(waitCtx(t), upd+1); err != nil {
		t.Fatal(err)
	}
	if n := e.fake.Calls("answerCallbackQuery"); n != 2 {
		t.Errorf("answerCallbackQuery calls = %d, want 2 (one per press, no retries)", n)
	}
	if n := strings.Count(e.logs.String(), "could not answer a button press"); n != 2 {
		t.Errorf("answer failures logged %d times, want 2:\n%s", n, e.logs.String())
	}
	// Run goes on and returns nil at cleanup (checked by e.run).
}

func TestUnusablePressesAreAnsweredNotDelivered(t *testing.T) {
	e := newEnv(t, nil)
	inline := e.fake.PushUpdate(map[string]any{"callback_query": map[string]any{
		"id": "901", "chat_instance": "1", "inline_message_id": "AAEAAA", "data": "approve:1",
		"from": map[string]any{"id": 42, "is_bot": false, "first_name": "Ada"}}})
	game := e.fake.PushUpdate(map[string]any{"callback_query": map[string]any{
		"id": "902", "chat_instance": "1", "game_short_name": "tetris",
		"from":    map[string]any{"id": 42, "is_bot": false, "first_name": "Ada"},
		"message": map[string]any{"message_id": 5, "date": 1, "chat": map[string]any{"id": 42, "type": "private"}}}})
	upd, _ := e.fake.PushText(42, 42, "ada", "hello")
	s := newSink()
	e.run(t, s)
	if in := s.next(t); in.Text != "hello" {
		t.Errorf("delivered %+v, want only the text message", in)
	}
	if err := e.fake.WaitOffset(waitCtx(t), upd+1); err != nil {
		t.Fatal(err)
	}
	for _, u := range []int{inline, game} {
		if c := callbackOf(t, e.fake, u); !c.Answered {
			t.Errorf("press %s (update %d) not answered", c.ID, u)
		}
	}
	if n := strings.Count(e.logs.String(), "skipping a button press"); n != 2 {
		t.Errorf("skipped presses logged %d times, want 2", n)
	}
}

// TestBatchDeliversChatsAtOnceInOrder: the updates of one poll are handed
// over chat by chat at the same time (a chat whose delivery waits does not
// hold up another chat), each chat's in order, and a failed delivery makes
// the next poll start at that update.
func TestBatchDeliversChatsAtOnceInOrder(t *testing.T) {
	t.Run("a waiting chat does not hold up another", func(t *testing.T) {
		e := newEnv(t, nil)
		e.fake.PushText(1, 1, "ada", "a1")
		e.fake.PushText(2, 2, "bob", "b1")
		e.fake.PushText(1, 1, "ada", "a2")
		bobIn := make(chan struct{})
		var (
			mu  sync.Mutex
			got []string
		)
		s := newSink()
		s.fail = func(in channels.Inbound) error {
			switch in.Text {
			case "a1": // delivered only once bob's message, later in the batch, is
				select {
				case <-bobIn:
				case <-waitCtx(t).Done():
					return errors.New("b1 was not delivered while a1 waited")
				}
			}
			mu.Lock()
			got = append(got, in.Text)
			mu.Unlock()
			if in.Text == "b1" {
				close(bobIn) // after b1 is recorded: a1 may record itself at once
			}
			return nil
		}
		e.run(t, s)
		for range 3 {
			s.next(t)
		}
		mu.Lock()
		defer mu.Unlock()
		if want := []string{"b1", "a1", "a2"}; !slices.Equal(got, want) {
			t.Errorf("delivered %q, want %q (ada's in order, after bob's)", got, want)
		}
	})
	t.Run("a failure restarts the next poll at the failed update", func(t *testing.T) {
		e := newEnv(t, nil)
		a1, _ := e.fake.PushText(1, 1, "ada", "a1")
		e.fake.PushText(2, 2, "bob", "b1")
		last, _ := e.fake.PushText(1, 1, "ada", "a2")
		var (
			mu       sync.Mutex
			got      []string
			failOnce = true
		)
		s := newSink()
		s.fail = func(in channels.Inbound) error {
			mu.Lock()
			defer mu.Unlock()
			if in.Text == "a1" && failOnce {
				failOnce = false
				return errors.New("database is locked")
			}
			got = append(got, in.Text)
			return nil
		}
		e.run(t, s)
		for range 4 { // b1 twice: delivered, then again with the retried poll
			s.next(t)
		}
		if err := e.fake.WaitOffset(waitCtx(t), last+1); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		var ada []string
		for _, g := range got {
			if strings.HasPrefix(g, "a") {
				ada = append(ada, g)
			}
		}
		if !slices.Equal(ada, []string{"a1", "a2"}) || len(got) != 4 {
			t.Errorf("delivered %q, want a1 then a2 once each and b1 twice", got)
		}
		for _, o := range e.fake.Offsets() {
			if o > a1 && o <= last {
				t.Errorf("offset %d confirmed updates past the failed a1 (%d)", o, a1)
			}
		}
	})
}

// A send that fails after the retries for a reason on Telegram's side (a
// 5xx page, a 5xx answer, a connection reset, a retry_after longer than we
// wait) is marked channels.ErrUnavailable, so the router keeps the reply
// for later; one Telegram refuses for good (403 blocked, 400 chat not
// found) is not.
func TestSendFailuresClassified(t *testing.T) {
	tests := []struct {
		name        string
		arm         func(f *tgfake.Fake)
		unavailable bool
	}{
		{"502 page", func(f *tgfake.Fake) { f.FailNextRaw("sendMessage", http.StatusBadGateway, "<html>502</html>") }, true},
		{"500", func(f *tgfake.Fake) { f.FailNext("sendMessage", http.StatusInternalServerError, "", 0) }, true},
		{"reset", func(f *tgfake.Fake) { f.ResetNext("sendMessage") }, true},
		{"429 too long", func(f *tgfake.Fake) { f.FailNext("sendMessage", http.StatusTooManyRequests, "", 120) }, true},
		{"403 blocked", func(f *tgfake.Fake) { f.FailNext("sendMessage", http.StatusForbidden, "", 0) }, false},
		{"400 chat not found", func(f *tgfake.Fake) {
			f.FailNext("sendMessage", http.StatusBadRequest, "Bad Request: chat not found", 0)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			for range maxAttempts {
				tt.arm(e.fake)
			}
			_, err := e.a.Send(t.Context(), channels.Outbound{ChatID: "42", Text: "hi"})
			if err == nil {
				t.Fatal("Send succeeded")
			}
			if got := errors.Is(err, channels.ErrUnavailable); got != tt.unavailable {
				t.Errorf("errors.Is(%v, ErrUnavailable) = %v, want %v", err, got, tt.unavailable)
			}
		})
	}
}
