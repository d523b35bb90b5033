package whatsapp

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/wafake"
)

// The adapter against internal/wafake, the fake Cloud API: its webhook
// sender signs and redelivers as Meta does, its Graph API checks the
// limits, the token and the 24-hour window.

const ann = "15551234567"

// inbox is a sink that hands each delivered message to a channel.
type inbox chan channels.Inbound

func (c inbox) Deliver(ctx context.Context, in channels.Inbound) error {
	select {
	case c <- in:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next waits for the next delivered message.
func (c inbox) next(t *testing.T) channels.Inbound {
	t.Helper()
	select {
	case in := <-c:
		return in
	case <-time.After(10 * time.Second):
		t.Fatal("no message was delivered")
		return channels.Inbound{}
	}
}

// onFake is an adapter serving its webhook to f, running with an inbox.
type onFake struct {
	a   *Adapter
	f   *wafake.Fake
	in  inbox
	log *testkit.SyncBuffer
	clk *clock
}

// newOnFake starts an adapter against a new fake; mod adjusts its
// options. The adapter's and the fake's clocks are one.
func newOnFake(t *testing.T, mod func(*Options)) *onFake {
	t.Helper()
	f := wafake.New(t)
	clk := newClock(time.Now().UTC().Truncate(time.Second))
	f.SetNow(clk.now)
	log := &testkit.SyncBuffer{}
	o := Options{PhoneNumberID: wafake.PhoneNumberID, AccessToken: wafake.AccessToken, AppSecret: wafake.AppSecret,
		VerifyToken: wafake.VerifyToken, APIBase: f.APIBase(), Now: clk.now,
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Sleep:  func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}
	if mod != nil {
		mod(&o)
	}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	path, h := a.Handler()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f.SetWebhook(srv.URL + path)
	in := make(inbox, 16)
	run(t, a, in)
	return &onFake{a: a, f: f, in: in, log: log, clk: clk}
}

// say makes ann write text and returns the message as delivered.
func (o *onFake) say(t *testing.T, m wafake.UserMessage) channels.Inbound {
	t.Helper()
	if m.From == "" {
		m.From = ann
	}
	if _, err := o.f.Say(m); err != nil {
		t.Fatal(err)
	}
	return o.in.next(t)
}

func TestFakeConversation(t *testing.T) {
	o := newOnFake(t, nil)
	in := o.say(t, wafake.UserMessage{Name: "Ann", Text: "hello"})
	if in.Text != "hello" || in.ChatID != ann || in.DisplayName != "Ann" || !strings.HasPrefix(in.MessageID, "wamid.") {
		t.Fatalf("delivered %+v", in)
	}
	ctx := channels.WithInbound(t.Context(), in)

	// Typing marks the message read and shows the indicator, once per 20 s.
	for range 3 {
		if err := o.a.Typing(ctx, ann); err != nil {
			t.Fatal(err)
		}
	}
	if got := o.f.Typing(); len(got) != 1 || got[0] != in.MessageID {
		t.Errorf("typing shown for %v; want once for %s", got, in.MessageID)
	}
	o.clk.add(21 * time.Second)
	if err := o.a.Typing(ctx, ann); err != nil {
		t.Fatal(err)
	}
	if got := o.f.Typing(); len(got) != 2 {
		t.Errorf("typing after 21 s: %v; want shown again", got)
	}

	// A long Markdown reply: WhatsApp's formatting, parts within 4,096.
	long := "**Title**\n\n" + strings.Repeat("word ", 1200) + "\n\n" + strings.Repeat("more ", 200) + "~~old~~ and *new*"
	if _, err := o.a.Send(ctx, channels.Outbound{ChatID: ann, Text: long}); err != nil {
		t.Fatal(err)
	}
	sent := o.f.Sent(ann)
	if len(sent) != 2 {
		t.Fatalf("sent %d messages, want 2 parts", len(sent))
	}
	for _, m := range sent {
		if n := len(utf16.Encode([]rune(m.Text))); m.Type != "text" || n > maxText {
			t.Errorf("part %s of %d units", m.Type, n)
		}
	}
	if !strings.HasPrefix(sent[0].Text, "*Title*") || !strings.HasSuffix(sent[1].Text, "~old~ and _new_") {
		t.Errorf("formatting: %q … %q", sent[0].Text[:20], sent[1].Text[len(sent[1].Text)-20:])
	}

	// Reactions, and approval buttons whose press comes back as an action.
	if err := o.a.React(ctx, ann, in.MessageID, "thumbsup"); err != nil {
		t.Fatal(err)
	}
	if got := o.f.Reactions(in.MessageID); len(got) != 1 || got[0] != "👍" {
		t.Errorf("reactions %v, want 👍", got)
	}
	if _, err := o.a.Ask(ctx, channels.Outbound{ChatID: ann, Text: "I'd like to run:\n- `shell` ls\n\nApprove?"},
		[]channels.Button{{Label: "Approve", Action: "approve:7"}, {Label: "Deny", Action: "deny:7"}}); err != nil {
		t.Fatal(err)
	}
	sent = o.f.Sent(ann)
	ask := sent[len(sent)-1]
	if ask.Type != "interactive" || len(ask.Buttons) != 2 || ask.Buttons[0] != (wafake.Button{ID: "approve:7", Title: "Approve"}) {
		t.Fatalf("the question went as %+v", ask)
	}
	press := o.say(t, wafake.UserMessage{ButtonID: "deny:7"})
	if press.Action != "deny:7" || press.Text != "Deny" || press.UserID != ann {
		t.Errorf("the press arrived as %+v", press)
	}

	// Plans ask with four buttons: three under the question, one after.
	if _, err := o.a.Ask(ctx, channels.Outbound{ChatID: ann, Text: "Step 1 done. Continue?"}, []channels.Button{
		{Label: "Continue", Action: "plan:1:continue"}, {Label: "Retry", Action: "plan:1:retry"},
		{Label: "Skip", Action: "plan:1:skip"}, {Label: "Stop this plan right now", Action: "plan:1:stop"}}); err != nil {
		t.Fatal(err)
	}
	sent = o.f.Sent(ann)
	if a, b := sent[len(sent)-2], sent[len(sent)-1]; len(a.Buttons) != 3 || len(b.Buttons) != 1 || b.Buttons[0].Title != "Stop this plan righ…" {
		t.Errorf("four buttons went as %+v and %+v", a.Buttons, b.Buttons)
	}
}

func TestFakeMediaIn(t *testing.T) {
	o := newOnFake(t, nil)
	voice := []byte("OggS\x00voice-note-bytes")
	in := o.say(t, wafake.UserMessage{Voice: voice})
	if len(in.Attachments) != 1 || in.Attachments[0].Kind != channels.Audio || string(in.Attachments[0].Data) != string(voice) {
		t.Fatalf("voice note delivered as %+v", in.Attachments)
	}
	img := []byte("\x89PNG\r\n\x1a\nimage")
	in = o.say(t, wafake.UserMessage{Image: img, Text: "what is it?"})
	if in.Text != "what is it?" || len(in.Attachments) != 1 || in.Attachments[0].Kind != channels.Image || string(in.Attachments[0].Data) != string(img) {
		t.Fatalf("image delivered as %q %+v", in.Text, in.Attachments)
	}
	in = o.say(t, wafake.UserMessage{Location: &wafake.Location{Latitude: 1.5, Longitude: 2.25, Name: "Home"}})
	if len(in.Attachments) != 1 || !strings.Contains(in.Attachments[0].Note, "1.500000, 2.250000 (Home") {
		t.Fatalf("location delivered as %+v", in.Attachments)
	}
	reply := o.say(t, wafake.UserMessage{Text: "this one", ReplyTo: in.MessageID})
	if reply.Quote == nil || reply.Quote.MessageID != in.MessageID {
		t.Fatalf("reply delivered with quote %+v", reply.Quote)
	}
}

func TestFakeSendFile(t *testing.T) {
	o := newOnFake(t, nil)
	o.say(t, wafake.UserMessage{Text: "send me the chart"})
	dir := t.TempDir()
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 100)...)
	for name, data := range map[string][]byte{"chart.png": png, "notes.pdf": []byte("%PDF-1.4 …")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := o.a.SendFile(t.Context(), ann, channels.OutboundFile{Path: filepath.Join(dir, "chart.png"), Caption: "**the** chart", Photo: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.a.SendFile(t.Context(), ann, channels.OutboundFile{Path: filepath.Join(dir, "notes.pdf")}); err != nil {
		t.Fatal(err)
	}
	sent := o.f.Sent(ann)
	if len(sent) != 2 {
		t.Fatalf("sent %+v", sent)
	}
	if sent[0].Type != "image" || string(sent[0].Media) != string(png) || sent[0].Text != "*the* chart" {
		t.Errorf("image went as %s %q (%d bytes)", sent[0].Type, sent[0].Text, len(sent[0].Media))
	}
	if sent[1].Type != "document" || sent[1].Filename != "notes.pdf" {
		t.Errorf("pdf went as %s %q", sent[1].Type, sent[1].Filename)
	}
}

// TestFakeWindow: a message to a user whose last message is older than
// 24 hours goes as the reminder template, or, without one, is refused
// with an ERROR and an error that is not ErrUnavailable (the outbox drops
// it); the adapter learns the window from the store after a restart, and
// from Meta's 131047 when it did not know.
func TestFakeWindow(t *testing.T) {
	t.Run("template", func(t *testing.T) {
		o := newOnFake(t, func(o *Options) { o.Reminder = &Template{Name: "reminder", Language: "en"} })
		o.say(t, wafake.UserMessage{Text: "remind me tomorrow"})
		o.clk.add(25 * time.Hour)
		if _, err := o.a.Send(t.Context(), channels.Outbound{ChatID: ann, Text: "**Reminder**:\n- water the plants"}); err != nil {
			t.Fatal(err)
		}
		sent := o.f.Sent(ann)
		if len(sent) != 1 || sent[0].Type != "template" || sent[0].Template != "reminder" || len(sent[0].Params) != 1 ||
			sent[0].Params[0] != "*Reminder*: - water the plants" {
			t.Fatalf("sent %+v; want the reminder template with the text", sent)
		}
	})
	t.Run("drop", func(t *testing.T) {
		o := newOnFake(t, nil)
		o.say(t, wafake.UserMessage{Text: "hi"})
		o.clk.add(24*time.Hour + time.Minute)
		_, err := o.a.Send(t.Context(), channels.Outbound{ChatID: ann, Text: "late"})
		if !errors.Is(err, ErrOutsideWindow) || errors.Is(err, channels.ErrUnavailable) {
			t.Fatalf("err %v; want ErrOutsideWindow, not ErrUnavailable", err)
		}
		if n := o.f.Tried(ann); n != 0 {
			t.Errorf("%d sends tried; want none", n)
		}
		if l := o.log.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "outside the 24-hour window") {
			t.Errorf("no ERROR names the reason:\n%s", l)
		}
	})
	t.Run("from the store", func(t *testing.T) {
		var mu sync.Mutex
		var stored time.Time
		o := newOnFake(t, func(o *Options) {
			o.Reminder = &Template{Name: "reminder", Language: "en"}
			o.LatestInboundAt = func(_ context.Context, chat string) (time.Time, error) {
				mu.Lock()
				defer mu.Unlock()
				return stored, nil
			}
		})
		// This process never saw ann write; the store says 2 hours ago.
		mu.Lock()
		stored = o.clk.now().Add(-2 * time.Hour)
		mu.Unlock()
		o.f.SetLastUserMessage(ann, stored)
		if _, err := o.a.Send(t.Context(), channels.Outbound{ChatID: ann, Text: "on time"}); err != nil {
			t.Fatal(err)
		}
		o.clk.add(23 * time.Hour)
		if _, err := o.a.Send(t.Context(), channels.Outbound{ChatID: ann, Text: "too late"}); err != nil {
			t.Fatal(err)
		}
		sent := o.f.Sent(ann)
		if len(sent) != 2 || sent[0].Type != "text" || sent[1].Type != "template" {
			t.Fatalf("sent %+v; want a text within the window and a template after it", sent)
		}
	})
	t.Run("meta knows better", func(t *testing.T) {
		var o *onFake
		o = newOnFake(t, func(opt *Options) {
			opt.Reminder = &Template{Name: "reminder", Language: "en"}
			// The store took a late redelivery just now.
			opt.LatestInboundAt = func(context.Context, string) (time.Time, error) { return o.clk.now(), nil }
		})
		o.say(t, wafake.UserMessage{Text: "hi", At: o.clk.now().Add(-30 * time.Hour)}) // written 30 h ago
		for _, text := range []string{"answer", "and more"} {
			if _, err := o.a.Send(t.Context(), channels.Outbound{ChatID: ann, Text: text}); err != nil {
				t.Fatal(err)
			}
		}
		sent := o.f.Sent(ann)
		if len(sent) != 2 || sent[0].Type != "template" || sent[1].Type != "template" {
			t.Fatalf("sent %+v; want two templates", sent)
		}
		if tried := o.f.Tried(ann); tried != 3 {
			t.Errorf("%d sends tried; want 3: a text refused with 131047, then templates only", tried)
		}
	})
}

// TestFakeFailures: Graph errors classified as the outbox needs them.
func TestFakeFailures(t *testing.T) {
	o := newOnFake(t, nil)
	in := o.say(t, wafake.UserMessage{Text: "hi"})
	ctx := channels.WithInbound(t.Context(), in)
	send := func() error {
		_, err := o.a.Send(ctx, channels.Outbound{ChatID: ann, Text: "reply"})
		return err
	}

	end := o.f.Outage(503)
	err := send()
	end()
	if !errors.Is(err, channels.ErrUnavailable) {
		t.Errorf("during an outage: %v; want ErrUnavailable", err)
	}
	tried := o.f.Tried(ann)
	if tried != maxAttempts {
		t.Errorf("%d tries during the outage; want %d", tried, maxAttempts)
	}

	o.f.Fail("messages", 429, codeThroughput, 2)
	if err := send(); err != nil {
		t.Errorf("after two rate limits: %v; want it sent", err)
	}
	if got := o.f.Tried(ann) - tried; got != 3 {
		t.Errorf("%d tries for a rate-limited send; want 3", got)
	}
	tried = o.f.Tried(ann)

	o.f.Fail("messages", 400, 368, 1) // a policy block
	err = send()
	if err == nil || errors.Is(err, channels.ErrUnavailable) || !strings.Contains(err.Error(), "code 368") {
		t.Errorf("a policy block: %v; want a permanent error naming the code", err)
	}
	if got := o.f.Tried(ann) - tried; got != 1 {
		t.Errorf("a policy block was tried %d times; want once", got)
	}

	tried = o.f.Tried(ann)

	o.f.Fail("messages", 401, codeToken, 1) // an expired token: kept, not retried now
	err = send()
	if !errors.Is(err, channels.ErrUnavailable) || o.f.Tried(ann)-tried != 1 || !strings.Contains(o.log.String(), "refused the access token") {
		t.Errorf("a refused token: %v after %d tries; want ErrUnavailable after one, and an ERROR", err, o.f.Tried(ann)-tried)
	}

	for _, secret := range []string{wafake.AccessToken, wafake.AppSecret, wafake.VerifyToken} {
		if strings.Contains(o.log.String(), secret) || strings.Contains(err.Error(), secret) {
			t.Errorf("the log shows a secret")
		}
	}
}

// TestFakeRefusedToken: Run fails when Meta refuses the token, and the
// error does not show it.
func TestFakeRefusedToken(t *testing.T) {
	f := wafake.New(t)
	const wrong = "EAAwrong-token-0123456789"
	a, err := New(Options{PhoneNumberID: wafake.PhoneNumberID, AccessToken: wrong, AppSecret: "s", VerifyToken: "v",
		APIBase: f.APIBase(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Run(t.Context(), inbox(make(chan channels.Inbound)))
	if err == nil || !strings.Contains(err.Error(), "access token was refused") || strings.Contains(err.Error(), wrong) {
		t.Fatalf("Run: %v; want the refusal, without the token", err)
	}
}
