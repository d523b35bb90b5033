package slack

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/slackfake"
)

// sink records what the adapter delivers and, like the store's intake,
// takes a MessageID once. fail > 0 refuses that many deliveries first.
type sink struct {
	mu       sync.Mutex
	calls    int
	fail     int
	got      []channels.Inbound
	seen     map[string]bool
	changed  chan struct{}
	deferred []func()
}

func newSink() *sink { return &sink{seen: map[string]bool{}, changed: make(chan struct{})} }

func (s *sink) Deliver(_ context.Context, in channels.Inbound) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	defer s.notifyLocked()
	if s.fail > 0 {
		s.fail--
		return errors.New("store unavailable")
	}
	if !s.seen[in.MessageID] {
		s.seen[in.MessageID] = true
		s.got = append(s.got, in)
	}
	return nil
}

func (s *sink) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// wait waits until cond holds over the messages taken in.
func (s *sink) wait(t *testing.T, what string, cond func(got []channels.Inbound, calls int) bool) []channels.Inbound {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		s.mu.Lock()
		got, calls, ch := append([]channels.Inbound(nil), s.got...), s.calls, s.changed
		s.mu.Unlock()
		if cond(got, calls) {
			return got
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s; got %d messages in %d deliveries: %+v", what, len(got), calls, got)
		}
	}
}

func (s *sink) count(n int) func([]channels.Inbound, int) bool {
	return func(got []channels.Inbound, _ int) bool { return len(got) >= n }
}

// quietLog keeps the adapter's log out of the test output unless -v.
func quietLog() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// sleeps records the waits of the adapter's retries without waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// newAdapter makes an adapter on the fake, retries not waiting.
func newAdapter(t *testing.T, f *slackfake.Fake, edit func(*Options)) (*Adapter, *sleeps) {
	t.Helper()
	sl := &sleeps{}
	o := Options{BotToken: slackfake.BotToken, AppToken: slackfake.AppToken, APIURL: f.APIURL(), Logger: quietLog(), Sleep: sl.sleep}
	if edit != nil {
		edit(&o)
	}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a, sl
}

// run runs a until the test ends, and waits until it is connected.
func run(t *testing.T, f *slackfake.Fake, a *Adapter, s channels.Sink) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, s) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	if a.eventsPath == "" {
		wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer wcancel()
		if err := f.WaitConnected(wctx, 1); err != nil {
			t.Fatalf("never connected: %v", err)
		}
	}
}

func waitAcked(t *testing.T, f *slackfake.Fake, ts string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ids := f.EnvelopesOf(ts)
	if len(ids) == 0 {
		t.Fatalf("no envelope for %s", ts)
	}
	for _, id := range ids {
		if err := f.WaitAcked(ctx, id); err != nil {
			t.Fatalf("envelope %s of %s not acked: %v", id, ts, err)
		}
	}
}

func TestDMIsDeliveredThenAcked(t *testing.T) {
	f := slackfake.New(t)
	a, _ := newAdapter(t, f, nil)
	s := newSink()
	run(t, f, a, s)
	ts := f.Say(slackfake.UserMessage{Channel: "D1", User: "U1", Text: "hello *there*"})
	got := s.wait(t, "the DM", s.count(1))
	in := got[0]
	if in.ChatID != "D1" || in.ChatType != channels.DM || in.MessageID != ts || in.UserID != "U1" || in.Text != "hello *there*" ||
		!in.Mentioned || in.Channel != "slack" || in.UserName == "" {
		t.Errorf("inbound = %+v", in)
	}
	waitAcked(t, f, ts)
	if !a.Connected() {
		t.Error("not connected after hello")
	}
}

func TestEnvelopeAckedOnlyAfterDeliver(t *testing.T) {
	f := slackfake.New(t)
	f.SetRedelivery(50*time.Millisecond, 0)
	a, _ := newAdapter(t, f, nil)
	s := newSink()
	s.fail = 2 // the store refuses twice: no ack, Slack sends it again
	run(t, f, a, s)
	ts := f.Say(slackfake.UserMessage{Channel: "D1", User: "U1", Text: "keep me"})
	s.wait(t, "the message after two refusals", func(got []channels.Inbound, calls int) bool { return len(got) == 1 && calls >= 3 })
	waitAcked(t, f, ts)
	var retried bool
	for _, e := range f.Envelopes() {
		if e.Sent > 1 {
			retried = true
		}
	}
	if !retried {
		t.Error("the envelope was never sent again: it was acked before Deliver succeeded")
	}
	// A redelivery after the ack (Slack's at-least-once) is the same message.
	s.mu.Lock()
	n := len(s.got)
	s.mu.Unlock()
	if n != 1 {
		t.Errorf("%d messages taken in, want 1", n)
	}
}

func TestRedeliveredEnvelopeIsOneMessage(t *testing.T) {
	f := slackfake.New(t)
	f.SetRedelivery(time.Hour, 0)
	a, _ := newAdapter(t, f, nil)
	s := newSink()
	run(t, f, a, s)
	// A channel mention comes as message + app_mention: two envelopes,
	// one message.
	ts := f.Say(slackfake.UserMessage{Channel: "C1", User: "U1", Text: "<@UBOT> once"})
	waitAcked(t, f, ts)
	got := s.wait(t, "one message", func(got []channels.Inbound, calls int) bool { return calls >= 2 })
	if len(got) != 1 || got[0].MessageID != ts {
		t.Fatalf("got %+v", got)
	}
	// Connection dropped: the fake sends unacked envelopes again on the
	// new connection; the adapter reconnects by itself.
	f.DropConnections()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := f.WaitConnected(ctx, 2); err != nil {
		t.Fatalf("no reconnect: %v", err)
	}
	ts2 := f.Say(slackfake.UserMessage{Channel: "D1", User: "U1", Text: "after the drop"})
	s.wait(t, "the message after the reconnect", s.count(2))
	waitAcked(t, f, ts2)
}

func TestMentionGatingAndThreads(t *testing.T) {
	f := slackfake.New(t)
	f.SetLimits(slackfake.NoLimits)
	a, _ := newAdapter(t, f, nil)
	s := newSink()
	run(t, f, a, s)
	plain := f.Say(slackfake.UserMessage{Channel: "C1", User: "U1", Text: "just chatting"})
	mention := f.Say(slackfake.UserMessage{Channel: "C1", User: "U1", Text: "hey <@UBOT> help"})
	got := s.wait(t, "both channel messages", s.count(2))
	byID := map[string]channels.Inbound{}
	for _, in := range got {
		byID[in.MessageID] = in
	}
	if in := byID[plain]; in.Mentioned || in.ChatType != channels.Group {
		t.Errorf("an unaddressed channel message: %+v", in)
	}
	in := byID[mention]
	if !in.Mentioned || in.Text != "hey help" || in.ChatID != "C1:"+mention || in.ChatTitle == "" {
		t.Fatalf("a mention: %+v", in)
	}
	// The reply goes into the thread the mention started.
	if _, err := a.Send(t.Context(), channels.Outbound{ChatID: in.ChatID, Text: "on it", ReplyTo: in.MessageID}); err != nil {
		t.Fatal(err)
	}
	msgs, err := f.WaitBotMessages(t.Context(), "C1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if msgs[0].ThreadTS != mention || msgs[0].Text != "on it" {
		t.Errorf("reply = %+v, want in thread %s", msgs[0], mention)
	}
	// A reply in that thread is the same chat.
	reply := f.Say(slackfake.UserMessage{Channel: "C1", User: "U1", Text: "<@UBOT> thanks", ThreadTS: mention})
	got = s.wait(t, "the thread reply", s.count(3))
	for _, in := range got {
		if in.MessageID == reply && in.ChatID != "C1:"+mention {
			t.Errorf("thread reply chat = %q", in.ChatID)
		}
	}
}

// A reply in a thread the bot takes part in needs no mention: one a
// mention started, one the bot posted in, or one stored before a restart
// (LastSeen); in any other thread a reply still needs one.
func TestThreadsTheBotIsInNeedNoMention(t *testing.T) {
	f := slackfake.New(t)
	f.SetLimits(slackfake.NoLimits)
	root := f.Say(slackfake.UserMessage{Channel: "C1", User: "U1", Text: "an old thread the bot answered"})
	other := f.Say(slackfake.UserMessage{Channel: "C1", User: "U1", Text: "a thread without the bot"})
	a, _ := newAdapter(t, f, func(o *Options) {
		o.LastSeen = func(context.Context) (map[string]string, error) {
			return map[string]string{"C1:" + root: root, "D9": "1.0"}, nil
		}
	})
	s := newSink()
	run(t, f, a, s)
	mention := f.Say(slackfake.UserMessage{Channel: "C1", User: "U1", Text: "<@UBOT> start here"})
	s.wait(t, "the two roots and the mention", s.count(3)) // the roots were queued for the first connection
	inMention := f.Say(slackfake.UserMessage{Channel: "C1", User: "U1", Text: "and a follow-up", ThreadTS: mention})
	inStored := f.Say(slackfake.UserMessage{Channel: "C1", User: "U1", Text: "back after a restart", ThreadTS: root})
	inOther := f.Say(slackfake.UserMessage{Channel: "C1", User: "U1", Text: "just people talking", ThreadTS: other})
	got := s.wait(t, "three thread replies", s.count(6))
	byID := map[string]channels.Inbound{}
	for _, in := range got {
		byID[in.MessageID] = in
	}
	if !byID[inMention].Mentioned || !byID[inStored].Mentioned {
		t.Errorf("replies in the bot's threads: %+v, %+v; want both addressed", byID[inMention], byID[inStored])
	}
	if byID[inOther].Mentioned {
		t.Errorf("a reply in a thread without the bot is addressed: %+v", byID[inOther])
	}
	// A thread the bot posts in takes replies without a mention too.
	if _, err := a.Send(t.Context(), channels.Outbound{ChatID: "C1:" + other, Text: "joining"}); err != nil {
		t.Fatal(err)
	}
	again := f.Say(slackfake.UserMessage{Channel: "C1", User: "U1", Text: "thanks for joining", ThreadTS: other})
	for _, in := range s.wait(t, "the reply after the bot posted", s.count(7)) {
		if in.MessageID == again && !in.Mentioned {
			t.Errorf("a reply after the bot posted in the thread: %+v; want addressed", in)
		}
	}
}

func TestBotsAreIgnored(t *testing.T) {
	f := slackfake.New(t)
	f.SetLimits(slackfake.NoLimits)
	a, _ := newAdapter(t, f, nil)
	s := newSink()
	run(t, f, a, s)
	other := f.Say(slackfake.UserMessage{Channel: "C1", BotID: "B999", User: "U999", Text: "<@UBOT> I am a bot"})
	if _, err := a.Send(t.Context(), channels.Outbound{ChatID: "D1", Text: "my own words"}); err != nil {
		t.Fatal(err)
	}
	last := f.Say(slackfake.UserMessage{Channel: "D1", User: "U1", Text: "a person"})
	got := s.wait(t, "the person's message", s.count(1))
	waitAcked(t, f, other) // ignored envelopes are acknowledged too
	if len(got) != 1 || got[0].MessageID != last {
		t.Errorf("got %+v; want only the person's message", got)
	}
}

func TestButtons(t *testing.T) {
	f := slackfake.New(t)
	f.SetLimits(slackfake.NoLimits)
	a, _ := newAdapter(t, f, nil)
	s := newSink()
	run(t, f, a, s)
	id, err := a.Ask(t.Context(), channels.Outbound{ChatID: "C1:1700000000.000100", Text: "Run `rm -rf build`?"},
		[]channels.Button{{Label: "Approve", Action: "approve:7"}, {Label: "Deny", Action: "deny:7"}})
	if err != nil {
		t.Fatal(err)
	}
	msgs := f.BotMessages("C1")
	if len(msgs) != 1 || msgs[0].TS != id || !strings.Contains(string(msgs[0].Blocks), `"value":"approve:7"`) || msgs[0].ThreadTS != "1700000000.000100" {
		t.Fatalf("asked = %+v", msgs)
	}
	env := f.Click(slackfake.Click{Channel: "C1", TS: id, User: "U5", Value: "deny:7"})
	got := s.wait(t, "the press", s.count(1))
	in := got[0]
	if in.Action != "deny:7" || in.UserID != "U5" || in.ChatID != "C1:1700000000.000100" || !strings.HasPrefix(in.MessageID, pressPrefix) {
		t.Errorf("press = %+v", in)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := f.WaitAcked(ctx, env); err != nil {
		t.Error(err)
	}
	if _, err := a.Ask(t.Context(), channels.Outbound{ChatID: "D1", Text: "x"}, []channels.Button{{Action: "a"}, {Action: "a"}}); err == nil {
		t.Error("two buttons with one action were accepted")
	}
}

func TestSendEditDeleteReact(t *testing.T) {
	f := slackfake.New(t)
	f.SetLimits(slackfake.NoLimits)
	a, _ := newAdapter(t, f, nil)
	ctx := t.Context()
	id, err := a.Send(ctx, channels.Outbound{ChatID: "D1", Text: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Edit(ctx, "D1", id, "**final**"); err != nil {
		t.Fatal(err)
	}
	if err := a.React(ctx, "D1", id, "👍"); err != nil {
		t.Fatal(err)
	}
	msgs := f.BotMessages("D1")
	if len(msgs) != 1 || msgs[0].Text != "*final*" || msgs[0].Edits != 1 {
		t.Fatalf("after edit = %+v", msgs)
	}
	if r := f.Reactions("D1", id); len(r) != 1 || r[0] != "thumbsup" {
		t.Errorf("reactions = %v", r)
	}
	if err := a.Delete(ctx, "D1", id); err != nil {
		t.Fatal(err)
	}
	if msgs := f.BotMessages("D1"); !msgs[0].Deleted {
		t.Errorf("not deleted: %+v", msgs[0])
	}
	if !a.Fits("short") || a.Fits(strings.Repeat("word ", 2000)) {
		t.Error("Fits is wrong")
	}
}

// record records the parts of one reply, as the router does.
type record struct {
	mu   sync.Mutex
	sent map[int]string
}

func (p *record) Sent(i int) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.sent[i]
	return id, ok
}

func (p *record) Confirmed(_ context.Context, i int, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent[i] = id
}

func TestLongReplySplitInOrderAndCompleted(t *testing.T) {
	f := slackfake.New(t)
	f.SetLimits(slackfake.NoLimits)
	a, _ := newAdapter(t, f, nil)
	var b strings.Builder
	for i := range 4000 {
		b.WriteString("w")
		b.WriteString(string(rune('a' + i%26)))
		if i%50 == 49 {
			b.WriteString("\n\n")
		} else {
			b.WriteString(" ")
		}
	}
	text := b.String()
	// A crash cut the reply off after its first part.
	rec := &record{sent: map[int]string{}}
	want := Split(Render(text), partLimit)
	if len(want) < 3 {
		t.Fatalf("only %d parts", len(want))
	}
	first, _, err := a.api.PostMessageContext(t.Context(), "D1", slack.MsgOptionText(want[0], false))
	if err != nil {
		t.Fatal(err)
	}
	rec.sent[0] = first
	last, err := a.Send(t.Context(), channels.Outbound{ChatID: "D1", Text: text, Parts: rec})
	if err != nil {
		t.Fatal(err)
	}
	msgs := f.BotMessages("D1")
	if len(msgs) != len(want) {
		t.Fatalf("%d messages, want %d (the first part once)", len(msgs), len(want))
	}
	for i, m := range msgs {
		if m.Text != want[i] {
			t.Errorf("part %d out of order or changed", i)
		}
	}
	if last != msgs[len(msgs)-1].TS || len(rec.sent) != len(want) {
		t.Errorf("last = %s, recorded %d parts", last, len(rec.sent))
	}
}

func TestRateLimitIsWaitedOut(t *testing.T) {
	f := slackfake.New(t)
	f.SetLimits(slackfake.NoLimits)
	a, sl := newAdapter(t, f, nil)
	f.RateLimit("chat.postMessage", 2*time.Second, 1)
	if _, err := a.Send(t.Context(), channels.Outbound{ChatID: "D1", Text: "patient"}); err != nil {
		t.Fatal(err)
	}
	if d := sl.all(); len(d) != 1 || d[0] != 2*time.Second {
		t.Errorf("waited %v, want the 2s Retry-After", d)
	}
	if n := len(f.BotMessages("D1")); n != 1 {
		t.Errorf("%d messages", n)
	}
	// A preview is dropped instead.
	id := f.BotMessages("D1")[0].TS
	f.RateLimit("chat.update", 2*time.Second, 1)
	err := a.Edit(channels.WithPriority(t.Context(), channels.PriorityPreview), "D1", id, "preview")
	if !errors.Is(err, channels.ErrPaced) {
		t.Errorf("preview edit = %v, want ErrPaced", err)
	}
	// A wait longer than the adapter waits: unavailable, for the outbox,
	// which waits it out.
	f.RateLimit("chat.postMessage", 5*time.Minute, 1)
	_, err = a.Send(t.Context(), channels.Outbound{ChatID: "D1", Text: "later"})
	if !errors.Is(err, channels.ErrUnavailable) || channels.RetryAfter(err) != 5*time.Minute {
		t.Errorf("long rate limit = %v (retry after %s), want ErrUnavailable after 5m", err, channels.RetryAfter(err))
	}
}

func TestServerErrorsAreUnavailable(t *testing.T) {
	f := slackfake.New(t)
	f.SetLimits(slackfake.NoLimits)
	a, sl := newAdapter(t, f, nil)
	end := f.Outage("chat.postMessage", http.StatusServiceUnavailable)
	_, err := a.Send(t.Context(), channels.Outbound{ChatID: "D1", Text: "lost?"})
	if !errors.Is(err, channels.ErrUnavailable) {
		t.Fatalf("send in an outage = %v, want ErrUnavailable", err)
	}
	if n := len(sl.all()); n != maxAttempts-1 {
		t.Errorf("%d backoffs, want %d", n, maxAttempts-1)
	}
	end()
	// One 502 is retried through.
	f.Fail("chat.postMessage", http.StatusBadGateway, 1)
	if _, err := a.Send(t.Context(), channels.Outbound{ChatID: "D1", Text: "through"}); err != nil {
		t.Fatal(err)
	}
	// A refusal is not unavailable: the outbox would keep it forever.
	bad, _ := newAdapter(t, f, func(o *Options) { o.BotToken = "xoxb-wrong" })
	if _, err := bad.Send(t.Context(), channels.Outbound{ChatID: "D1", Text: "x"}); err == nil || errors.Is(err, channels.ErrUnavailable) || strings.Contains(err.Error(), "xoxb-wrong") {
		t.Errorf("invalid_auth = %v; want a plain error without the token", err)
	}
	// Connection refused: unavailable.
	down, _ := newAdapter(t, f, func(o *Options) { o.APIURL = "http://127.0.0.1:1/api/" })
	if _, err := down.Send(t.Context(), channels.Outbound{ChatID: "D1", Text: "x"}); !errors.Is(err, channels.ErrUnavailable) {
		t.Errorf("connection refused = %v, want ErrUnavailable", err)
	}
}

func TestFilesInAndOut(t *testing.T) {
	f := slackfake.New(t)
	f.SetLimits(slackfake.NoLimits)
	a, _ := newAdapter(t, f, nil)
	s := newSink()
	run(t, f, a, s)
	img := f.AddFile("cat.png", "image/png", []byte("\x89PNG fake"))
	note := f.AddFile("notes.txt", "text/plain", []byte("remember the milk"))
	f.Say(slackfake.UserMessage{Channel: "D1", User: "U1", Text: "look", Files: []slackfake.File{img, note}})
	in := s.wait(t, "the files", s.count(1))[0]
	if len(in.Attachments) != 2 || string(in.Attachments[0].Data) != "\x89PNG fake" || in.Attachments[0].Kind != channels.Image ||
		in.Attachments[1].Text != "remember the milk" {
		t.Fatalf("attachments = %+v", in.Attachments)
	}
	// Only Slack's file host (here: the fake's) is fetched with the token.
	if _, err := a.download(t.Context(), "https://evil.example/x.png", 100); err == nil {
		t.Error("a file on another host was fetched")
	}
	path := filepath.Join(t.TempDir(), "report.txt")
	if err := os.WriteFile(path, []byte("figures"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SendFile(t.Context(), "C1:1700000000.000100", channels.OutboundFile{Path: path, Caption: "the **report**"}); err != nil {
		t.Fatal(err)
	}
	ups := f.Uploads()
	if len(ups) != 1 || string(ups[0].Data) != "figures" || ups[0].Channel != "C1" || ups[0].ThreadTS != "1700000000.000100" {
		t.Errorf("uploads = %+v", ups)
	}
}

func TestTypingShowsAStatusInThreads(t *testing.T) {
	f := slackfake.New(t)
	f.SetLimits(slackfake.NoLimits)
	a, _ := newAdapter(t, f, nil)
	if err := a.Typing(t.Context(), "D1"); err != nil {
		t.Fatal(err)
	}
	if err := a.Typing(t.Context(), "D1:1700000000.000100"); err != nil {
		t.Fatal(err)
	}
	st := f.Statuses()
	if len(st) != 1 || st[0].ThreadTS != "1700000000.000100" || st[0].Status != thinkingStatus {
		t.Errorf("statuses = %+v", st)
	}
	// Refused in a chat: no error, and not asked again there.
	bad, _ := newAdapter(t, f, func(o *Options) { o.BotToken = "xoxb-wrong" })
	before := f.Calls("assistant.threads.setStatus")
	for range 3 {
		if err := bad.Typing(t.Context(), "C1:1700000000.000200"); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.Calls("assistant.threads.setStatus") - before; n != 1 {
		t.Errorf("asked %d times after a refusal, want 1", n)
	}
}

func TestEventsAPI(t *testing.T) {
	f := slackfake.New(t)
	f.SetLimits(slackfake.NoLimits)
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	a, _ := newAdapter(t, f, func(o *Options) { o.AppToken, o.SigningSecret, o.EventsPath = "", secret, "/slack/events" })
	path, h := a.Handler()
	if path != "/slack/events" || h == nil {
		t.Fatalf("Handler = %q, %v", path, h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctx := t.Context()
	ts, bodies := f.SayEvents(slackfake.UserMessage{Channel: "D1", User: "U1", Text: "over http"})
	// Before Run: not ready, Slack retries.
	if code, err := f.PostEvent(ctx, srv.URL, secret, bodies[0], 0); err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("before Run: %d, %v", code, err)
	}
	s := newSink()
	run(t, f, a, s)
	select {
	case <-a.ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the Events API handler never became ready")
	}
	for retry := range 3 {
		if code, err := f.PostEvent(ctx, srv.URL, secret, bodies[0], retry); err != nil || code != http.StatusOK {
			t.Fatalf("retry %d: %d, %v", retry, code, err)
		}
	}
	got := s.wait(t, "the event", func(got []channels.Inbound, calls int) bool { return calls == 3 })
	if len(got) != 1 || got[0].MessageID != ts || got[0].Text != "over http" {
		t.Errorf("three deliveries of one event = %+v, want one message", got)
	}
	// A refused delivery is not answered 200, so Slack retries it.
	s.mu.Lock()
	s.fail = 1
	s.mu.Unlock()
	_, bodies2 := f.SayEvents(slackfake.UserMessage{Channel: "D1", User: "U1", Text: "second"})
	if code, _ := f.PostEvent(ctx, srv.URL, secret, bodies2[0], 0); code == http.StatusOK {
		t.Error("a message not stored was answered 200")
	}
	// Wrong secret, stale timestamp, no signature.
	if code, _ := f.PostEvent(ctx, srv.URL, "wrong-secret", bodies[0], 0); code != http.StatusUnauthorized {
		t.Errorf("bad signature: %d", code)
	}
	stale := func(at time.Time) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(string(bodies[0])))
		for k, v := range slackfake.Sign(secret, at, bodies[0]) {
			req.Header[k] = v
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := stale(time.Now().Add(-6 * time.Minute)); code != http.StatusUnauthorized {
		t.Errorf("a 6-minute-old request: %d", code)
	}
	if code := stale(time.Now().Add(-4 * time.Minute)); code != http.StatusOK {
		t.Errorf("a 4-minute-old request: %d", code)
	}
	// url_verification.
	resp := postSigned(t, srv.URL, secret, `{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	if resp != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Errorf("challenge answer = %q", resp)
	}
	// A button press by HTTP interactivity.
	id, err := a.Ask(ctx, channels.Outbound{ChatID: "D1", Text: "ok?"}, []channels.Button{{Label: "Yes", Action: "approve:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := f.PostInteraction(ctx, srv.URL, secret, f.ClickPayload(slackfake.Click{Channel: "D1", TS: id, User: "U1", Value: "approve:1"})); err != nil || code != http.StatusOK {
		t.Fatalf("interaction: %d, %v", code, err)
	}
	s.wait(t, "the press", func(got []channels.Inbound, _ int) bool {
		return len(got) >= 2 && got[len(got)-1].Action == "approve:1"
	})
}

func postSigned(t *testing.T, url, secret, body string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	for k, v := range slackfake.Sign(secret, time.Now(), []byte(body)) {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestSlashCommand(t *testing.T) {
	f := slackfake.New(t)
	a, _ := newAdapter(t, f, nil)
	s := newSink()
	run(t, f, a, s)
	env := f.SlashCommand(slackfake.SlashCommand{Channel: "D1", User: "U1", Command: "/status"})
	in := s.wait(t, "the command", s.count(1))[0]
	if in.Text != "/status" || in.ChatID != "D1" || in.ChatType != channels.DM || !strings.HasPrefix(in.MessageID, commandPrefix) {
		t.Errorf("command = %+v", in)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := f.WaitAcked(ctx, env); err != nil {
		t.Fatal(err)
	}
	for _, e := range f.Envelopes() {
		if e.ID == env && !strings.Contains(string(e.AckPayload), "/status") {
			t.Errorf("ack payload = %s", e.AckPayload)
		}
	}
}
