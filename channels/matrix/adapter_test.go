package matrix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

const (
	bot   = "@bot:hs.test"
	alice = "@alice:hs.test"
	eve   = "@eve:hs.test"
	dm    = "!dm:hs.test"
	group = "!group:hs.test"
)

// sleeps records the adapter's waits instead of waiting.
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

// open opens an adapter on f (password login, plaintext) with state.
func open(t testing.TB, f *fakeHS, state channels.State, dir string, sl *sleeps) *Adapter {
	t.Helper()
	a, err := Open(t.Context(), Options{Homeserver: f.URL(), UserID: bot, Password: "pw-123456",
		StatePath: filepath.Join(dir, "state.db"), State: state, Sleep: sl.sleep, SyncTimeout: 5 * time.Second,
		Admit: func(u string) bool { return u == alice }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// sink records deliveries; fail makes the next Deliver fail, block makes
// every Deliver wait for ctx.
type sink struct {
	mu    sync.Mutex
	got   []channels.Inbound
	calls chan channels.Inbound
	fail  int
	block bool
}

func newSink() *sink { return &sink{calls: make(chan channels.Inbound, 100)} }

func (s *sink) Deliver(ctx context.Context, in channels.Inbound) error {
	s.calls <- in
	s.mu.Lock()
	block, fail := s.block, s.fail > 0
	if fail {
		s.fail--
	}
	s.mu.Unlock()
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	if fail {
		return errors.New("store is down")
	}
	s.mu.Lock()
	s.got = append(s.got, in)
	s.mu.Unlock()
	return nil
}

func (s *sink) next(t *testing.T) channels.Inbound {
	t.Helper()
	select {
	case in := <-s.calls:
		return in
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
		return channels.Inbound{}
	}
}

// run runs a until the test ends; the returned func stops it and waits.
func run(t *testing.T, a *Adapter, s channels.Sink) func() {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	var err error
	go func() { err = a.Run(ctx, s); close(done) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func dmState() []map[string]any {
	return []map[string]any{member(alice, "join", alice, false), member(bot, "join", bot, false)}
}

func groupState() []map[string]any {
	return append(dmState(), member(eve, "join", eve, false))
}

func TestPasswordLoginIsKeptAndReused(t *testing.T) {
	f := newFakeHS(t)
	state := &memState{m: map[string]string{}}
	dir := t.TempDir()
	open(t, f, state, dir, &sleeps{}).Close()
	a := open(t, f, state, dir, &sleeps{})
	if f.logins != 1 {
		t.Errorf("logins = %d, want 1 (the token kept in the store)", f.logins)
	}
	if tok, _, _ := state.GetState(t.Context(), keyToken); tok != "tok-123456" {
		t.Errorf("kept token = %q", tok)
	}
	if a.DeviceID() != "DEV1" {
		t.Errorf("device = %q, want DEV1", a.DeviceID())
	}
}

func TestWrongPasswordIsAClearErrorWithoutTheSecret(t *testing.T) {
	f := newFakeHS(t)
	_, err := Open(t.Context(), Options{Homeserver: f.URL(), UserID: bot, Password: "wrong-password",
		StatePath: filepath.Join(t.TempDir(), "s.db")})
	if err == nil || !strings.Contains(err.Error(), "MATRIX_PASSWORD") || strings.Contains(err.Error(), "wrong-password") {
		t.Fatalf("err = %v", err)
	}
}

// A reply of three parts sent again (a restart between its parts, before
// the record knew) is three events: the transaction ids are derived from
// the message answered and the part.
func TestResentReplyIsOneMessagePerPart(t *testing.T) {
	f := newFakeHS(t)
	a := open(t, f, nil, t.TempDir(), &sleeps{})
	para := "**bold** " + strings.Repeat("word ", partLimit/5-10)
	text := para + "\n\n" + para + "\n\n" + para
	if n := len(parts(text)); n != 3 {
		t.Fatalf("parts = %d, want 3", n)
	}
	ctx := channels.WithInbound(t.Context(), channels.Inbound{Channel: Name, ChatID: dm, MessageID: "$in1"})
	for range 2 {
		if _, err := a.Send(ctx, channels.Outbound{ChatID: dm, Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(f.sent()); got != 3 {
		t.Fatalf("events in the room = %d, want 3", got)
	}
	other := channels.WithInbound(t.Context(), channels.Inbound{Channel: Name, ChatID: dm, MessageID: "$in2"})
	if _, err := a.Send(other, channels.Outbound{ChatID: dm, Text: "short"}); err != nil {
		t.Fatal(err)
	}
	ev := f.sent()
	if len(ev) != 4 {
		t.Fatalf("events = %d, want 4 (another message's reply is new)", len(ev))
	}
	if ev[0].Content["format"] != "org.matrix.custom.html" || ev[0].Content["formatted_body"] == "" || ev[0].Content["body"] == "" {
		t.Errorf("content = %v, want HTML and a plain body", ev[0].Content)
	}
}

// The sync token is stored only after the batch's messages were
// delivered: a crash while delivering replays the batch, and a failed
// Deliver is tried again.
func TestSyncTokenAdvancesOnlyAfterDeliver(t *testing.T) {
	f := newFakeHS(t)
	state := &memState{m: map[string]string{}}
	dir := t.TempDir()
	f.queue(joinBatch(map[string]any{dm: joinedRoom(dmState())})) // b1: the first sync, state only
	f.queue(joinBatch(map[string]any{dm: joinedRoom(nil, textEvent("$hello", alice, "hello", nil))}))

	blocked := newSink()
	blocked.block = true
	a := open(t, f, state, dir, &sleeps{})
	stop := run(t, a, blocked)
	if in := blocked.next(t); in.MessageID != "$hello" {
		t.Fatalf("delivered %q", in.MessageID)
	}
	stop() // the crash: Deliver never returned
	if since, _, _ := state.GetState(t.Context(), keySince); since != "b1" {
		t.Fatalf("since after the crash = %q, want b1 (the batch not delivered is not confirmed)", since)
	}
	a.Close()

	s := newSink()
	s.fail = 1
	a = open(t, f, state, dir, &sleeps{})
	stop = run(t, a, s)
	first, second := s.next(t), s.next(t)
	if first.MessageID != "$hello" || second.MessageID != "$hello" {
		t.Fatalf("delivered %q, %q; want $hello replayed, and again after the failed Deliver", first.MessageID, second.MessageID)
	}
	if first.ChatType != channels.DM || !first.Mentioned || first.UserID != alice || first.UserName != "alice:hs.test" {
		t.Errorf("inbound = %+v", first)
	}
	waitFor(t, func() bool { v, _, _ := state.GetState(t.Context(), keySince); return v == "b2" })
	stop()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := waitfor.Poll(ctx, 5*time.Millisecond, cond); err != nil {
		t.Fatal("condition not met in 10 s")
	}
}

// A sync whose timeline is limited (the room got more events than it
// holds while the bot was away) has its gap read by /messages, oldest
// first, before the timeline: no message is lost.
func TestLimitedTimelineGapIsRead(t *testing.T) {
	f := newFakeHS(t)
	f.history = map[string][]map[string]any{}
	var want []string
	for i := range 250 { // three pages of /messages
		id := fmt.Sprintf("$old%d", i)
		f.history[dm] = append(f.history[dm], textEvent(id, alice, fmt.Sprint("old ", i), nil))
		want = append(want, id)
	}
	f.queue(joinBatch(map[string]any{dm: joinedRoom(dmState())})) // b1: the first sync, state only
	limited := joinedRoom(nil, textEvent("$new", alice, "new", nil))
	limited["timeline"].(map[string]any)["limited"] = true
	limited["timeline"].(map[string]any)["prev_batch"] = "gap"
	f.queue(joinBatch(map[string]any{dm: limited}))
	want = append(want, "$new")

	state := &memState{m: map[string]string{}}
	s := newSink()
	a := open(t, f, state, t.TempDir(), &sleeps{})
	stop := run(t, a, s)
	defer stop()
	var got []string
	for range want {
		got = append(got, s.next(t).MessageID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("delivered %d messages %q…, want the %d of the gap oldest first, then the timeline's", len(got), got[:3], len(want))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.historyTo) != 3 || f.historyTo[0] != "b1" {
		t.Errorf("/messages asked with to = %q, want 3 pages, each up to the stored token b1", f.historyTo)
	}
}

func TestInvites(t *testing.T) {
	f := newFakeHS(t)
	f.queue(map[string]any{"rooms": map[string]any{"invite": map[string]any{
		"!fromalice:hs.test": map[string]any{"invite_state": map[string]any{"events": []map[string]any{member(bot, "invite", alice, true)}}},
		"!fromeve:hs.test":   map[string]any{"invite_state": map[string]any{"events": []map[string]any{member(bot, "invite", eve, true)}}},
	}}})
	state := &memState{m: map[string]string{}}
	a := open(t, f, state, t.TempDir(), &sleeps{})
	stop := run(t, a, newSink())
	// The fake records a join as it arrives; the adapter keeps the DM
	// once the join has answered, so wait for that too before stopping.
	dm := func() bool { _, ok, _ := state.GetState(t.Context(), keyDMPrefix+"!fromalice:hs.test"); return ok }
	waitFor(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.joined)+len(f.left) == 2 && dm() })
	stop()
	if len(f.joined) != 1 || f.joined[0] != "!fromalice:hs.test" || len(f.left) != 1 || f.left[0] != "!fromeve:hs.test" {
		t.Fatalf("joined %v, left %v; want alice's invite joined and eve's declined", f.joined, f.left)
	}
}

func TestGroupMentionsThreadsAndStrangers(t *testing.T) {
	f := newFakeHS(t)
	f.queue(joinBatch(map[string]any{group: joinedRoom(groupState())}))
	thread := map[string]any{"m.relates_to": map[string]any{"rel_type": "m.thread", "event_id": "$root", "is_falling_back": true,
		"m.in_reply_to": map[string]any{"event_id": "$root"}}}
	pill := map[string]any{"m.mentions": map[string]any{"user_ids": []string{bot}}}
	f.queue(joinBatch(map[string]any{group: joinedRoom(nil,
		textEvent("$plain", alice, "hello all", nil),
		textEvent("$byname", alice, "Switchbot: what time is it", nil),
		textEvent("$pill", alice, "hey you", pill),
		textEvent("$thread", alice, "in a thread", thread),
		textEvent("$eve", eve, "Switchbot: let me in", nil),
		textEvent("$own", bot, "my own words", nil),
	)}))
	s := newSink()
	stop := run(t, open(t, f, nil, t.TempDir(), &sleeps{}), s)
	want := []struct {
		id, chat, text string
		mentioned      bool
	}{
		{"$plain", group, "hello all", false},
		{"$byname", group, "what time is it", true},
		{"$pill", group, "hey you", true},
		{"$thread", group + "/$root", "in a thread", false},
	}
	for _, w := range want {
		in := s.next(t)
		if in.MessageID != w.id || in.ChatID != w.chat || in.Text != w.text || in.Mentioned != w.mentioned || in.ChatType != channels.Group {
			t.Errorf("got %s chat %q text %q mentioned %v type %s; want %s %q %q %v group", in.MessageID, in.ChatID, in.Text, in.Mentioned, in.ChatType, w.id, w.chat, w.text, w.mentioned)
		}
	}
	stop()
	select {
	case in := <-s.calls:
		t.Errorf("delivered %s (a stranger's or the bot's own)", in.MessageID)
	default:
	}
}

func TestThreadRepliesGoToTheThread(t *testing.T) {
	f := newFakeHS(t)
	a := open(t, f, nil, t.TempDir(), &sleeps{})
	if _, err := a.Send(t.Context(), channels.Outbound{ChatID: group + "/$root", Text: "in the thread"}); err != nil {
		t.Fatal(err)
	}
	ev := f.sent()
	rel, _ := ev[0].Content["m.relates_to"].(map[string]any)
	if ev[0].Room != group || rel["rel_type"] != "m.thread" || rel["event_id"] != "$root" {
		t.Fatalf("sent %+v, want in thread $root of %s", ev[0], group)
	}
	if !a.inThread(t.Context(), group+"/$root") {
		t.Error("the thread the bot answered in is not remembered")
	}
}

func TestApprovalByReaction(t *testing.T) {
	f := newFakeHS(t)
	a := open(t, f, nil, t.TempDir(), &sleeps{})
	qid, err := a.Ask(t.Context(), channels.Outbound{ChatID: dm, Text: "I'd like to run: shell ls"},
		[]channels.Button{{Label: "Approve", Action: "approve:7"}, {Label: "Deny", Action: "deny:7"}})
	if err != nil {
		t.Fatal(err)
	}
	ev := f.sent()
	if len(ev) != 3 || !strings.Contains(ev[0].Content["body"].(string), "✅ Approve") || ev[1].Type != "m.reaction" || ev[2].Type != "m.reaction" {
		t.Fatalf("sent %+v, want the question and the bot's ✅ ❌", ev)
	}
	react := func(eventID, sender, key string) map[string]any {
		return map[string]any{"type": "m.reaction", "sender": sender, "event_id": eventID, "origin_server_ts": 1,
			"content": map[string]any{"m.relates_to": map[string]any{"rel_type": "m.annotation", "event_id": qid, "key": key}}}
	}
	f.queue(joinBatch(map[string]any{dm: joinedRoom(dmState())}))
	f.queue(joinBatch(map[string]any{dm: joinedRoom(nil, react("$r0", bot, "✅"), react("$r1", alice, "👍"), react("$r2", alice, "✅️"))}))
	s := newSink()
	stop := run(t, a, s)
	in := s.next(t)
	stop()
	if in.Action != "approve:7" || in.UserID != alice || in.ChatID != dm || in.MessageID != "$r2" {
		t.Fatalf("got %+v, want alice's ✅ as approve:7", in)
	}
}

func TestRateLimitIsWaitedOn(t *testing.T) {
	f := newFakeHS(t)
	sl := &sleeps{}
	a := open(t, f, nil, t.TempDir(), sl)
	f.failNext(429, `{"errcode":"M_LIMIT_EXCEEDED","error":"Too many requests","retry_after_ms":1500}`, 1)
	if _, err := a.Send(t.Context(), channels.Outbound{ChatID: dm, Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if got := sl.all(); len(got) != 1 || got[0] != 1500*time.Millisecond {
		t.Fatalf("waits = %v, want [1.5s] (retry_after_ms)", got)
	}
	f.failNext(429, `{"errcode":"M_LIMIT_EXCEEDED","error":"Too many requests","retry_after_ms":120000}`, 1)
	_, err := a.Send(t.Context(), channels.Outbound{ChatID: dm, Text: "again"})
	if !errors.Is(err, channels.ErrUnavailable) || channels.RetryAfter(err) != 2*time.Minute {
		t.Fatalf("err = %v (retry after %v), want unavailable for 2m", err, channels.RetryAfter(err))
	}
	f.failNext(429, `{"errcode":"M_LIMIT_EXCEEDED","retry_after_ms":500}`, 1)
	err = a.Edit(channels.WithPriority(t.Context(), channels.PriorityPreview), dm, "$ev1", "preview")
	if !errors.Is(err, channels.ErrPaced) {
		t.Fatalf("preview edit err = %v, want ErrPaced", err)
	}
}

func TestServerErrorsAreUnavailable(t *testing.T) {
	f := newFakeHS(t)
	sl := &sleeps{}
	a := open(t, f, nil, t.TempDir(), sl)
	f.failNext(502, `<html>bad gateway</html>`, maxTransientAttempts)
	_, err := a.Send(t.Context(), channels.Outbound{ChatID: dm, Text: "hi"})
	if !errors.Is(err, channels.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if got := len(sl.all()); got != maxTransientAttempts-1 {
		t.Errorf("waits = %d, want %d", got, maxTransientAttempts-1)
	}
	f.failNext(400, `{"errcode":"M_BAD_JSON","error":"bad"}`, 1)
	_, err = a.Send(t.Context(), channels.Outbound{ChatID: dm, Text: "hi"})
	if err == nil || errors.Is(err, channels.ErrUnavailable) {
		t.Fatalf("err = %v, want a refusal that is not unavailable", err)
	}
}

func TestEditsAndPreviewRate(t *testing.T) {
	f := newFakeHS(t)
	a := open(t, f, nil, t.TempDir(), &sleeps{})
	preview := channels.WithPriority(t.Context(), channels.PriorityPreview)
	if err := a.Edit(preview, dm, "$p", "one"); err != nil {
		t.Fatal(err)
	}
	if err := a.Edit(preview, dm, "$p", "two"); !errors.Is(err, channels.ErrPaced) {
		t.Fatalf("a second preview edit within a second: err = %v, want ErrPaced", err)
	}
	if err := a.Edit(t.Context(), dm, "$p", "final"); err != nil {
		t.Fatal(err)
	}
	ev := f.sent()
	if len(ev) != 2 {
		t.Fatalf("events = %d, want 2", len(ev))
	}
	rel, _ := ev[1].Content["m.relates_to"].(map[string]any)
	nc, _ := ev[1].Content["m.new_content"].(map[string]any)
	if rel["rel_type"] != "m.replace" || rel["event_id"] != "$p" || nc["body"] != "final" {
		t.Fatalf("edit = %v", ev[1].Content)
	}
}

func TestPlaintextIsNeverSentIntoAnEncryptedRoom(t *testing.T) {
	f := newFakeHS(t)
	enc := map[string]any{"type": "m.room.encryption", "state_key": "", "sender": alice, "event_id": "$enc", "origin_server_ts": 1,
		"content": map[string]any{"algorithm": "m.megolm.v1.aes-sha2"}}
	f.queue(joinBatch(map[string]any{dm: joinedRoom(append(dmState(), enc))}))
	a := open(t, f, nil, t.TempDir(), &sleeps{})
	stop := run(t, a, newSink())
	waitFor(t, func() bool { ok, _ := a.states.IsEncrypted(t.Context(), dm); return ok })
	stop()
	_, err := a.Send(t.Context(), channels.Outbound{ChatID: dm, Text: "secret"})
	if err == nil || len(f.sent()) != 0 {
		t.Fatalf("err = %v, sent %d; want a refusal and nothing sent", err, len(f.sent()))
	}
}

func TestTyping(t *testing.T) {
	f := newFakeHS(t)
	a := open(t, f, nil, t.TempDir(), &sleeps{})
	if err := a.Typing(t.Context(), dm); err != nil {
		t.Fatal(err)
	}
	if f.typing != 1 {
		t.Fatalf("typing calls = %d", f.typing)
	}
}

func TestChatKeys(t *testing.T) {
	for _, c := range []string{"!r:hs.test", "!r:hs.test/$ev"} {
		room, thread := splitChat(c)
		if got := chatKey(room, thread); got != c {
			t.Errorf("chatKey(splitChat(%q)) = %q", c, got)
		}
	}
	if _, thread := splitChat("!r/x:hs.test"); thread != "" {
		t.Errorf("a room id with a slash read as a thread %q", thread)
	}
}

// Files go both ways: an image sent is uploaded and posted as m.image; a
// file received is downloaded from the homeserver with the token
// (authenticated media).
func TestFiles(t *testing.T) {
	f := newFakeHS(t)
	a := open(t, f, nil, t.TempDir(), &sleeps{})
	path := filepath.Join(t.TempDir(), "chart.png")
	png := []byte("\x89PNG\r\n\x1a\nfake image")
	if err := os.WriteFile(path, png, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SendFile(t.Context(), dm, channels.OutboundFile{Path: path, Caption: "the chart"}); err != nil {
		t.Fatal(err)
	}
	ev := f.sent()
	if len(ev) != 1 || ev[0].Content["msgtype"] != "m.image" || ev[0].Content["body"] != "the chart" || !strings.HasPrefix(ev[0].Content["url"].(string), "mxc://hs.test/") {
		t.Fatalf("sent %+v", ev)
	}
	f.queue(joinBatch(map[string]any{dm: joinedRoom(dmState())}))
	f.queue(joinBatch(map[string]any{dm: joinedRoom(nil, map[string]any{"type": "m.room.message", "sender": alice, "event_id": "$file", "origin_server_ts": 1,
		"content": map[string]any{"msgtype": "m.file", "body": "notes.txt", "url": ev[0].Content["url"], "info": map[string]any{"mimetype": "text/plain", "size": len(png)}}})}))
	s := newSink()
	stop := run(t, a, s)
	in := s.next(t)
	stop()
	if len(in.Attachments) != 1 || string(in.Attachments[0].Data) != string(png) || in.Attachments[0].Kind != channels.File || in.Attachments[0].Name != "notes.txt" {
		t.Fatalf("attachments = %+v", in.Attachments)
	}
	if len(f.mediaAuth) != 1 || f.mediaAuth[0] != "Bearer tok-123456" {
		t.Errorf("download auth = %v, want the bot's token (authenticated media)", f.mediaAuth)
	}
}

// With encryption off, an encrypted message is not delivered (nor
// answered): it cannot be read.
func TestEncryptedMessageWithEncryptionOffIsNotDelivered(t *testing.T) {
	f := newFakeHS(t)
	f.queue(joinBatch(map[string]any{dm: joinedRoom(dmState())}))
	enc := map[string]any{"type": "m.room.encrypted", "sender": alice, "event_id": "$secret", "origin_server_ts": 1,
		"content": map[string]any{"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgAEnB", "session_id": "s1", "sender_key": "k", "device_id": "D"}}
	f.queue(joinBatch(map[string]any{dm: joinedRoom(nil, enc, textEvent("$plain", alice, "readable", nil))}))
	s := newSink()
	stop := run(t, open(t, f, nil, t.TempDir(), &sleeps{}), s)
	if in := s.next(t); in.MessageID != "$plain" {
		t.Fatalf("delivered %s, want only the readable message", in.MessageID)
	}
	stop()
}

// TestRedactionIsNoMessage: a redaction (of a message taken in before, or
// of one never seen) is not delivered, answered or mistaken for text, and
// the messages around it are delivered in order.
func TestRedactionIsNoMessage(t *testing.T) {
	f := newFakeHS(t)
	f.queue(joinBatch(map[string]any{dm: joinedRoom(dmState())}))
	f.queue(joinBatch(map[string]any{dm: joinedRoom(nil, textEvent("$first", alice, "first", nil))}))
	redact := func(id, of string) map[string]any {
		return map[string]any{"type": "m.room.redaction", "sender": alice, "event_id": id, "origin_server_ts": 2,
			"redacts": of, "content": map[string]any{"redacts": of, "reason": "typo"}}
	}
	f.queue(joinBatch(map[string]any{dm: joinedRoom(nil, redact("$r1", "$first"), redact("$r2", "$unknown"),
		textEvent("$second", alice, "second", nil))}))
	s := newSink()
	stop := run(t, open(t, f, nil, t.TempDir(), &sleeps{}), s)
	for _, want := range []string{"$first", "$second"} {
		if in := s.next(t); in.MessageID != want {
			t.Fatalf("delivered %s (%q), want %s", in.MessageID, in.Text, want)
		}
	}
	stop()
	select {
	case in := <-s.calls:
		t.Errorf("delivered %s (%q) after the messages: a redaction is no message", in.MessageID, in.Text)
	default:
	}
}

// TestAdmitFollowsAReload: the adapter's Admit (invites joined, a
// stranger's events dropped before the sink) reads the access a reload
// keeps current (BuildEnv.Access), not the section the adapter was built
// from; allow_servers stays as configured.
func TestAdmitFollowsAReload(t *testing.T) {
	c := &Config{AllowServers: []string{"friends.example"}}
	c.AllowUsers = []string{"@alice:hs.test"}
	live := channels.Access{Users: c.AllowUsers}
	admit := c.admitter(func() channels.Access { return live })
	for _, tc := range []struct {
		step string
		set  channels.Access
		user string
		want bool
	}{
		{"as built", live, "@alice:hs.test", true},
		{"as built", live, "@bob:hs.test", false},
		{"bob added by a reload", channels.Access{Users: []string{"@alice:hs.test", "@bob:hs.test"}}, "@bob:hs.test", true},
		{"alice removed by a reload", channels.Access{Users: []string{"@bob:hs.test"}}, "@alice:hs.test", false},
		{"an admin added", channels.Access{Admins: []string{"@ops:hs.test"}}, "@ops:hs.test", true},
		{"pairing on: a user of an allowed server", channels.Access{Pairing: true}, "@carol:friends.example", true},
		{"pairing on: a user of another server", channels.Access{Pairing: true}, "@mallory:evil.example", false},
	} {
		live = tc.set
		if got := admit(tc.user); got != tc.want {
			t.Errorf("%s: admit(%s) = %v, want %v", tc.step, tc.user, got, tc.want)
		}
	}
	if c.admitter(nil)("@alice:hs.test") != true || c.admitter(nil)("@bob:hs.test") {
		t.Errorf("without BuildEnv.Access the section's own allowlist must decide")
	}
}
