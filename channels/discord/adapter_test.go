package discord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/discordfake"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// recorder is a Sink that keeps what it was given.
type recorder struct {
	mu      sync.Mutex
	got     []channels.Inbound
	failN   int // fail this many next deliveries
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) Deliver(_ context.Context, in channels.Inbound) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failN > 0 {
		r.failN--
		return errors.New("store is down")
	}
	r.got = append(r.got, in)
	close(r.changed)
	r.changed = make(chan struct{})
	return nil
}

func (r *recorder) count(msgID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, in := range r.got {
		if in.MessageID == msgID {
			n++
		}
	}
	return n
}

// wait returns the delivery of msgID.
func (r *recorder) wait(t *testing.T, msgID string) channels.Inbound {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		r.mu.Lock()
		ch := r.changed
		for _, in := range r.got {
			if in.MessageID == msgID {
				r.mu.Unlock()
				return in
			}
		}
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("message %s not delivered", msgID)
		}
	}
}

// sleeper records the waits the adapter asks for and returns at once,
// unless a test installs a hook.
type sleeper struct {
	mu    sync.Mutex
	calls []time.Duration
	hook  func(ctx context.Context, d time.Duration) error
}

func (s *sleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.calls = append(s.calls, d)
	hook := s.hook
	s.mu.Unlock()
	if hook != nil {
		return hook(ctx, d)
	}
	return ctx.Err()
}

func (s *sleeper) reset(hook func(ctx context.Context, d time.Duration) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls, s.hook = nil, hook
}

func (s *sleeper) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestAdapter drives one real discordgo session against the fake through
// every subtest: a session's Close costs a second, so it is shared.
func TestAdapter(t *testing.T) {
	f := discordfake.New(t)
	rec := newRecorder()
	sl := &sleeper{}
	logs := &testkit.SyncBuffer{}
	// Downloads go through the gateway's outbound guard, which admits the
	// fake (on loopback) only because it is the configured API base.
	downloads := guardedDownloads(t, f.APIBase())
	a, err := New(Options{
		Token:             f.Token,
		APIBase:           f.APIBase(),
		Logger:            slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Sleep:             sl.sleep,
		MaxDownloadBytes:  1024,
		DownloadTransport: downloads,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(runCtx, rec) }()
	stopped := false
	stopRun := func() error {
		if stopped {
			return nil
		}
		stopped = true
		stop()
		return <-runErr
	}
	t.Cleanup(func() { _ = stopRun() }) // before the fake's cleanup

	if _, err := f.WaitIdentify(waitCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	f.AddUser(discordfake.User{ID: "u2", Username: "bob"})
	f.AddChannel("g-text", discordfake.ChannelTypeGuildText, "g1", "")
	f.AddChannel("th-1", discordfake.ChannelTypePublicThread, "g1", "g-text")

	t.Run("identify carries intents and slash commands are registered", func(t *testing.T) {
		id, _ := f.WaitIdentify(waitCtx(t), 1)
		// Guilds | GuildMessages | DirectMessages | MessageContent
		if want := 1 | 1<<9 | 1<<12 | 1<<15; id.Intents != want {
			t.Errorf("intents = %d, want %d", id.Intents, want)
		}
		if id.Token != "Bot "+f.Token {
			t.Errorf("identify token is not the bot token")
		}
		err := f.WaitFor(waitCtx(t), func() bool { return len(f.Commands()) == 4 })
		var names []string
		for _, c := range f.Commands() {
			names = append(names, c.Name)
		}
		if err != nil || !slices.Equal(names, []string{"new", "stop", "status", "help"}) {
			t.Errorf("commands = %v (%v)", names, err)
		}
	})

	t.Run("DM", func(t *testing.T) {
		m := f.MessageCreate("dm-1", "", "u1", "alice", "hello there")
		f.Dispatch("MESSAGE_CREATE", m)
		in := rec.wait(t, m.ID)
		want := channels.Inbound{
			Channel: "discord", ChatID: "dm-1", ChatType: channels.DM, MessageID: m.ID,
			UserID: "u1", UserName: "alice", DisplayName: "alice", Text: "hello there", Mentioned: true,
		}
		in.Time = time.Time{}
		if fmt.Sprint(in) != fmt.Sprint(want) {
			t.Errorf("got  %+v\nwant %+v", in, want)
		}
	})

	t.Run("guild message without mention", func(t *testing.T) {
		m := f.MessageCreate("g-text", "g1", "u1", "alice", "just chatting", discordfake.WithNick("Al"))
		f.Dispatch("MESSAGE_CREATE", m)
		in := rec.wait(t, m.ID)
		if in.Mentioned || in.ChatType != channels.Group || in.ChatTitle != "channel-g-text" || in.DisplayName != "Al" {
			t.Errorf("got %+v, want an unmentioned group message in channel-g-text by Al", in)
		}
	})

	t.Run("guild message with mention", func(t *testing.T) {
		m := f.MessageCreate("g-text", "g1", "u1", "alice", "<@"+f.Bot.ID+"> what does <@!u2> think?")
		f.Dispatch("MESSAGE_CREATE", m)
		in := rec.wait(t, m.ID)
		if !in.Mentioned || in.Text != "what does @bob think?" {
			t.Errorf("got mentioned=%v text=%q, want true and %q", in.Mentioned, in.Text, "what does @bob think?")
		}
	})

	t.Run("reply to the bot counts as mention and quotes it", func(t *testing.T) {
		id, err := a.Send(waitCtx(t), channels.Outbound{ChatID: "g-text", Text: "I am the bot"})
		if err != nil {
			t.Fatal(err)
		}
		sent := f.SentTo("g-text")
		m := f.MessageCreate("g-text", "g1", "u1", "alice", "tell me more", discordfake.ReplyTo(f.BotMessage(sent[len(sent)-1])))
		f.Dispatch("MESSAGE_CREATE", m)
		in := rec.wait(t, m.ID)
		want := &channels.Quote{MessageID: id, Author: f.Bot.Username, Text: "I am the bot", FromBot: true}
		if !in.Mentioned || in.Quote == nil || *in.Quote != *want {
			t.Errorf("got mentioned=%v quote=%+v, want true and %+v", in.Mentioned, in.Quote, want)
		}
		// Discord echoes the bot's own message back; it is never delivered.
		if n := rec.count(id); n != 0 {
			t.Errorf("own message delivered %d times", n)
		}
	})

	t.Run("thread is its own chat", func(t *testing.T) {
		m := f.MessageCreate("th-1", "g1", "u1", "alice", "in a thread")
		f.Dispatch("MESSAGE_CREATE", m)
		in := rec.wait(t, m.ID)
		if in.ChatID != "th-1" || in.ChatType != channels.Group || in.ChatTitle != "channel-th-1" {
			t.Errorf("got chat %q (%s, %q), want th-1 group channel-th-1", in.ChatID, in.ChatType, in.ChatTitle)
		}
	})

	t.Run("messages from bots are ignored", func(t *testing.T) {
		own := f.MessageCreate("g-ign", "g1", f.Bot.ID, f.Bot.Username, "my own words")
		other := f.MessageCreate("g-ign", "g1", "b2", "otherbot", "beep", discordfake.FromBot())
		user := f.MessageCreate("g-ign", "g1", "u1", "alice", "after the bots")
		for _, m := range []discordfake.Message{own, other, user} {
			f.Dispatch("MESSAGE_CREATE", m)
		}
		// Delivery is in order per chat, so once the user's message is in,
		// the bots' would be too.
		rec.wait(t, user.ID)
		if rec.count(own.ID) != 0 || rec.count(other.ID) != 0 {
			t.Errorf("bot messages delivered: own %d, other %d", rec.count(own.ID), rec.count(other.ID))
		}
	})

	t.Run("attachments", func(t *testing.T) {
		small := f.AddFile("cat.png", "image/png", []byte("\x89PNG small image"))
		big := f.AddFile("huge.png", "image/png", bytes.Repeat([]byte("x"), 2048))
		text := f.AddFile("notes.txt", "text/plain; charset=utf-8", []byte("line one\nline two"))
		pdf := f.AddFile("report.pdf", "application/pdf", []byte("%PDF-1.7"))
		m := f.MessageCreate("dm-1", "", "u1", "alice", "", discordfake.WithAttachments(small, big, text, pdf))
		f.Dispatch("MESSAGE_CREATE", m)
		in := rec.wait(t, m.ID)
		if len(in.Attachments) != 4 {
			t.Fatalf("attachments = %+v", in.Attachments)
		}
		img, huge, txt, doc := in.Attachments[0], in.Attachments[1], in.Attachments[2], in.Attachments[3]
		if img.Kind != channels.Image || string(img.Data) != "\x89PNG small image" || img.MIME != "image/png" {
			t.Errorf("image = %+v", img)
		}
		if huge.Kind != channels.Image || huge.Data != nil || !strings.Contains(huge.Note, "limit") || huge.Size != 2048 {
			t.Errorf("big image = %+v", huge)
		}
		if txt.Kind != channels.File || txt.Text != "line one\nline two" || txt.MIME != "text/plain" {
			t.Errorf("text = %+v", txt)
		}
		if doc.Kind != channels.File || doc.Data != nil || doc.Text != "" || !strings.Contains(doc.Note, "report.pdf") || doc.MIME != "application/pdf" {
			t.Errorf("pdf = %+v", doc)
		}
	})

	t.Run("attachments are bounded", func(t *testing.T) { testAttachmentBounds(t, f, rec, downloads) })

	t.Run("a failing sink is retried", func(t *testing.T) {
		sl.reset(nil)
		rec.mu.Lock()
		rec.failN = 1
		rec.mu.Unlock()
		m := f.MessageCreate("dm-2", "", "u1", "alice", "try again")
		f.Dispatch("MESSAGE_CREATE", m)
		rec.wait(t, m.ID)
		if got := sl.got(); !slices.Equal(got, []time.Duration{time.Second}) || rec.count(m.ID) != 1 {
			t.Errorf("sleeps = %v, deliveries = %d; want [1s] and 1", got, rec.count(m.ID))
		}
	})

	t.Run("long reply is split with the code block intact", func(t *testing.T) {
		text := longReply()
		if n := utf8.RuneCountInString(text); n < 4400 || n > 4600 {
			t.Fatalf("test text is %d chars", n)
		}
		before := len(f.Sent())
		last, err := a.Send(waitCtx(t), channels.Outbound{ChatID: "long-1", Text: text, ReplyTo: "orig-1"})
		if err != nil {
			t.Fatal(err)
		}
		sent := f.SentTo("long-1")
		if len(sent) != 3 || len(f.Sent()) != before+3 {
			t.Fatalf("sent %d parts, want 3", len(sent))
		}
		var parts []string
		for i, s := range sent {
			parts = append(parts, s.Content)
			if n := utf8.RuneCountInString(s.Content); n >= 2000 {
				t.Errorf("part %d has %d chars", i, n)
			}
			if (i == 0) != (s.Reference != nil) || (i == 0 && s.Reference.MessageID != "orig-1") {
				t.Errorf("part %d reference = %+v; want only the first to reply to orig-1", i, s.Reference)
			}
		}
		if last != sent[2].ID {
			t.Errorf("returned id %s, want the last part's %s", last, sent[2].ID)
		}
		checkSplit(t, text, parts)
		if n := strings.Count(strings.Join(parts, "\n"), "```go\n"); n < 2 {
			t.Errorf("the code block should span two parts (reopened with its language), found %d openings", n)
		}
	})

	t.Run("429 is waited out and the message sent once", func(t *testing.T) {
		sl.reset(nil)
		reqs := f.Requests(discordfake.RouteCreateMessage)
		f.FailNext(discordfake.RouteCreateMessage, 429, discordfake.RateLimitBody(0.25, false))
		if _, err := a.Send(waitCtx(t), channels.Outbound{ChatID: "rl-1", Text: "patience"}); err != nil {
			t.Fatal(err)
		}
		if got := sl.got(); !slices.Equal(got, []time.Duration{250 * time.Millisecond}) {
			t.Errorf("sleeps = %v, want [250ms]", got)
		}
		if s := f.SentTo("rl-1"); len(s) != 1 || s[0].Content != "patience" {
			t.Errorf("sent = %+v, want one 'patience'", s)
		}
		if got := f.Requests(discordfake.RouteCreateMessage) - reqs; got != 2 {
			t.Errorf("requests = %d, want 2", got)
		}
	})

	t.Run("one chat's 429 does not hold up another", func(t *testing.T) {
		entered, release := make(chan time.Duration, 1), make(chan struct{})
		sl.reset(func(ctx context.Context, d time.Duration) error {
			entered <- d
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		defer sl.reset(nil)
		f.FailNext(discordfake.RouteCreateMessage, 429, discordfake.RateLimitBody(3.5, false))
		aErr := make(chan error, 1)
		go func() {
			_, err := a.Send(waitCtx(t), channels.Outbound{ChatID: "rl-a", Text: "slow chat"})
			aErr <- err
		}()
		if d := <-entered; d != 3500*time.Millisecond {
			t.Errorf("waiting %v, want 3.5s", d)
		}
		if _, err := a.Send(waitCtx(t), channels.Outbound{ChatID: "rl-b", Text: "fast chat"}); err != nil {
			t.Fatal(err)
		}
		if len(f.SentTo("rl-b")) != 1 || len(f.SentTo("rl-a")) != 0 {
			t.Errorf("while rl-a waits: rl-a %d, rl-b %d sent; want 0 and 1", len(f.SentTo("rl-a")), len(f.SentTo("rl-b")))
		}
		close(release)
		if err := <-aErr; err != nil {
			t.Fatal(err)
		}
		if len(f.SentTo("rl-a")) != 1 {
			t.Errorf("rl-a sent %d, want 1", len(f.SentTo("rl-a")))
		}
	})

	t.Run("5xx is retried with backoff and the message sent once", func(t *testing.T) {
		sl.reset(nil)
		// The first attempt is stored but its answer lost; the nonce makes
		// the retry return the same message.
		f.FailNextAfterCommit(discordfake.RouteCreateMessage, 500, discordfake.ErrorBody(0, "500: Internal Server Error"))
		id, err := a.Send(waitCtx(t), channels.Outbound{ChatID: "5xx-1", Text: "exactly once"})
		if err != nil {
			t.Fatal(err)
		}
		f.FailNext(discordfake.RouteCreateMessage, 502, "<html>bad gateway</html>")
		if _, err := a.Send(waitCtx(t), channels.Outbound{ChatID: "5xx-1", Text: "second"}); err != nil {
			t.Fatal(err)
		}
		s := f.SentTo("5xx-1")
		if len(s) != 2 || s[0].ID != id || s[0].Content != "exactly once" || s[1].Content != "second" {
			t.Errorf("sent = %+v, want 'exactly once' (id %s) and 'second'", s, id)
		}
		if got := sl.got(); !slices.Equal(got, []time.Duration{firstBackoff, firstBackoff}) {
			t.Errorf("sleeps = %v, want two of %v", got, firstBackoff)
		}
	})

	// Failures after the retries are marked for the router's outbox: a
	// 5xx or a rate limit longer than we wait is Discord being unavailable,
	// a 403 is a refusal for good.
	t.Run("failures classified", func(t *testing.T) {
		sl.reset(nil)
		for range maxAttempts {
			f.FailNext(discordfake.RouteCreateMessage, 502, "<html>bad gateway</html>")
		}
		if _, err := a.Send(waitCtx(t), channels.Outbound{ChatID: "down-1", Text: "later"}); !errors.Is(err, channels.ErrUnavailable) {
			t.Errorf("after %d 502s: err = %v, want ErrUnavailable", maxAttempts, err)
		}
		f.FailNext(discordfake.RouteCreateMessage, 429, discordfake.RateLimitBody(120, false))
		if _, err := a.Send(waitCtx(t), channels.Outbound{ChatID: "down-1", Text: "later"}); !errors.Is(err, channels.ErrUnavailable) ||
			channels.RetryAfter(err) != 2*time.Minute {
			t.Errorf("after a 2-minute rate limit: err = %v (retry after %s), want ErrUnavailable after 2m", err, channels.RetryAfter(err))
		}
		f.FailNext(discordfake.RouteCreateMessage, 403, discordfake.ErrorBody(50013, "Missing Permissions"))
		if _, err := a.Send(waitCtx(t), channels.Outbound{ChatID: "down-1", Text: "never"}); err == nil || errors.Is(err, channels.ErrUnavailable) {
			t.Errorf("after a 403: err = %v, want an error that is not ErrUnavailable", err)
		}
		if s := f.SentTo("down-1"); len(s) != 0 {
			t.Errorf("sent = %+v, want nothing", s)
		}
	})

	t.Run("typing", func(t *testing.T) {
		if err := a.Typing(waitCtx(t), "dm-1"); err != nil {
			t.Fatal(err)
		}
		if got := f.Typing(); !slices.Contains(got, "dm-1") {
			t.Errorf("typing = %v", got)
		}
		// Typing is refreshed by the router; a 429 is reported, not waited.
		sl.reset(nil)
		f.FailNext(discordfake.RouteTyping, 429, discordfake.RateLimitBody(1, false))
		err := a.Typing(waitCtx(t), "dm-1")
		var rl *discordgo.RateLimitError
		if !errors.As(err, &rl) || len(sl.got()) != 0 {
			t.Errorf("err = %v, sleeps %v; want a RateLimitError and no wait", err, sl.got())
		}
	})

	t.Run("react and edit", func(t *testing.T) {
		id, err := a.Send(waitCtx(t), channels.Outbound{ChatID: "g-text", Text: "draft"})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.React(waitCtx(t), "g-text", id, "👍"); err != nil {
			t.Fatal(err)
		}
		if r := f.Reactions(); len(r) == 0 || r[len(r)-1] != (discordfake.Reaction{ChannelID: "g-text", MessageID: id, Emoji: "👍"}) {
			t.Errorf("reactions = %+v", r)
		}
		if err := a.Edit(waitCtx(t), "g-text", id, "final"); err != nil {
			t.Fatal(err)
		}
		if err := a.Edit(waitCtx(t), "g-text", id, strings.Repeat("word ", 500)); err != nil {
			t.Fatal(err)
		}
		e := f.Edits()
		if len(e) < 2 || e[len(e)-2].Content != "final" || !strings.HasSuffix(e[len(e)-1].Content, "…") || utf8.RuneCountInString(e[len(e)-1].Content) > 2000 {
			t.Errorf("edits = %+v", e)
		}
		if err := a.Edit(waitCtx(t), "g-text", "no-such-id", "x"); err == nil {
			t.Error("edit of an unknown message: no error")
		}
	})

	t.Run("delete, and a preview that does not wait out a rate limit", func(t *testing.T) {
		id, err := a.Send(waitCtx(t), channels.Outbound{ChatID: "g-text", Text: "searching…"})
		if err != nil {
			t.Fatal(err)
		}
		sl.reset(nil)
		f.FailNext(discordfake.RouteEditMessage, 429, discordfake.RateLimitBody(0.25, false))
		err = a.Edit(channels.WithPriority(waitCtx(t), channels.PriorityPreview), "g-text", id, "a preview")
		if !errors.Is(err, channels.ErrPaced) || len(sl.got()) != 0 {
			t.Errorf("rate-limited preview edit: %v after sleeps %v; want ErrPaced at once", err, sl.got())
		}
		if err := a.Delete(waitCtx(t), "g-text", id); err != nil {
			t.Fatal(err)
		}
		if d := f.Deleted(); len(d) != 1 || d[0] != (discordfake.Edit{ChannelID: "g-text", MessageID: id, Content: "searching…"}) {
			t.Errorf("deleted = %+v", d)
		}
		if err := a.Delete(waitCtx(t), "g-text", id); err == nil {
			t.Error("delete of a deleted message: no error")
		}
		if !a.Fits(strings.Repeat("word ", 380)) || a.Fits(strings.Repeat("word ", 500)) {
			t.Error("Fits: want 1,900 characters in one message, 2,500 not")
		}
	})

	t.Run("send file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "report.txt")
		if err := os.WriteFile(path, []byte("the report"), 0o600); err != nil {
			t.Fatal(err)
		}
		id, err := a.SendFile(waitCtx(t), "files-1", channels.OutboundFile{Path: path, Caption: "here you go"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.SendFile(waitCtx(t), "files-1", channels.OutboundFile{URL: "https://example.com/x.png", Caption: "a picture"}); err != nil {
			t.Fatal(err)
		}
		s := f.SentTo("files-1")
		if len(s) != 2 || s[0].ID != id || s[0].Content != "here you go" || len(s[0].Files) != 1 ||
			s[0].Files[0].Name != "report.txt" || string(s[0].Files[0].Data) != "the report" {
			t.Fatalf("sent = %+v", s)
		}
		if s[1].Content != "a picture\nhttps://example.com/x.png" || len(s[1].Files) != 0 {
			t.Errorf("url message = %+v", s[1])
		}
	})

	t.Run("slash command", func(t *testing.T) {
		ic := f.SlashCommand("g-text", "g1", "u1", "alice", "new")
		f.Dispatch("INTERACTION_CREATE", ic)
		in := rec.wait(t, ic.ID)
		if in.Text != "/new" || !in.Mentioned || in.ChatID != "g-text" || in.UserID != "u1" || in.ChatType != channels.Group {
			t.Errorf("got %+v", in)
		}
		if err := f.WaitFor(waitCtx(t), func() bool { return len(f.InteractionResponses()) == 1 }); err != nil {
			t.Fatal(err)
		}
		r := f.InteractionResponses()[0]
		if r.InteractionID != ic.ID || r.Token != ic.Token || r.Type != 4 || r.Flags != 64 || r.Content == "" {
			t.Errorf("response = %+v, want an ephemeral message for %s", r, ic.ID)
		}
	})

	approveDeny := []channels.Button{{Label: "Approve", Action: "approve:12"}, {Label: "Deny", Action: "deny:12"}}
	approveDenyRow := [][]discordfake.Component{{
		{Type: discordfake.ComponentButton, Style: discordfake.ButtonPrimary, Label: "Approve", CustomID: "approve:12"},
		{Type: discordfake.ComponentButton, Style: discordfake.ButtonDanger, Label: "Deny", CustomID: "deny:12"},
	}}
	// response waits for the callback of interaction id and returns it.
	response := func(t *testing.T, id string) discordfake.InteractionResponse {
		t.Helper()
		var got discordfake.InteractionResponse
		err := f.WaitFor(waitCtx(t), func() bool {
			for _, r := range f.InteractionResponses() {
				if r.InteractionID == id {
					got = r
					return true
				}
			}
			return false
		})
		if err != nil {
			t.Fatalf("interaction %s not answered: %v", id, err)
		}
		return got
	}

	t.Run("ask shows buttons and a press arrives once", func(t *testing.T) {
		id, err := a.Ask(waitCtx(t), channels.Outbound{ChatID: "g-text", Text: "Run the **migration**?"}, approveDeny)
		if err != nil {
			t.Fatal(err)
		}
		sent := f.SentTo("g-text")
		last := sent[len(sent)-1]
		if last.ID != id || last.Content != "Run the **migration**?" {
			t.Fatalf("last sent = %+v, want the question with id %s", last, id)
		}
		if got := last.Buttons(); !reflect.DeepEqual(got, approveDenyRow) {
			t.Errorf("buttons = %+v, want %+v", got, approveDenyRow)
		}

		ic := f.ClickButton("g-text", "g1", "u2", "bob", id, "approve:12")
		in := rec.wait(t, "ia:"+ic.ID)
		if in.Time.IsZero() {
			t.Error("press without a time")
		}
		in.Time = time.Time{}
		want := channels.Inbound{
			Channel: "discord", ChatID: "g-text", ChatType: channels.Group, ChatTitle: "channel-g-text", Space: "g1",
			MessageID: "ia:" + ic.ID, UserID: "u2", UserName: "bob", DisplayName: "bob", Mentioned: true, Action: "approve:12",
			Quote: &channels.Quote{MessageID: id, Author: f.Bot.Username, Text: "Run the **migration**?", FromBot: true},
		}
		if !reflect.DeepEqual(in, want) {
			t.Errorf("press delivered as\n%+v\nwant\n%+v", in, want)
		}
		if r := response(t, ic.ID); r != (discordfake.InteractionResponse{InteractionID: ic.ID, Token: ic.Token, Type: 6}) {
			t.Errorf("response = %+v, want a deferred update (type 6) for %s", r, ic.ID)
		}
		// Exactly once: delivery is in order per chat, so once a later
		// message is in, a second delivery of the press would be too.
		m := f.MessageCreate("g-text", "g1", "u1", "alice", "after the press")
		f.Dispatch("MESSAGE_CREATE", m)
		rec.wait(t, m.ID)
		if n := rec.count("ia:" + ic.ID); n != 1 {
			t.Errorf("press delivered %d times, want 1", n)
		}
	})

	t.Run("a press in a DM comes from the user", func(t *testing.T) {
		id, err := a.Ask(waitCtx(t), channels.Outbound{ChatID: "dm-ask", Text: "Stop the run?"}, []channels.Button{{Label: "Stop", Action: "stop:7"}})
		if err != nil {
			t.Fatal(err)
		}
		ic := f.ClickButton("dm-ask", "", "u1", "alice", id, "stop:7")
		in := rec.wait(t, "ia:"+ic.ID)
		if in.ChatType != channels.DM || in.Space != "" || in.UserID != "u1" || in.Action != "stop:7" || !in.Mentioned || in.Quote == nil || in.Quote.Text != "Stop the run?" {
			t.Errorf("got %+v", in)
		}
		if r := response(t, ic.ID); r.Type != 6 {
			t.Errorf("response = %+v, want type 6", r)
		}
	})

	t.Run("ask splits with the buttons on the last part", func(t *testing.T) {
		_, err := a.Ask(waitCtx(t), channels.Outbound{ChatID: "ask-long", Text: longReply(), ReplyTo: "orig-2"}, approveDeny)
		if err != nil {
			t.Fatal(err)
		}
		sent := f.SentTo("ask-long")
		if len(sent) != 3 {
			t.Fatalf("sent %d parts, want 3", len(sent))
		}
		for i, s := range sent {
			if wantButtons := i == len(sent)-1; (s.Buttons() != nil) != wantButtons {
				t.Errorf("part %d buttons = %+v; want them only on the last part", i, s.Buttons())
			}
			if (i == 0) != (s.Reference != nil) {
				t.Errorf("part %d reference = %+v; want only the first to reply", i, s.Reference)
			}
		}
	})

	t.Run("ask refuses an action over 100 characters", func(t *testing.T) {
		posts := f.Requests(discordfake.RouteCreateMessage)
		_, err := a.Ask(waitCtx(t), channels.Outbound{ChatID: "ask-bad", Text: "Go?"}, []channels.Button{{Label: "Go", Action: strings.Repeat("x", 101)}})
		if err == nil || !strings.Contains(err.Error(), "at most 100") {
			t.Errorf("Ask = %v, want an error about the 100-character limit", err)
		}
		if got := f.Requests(discordfake.RouteCreateMessage) - posts; got != 0 {
			t.Errorf("%d messages posted, want none", got)
		}
	})

	t.Run("a press that could not be stored is answered with an apology", func(t *testing.T) {
		sl.reset(nil)
		id, err := a.Ask(waitCtx(t), channels.Outbound{ChatID: "dm-fail", Text: "Deploy?"}, approveDeny)
		if err != nil {
			t.Fatal(err)
		}
		rec.mu.Lock()
		rec.failN = 4 // every attempt of deliver
		rec.mu.Unlock()
		ic := f.ClickButton("dm-fail", "", "u1", "alice", id, "deny:12")
		r := response(t, ic.ID)
		if r.Type != 4 || r.Flags != 64 || !strings.Contains(r.Content, "did not go through") {
			t.Errorf("response = %+v, want an ephemeral apology", r)
		}
		if n := rec.count("ia:" + ic.ID); n != 0 {
			t.Errorf("delivered %d times, want 0", n)
		}
	})

	t.Run("a failed acknowledgement is logged, not fatal", func(t *testing.T) {
		id, err := a.Ask(waitCtx(t), channels.Outbound{ChatID: "dm-ack", Text: "Deploy?"}, approveDeny)
		if err != nil {
			t.Fatal(err)
		}
		acks := f.Requests(discordfake.RouteInteractionCallback)
		f.FailNext(discordfake.RouteInteractionCallback, 500, discordfake.ErrorBody(0, "500: Internal Server Error"))
		ic := f.ClickButton("dm-ack", "", "u1", "alice", id, "approve:12")
		rec.wait(t, "ia:"+ic.ID)
		if err := f.WaitFor(waitCtx(t), func() bool { return f.Requests(discordfake.RouteInteractionCallback) > acks }); err != nil {
			t.Fatal(err)
		}
		// Still running: the next message in the chat arrives.
		m := f.MessageCreate("dm-ack", "", "u1", "alice", "still there?")
		f.Dispatch("MESSAGE_CREATE", m)
		rec.wait(t, m.ID)
		if l := logs.String(); !strings.Contains(l, "acknowledge interaction") || strings.Contains(l, ic.Token) {
			t.Errorf("the failed acknowledgement is not logged, or with its token:\n%s", l)
		}
	})

	t.Run("token never in errors or logs", func(t *testing.T) {
		// A server (or proxy) that echoes the Authorization header.
		f.FailNext(discordfake.RouteCreateMessage, 401, discordfake.ErrorBody(0, "401: Unauthorized (got Bot "+f.Token+")"))
		_, err := a.Send(waitCtx(t), channels.Outbound{ChatID: "tok-1", Text: "hi"})
		var re *discordgo.RESTError
		if err == nil || !errors.As(err, &re) || re.Response.StatusCode != 401 {
			t.Fatalf("err = %v, want a wrapped 401 RESTError", err)
		}
		if strings.Contains(err.Error(), f.Token) || !strings.Contains(err.Error(), "[redacted]") {
			t.Errorf("error text leaks or is not redacted: %s", err)
		}
		// discordgo's own log lines go through the same redaction.
		discordgo.Logger(discordgo.LogError, 1, "identify with %s", "Bot "+f.Token)
		if l := logs.String(); strings.Contains(l, f.Token) || !strings.Contains(l, "identify with [redacted]") {
			t.Errorf("library log not redacted:\n%s", l)
		}
	})

	// Last: it costs discordgo's 1 s close on the dropped connection.
	t.Run("dropped gateway resumes and replays missed messages", func(t *testing.T) {
		ctx := waitCtx(t)
		before := f.MessageCreate("dm-3", "", "u1", "alice", "before the drop")
		seq := f.Dispatch("MESSAGE_CREATE", before)
		rec.wait(t, before.ID)
		session, resumes := f.SessionID(), f.Resumes()

		f.DropConnection()
		var during []discordfake.Message
		for i := range 3 {
			m := f.MessageCreate("dm-3", "", "u1", "alice", fmt.Sprintf("during the drop %d", i))
			f.Dispatch("MESSAGE_CREATE", m)
			during = append(during, m)
		}
		r, err := f.WaitResume(ctx, resumes+1)
		if err != nil {
			t.Fatal(err)
		}
		if r.SessionID != session || r.Seq != seq {
			t.Errorf("resume = %+v, want session %s seq %d", r, session, seq)
		}
		after := f.MessageCreate("dm-3", "", "u1", "alice", "after the resume")
		f.Dispatch("MESSAGE_CREATE", after)
		rec.wait(t, after.ID)
		for _, m := range append(during, before, after) {
			if n := rec.count(m.ID); n != 1 {
				t.Errorf("message %q delivered %d times, want 1", m.Content, n)
			}
		}
		if f.Identifies() != 1 {
			t.Errorf("identifies = %d, want 1 (resumed, not re-identified)", f.Identifies())
		}
	})

	if err := stopRun(); err != nil {
		t.Errorf("Run returned %v, want nil", err)
	}
	if l := logs.String(); strings.Contains(l, f.Token) {
		t.Errorf("logs contain the token")
	}
}

// longReply is about 4500 characters: prose, a Go code block of about 2000
// characters, and more prose.
func longReply() string {
	var b strings.Builder
	for i := range 16 {
		fmt.Fprintf(&b, "Paragraph %02d talks about the plan in some detail, so that it fills a line or two of text.\n\n", i)
	}
	b.WriteString("```go\n")
	for i := range 50 {
		fmt.Fprintf(&b, "\tx%02d := compute(%02d) // step %02d of the loop\n", i, i, i)
	}
	b.WriteString("```\n\n")
	for i := range 12 {
		fmt.Fprintf(&b, "Closing remark %02d explains what the code above does and why it matters.\n", i)
	}
	return b.String()
}

// checkSplit asserts that every word of text appears in parts, in order,
// with the code-block language it had in text (outside: ""), and that every
// part closes the code blocks it opens.
func checkSplit(t *testing.T, text string, parts []string) {
	t.Helper()
	type line struct{ text, lang string }
	scan := func(s string) (lines []line, balanced bool) {
		lang, in := "", false
		for l := range strings.SplitSeq(s, "\n") {
			if strings.HasPrefix(l, "```") {
				if in {
					in, lang = false, ""
				} else {
					in, lang = true, strings.TrimPrefix(l, "```")
				}
				continue
			}
			// Words, not lines: a line over the limit is cut at a space.
			for _, w := range strings.Fields(l) {
				lines = append(lines, line{w, lang})
			}
		}
		return lines, !in
	}
	want, _ := scan(text)
	var got []line
	for i, p := range parts {
		l, ok := scan(p)
		if !ok {
			t.Errorf("part %d leaves a code block open:\n%s", i, p)
		}
		got = append(got, l...)
	}
	if !slices.Equal(got, want) {
		t.Errorf("lines differ after split:\ngot  %q\nwant %q", got, want)
	}
}

// A first connection that fails (here: a rejected token) ends Run with an
// error that names the cause and not the token.
func TestRunFailsOnRejectedToken(t *testing.T) {
	f := discordfake.New(t)
	secret := "wrong-" + f.Token
	a, err := New(Options{Token: secret, APIBase: f.APIBase(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Run(waitCtx(t), newRecorder())
	if err == nil || !strings.Contains(err.Error(), "4004") || strings.Contains(err.Error(), secret) {
		t.Fatalf("Run = %v, want a 4004 error without the token", err)
	}
	if f.Identifies() != 0 {
		t.Errorf("identifies = %d, want 0", f.Identifies())
	}
	// A second Run is allowed after the first returned.
	if err := a.Run(waitCtx(t), newRecorder()); err == nil || strings.Contains(err.Error(), "already running") {
		t.Errorf("second Run = %v, want the same connect error", err)
	}
}
