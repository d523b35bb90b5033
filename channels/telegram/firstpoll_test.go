package telegram

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
)

// New puts the first long poll out with getMe (the gateway's store opens
// meanwhile). It confirms nothing: the update it fetched stays at Telegram
// until Run has delivered it, and Run delivers it once.
func TestFirstPollGoesOutWithGetMe(t *testing.T) {
	var upd int
	e := newEnv(t, func(f *tgfake.Fake, o *Options) {
		o.PollOnRun = false
		upd, _ = f.PushText(42, 42, "ada", "sent while the bot was down")
	})
	if err := e.fake.WaitCalls(waitCtx(t), "getUpdates", 1); err != nil {
		t.Fatalf("New made no long poll: %v", err)
	}
	// Recorded with the call: the poll from offset 0 (none sent).
	if reqs := e.fake.Requests("getUpdates"); len(reqs) != 1 || reqs[0].Get("offset") != "" {
		t.Errorf("polls before Run = %v; want the one first poll, from offset 0", reqs)
	}
	if n := e.fake.Pending(); n != 1 {
		t.Errorf("pending before Run = %d; want the update still held by Telegram", n)
	}
	s := newSink()
	e.run(t, s)
	if in := s.next(t); in.Text != "sent while the bot was down" {
		t.Errorf("delivered %q", in.Text)
	}
	if err := e.fake.WaitOffset(waitCtx(t), upd+1); err != nil {
		t.Fatalf("offset not confirmed after delivery: %v", err)
	}
	select {
	case in := <-s.got:
		t.Errorf("delivered again: %+v", in)
	default:
	}
	if got := e.fake.Calls("deleteWebhook"); got != 0 {
		t.Errorf("deleteWebhook calls = %d; want none while no webhook is set", got)
	}
}

// A webhook left set (this bot once ran in webhook mode, or another
// program set one) makes getUpdates answer 409: the poll loop deletes it
// once and polls at once, without the conflict's error and backoff.
func TestWebhookLeftSetIsDeleted(t *testing.T) {
	e := newEnv(t, func(f *tgfake.Fake, o *Options) {
		o.PollOnRun = false // the conflict answers New's poll
		resp, err := http.PostForm(f.URL+"/bot"+testToken+"/setWebhook", url.Values{"url": {"https://hooks.example/telegram"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		f.PushText(42, 42, "ada", "hello")
	})
	s := newSink()
	e.run(t, s)
	if in := s.next(t); in.Text != "hello" {
		t.Errorf("delivered %q", in.Text)
	}
	if got := e.fake.Calls("deleteWebhook"); got != 1 {
		t.Errorf("deleteWebhook calls = %d; want 1", got)
	}
	if u, _ := e.fake.Webhook(); u != "" {
		t.Errorf("webhook still set: %q", u)
	}
	if waits := e.sleep.recorded(); len(waits) != 0 {
		t.Errorf("waited %v; want the poll again at once", waits)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "a webhook is set; deleting it to poll") || strings.Contains(logs, "level=ERROR") {
		t.Errorf("log:\n%s\nwant the deletion at INFO and no error", logs)
	}
}

type holdAll struct{}

func (holdAll) HoldAny(context.Context, []string) (int, error) { return 0, nil }

// Among replicas the poller role decides who polls: an adapter built on a
// replica on standby must not poll (its poll would end the poller's), so
// its first poll waits for Run, after the role's gate. Alone, New polls.
func TestStandbyReplicaPollsOnlyInRun(t *testing.T) {
	for _, replicas := range []bool{true, false} {
		f := tgfake.New(t, testToken)
		cfg := &Config{Token: testToken, APIEndpoint: f.URL, PollTimeout: time.Second}
		env := channels.BuildEnv{Logger: slog.New(slog.DiscardHandler)}
		if replicas {
			env.Roles = holdAll{}
		}
		l := build(cfg, env)
		if got := l.Gate != nil; got != replicas {
			t.Fatalf("replicas %v: gated %v", replicas, got)
		}
		ch, err := l.Build(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got := ch.(*Adapter).first.Load() != nil; got == replicas {
			t.Errorf("replicas %v: New started the first poll: %v", replicas, got)
		}
	}
}
