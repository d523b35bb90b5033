package router

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/chatfake"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// The fake channel and echoing agent of the router's tests (shared with
// the reply side's).
type (
	fakeChannel = chatfake.Channel
	fakeRunner  = chatfake.Runner
)

func newFakeChannel() *fakeChannel { return chatfake.NewChannel() }
func newFakeRunner() *fakeRunner   { return chatfake.NewRunner() }

type env struct {
	r      *Router
	st     *store.Store
	ch     *fakeChannel
	runner *fakeRunner
	ctx    context.Context
}

func newEnv(t *testing.T, maxTurns int, access Access) *env {
	t.Helper()
	return newEnvWith(t, access, func(c *Config) { c.MaxConcurrentTurns = maxTurns })
}

// newEnvWith is newEnv with the router's configuration adjusted by mod.
func newEnvWith(t *testing.T, access Access, mod func(*Config)) *env {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{st: st, ch: newFakeChannel(), runner: newFakeRunner(), ctx: t.Context()}
	cfg := Config{Store: st, Agent: e.runner, NewTicker: func(time.Duration) Ticker { return stoppedTicker{} }}
	mod(&cfg)
	e.r, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.r.AddChannel(e.ch, access)
	if err := e.r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.r.Shutdown(context.Background()) })
	return e
}

type stoppedTicker struct{}

func (stoppedTicker) C() <-chan time.Time { return nil }
func (stoppedTicker) Stop()               {}

func msg(chat, user, text string) channels.Inbound { return chatfake.Msg(chat, user, text) }

func (e *env) deliver(t *testing.T, in channels.Inbound) {
	t.Helper()
	if err := e.r.Deliver(e.ctx, in); err != nil {
		t.Fatal(err)
	}
}

func (e *env) waitSent(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-e.ch.Notify:
		case <-e.ctx.Done():
			t.Fatalf("waiting for %d sends: %v (sent %q)", n, e.ctx.Err(), e.ch.Texts())
		}
	}
}

var everyone = Access{Users: []string{"*"}}

// A message that arrives while its chat is busy is queued and handled next:
// never dropped, never merged, in order.
func TestPerChatFIFO(t *testing.T) {
	e := newEnv(t, 4, everyone)
	release := e.runner.Hold("first")
	e.deliver(t, msg("c1", "u", "first"))
	if got := <-e.runner.Started; got != "first" {
		t.Fatalf("started %q", got)
	}
	e.deliver(t, msg("c1", "u", "second"))
	e.deliver(t, msg("c1", "u", "third"))
	if d := e.r.QueueDepth(); d != 2 {
		t.Fatalf("queue depth = %d; want 2", d)
	}
	close(release)
	e.waitSent(t, 3)
	if got := e.ch.Texts(); !slices.Equal(got, []string{"echo: first", "echo: second", "echo: third"}) {
		t.Fatalf("sent %q", got)
	}
	if e.runner.MaxSeen != 1 {
		t.Fatalf("one chat ran %d turns at once", e.runner.MaxSeen)
	}
}

// Different chats run concurrently, up to max_concurrent_turns.
func TestConcurrencyLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 2, everyone)
		rel := []chan struct{}{e.runner.Hold("a"), e.runner.Hold("b"), e.runner.Hold("c")}
		e.deliver(t, msg("c1", "u", "a"))
		e.deliver(t, msg("c2", "u", "b"))
		e.deliver(t, msg("c3", "u", "c"))
		// Receives, not counts after synctest.Wait: a store write that
		// meets SQLITE_BUSY waits on a timer, which synctest.Wait counts
		// as blocked, so a turn can start after Wait returned.
		<-e.runner.Started
		<-e.runner.Started
		synctest.Wait()
		if n := len(e.runner.Started); n != 0 {
			t.Fatalf("%d more turns started while 2 held their slots; want 0 (the limit is 2)", n)
		}
		close(rel[0])
		<-e.runner.Started // the third, once a slot is free (a deadlock fails the test)
		close(rel[1])
		close(rel[2])
		if err := e.r.Drain(e.ctx); err != nil {
			t.Fatal(err)
		}
		if e.runner.MaxSeen != 2 {
			t.Fatalf("max concurrent turns = %d; want 2", e.runner.MaxSeen)
		}
		_ = e.r.Shutdown(context.Background())
		e.st.Close()
	})
}

// /stop cancels the running turn and drops queued messages; it does not wait.
func TestStopCancelsRunningTurn(t *testing.T) {
	e := newEnv(t, 4, everyone)
	e.runner.Hold("long job")
	e.deliver(t, msg("c1", "u", "long job"))
	<-e.runner.Started
	e.deliver(t, msg("c1", "u", "queued"))
	e.deliver(t, msg("c1", "u", "/stop"))
	e.waitSent(t, 1)
	if got := e.ch.Texts(); !slices.Equal(got, []string{"Stopped. I also dropped 1 queued message(s)."}) {
		t.Fatalf("sent %q", got)
	}
	if err := e.r.Drain(e.ctx); err != nil {
		t.Fatal(err)
	}
	pending, _ := e.st.PendingInbox(e.ctx)
	if len(pending) != 0 {
		t.Fatalf("%d messages still pending", len(pending))
	}
}

// The same channel message id never starts a second turn.
func TestIdempotentIntake(t *testing.T) {
	e := newEnv(t, 4, everyone)
	m := msg("c1", "u", "hello")
	e.deliver(t, m)
	e.deliver(t, m)
	if err := e.r.Drain(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.deliver(t, m) // after it was handled, too
	if err := e.r.Drain(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.runner.Turns); n != 1 {
		t.Fatalf("%d turns for one message id", n)
	}
}

func TestAccessAndGroups(t *testing.T) {
	e := newEnv(t, 4, Access{Users: []string{"42", "@Ada"}})
	stranger := msg("c9", "666", "let me in")
	stranger.UserName = "mallory"
	e.deliver(t, stranger)
	e.deliver(t, msg("c9", "666", "please"))
	e.waitSent(t, 1)
	got := e.ch.Texts()
	if len(got) != 1 || !strings.Contains(got[0], "Your user id is 666") {
		t.Fatalf("refusals = %q; want exactly one naming the id", got)
	}
	byName := msg("c2", "7", "hi")
	byName.UserName = "ada"
	e.deliver(t, byName)
	e.deliver(t, msg("c1", "42", "hi by id"))

	group := msg("g1", "42", "chatter")
	group.ChatType, group.Mentioned = channels.Group, false
	e.deliver(t, group)
	addressed := msg("g1", "42", "@bot hi")
	addressed.ChatType = channels.Group
	e.deliver(t, addressed)
	if err := e.r.Drain(e.ctx); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, tr := range e.runner.Turns {
		texts = append(texts, tr.Input.Content)
	}
	slices.Sort(texts)
	if !slices.Equal(texts, []string{"[from user 42]\n@bot hi", "hi", "hi by id"}) {
		t.Fatalf("turns for %q", texts)
	}
	e.ch.Mu.Lock()
	defer e.ch.Mu.Unlock()
	for _, m := range e.ch.Sent {
		if m.ChatID == "g1" && m.ReplyTo != addressed.MessageID {
			t.Fatalf("group reply does not quote the message: %+v", m)
		}
	}
}

func TestEmptyAllowlistAdmitsNobody(t *testing.T) {
	e := newEnv(t, 4, Access{})
	e.deliver(t, msg("c1", "1", "hi"))
	e.waitSent(t, 1)
	if len(e.runner.Turns) != 0 || !strings.Contains(e.ch.Texts()[0], "allowlist") {
		t.Fatalf("turns %d, sent %q", len(e.runner.Turns), e.ch.Texts())
	}
}

func TestCommands(t *testing.T) {
	e := newEnv(t, 4, everyone)
	e.deliver(t, msg("c1", "u", "hello"))
	e.waitSent(t, 1)
	chat, _ := e.st.EnsureChat(e.ctx, "fake", "c1", "dm", "")
	before, _ := e.st.CurrentSession(e.ctx, chat.ID)
	e.deliver(t, msg("c1", "u", "/new@mybot"))
	e.waitSent(t, 1)
	if err := e.r.Drain(e.ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := e.st.CurrentSession(e.ctx, chat.ID)
	if after.ID == before.ID {
		t.Fatal("/new did not start a new session")
	}
	sessions, _ := e.st.Sessions(e.ctx, chat.ID)
	if len(sessions) != 2 {
		t.Fatalf("%d sessions; the old one must stay", len(sessions))
	}
	e.deliver(t, msg("c1", "u", "/status"))
	e.deliver(t, msg("c1", "u", "/help"))
	e.waitSent(t, 2)
	got := e.ch.Texts()
	if !strings.HasPrefix(got[1], "Started a new conversation") || !strings.Contains(got[2], "Idle") ||
		!strings.Contains(got[2], fmt.Sprintf("Conversation #%d", after.ID)) || !strings.Contains(got[3], "/new") {
		t.Fatalf("command replies = %q", got)
	}
	if n := len(e.runner.Turns); n != 1 {
		t.Fatalf("commands reached the model: %d turns", n)
	}
}

// E budget: /status shows the size of the chat's last request and what the
// rolling summary covers; /new starts a conversation without one.
func TestStatusShowsRequestSizeAndSummary(t *testing.T) {
	e := newEnv(t, 4, everyone)
	chat, _ := e.st.EnsureChat(e.ctx, "fake", "c1", "dm", "")
	sess, _ := e.st.CurrentSession(e.ctx, chat.ID)
	var last int64
	for i := range 3 {
		id, ids, err := e.st.BeginTurn(e.ctx, store.TurnStart{ChatID: chat.ID, SessionID: sess.ID, Kind: "user"},
			[]llm.Message{{Role: llm.RoleUser, Content: fmt.Sprint("hello ", i)}})
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			last = ids[0]
		}
		if err := e.st.FinishTurn(e.ctx, id, store.TurnEnd{StopReason: "end_turn", Status: store.TurnCompleted,
			RequestTokens: 14210, RequestBytes: 58140}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.st.SaveSummary(e.ctx, sess.ID, last, "they said hello twice"); err != nil {
		t.Fatal(err)
	}
	e.deliver(t, msg("c1", "u", "/status"))
	e.waitSent(t, 1)
	got := e.ch.Texts()[0]
	for _, want := range []string{"Last request: about 14210 tokens, 58.1 KB", "Summarised: 2 messages (2 turns) up to ", "in 1 folds"} {
		if !strings.Contains(got, want) {
			t.Fatalf("/status = %q; want %q in it", got, want)
		}
	}
	e.deliver(t, msg("c1", "u", "/new"))
	e.waitSent(t, 1)
	if err := e.r.Drain(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.deliver(t, msg("c1", "u", "/status"))
	e.waitSent(t, 1)
	if got := e.ch.Texts()[2]; strings.Contains(got, "Summarised") {
		t.Fatalf("/status after /new = %q; the new conversation has no summary", got)
	}
}

// startRouter starts a router with cfg on a fresh store, cfg.Agent as its
// runner and ch as its one channel, open to everyone; the store is closed
// when the test ends.
func startRouter(t *testing.T, cfg Config, ch channels.Channel) *Router {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg.Store = st
	if cfg.NewTicker == nil {
		cfg.NewTicker = func(time.Duration) Ticker { return stoppedTicker{} }
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.AddChannel(ch, everyone)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r
}

// Config.Hooks.Load sees the number of chats with a turn running or queued as
// it changes: up with each chat, down to 0 when they are done.
func TestLoadObserved(t *testing.T) {
	runner := newFakeRunner()
	var mu sync.Mutex
	var seen []int
	r := startRouter(t, Config{Agent: runner, MaxConcurrentTurns: 4, Hooks: Hooks{Load: func(n int) {
		mu.Lock()
		seen = append(seen, n)
		mu.Unlock()
	}}}, newFakeChannel())
	defer func() { _ = r.Shutdown(context.Background()) }()
	var releases []chan struct{}
	for i := range 3 {
		text := fmt.Sprint("held ", i)
		releases = append(releases, runner.Hold(text))
		if err := r.Deliver(t.Context(), msg(fmt.Sprint("c", i), "u", text)); err != nil {
			t.Fatal(err)
		}
		<-runner.Started
	}
	for _, rel := range releases {
		close(rel)
	}
	if err := r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []int{1, 2, 3}; len(seen) != 6 || !slices.Equal(seen[:3], want) || seen[5] != 0 {
		t.Errorf("Load saw %v, want 1, 2, 3, then down to 0", seen)
	}
}

// After a restart, stored but unfinished messages are handled; one whose
// reply was already delivered is not answered again.
func TestRestartReplaysPending(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.db")
	st, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	payload := func(id, text string) []byte {
		return fmt.Appendf(nil, `{"Channel":"fake","ChatID":"c1","ChatType":"dm","MessageID":%q,"UserID":"u","Text":%q,"Mentioned":true}`, id, text)
	}
	unanswered, _, _ := st.Intake(ctx, store.InboxItem{Channel: "fake", ChatKey: "c1", MessageID: "m1", UserID: "u", Payload: payload("m1", "unanswered")})
	answered, _, _ := st.Intake(ctx, store.InboxItem{Channel: "fake", ChatKey: "c1", MessageID: "m2", UserID: "u", Payload: payload("m2", "answered")})
	if err := st.RecordDelivery(ctx, answered, 0, "out-1"); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st, err = store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runner, ch := newFakeRunner(), newFakeChannel()
	r, _ := New(Config{Store: st, Agent: runner, NewTicker: func(time.Duration) Ticker { return stoppedTicker{} }})
	r.AddChannel(ch, everyone)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ch.Texts(); !slices.Equal(got, []string{"echo: unanswered"}) {
		t.Fatalf("after restart sent %q", got)
	}
	if n, _ := st.Deliveries(ctx, unanswered); n != 1 {
		t.Fatalf("delivery of the replayed message recorded %d times", n)
	}
	pending, _ := st.PendingInbox(ctx)
	if len(pending) != 0 {
		t.Fatalf("%d still pending", len(pending))
	}
	_ = r.Shutdown(ctx)
}

func TestToMessage(t *testing.T) {
	in := channels.Inbound{Text: "what about this?",
		Quote: &channels.Quote{Author: "Bob", Text: "the plan"},
		Attachments: []channels.Attachment{
			{Kind: channels.Image, Name: "cat.jpg", MIME: "image/jpeg", Data: []byte{1, 2}},
			{Kind: channels.File, Name: "notes.txt", MIME: "text/plain", Size: 5, Text: "hello"},
			{Kind: channels.Audio, Name: "voice.ogg"},
		}}
	m := toMessage(in, false)
	for _, want := range []string{`[replying to Bob: "the plan"]`, "what about this?", "cannot see images", "notes.txt", "hello", "transcription is not configured"} {
		if !strings.Contains(m.Content, want) {
			t.Errorf("content lacks %q:\n%s", want, m.Content)
		}
	}
	if len(m.Images) != 0 {
		t.Fatal("images sent to a model without vision")
	}
	if m := toMessage(in, true); len(m.Images) != 1 || m.Images[0].MIME != "image/jpeg" {
		t.Fatalf("vision images = %+v", m.Images)
	}
}

func TestAccessRules(t *testing.T) {
	dm := channels.Inbound{ChatType: channels.DM, ChatID: "d1", UserID: "42", UserName: "Ada"}
	group := channels.Inbound{ChatType: channels.Group, ChatID: "c7", Space: "g1", UserID: "42"}
	tests := []struct {
		name string
		a    Access
		in   channels.Inbound
		want bool
	}{
		{"zero value admits nobody", Access{}, dm, false},
		{"by id", Access{Users: []string{"42"}}, dm, true},
		{"by @username, any case", Access{Users: []string{"@ada"}}, dm, true},
		{"username without @ is not an id", Access{Users: []string{"Ada"}}, dm, false},
		{"wildcard", Access{Users: []string{"*"}}, dm, true},
		{"space allowed", Access{Users: []string{"42"}, Spaces: []string{"g1"}}, group, true},
		{"space not allowed", Access{Users: []string{"42"}, Spaces: []string{"g2"}}, group, false},
		{"chat not allowed", Access{Users: []string{"42"}, Chats: []string{"c8"}}, group, false},
		{"space rules do not apply to DMs", Access{Users: []string{"42"}, Spaces: []string{"g2"}}, dm, true},
		{"user still required in an allowed space", Access{Users: []string{"7"}, Spaces: []string{"g1"}}, group, false},
		{"an admin is admitted", Access{Admins: []string{"42"}}, dm, true},
		{"an admin too only where groups are allowed", Access{Admins: []string{"42"}, Spaces: []string{"g2"}}, group, false},
		{"admins are ids, not usernames", Access{Admins: []string{"@ada"}}, dm, false},
	}
	for _, tt := range tests {
		if got := tt.a.Allows(tt.in); got != tt.want {
			t.Errorf("%s: Allows = %v; want %v", tt.name, got, tt.want)
		}
	}
}

// Pairing: an unknown user in a DM gets a one-time code, once: a stranger
// repeating messages is not answered again while the code is pending (issue
// 29); once the operator approves it, their messages are handled.
func TestPairing(t *testing.T) {
	e := newEnv(t, 4, Access{Users: []string{"1"}, Pairing: true})
	for i := range 5 {
		e.deliver(t, msg("dm-9", "9", fmt.Sprintf("hello? (%d)", i+1)))
	}
	e.waitSent(t, 1)
	got := e.ch.Texts() // Deliver answers a stranger before it returns
	if len(got) != 1 {
		t.Fatalf("five messages from a stranger got %d replies, want 1: %q", len(got), got)
	}
	code := strings.Fields(strings.SplitAfter(got[0], "pairing code is ")[1])[0]
	if len(code) != 8 || !strings.Contains(got[0], "switchboard pairing approve "+code) {
		t.Fatalf("pairing reply = %q", got)
	}
	if list, _ := e.st.PendingPairings(e.ctx); len(list) != 1 || list[0].Code != code {
		t.Fatalf("pending pairings = %+v, want the one code", list)
	}
	group := msg("g1", "9", "@bot hi")
	group.ChatType = channels.Group
	e.deliver(t, group) // groups never hand out codes
	e.waitSent(t, 1)
	if last := e.ch.Texts()[1]; !strings.Contains(last, "allowlist") {
		t.Fatalf("group reply = %q", last)
	}
	if _, err := e.st.ApprovePairing(e.ctx, code); err != nil {
		t.Fatal(err)
	}
	e.deliver(t, msg("dm-9", "9", "now?"))
	e.waitSent(t, 1)
	if last := e.ch.Texts()[2]; last != "echo: now?" {
		t.Fatalf("after approval: %q", last)
	}
}

// Issue 29: a message without a user id (a Telegram update without from)
// gets no pairing code and no reply, and nothing it can be approved with.
func TestPairingRefusesNoUserID(t *testing.T) {
	e := newEnv(t, 4, Access{Users: []string{"1"}, Pairing: true})
	for range 3 {
		e.deliver(t, msg("dm-anon", "", "let me in"))
	}
	if got := e.ch.Texts(); len(got) != 0 {
		t.Fatalf("a message without a user id was answered: %q", got)
	}
	if list, _ := e.st.PendingPairings(e.ctx); len(list) != 0 {
		t.Fatalf("pending pairings = %+v, want none", list)
	}
	// The chat's queue is in order: once a known user's message there is
	// answered, an admitted anonymous one would have run before it.
	e.deliver(t, msg("dm-anon", "1", "known"))
	e.waitSent(t, 1)
	if got := e.ch.Texts(); len(got) != 1 || got[0] != "echo: known" {
		t.Fatalf("chat holds %q, want only the known user's answer", got)
	}
}

// countingStore counts the lookups a turn makes for an earlier attempt.
type countingStore struct {
	*store.Store
	lookups atomic.Int64
}

func (c *countingStore) Deliveries(ctx context.Context, inboxID int64) (int, error) {
	c.lookups.Add(1)
	return c.Store.Deliveries(ctx, inboxID)
}

func (c *countingStore) TurnForInbox(ctx context.Context, inboxID int64) (store.Turn, bool, error) {
	c.lookups.Add(1)
	return c.Store.TurnForInbox(ctx, inboxID)
}

// A message stored a moment ago has no earlier reply or turn to look for;
// one left pending by a restart is looked up (and not answered twice).
func TestFreshMessagesSkipEarlierAttemptLookups(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cs := &countingStore{Store: st}
	ch, runner := newFakeChannel(), newFakeRunner()
	r, err := New(Config{Store: cs, Agent: runner, NewTicker: func(time.Duration) Ticker { return stoppedTicker{} }})
	if err != nil {
		t.Fatal(err)
	}
	r.AddChannel(ch, everyone)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := r.Deliver(t.Context(), msg("c1", "u", "hello")); err != nil {
		t.Fatal(err)
	}
	<-ch.Notify
	if err := r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := cs.lookups.Load(); n != 0 {
		t.Errorf("a fresh message made %d lookups for an earlier attempt", n)
	}
	_ = r.Shutdown(t.Context())

	// A message pending from before a restart, already answered.
	in := msg("c2", "u", "answered before the crash")
	payload, _ := json.Marshal(in)
	id, _, err := st.Intake(t.Context(), store.InboxItem{Channel: in.Channel, ChatKey: in.ChatID, MessageID: in.MessageID, UserID: in.UserID, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RecordDelivery(t.Context(), id, 0, "out-earlier"); err != nil {
		t.Fatal(err)
	}
	r2, err := New(Config{Store: cs, Agent: runner, NewTicker: func(time.Duration) Ticker { return stoppedTicker{} }})
	if err != nil {
		t.Fatal(err)
	}
	r2.AddChannel(ch, everyone)
	if err := r2.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r2.Shutdown(context.Background())
	if err := r2.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if cs.lookups.Load() == 0 {
		t.Error("a message pending from before a restart was not looked up")
	}
	if got := ch.Texts(); len(got) != 1 {
		t.Errorf("sent %q; want only the first answer (the second message was answered before the crash)", got)
	}
}

// /status shows the operator's notes (skill errors…) to admins only.
func TestStatusNotesForAdminsOnly(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ch := newFakeChannel()
	r, err := New(Config{Store: st, Agent: newFakeRunner(), NewTicker: func(time.Duration) Ticker { return stoppedTicker{} },
		Hooks: Hooks{StatusNotes: func() []string { return []string{"Skill problem: broken.yaml:3: unknown field"} }}})
	if err != nil {
		t.Fatal(err)
	}
	r.AddChannel(ch, Access{Users: []string{"*"}, Admins: []string{"1"}})
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Shutdown(context.Background()) })
	tests := []struct {
		user      string
		wantNotes bool
	}{{"1", true}, {"2", false}}
	for i, tt := range tests {
		if err := r.Deliver(t.Context(), msg("c"+tt.user, tt.user, "/status")); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch.Notify:
		case <-t.Context().Done():
			t.Fatal("no /status reply")
		}
		got := ch.Texts()[i]
		if strings.Contains(got, "Skill problem") != tt.wantNotes || !strings.HasPrefix(got, "Idle.") {
			t.Errorf("user %s: /status = %q, want the operator's notes: %v", tt.user, got, tt.wantNotes)
		}
	}
}
