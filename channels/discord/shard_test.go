package discord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/discordfake"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// guildOn returns a guild id (a snowflake) whose events Discord sends to
// shard of count: (id >> 22) % count == shard.
func guildOn(t *testing.T, n, shard, count int) string {
	t.Helper()
	id := strconv.FormatUint(uint64(1000*count+n*count+shard)<<22|777, 10)
	if got := discordfake.ShardOf(id, count); got != shard {
		t.Fatalf("guild %s is on shard %d, want %d", id, got, shard)
	}
	return id
}

// waitLog is a log buffer a test can wait on.
type waitLog struct{ testkit.SyncBuffer }

func newWaitLog() *waitLog { return &waitLog{} }

// line waits for a log line that contains every one of parts and returns it.
func (w *waitLog) line(t *testing.T, parts ...string) string {
	t.Helper()
	l, err := w.WaitFor(waitCtx(t), func(text string) (string, bool) {
	lines:
		for l := range strings.SplitSeq(text, "\n") {
			for _, p := range parts {
				if !strings.Contains(l, p) {
					continue lines
				}
			}
			return l, true
		}
		return "", false
	})
	if err != nil {
		t.Fatalf("no log line with %q:\n%s", parts, w.String())
	}
	return l
}

func (w *waitLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// started is an adapter whose Run is in progress.
type started struct {
	a    *Adapter
	stop func() error // ends Run and returns its error; once
}

// start runs a in the background until stop (or the test's end).
func start(t *testing.T, a *Adapter, sink channels.Sink) *started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, sink) }()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return &started{a: a, stop: stop}
}

// stopAll stops Runs at once (each costs discordgo's 1 s close) and
// fails the test if one returned an error.
func stopAll(t *testing.T, runs ...*started) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(runs))
	for i, r := range runs {
		wg.Go(func() { errs[i] = r.stop() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Run %d: %v", i, err)
		}
	}
}

func intp(n int) *int { return &n }

// Two adapters that split the gateway into two shards, and one unsharded
// adapter, on one fake Discord: each IDENTIFY carries its shard, a guild's
// messages and commands reach only the adapter of the guild's shard, DMs
// only shard 0, and the unsharded adapter gets everything.
func TestShardedAdapters(t *testing.T) {
	f := discordfake.New(t)
	type adapter struct {
		name string
		o    Options
		rec  *recorder
		logs *waitLog
		run  *started
	}
	adapters := []*adapter{
		{name: "0", o: Options{ShardCount: 2, ShardID: intp(0)}},
		{name: "1", o: Options{ShardCount: 2, ShardID: intp(1)}},
		{name: "u", o: Options{}},
	}
	for _, ad := range adapters {
		ad.rec, ad.logs = newRecorder(), newWaitLog()
		ad.o.Token, ad.o.APIBase, ad.o.Logger, ad.o.Sleep = f.Token, f.APIBase(), ad.logs.logger(), (&sleeper{}).sleep
		a, err := New(ad.o)
		if err != nil {
			t.Fatal(err)
		}
		ad.run = start(t, a, ad.rec)
	}
	if _, err := f.WaitIdentify(waitCtx(t), len(adapters)); err != nil {
		t.Fatal(err)
	}
	shards := map[string]bool{}
	for _, id := range f.IdentifyLog() {
		shards[fmt.Sprint(id.Shard)] = true
	}
	for _, want := range []string{"&[0 2]", "&[1 2]", "<nil>"} {
		if !shards[want] {
			t.Errorf("IDENTIFY shards = %v, want one with %s", shards, want)
		}
	}
	for _, ad := range adapters {
		want := []string{"discord: connected", "shard=" + ad.name, "shards=2"}
		if ad.name == "u" {
			l := ad.logs.line(t, "discord: connected")
			if strings.Contains(l, "shard") {
				t.Errorf("unsharded adapter logged %q, want no shard", l)
			}
			continue
		}
		ad.logs.line(t, want...)
	}

	g0, g1 := guildOn(t, 0, 0, 2), guildOn(t, 1, 1, 2)
	g0b, g1b := guildOn(t, 2, 0, 2), guildOn(t, 3, 1, 2)
	for ch, g := range map[string]string{"c-g0": g0, "c-g1": g1, "c-g0b": g0b, "c-g1b": g1b} {
		f.AddChannel(ch, discordfake.ChannelTypeGuildText, g, "")
	}
	mention := "<@" + f.Bot.ID + "> "
	rows := []struct {
		name    string
		chat    string
		guild   string
		command bool   // a slash command, not a message
		to      string // the adapters it reaches
	}{
		{"message in a guild on shard 0", "c-g0", g0, false, "0u"},
		{"message in a guild on shard 1", "c-g1", g1, false, "1u"},
		{"message in another guild on shard 0", "c-g0b", g0b, false, "0u"},
		{"message in another guild on shard 1", "c-g1b", g1b, false, "1u"},
		{"DM", "dm-1", "", false, "0u"},
		{"slash command in a guild on shard 1", "c-g1", g1, true, "1u"},
		{"slash command in a guild on shard 0", "c-g0b", g0b, true, "0u"},
		{"slash command in a DM", "dm-2", "", true, "0u"},
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		if r.command {
			ic := f.SlashCommand(r.chat, r.guild, "u1", "alice", "status")
			f.Dispatch("INTERACTION_CREATE", ic)
			ids[i] = ic.ID
			continue
		}
		m := f.MessageCreate(r.chat, r.guild, "u1", "alice", mention+r.name)
		f.Dispatch("MESSAGE_CREATE", m)
		ids[i] = m.ID
	}
	// Barriers: the last message each adapter gets. An adapter reads its
	// connection in order and queues each message before the next is
	// read; once its barrier is delivered, stopping it (which drains its
	// queues) leaves in its sink all it will ever deliver of the above.
	b0 := f.MessageCreate("dm-1", "", "u1", "alice", "barrier for shard 0")
	b1 := f.MessageCreate("c-g1", g1, "u1", "alice", "barrier for shard 1")
	f.Dispatch("MESSAGE_CREATE", b0)
	f.Dispatch("MESSAGE_CREATE", b1)
	adapters[0].rec.wait(t, b0.ID)
	adapters[1].rec.wait(t, b1.ID)
	adapters[2].rec.wait(t, b0.ID)
	adapters[2].rec.wait(t, b1.ID)
	stopAll(t, adapters[0].run, adapters[1].run, adapters[2].run)

	for i, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			for _, ad := range adapters {
				want := 0
				if strings.Contains(r.to, ad.name) {
					want = 1
				}
				if got := ad.rec.count(ids[i]); got != want {
					t.Errorf("adapter %s got it %d times, want %d (it should reach %q)", ad.name, got, want, r.to)
				}
			}
		})
	}
	if n := adapters[0].rec.count(b1.ID); n != 0 {
		t.Errorf("adapter 0 got shard 1's barrier %d times", n)
	}
	if n := adapters[1].rec.count(b0.ID); n != 0 {
		t.Errorf("adapter 1 got the DM barrier %d times", n)
	}
}

// waitChan waits for a value on ch.
func waitChan[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-waitCtx(t).Done():
		t.Fatal("timed out")
		var zero T
		return zero
	}
}

// runResult waits for Run's result.
func runResult(t *testing.T, runErr <-chan error) error {
	t.Helper()
	select {
	case err := <-runErr:
		return err
	case <-waitCtx(t).Done():
		t.Fatal("Run did not return")
		return nil
	}
}

// After a restart, each shard catches up only on the chats whose live
// messages it gets: those of its guilds, and DMs on shard 0. It reads each
// chat's guild (as it must, REST messages carry none) and does not fetch
// the history of another shard's chat.
func TestShardedCatchUp(t *testing.T) {
	f := discordfake.New(t)
	g0, g1 := guildOn(t, 0, 0, 2), guildOn(t, 1, 1, 2)
	f.AddChannel("c-g0", discordfake.ChannelTypeGuildText, g0, "")
	f.AddChannel("c-g1", discordfake.ChannelTypeGuildText, g1, "")
	f.AddChannel("dm-1", discordfake.ChannelTypeDM, "", "")
	mention := "<@" + f.Bot.ID + "> "
	before := f.NewID() // taken in before the restart
	missed := map[string]string{}
	for chat, guild := range map[string]string{"c-g0": g0, "c-g1": g1, "dm-1": ""} {
		m := f.MessageCreate(chat, guild, "u1", "alice", mention+"while down in "+chat)
		f.Post(m)
		missed[chat] = m.ID
	}

	type shard struct {
		id         int
		sink       *intake
		logs       *waitLog
		run        *started
		own, other []string // chats
	}
	shards := []*shard{
		{id: 0, own: []string{"c-g0", "dm-1"}, other: []string{"c-g1"}},
		{id: 1, own: []string{"c-g1"}, other: []string{"c-g0", "dm-1"}},
	}
	for _, s := range shards {
		s.sink, s.logs = newIntake(), newWaitLog()
		for chat := range missed {
			s.sink.seed(chat, before)
		}
		a, err := New(Options{Token: f.Token, APIBase: f.APIBase(), Sleep: (&sleeper{}).sleep, Logger: s.logs.logger(),
			LastSeen: s.sink.LastSeen, ShardCount: 2, ShardID: intp(s.id)})
		if err != nil {
			t.Fatal(err)
		}
		s.run = start(t, a, s.sink)
	}
	for _, s := range shards {
		// Logged once every chat's catch-up is over.
		l := s.logs.line(t, "caught up on messages")
		for _, want := range []string{"chats=3", fmt.Sprintf("messages=%d", len(s.own)),
			fmt.Sprintf("chats_other_shards=%d", len(s.other)), "chats_failed=0", fmt.Sprintf("shard=%d", s.id)} {
			if !strings.Contains(l, want) {
				t.Errorf("shard %d logged %q, want %s", s.id, l, want)
			}
		}
		for _, chat := range s.own {
			s.sink.waitFor(t, "shard "+strconv.Itoa(s.id)+" catching up on "+chat, func() bool {
				_, ok := s.sink.get(missed[chat])
				return ok
			})
		}
	}
	stopAll(t, shards[0].run, shards[1].run)
	if got := f.Requests(discordfake.RouteMessages); got != 3 {
		t.Errorf("history requests = %d, want 3 (each chat once, by its shard)", got)
	}
	for _, s := range shards {
		for _, chat := range s.other {
			if n := s.sink.count(missed[chat]); n != 0 {
				t.Errorf("shard %d delivered the missed message of %s (another shard's) %d times", s.id, chat, n)
			}
		}
	}
}

// With ShardCount > 1 and no ShardID, Run does not connect until
// ClaimShard gives a shard, identifies with it, disconnects and returns an
// error when the claim is lost, and releases it; the next Run claims anew
// and may get another shard.
func TestClaimShard(t *testing.T) {
	f := discordfake.New(t)
	type claim struct {
		c   ShardClaim
		err error
	}
	asked, give := make(chan struct{}), make(chan claim)
	released := make(chan int, 2)
	rec := newRecorder()
	a, err := New(Options{Token: f.Token, APIBase: f.APIBase(), Sleep: (&sleeper{}).sleep, Logger: newWaitLog().logger(),
		ShardCount: 2,
		ClaimShard: func(ctx context.Context) (ShardClaim, error) {
			asked <- struct{}{}
			select {
			case c := <-give:
				return c.c, c.err
			case <-ctx.Done():
				return ShardClaim{}, ctx.Err()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(t.Context(), rec) }()

	waitChan(t, asked)
	if f.Requests(discordfake.RouteGateway) != 0 || f.Identifies() != 0 || f.Connected() {
		t.Fatalf("the adapter contacted the gateway before it had a shard")
	}
	if !a.Standby() || a.Connected() {
		t.Errorf("waiting for a shard: standby %v, connected %v; want standby", a.Standby(), a.Connected())
	}
	lost := make(chan struct{})
	give <- claim{c: ShardClaim{ID: 1, Lost: lost, Release: func() { released <- 1 }}}
	id, err := f.WaitIdentify(waitCtx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	if id.Shard == nil || *id.Shard != [2]int{1, 2} {
		t.Errorf("IDENTIFY shard = %v, want [1 2]", id.Shard)
	}
	if a.Standby() {
		t.Error("still on standby with a shard")
	}
	m := f.MessageCreate("c-g1", guildOn(t, 0, 1, 2), "u1", "alice", "<@"+f.Bot.ID+"> hi")
	f.Dispatch("MESSAGE_CREATE", m)
	rec.wait(t, m.ID)

	close(lost)
	if err := runResult(t, runErr); err == nil || !strings.Contains(err.Error(), "lost the claim on gateway shard 1") {
		t.Errorf("Run after a lost claim = %v, want an error about shard 1", err)
	}
	select {
	case n := <-released:
		if n != 1 {
			t.Errorf("released %d", n)
		}
	default:
		t.Errorf("the claim was not released when Run returned")
	}
	if f.Connected() {
		t.Errorf("still connected after the claim was lost")
	}

	// The next Run claims shard 0 this time: a new session for it.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { runErr <- a.Run(ctx, rec) }()
	waitChan(t, asked)
	give <- claim{c: ShardClaim{ID: 0, Release: func() { released <- 0 }}}
	id, err = f.WaitIdentify(waitCtx(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	if id.Shard == nil || *id.Shard != [2]int{0, 2} {
		t.Errorf("second IDENTIFY shard = %v, want [0 2]", id.Shard)
	}
	dm := f.MessageCreate("dm-1", "", "u1", "alice", "a DM for shard 0")
	f.Dispatch("MESSAGE_CREATE", dm)
	rec.wait(t, dm.ID)
	cancel()
	if err := runResult(t, runErr); err != nil {
		t.Errorf("Run = %v, want nil after ctx ended", err)
	}
	select {
	case n := <-released:
		if n != 0 {
			t.Errorf("released %d, want 0", n)
		}
	default:
		t.Errorf("the second claim was not released when Run returned")
	}
}

// A claim that fails, gives a shard out of range or is cut short by ctx
// ends Run without contacting the gateway.
func TestClaimShardFailures(t *testing.T) {
	f := discordfake.New(t)
	for _, tc := range []struct {
		name     string
		claim    func(ctx context.Context) (ShardClaim, error)
		cancel   bool // ctx ends while claiming
		want     string
		released bool
	}{
		{name: "the claim fails", want: "claim a gateway shard: database is down",
			claim: func(context.Context) (ShardClaim, error) { return ShardClaim{}, errors.New("database is down") }},
		{name: "shard out of range", want: "claimed shard 2 is not one of the 2 shards", released: true,
			claim: func(context.Context) (ShardClaim, error) { return ShardClaim{ID: 2}, nil }},
		{name: "negative shard", want: "claimed shard -1 is not one of the 2 shards", released: true,
			claim: func(context.Context) (ShardClaim, error) { return ShardClaim{ID: -1}, nil }},
		{name: "ctx ends while waiting for a shard", cancel: true,
			claim: func(ctx context.Context) (ShardClaim, error) { <-ctx.Done(); return ShardClaim{}, ctx.Err() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			released := false
			a, err := New(Options{Token: f.Token, APIBase: f.APIBase(), Logger: slog.New(slog.DiscardHandler), ShardCount: 2,
				ClaimShard: func(ctx context.Context) (ShardClaim, error) {
					c, err := tc.claim(ctx)
					c.Release = func() { released = true }
					return c, err
				}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			if tc.cancel {
				cancel()
			}
			defer cancel()
			err = a.Run(ctx, newRecorder())
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Run = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Run = %v, want an error with %q", err, tc.want)
			}
			if released != tc.released {
				t.Errorf("released = %v, want %v", released, tc.released)
			}
			if f.Requests(discordfake.RouteGateway) != 0 || f.Identifies() != 0 {
				t.Errorf("the gateway was contacted without a shard")
			}
		})
	}
}

func TestNewValidatesShards(t *testing.T) {
	claim := func(context.Context) (ShardClaim, error) { return ShardClaim{}, nil }
	for _, tc := range []struct {
		name string
		o    Options
		want string // "" for accepted
	}{
		{"unsharded", Options{}, ""},
		{"one shard, shard 0", Options{ShardCount: 1, ShardID: intp(0)}, ""},
		{"fixed shard", Options{ShardCount: 4, ShardID: intp(3)}, ""},
		{"claimed shard", Options{ShardCount: 4, ClaimShard: claim}, ""},
		{"fixed shard wins over a claim", Options{ShardCount: 4, ShardID: intp(1), ClaimShard: claim}, ""},
		{"negative count", Options{ShardCount: -1}, "shard count -1"},
		{"id equal to count", Options{ShardCount: 2, ShardID: intp(2)}, "shard id 2"},
		{"negative id", Options{ShardCount: 2, ShardID: intp(-1)}, "shard id -1"},
		{"id without shards", Options{ShardID: intp(1)}, "shard id 1"},
		{"shards but no shard", Options{ShardCount: 2}, "split into 2 shards, but this process has none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Token = "t"
			a, err := New(tc.o)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("New = %v, want it accepted", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("New = %v, want an error with %q", err, tc.want)
			case err == nil && a.s.ShardCount != max(tc.o.ShardCount, 1):
				t.Errorf("session shard count = %d, want %d", a.s.ShardCount, max(tc.o.ShardCount, 1))
			}
		})
	}
}
