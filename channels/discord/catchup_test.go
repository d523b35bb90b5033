package discord

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/discordfake"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// intake is a Sink that stores each message once by chat and id, as the
// router's intake does, and answers LastSeen from what it stored.
type intake struct {
	mu      sync.Mutex
	calls   []channels.Inbound // every Deliver, duplicates included
	stored  map[string]string  // chat → newest message id stored
	seen    map[[2]string]bool
	changed chan struct{}
}

func newIntake() *intake {
	return &intake{stored: map[string]string{}, seen: map[[2]string]bool{}, changed: make(chan struct{})}
}

func (s *intake) Deliver(_ context.Context, in channels.Inbound) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, in)
	if k := [2]string{in.ChatID, in.MessageID}; !s.seen[k] {
		s.seen[k] = true
		if compareIDs(in.MessageID, s.stored[in.ChatID]) > 0 {
			s.stored[in.ChatID] = in.MessageID
		}
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

func (s *intake) LastSeen(context.Context) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for k, v := range s.stored {
		out[k] = v
	}
	return out, nil
}

// seed stores a message id as taken in by an earlier process.
func (s *intake) seed(chat, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stored[chat] = id
	s.seen[[2]string{chat, id}] = true
}

// ids returns the message ids stored for chat, in the order of their
// first delivery.
func (s *intake) ids(chat string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, in := range s.calls {
		if in.ChatID == chat && !slices.Contains(out, in.MessageID) {
			out = append(out, in.MessageID)
		}
	}
	return out
}

// count is how many times id was delivered.
func (s *intake) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, in := range s.calls {
		if in.MessageID == id {
			n++
		}
	}
	return n
}

func (s *intake) get(id string) (channels.Inbound, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.calls {
		if in.MessageID == id {
			return in, true
		}
	}
	return channels.Inbound{}, false
}

// waitFor waits until cond holds.
func (s *intake) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := waitCtx(t)
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; delivered %d", what, ctx.Err(), len(s.calls))
		}
	}
}

// runAdapter runs a new adapter (a new process, as far as the gateway
// knows) until the returned stop is called.
func runAdapter(t *testing.T, f *discordfake.Fake, sink *intake, logs *testkit.SyncBuffer, limit int) (stop func()) {
	t.Helper()
	a, err := New(Options{
		Token: f.Token, APIBase: f.APIBase(), Sleep: (&sleeper{}).sleep, LastSeen: sink.LastSeen, CatchUpLimit: limit,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, sink) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// Messages posted while no process had a gateway session reach the sink
// after the next READY, once each, in order, before the live ones of the
// same chat, and through the same filters as live ones.
func TestCatchUpAfterRestart(t *testing.T) {
	f := discordfake.New(t)
	f.AddChannel("dm-1", discordfake.ChannelTypeDM, "", "")
	f.AddChannel("g-text", discordfake.ChannelTypeGuildText, "g1", "")
	f.AddChannel("th-1", discordfake.ChannelTypePublicThread, "g1", "g-text")
	f.AddChannel("dm-old", discordfake.ChannelTypeDM, "", "")
	f.AddChannel("dm-new", discordfake.ChannelTypeDM, "", "")
	mention := "<@" + f.Bot.ID + "> "
	sink := newIntake()
	logs := &testkit.SyncBuffer{}

	// The first process talks in three chats.
	stop := runAdapter(t, f, sink, logs, 130)
	if _, err := f.WaitIdentify(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	live1 := []discordfake.Message{
		f.MessageCreate("dm-1", "", "u1", "alice", "first"),
		f.MessageCreate("g-text", "g1", "u1", "alice", mention+"hi all"),
		f.MessageCreate("th-1", "g1", "u1", "alice", mention+"in a thread"),
	}
	for _, m := range live1 {
		f.Dispatch("MESSAGE_CREATE", m)
	}
	sink.waitFor(t, "the first process's messages", func() bool {
		return len(sink.ids("dm-1"))+len(sink.ids("g-text"))+len(sink.ids("th-1")) == 3
	})
	stop()

	// While it is down: a dispatch to no session (the fake drops it at the
	// next IDENTIFY, as Discord does) and messages only REST shows.
	sink.seed("dm-old", snowflakeAt(time.Now().Add(-72*time.Hour)))
	down := func(ch, guild, author, text string, opts ...discordfake.MsgOption) discordfake.Message {
		m := f.MessageCreate(ch, guild, author, author+"-name", text, opts...)
		f.Post(m)
		return m
	}
	d2 := f.MessageCreate("dm-1", "", "u1", "alice", "while you were out")
	f.Dispatch("MESSAGE_CREATE", d2)
	d3 := down("dm-1", "", "u1", "and again")
	stranger := down("dm-1", "", "u9", "a stranger writes")
	unmentioned := down("g-text", "g1", "u1", "just chatting")
	mentioned := down("g-text", "g1", "u1", mention+"are you there?")
	down("g-text", "g1", "b7", mention+"beep", discordfake.FromBot())
	own := f.MessageCreate("g-text", "g1", f.Bot.ID, f.Bot.Username, "my own words")
	own.Author = f.Bot
	f.Post(own)
	var thread []string
	for i := range 140 {
		thread = append(thread, down("th-1", "g1", "u1", mention+"t"+strconv.Itoa(i)).ID)
	}
	stale := f.MessageCreate("dm-old", "", "u1", "alice", "two days ago")
	stale.ID = strconv.FormatUint(mustUint(t, snowflakeAt(time.Now().Add(-48*time.Hour)))+1, 10)
	f.Post(stale)
	fresh := down("dm-old", "", "u1", "back after a while")
	down("dm-new", "", "u1", "a chat the bot never talked in")

	// The next process: its READY catches up; a live message dispatched
	// right after READY comes after the recovered ones of its chat.
	stop = runAdapter(t, f, sink, logs, 130)
	if _, err := f.WaitIdentify(waitCtx(t), 2); err != nil {
		t.Fatal(err)
	}
	live2 := f.MessageCreate("dm-1", "", "u1", "alice", "live after restart")
	f.Dispatch("MESSAGE_CREATE", live2)

	want := map[string][]string{
		"dm-1":   {live1[0].ID, d2.ID, d3.ID, stranger.ID, live2.ID},
		"g-text": {live1[1].ID, unmentioned.ID, mentioned.ID},
		"th-1":   append([]string{live1[2].ID}, thread[:130]...), // the limit
		"dm-old": {fresh.ID},
	}
	sink.waitFor(t, "the recovered messages", func() bool {
		for chat, ids := range want {
			if len(sink.ids(chat)) < len(ids) {
				return false
			}
		}
		return true
	})
	stop() // Run returns once the catch-up is over
	for chat, ids := range want {
		if got := sink.ids(chat); !slices.Equal(got, ids) {
			t.Errorf("chat %s: delivered %v\nwant %v", chat, got, ids)
		}
	}
	if got := sink.ids("dm-new"); len(got) != 0 {
		t.Errorf("chat dm-new (never talked in) got %v; its messages are not looked for", got)
	}

	// Normalised as live: a guild message knows its guild though REST
	// messages carry no guild_id, so without a mention it is not addressed
	// to the bot; a DM is; the stranger is handed on as who they are, for
	// the router's allowlist to refuse.
	checks := []struct {
		id        string
		chatType  channels.ChatType
		mentioned bool
		user      string
	}{
		{unmentioned.ID, channels.Group, false, "u1"},
		{mentioned.ID, channels.Group, true, "u1"},
		{d3.ID, channels.DM, true, "u1"},
		{stranger.ID, channels.DM, true, "u9"},
	}
	for _, c := range checks {
		in, _ := sink.get(c.id)
		if in.ChatType != c.chatType || in.Mentioned != c.mentioned || in.UserID != c.user {
			t.Errorf("message %s: type %q mentioned %v user %q, want %q %v %q", c.id, in.ChatType, in.Mentioned, in.UserID,
				c.chatType, c.mentioned, c.user)
		}
	}
	if in, _ := sink.get(mentioned.ID); in.Text != "are you there?" || in.Space != "g1" || in.ChatTitle != "channel-g-text" {
		t.Errorf("recovered guild message = %+v, want text without the mention, space g1, title channel-g-text", in)
	}
	// What the first process took in is not asked for again.
	for _, m := range live1 {
		if n := sink.count(m.ID); n != 1 {
			t.Errorf("message %s delivered %d times, want once", m.ID, n)
		}
	}
	for _, line := range []string{"caught up on messages", "chats=4", "chats_failed=0", "catch-up stopped at its limit"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("the log lacks %q:\n%s", line, logs.String())
		}
	}
}

// A chat whose catch-up fails (here, a channel the bot can no longer see)
// is logged and skipped; the others are recovered, and live messages flow.
func TestCatchUpFailureIsNotFatal(t *testing.T) {
	f := discordfake.New(t)
	f.AddChannel("dm-1", discordfake.ChannelTypeDM, "", "")
	sink := newIntake()
	sink.seed("gone", "100")
	sink.seed("dm-1", "100")
	m := f.MessageCreate("dm-1", "", "u1", "alice", "missed")
	f.Post(m)
	logs := &testkit.SyncBuffer{}
	stop := runAdapter(t, f, sink, logs, 0)
	if _, err := f.WaitIdentify(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	live := f.MessageCreate("gone", "", "u1", "alice", "live")
	f.Dispatch("MESSAGE_CREATE", live)
	sink.waitFor(t, "the messages", func() bool {
		_, a := sink.get(m.ID)
		_, b := sink.get(live.ID)
		return a && b
	})
	stop() // Run returns once the catch-up is over
	for _, line := range []string{"level=WARN msg=\"discord: catch-up of a chat failed", "chat=gone", "chats_failed=1"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("the log lacks %q:\n%s", line, logs.String())
		}
	}
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCompareIDs(t *testing.T) {
	for _, tc := range []struct {
		x, y string
		want int
	}{
		{"99", "100", -1},
		{"1300000000000000007", "200000000000000000", 1},
		{"5", "5", 0},
		{"", "1", -1},
	} {
		if got := compareIDs(tc.x, tc.y); got != tc.want {
			t.Errorf("compareIDs(%q, %q) = %d, want %d", tc.x, tc.y, got, tc.want)
		}
	}
	at := time.UnixMilli(discordEpoch + 1234)
	if id := snowflakeAt(at); id != strconv.FormatUint(1234<<22, 10) {
		t.Errorf("snowflakeAt = %s, want %d", id, uint64(1234)<<22)
	}
}
