package reply_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/reply"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/store"
)

// vclock is a virtual clock for the outbox: a timer from After fires at
// once, moving the clock on to its deadline (if it is not past it yet),
// but only after run is closed, so a test decides when the worker starts
// going through time. onAdvance sees each new time, under the clock's lock
// (a test ends an outage there).
type vclock struct {
	mu        sync.Mutex
	now       time.Time
	run       chan struct{}
	done      chan struct{}
	onAdvance func(now time.Time)
}

func newVclock(t *testing.T) *vclock {
	c := &vclock{now: time.Now().UTC().Truncate(time.Millisecond), run: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() { close(c.done) })
	return c
}

func (c *vclock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *vclock) After(d time.Duration) <-chan time.Time {
	deadline := c.Now().Add(d)
	ch := make(chan time.Time, 1)
	go func() {
		select {
		case <-c.run:
		case <-c.done:
			return
		}
		c.mu.Lock()
		if c.now.Before(deadline) {
			c.now = deadline
			if c.onAdvance != nil {
				c.onAdvance(c.now)
			}
		}
		now := c.now
		c.mu.Unlock()
		ch <- now
	}()
	return ch
}

// echoModel answers every turn with "re: <the user's text>".
type echoModel struct {
	mu    sync.Mutex
	calls int
}

func (m *echoModel) Complete(_ context.Context, req llm.Request, _ func(llm.Delta)) (llm.Response, error) {
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
	last := ""
	for _, msg := range req.Messages {
		if msg.Role == llm.RoleUser {
			last = msg.Content
		}
	}
	text := "re: " + last
	if last == "long" {
		text = longReply
	}
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: text}, FinishReason: "stop"}, nil
}

// longReply is a reply Telegram gets in three parts.
var longReply = func() string {
	var b strings.Builder
	for i := range 160 {
		fmt.Fprintf(&b, "Paragraph %d of a long answer that Telegram gets in three parts.\n\n", i)
	}
	return b.String()
}()

func (m *echoModel) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// outboxEvents collects the outbox's events for a test to wait on.
type outboxEvents chan reply.OutboxEvent

func (e outboxEvents) wait(t *testing.T, kind string, n int) {
	t.Helper()
	for n > 0 {
		select {
		case ev := <-e:
			if ev.Kind == kind {
				n--
			}
		case <-t.Context().Done():
			t.Fatalf("still waiting for %d %s events", n, kind)
		case <-time.After(20 * time.Second): // a bound on a broken test, not a synchronisation
			t.Fatalf("still waiting for %d %s events after 20s", n, kind)
		}
	}
}

// tgRouter is a router with the real agent (echoModel) and the real
// Telegram adapter on a fake Bot API, on the store st, with the outbox on
// the virtual clock.
type tgRouter struct {
	r      *router.Router
	tg     *telegram.Adapter
	model  *echoModel
	events outboxEvents
	log    *testkit.SyncBuffer
	stop   func()
}

func startTgRouter(t *testing.T, st *store.Store, fake *tgfake.Fake, clock *vclock, maxAge time.Duration) *tgRouter {
	t.Helper()
	return startTgRouterWith(t, st, fake, clock, maxAge, nil, "")
}

// startTgRouterWith is startTgRouter with another model (nil: echoModel)
// and a files root for send_file.
func startTgRouterWith(t *testing.T, st *store.Store, fake *tgfake.Fake, clock *vclock, maxAge time.Duration, m agent.Model, filesRoot string) *tgRouter {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	logs := &testkit.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	ad, err := telegram.New(ctx, telegram.Options{Token: fake.Token, APIEndpoint: fake.URL, PollTimeout: time.Second,
		Logger: log, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	model := &echoModel{}
	if m == nil {
		m = model
	}
	ag, err := agent.New(agent.Config{Model: m, Store: st, Sources: []agent.Source{agent.ChannelContext()}})
	if err != nil {
		t.Fatal(err)
	}
	events := make(outboxEvents, 100)
	r, err := router.New(router.Config{Store: st, Agent: ag, Logger: log,
		NewTicker: func(time.Duration) router.Ticker { return stoppedTicker{} },
		Replies: reply.Options{Now: clock.Now, FilesRoot: filesRoot,
			Outbox: st, OutboxConfig: reply.OutboxConfig{MaxAge: maxAge, After: clock.After, OnEvent: func(ev reply.OutboxEvent) { events <- ev }}}})
	if err != nil {
		t.Fatal(err)
	}
	r.AddChannel(ad, everyone)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = ad.Run(ctx, r) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = r.Shutdown(context.Background())
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	return &tgRouter{r: r, tg: ad, model: model, events: events, log: logs, stop: stop}
}

func openStore(t *testing.T, path string) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// sentByChat is the texts the fake Telegram holds, by chat.
func sentByChat(fake *tgfake.Fake) map[int64][]string {
	out := map[int64][]string{}
	for _, m := range fake.Sent() {
		out[m.ChatID] = append(out[m.ChatID], m.Text)
	}
	return out
}

const badGateway = "<html><body><h1>502 Bad Gateway</h1></body></html>"

// A 45-second Telegram outage (every sendMessage a proxy's 502 page) ends
// with exactly one late reply per message, in order within each chat, and
// nothing lost: the turns end normally, their replies wait in the outbox
// and go out once Telegram is back.
func TestOutboxTelegramOutage(t *testing.T) {
	fake := tgfake.New(t, "123:ABC")
	st := openStore(t, filepath.Join(t.TempDir(), "o.db"))
	clock := newVclock(t)
	start := clock.Now()
	var lifted time.Time
	clock.onAdvance = func(now time.Time) {
		if lifted.IsZero() && now.Sub(start) >= 45*time.Second {
			lifted = now
			fake.EndOutage("sendMessage")
		}
	}
	fake.Outage("sendMessage", http.StatusBadGateway, badGateway)
	e := startTgRouter(t, st, fake, clock, 0)

	// Two messages in one chat, one in another, all answered during the outage.
	fake.PushText(7, 7, "ada", "a1")
	e.events.wait(t, reply.OutboxQueued, 1)
	fake.PushText(7, 7, "ada", "a2")
	fake.PushText(8, 8, "bob", "b1")
	e.events.wait(t, reply.OutboxQueued, 2)
	if n := len(fake.Sent()); n != 0 {
		t.Fatalf("%d messages went out during the outage", n)
	}
	if err := e.r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	pending, err := st.PendingOutbox(t.Context())
	if err != nil || len(pending) != 3 {
		t.Fatalf("outbox holds %d replies (%v), want 3", len(pending), err)
	}
	for _, it := range pending {
		turn, ok, err := st.TurnForInbox(t.Context(), it.InboxID)
		if err != nil || !ok || turn.Status != store.TurnCompleted || turn.Error != "" || turn.Delivery != store.DeliveryPending {
			t.Fatalf("turn of inbox %d: %+v (%v), want completed without error, delivery pending", it.InboxID, turn, err)
		}
	}
	if got := e.r.PendingReplies(); got != 3 {
		t.Errorf("PendingReplies = %d, want 3", got)
	}

	close(clock.run) // the worker goes through the outage's virtual time
	e.events.wait(t, reply.OutboxDelivered, 3)

	want := map[int64][]string{7: {"re: a1", "re: a2"}, 8: {"re: b1"}}
	if got := sentByChat(fake); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Telegram holds %v, want exactly one reply per message, in order: %v", got, want)
	}
	clock.mu.Lock()
	liftedAt := lifted
	clock.mu.Unlock()
	if liftedAt.IsZero() || clock.Now().Before(start.Add(45*time.Second)) {
		t.Fatalf("delivered at +%s, before the 45 s outage ended", clock.Now().Sub(start))
	}
	if calls := fake.Calls("sendMessage"); calls <= 3*4 {
		t.Errorf("%d sendMessage calls: the outbox did not retry during the outage", calls)
	}
	for _, it := range pending {
		n, err := st.Deliveries(t.Context(), it.InboxID)
		turn, _, _ := st.TurnForInbox(t.Context(), it.InboxID)
		if err != nil || n != 1 || turn.Delivery != store.DeliveryLate {
			t.Errorf("inbox %d: %d deliveries (%v), turn delivery %q; want 1, late", it.InboxID, n, err, turn.Delivery)
		}
	}
	if left, _ := st.PendingOutbox(t.Context()); len(left) != 0 || e.r.PendingReplies() != 0 {
		t.Errorf("outbox still holds %d replies (gauge %d)", len(left), e.r.PendingReplies())
	}
	if e.model.count() != 3 {
		t.Errorf("the model ran %d times, want once per message", e.model.count())
	}
}

// endingClock is a virtual clock that ends fake's outage (or flood) of
// sendMessage once d has passed on it from start.
func endingClock(t *testing.T, fake *tgfake.Fake, d time.Duration) (clock *vclock, start time.Time) {
	clock = newVclock(t)
	start = clock.Now()
	clock.onAdvance = func(now time.Time) {
		if now.Sub(start) >= d {
			fake.EndOutage("sendMessage")
		}
	}
	return clock, start
}

// A 90-second flood ban (every sendMessage answered 429 with retry_after
// 90) is waited out: the reply the turn could not send goes out once, at
// the end of the ban, with no attempt inside it (each would only prolong
// a real ban).
func TestOutboxWaitsOutRetryAfter(t *testing.T) {
	fake := tgfake.New(t, "123:ABC")
	st := openStore(t, filepath.Join(t.TempDir(), "o.db"))
	clock, start := endingClock(t, fake, 90*time.Second)
	fake.Flood("sendMessage", 90)
	e := startTgRouter(t, st, fake, clock, 0)
	fake.PushText(7, 7, "ada", "hello")
	e.events.wait(t, reply.OutboxQueued, 1)
	if n := fake.Calls("sendMessage"); n != 1 {
		t.Fatalf("%d sendMessage calls during the turn, want 1 (a 90 s retry_after is longer than the adapter waits)", n)
	}
	close(clock.run)
	e.events.wait(t, reply.OutboxDelivered, 1)
	at := clock.Now().Sub(start)
	if n := fake.Calls("sendMessage"); n != 2 {
		t.Errorf("%d sendMessage calls, want 2: the turn's, refused, and one after the ban (delivered at +%s)", n, at)
	}
	if got := sentByChat(fake); fmt.Sprint(got) != fmt.Sprint(map[int64][]string{7: {"re: hello"}}) {
		t.Errorf("Telegram holds %v, want the reply once", got)
	}
	if at < 90*time.Second {
		t.Errorf("delivered at +%s, inside the 90 s ban", at)
	}
}

// A reply waiting in the outbox when the gateway stops is delivered by the
// next process, and its message, pending again after a crash, is answered
// by it: no second turn.
func TestOutboxAfterRestart(t *testing.T) {
	fake := tgfake.New(t, "123:ABC")
	path := filepath.Join(t.TempDir(), "o.db")
	st := openStore(t, path)
	fake.Outage("sendMessage", http.StatusBadGateway, badGateway)
	first := startTgRouter(t, st, fake, newVclock(t), 0)
	fake.PushText(7, 7, "ada", "hello")
	first.events.wait(t, reply.OutboxQueued, 1)
	first.stop()

	// A crash between keeping a reply and finishing its message: the message
	// is pending again, with its reply in the outbox.
	id, _, err := st.Intake(t.Context(), store.InboxItem{Channel: "telegram", ChatKey: "9", MessageID: "1",
		Payload: []byte(`{"Channel":"telegram","ChatID":"9","ChatType":"dm","MessageID":"1","UserID":"9","Text":"crashed","Mentioned":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.EnqueueOutbox(t.Context(), store.OutboxItem{InboxID: id, Channel: "telegram", ChatKey: "9",
		MessageID: "1", Text: "re: crashed", Attempts: 1, LastError: "HTTP 502"}); err != nil {
		t.Fatal(err)
	}
	fake.EndOutage("sendMessage")

	clock := newVclock(t)
	close(clock.run)
	second := startTgRouter(t, st, fake, clock, 0)
	second.events.wait(t, reply.OutboxDelivered, 2)
	if err := second.r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := map[int64][]string{7: {"re: hello"}, 9: {"re: crashed"}}
	if got := sentByChat(fake); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Telegram holds %v, want %v", got, want)
	}
	if n := second.model.count(); n != 0 {
		t.Errorf("the restarted gateway ran %d turns, want none", n)
	}
	if pending, _ := st.PendingInbox(t.Context()); len(pending) != 0 {
		t.Errorf("%d messages still pending", len(pending))
	}
	for _, inbox := range []int64{1, id} {
		if n, _ := st.Deliveries(t.Context(), inbox); n != 1 {
			t.Errorf("inbox %d has %d deliveries, want 1", inbox, n)
		}
	}
}

// A reply in parts cut off by the outage after its first part is kept
// whole, and the worker sends only the parts Telegram did not get.
func TestOutboxCompletesASplitReply(t *testing.T) {
	fake := tgfake.New(t, "123:ABC")
	st := openStore(t, filepath.Join(t.TempDir(), "o.db"))
	clock, _ := endingClock(t, fake, 45*time.Second)
	fake.OutageAfter("sendMessage", 1, http.StatusBadGateway, badGateway)
	e := startTgRouter(t, st, fake, clock, 0)
	fake.PushText(7, 7, "ada", "long")
	e.events.wait(t, reply.OutboxQueued, 1)
	if n := len(fake.Sent()); n != 1 {
		t.Fatalf("%d parts went out before the outage, want 1", n)
	}
	close(clock.run)
	e.events.wait(t, reply.OutboxDelivered, 1)
	var texts []string
	for _, m := range fake.Sent() {
		texts = append(texts, m.Text)
	}
	all := strings.Join(texts, "\n")
	if len(texts) != 3 || strings.Count(all, "Paragraph 0 ") != 1 || strings.Count(all, "Paragraph 159 ") != 1 {
		t.Fatalf("Telegram holds %d messages, want the reply's 3 parts once each, in order:\n%s", len(texts), all)
	}
	if n, _ := st.Deliveries(t.Context(), 1); n != 1 {
		t.Errorf("%d deliveries, want 1", n)
	}
}

// flakyChannel is a fakeChannel whose platform can be down (its sends fail
// as unavailable) or refuse sends for good.
type flakyChannel struct {
	*fakeChannel
	mu        sync.Mutex
	down      bool
	refuse    bool
	refused   int
	refusedIn map[string]int // by chat
}

func (c *flakyChannel) set(down, refuse bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down, c.refuse = down, refuse
}

func (c *flakyChannel) Send(ctx context.Context, m channels.Outbound) (string, error) {
	c.mu.Lock()
	down, refuse := c.down, c.refuse
	if down || refuse {
		c.refused++
		if c.refusedIn == nil {
			c.refusedIn = map[string]int{}
		}
		c.refusedIn[m.ChatID]++
	}
	c.mu.Unlock()
	switch {
	case down:
		return "", channels.Unavailable(errors.New("fake: HTTP 502 Bad Gateway"))
	case refuse:
		return "", errors.New("fake: 403 Forbidden: bot was blocked by the user")
	}
	return c.fakeChannel.Send(ctx, m)
}

type flakyEnv struct {
	r      *router.Router
	st     *store.Store
	ch     *flakyChannel
	clock  *vclock
	events outboxEvents
	log    *testkit.SyncBuffer
}

func newFlakyEnv(t *testing.T, maxAge time.Duration) *flakyEnv {
	t.Helper()
	st := openStore(t, filepath.Join(t.TempDir(), "f.db"))
	e := &flakyEnv{st: st, ch: &flakyChannel{fakeChannel: newFakeChannel()}, clock: newVclock(t),
		events: make(outboxEvents, 100), log: &testkit.SyncBuffer{}}
	var err error
	e.r, err = router.New(router.Config{Store: st, Agent: newFakeRunner(),
		Logger:    slog.New(slog.NewTextHandler(e.log, nil)),
		NewTicker: func(time.Duration) router.Ticker { return stoppedTicker{} },
		Replies: reply.Options{Now: e.clock.Now,
			Outbox: st, OutboxConfig: reply.OutboxConfig{MaxAge: maxAge, After: e.clock.After, OnEvent: func(ev reply.OutboxEvent) { e.events <- ev }}}})
	if err != nil {
		t.Fatal(err)
	}
	e.r.AddChannel(e.ch, everyone)
	if err := e.r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.r.Shutdown(context.Background()) })
	return e
}

func (e *flakyEnv) say(t *testing.T, chat, text string) {
	t.Helper()
	if err := e.r.Deliver(t.Context(), msg(chat, chat, text)); err != nil {
		t.Fatal(err)
	}
}

// Replies to one chat stay in order: while one waits in the outbox, the
// next waits behind it even though the platform is back, and both go out
// in order.
func TestOutboxKeepsOrder(t *testing.T) {
	e := newFlakyEnv(t, 0)
	e.ch.set(true, false)
	e.say(t, "c1", "first")
	e.events.wait(t, reply.OutboxQueued, 1)
	e.ch.set(false, false) // back, but the first reply still waits for its retry
	e.say(t, "c1", "second")
	e.events.wait(t, reply.OutboxQueued, 1)
	e.say(t, "c2", "other chat")
	<-e.ch.Notify // another chat is not held up
	if got := e.ch.Texts(); !slices.Equal(got, []string{"echo: other chat"}) {
		t.Fatalf("sent %q before the retry, want only the other chat's reply", got)
	}
	close(e.clock.run)
	e.events.wait(t, reply.OutboxDelivered, 2)
	if got := e.ch.Texts(); !slices.Equal(got, []string{"echo: other chat", "echo: first", "echo: second"}) {
		t.Fatalf("sent %q, want the chat's replies in order", got)
	}
}

// While the platform is down, one chat's reply probes it for all: the
// other chats' replies are not tried (each try costs the adapter's own
// retries) until it comes back.
func TestOutboxProbesOneChatPerChannel(t *testing.T) {
	e := newFlakyEnv(t, 0)
	e.ch.set(true, false)
	e.say(t, "c1", "first chat")
	e.events.wait(t, reply.OutboxQueued, 1)
	e.say(t, "c2", "second chat")
	e.events.wait(t, reply.OutboxQueued, 1)
	start := e.clock.Now()
	e.clock.mu.Lock()
	e.clock.onAdvance = func(now time.Time) {
		if now.Sub(start) >= 45*time.Second {
			e.ch.set(false, false)
		}
	}
	e.clock.mu.Unlock()
	close(e.clock.run)
	e.events.wait(t, reply.OutboxDelivered, 2)
	e.ch.mu.Lock()
	c1, c2 := e.ch.refusedIn["c1"], e.ch.refusedIn["c2"]
	e.ch.mu.Unlock()
	if c1 < 3 || c2 != 1 {
		t.Errorf("failed sends during the outage: c1 %d, c2 %d; want c1 retried (3+), c2 only its turn's send", c1, c2)
	}
	if got := e.ch.Texts(); !slices.Equal(got, []string{"echo: first chat", "echo: second chat"}) {
		t.Errorf("sent %q", got)
	}
}

// A reply still undelivered after the maximum age is dropped with an
// ERROR and an event (the metric), never silently; so is one the platform
// refuses for good on a retry.
func TestOutboxDrops(t *testing.T) {
	t.Run("max age", func(t *testing.T) {
		e := newFlakyEnv(t, time.Hour)
		e.ch.set(true, false)
		e.say(t, "c1", "too late")
		e.events.wait(t, reply.OutboxQueued, 1)
		close(e.clock.run)
		e.events.wait(t, reply.OutboxDropped, 1)
		if !strings.Contains(e.log.String(), `level=ERROR msg="reply dropped undelivered"`) ||
			!strings.Contains(e.log.String(), "not delivered within 1h0m0s") {
			t.Errorf("no ERROR naming the age in the log:\n%s", e.log.String())
		}
		if e.clock.Now().Sub(time.Now()) < time.Hour-time.Minute {
			t.Errorf("dropped at +%s, before the maximum age", e.clock.Now().Sub(time.Now()))
		}
		assertDropped(t, e)
	})
	t.Run("refused for good", func(t *testing.T) {
		e := newFlakyEnv(t, 0)
		e.ch.set(true, false)
		e.say(t, "c1", "blocked later")
		e.events.wait(t, reply.OutboxQueued, 1)
		e.ch.set(false, true)
		close(e.clock.run)
		e.events.wait(t, reply.OutboxDropped, 1)
		if !strings.Contains(e.log.String(), "the platform refused it: fake: 403 Forbidden") {
			t.Errorf("no ERROR naming the refusal in the log:\n%s", e.log.String())
		}
		assertDropped(t, e)
	})
}

func assertDropped(t *testing.T, e *flakyEnv) {
	t.Helper()
	if left, _ := e.st.PendingOutbox(t.Context()); len(left) != 0 || e.r.PendingReplies() != 0 {
		t.Errorf("outbox still holds %d replies (gauge %d)", len(left), e.r.PendingReplies())
	}
	if got := e.ch.Texts(); len(got) != 0 {
		t.Errorf("sent %q, want nothing", got)
	}
}

// A send the platform refuses for good is not kept: the turn sees the
// error as before.
func TestOutboxNotForRefusals(t *testing.T) {
	e := newFlakyEnv(t, 0)
	e.ch.set(false, true)
	e.say(t, "c1", "blocked")
	if err := e.r.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if left, _ := e.st.PendingOutbox(t.Context()); len(left) != 0 {
		t.Errorf("outbox holds %d replies, want none", len(left))
	}
	if e.ch.refused != 1 {
		t.Errorf("%d sends refused, want 1", e.ch.refused)
	}
}
