package slackfake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

// slack-go's socketmode drops a connection that gets no ping for its ping
// interval; the fake's pings keep it.
func TestPingsKeepTheSocket(t *testing.T) {
	f := New(t)
	f.SetPingInterval(10 * time.Millisecond)
	ctx := testCtx(t)
	sm := socketmode.New(client(f, BotToken), socketmode.OptionPingInterval(300*time.Millisecond))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = sm.RunContext(runCtx) }()
	go func() { // drain the client's events so it never blocks
		for {
			select {
			case <-sm.Events:
			case <-done:
				return
			}
		}
	}()
	defer func() { cancel(); <-done }()
	// 90 pings span 3 of the client's intervals; without them it would
	// have reconnected by then.
	if err := f.WaitFor(ctx, func() bool { return f.Pings() >= 90 || f.Connects() > 1 }); err != nil {
		t.Fatal(err)
	}
	if n := f.Connects(); n != 1 {
		t.Errorf("Connects = %d with pings every 10 ms, want 1", n)
	}
}

func TestRedeliveryGivesUp(t *testing.T) {
	f := New(t)
	f.SetRedelivery(10*time.Millisecond, 3)
	ctx := testCtx(t)
	sm := socket(t, f)
	f.Say(UserMessage{Channel: "D1", User: "U1", Text: "ignored"})
	for want := range 4 {
		ev := next(t, ctx, sm, socketmode.EventTypeEventsAPI)
		if ev.Request.RetryAttempt != want {
			t.Fatalf("retry_attempt %d, want %d", ev.Request.RetryAttempt, want)
		}
	}
	if err := f.WaitAllAcked(ctx); err != nil {
		t.Fatal(err)
	}
	if e := f.Envelopes()[0]; !e.Dropped || e.Acked || e.Sent != 4 {
		t.Errorf("envelope %+v, want dropped after 4 sends", e)
	}
}

func TestUserEditDeleteAndBotEcho(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	sm := socket(t, f)
	ts := f.Say(UserMessage{Channel: "D1", User: "U1", Text: "helo"})
	f.UserEdit("D1", ts, "hello")
	f.UserDelete("D1", ts)
	var subtypes []string
	for range 3 {
		ev := next(t, ctx, sm, socketmode.EventTypeEventsAPI)
		sm.Ack(*ev.Request)
		m := ev.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent)
		subtypes = append(subtypes, m.SubType)
		switch m.SubType {
		case "message_changed":
			if m.Message.Text != "hello" || m.Message.Timestamp != ts || m.PreviousMessage.Text != "helo" {
				t.Errorf("message_changed %+v / %+v", m.Message, m.PreviousMessage)
			}
		case "message_deleted":
			if m.DeletedTimeStamp != ts {
				t.Errorf("deleted_ts %q, want %q", m.DeletedTimeStamp, ts)
			}
		}
	}
	if subtypes[0] != "" || subtypes[1] != "message_changed" || subtypes[2] != "message_deleted" {
		t.Errorf("subtypes %q", subtypes)
	}
	if h := f.History("D1"); len(h) != 1 || !h[0].Deleted || h[0].Edits != 1 {
		t.Errorf("history %+v", h)
	}

	// The bot's own post comes back as a message event with bot_id.
	if _, _, err := client(f, BotToken).PostMessageContext(ctx, "D1", slack.MsgOptionText("hi", false)); err != nil {
		t.Fatal(err)
	}
	ev := next(t, ctx, sm, socketmode.EventTypeEventsAPI)
	sm.Ack(*ev.Request)
	if m := ev.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent); m.BotID != BotID || m.User != BotUserID {
		t.Errorf("echo %+v", m)
	}
}

func TestSlashCommandAckPayload(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	sm := socket(t, f)
	id := f.SlashCommand(SlashCommand{Channel: "C1", User: "U1", Command: "/status", Text: "now"})
	ev := next(t, ctx, sm, socketmode.EventTypeSlashCommand)
	cmd := ev.Data.(slack.SlashCommand)
	if cmd.Command != "/status" || cmd.Text != "now" || cmd.UserID != "U1" || cmd.ChannelID != "C1" {
		t.Errorf("command %+v", cmd)
	}
	sm.Ack(*ev.Request, map[string]any{"text": "all fine"})
	if err := f.WaitAcked(ctx, id); err != nil {
		t.Fatal(err)
	}
	if p := f.Envelopes()[0].AckPayload; string(p) != `{"text":"all fine"}` {
		t.Errorf("ack payload %s", p)
	}
}

func TestPostInteractionIsSigned(t *testing.T) {
	f := New(t)
	f.SetEchoBot(false)
	ctx := testCtx(t)
	btn := slack.NewButtonBlockElement("ok", "v1", slack.NewTextBlockObject(slack.PlainTextType, "OK", false, false))
	_, ts, err := client(f, BotToken).PostMessageContext(ctx, "C1", slack.MsgOptionBlocks(slack.NewActionBlock("b1", btn)))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan slack.InteractionCallback, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sv, err := slack.NewSecretsVerifier(r.Header, "sec")
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		_, _ = sv.Write(body)
		if sv.Ensure() != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		cb, err := slack.InteractionCallbackParse(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- cb
	}))
	defer srv.Close()
	status, err := f.PostInteraction(ctx, srv.URL, "sec", f.ClickPayload(Click{Channel: "C1", TS: ts, User: "U2", Value: "v1"}))
	if err != nil || status != http.StatusOK {
		t.Fatalf("post: %d %v", status, err)
	}
	cb := <-got
	if a := cb.ActionCallback.BlockActions; len(a) != 1 || a[0].ActionID != "ok" || a[0].BlockID != "b1" || cb.User.ID != "U2" {
		t.Errorf("callback %+v", cb)
	}
}

func TestInjectedErrorsAndInvalidBlocks(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	api := client(f, BotToken)
	f.FailError("chat.postMessage", "not_in_channel", 1)
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false)); err == nil || err.Error() != "not_in_channel" {
		t.Errorf("FailError: %v", err)
	}
	long := strings.Repeat("a", maxSectionText+1)
	sec := slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, long, false, false), nil, nil)
	_, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionBlocks(sec))
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err != "invalid_blocks" || len(se.ResponseMetadata.Messages) == 0 {
		t.Fatalf("3001-character section: %#v, want invalid_blocks with a message", err)
	}
	md := slack.NewMarkdownBlock("", "**bold** and a [link](https://example.com)")
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("fallback", false), slack.MsgOptionBlocks(md)); err != nil {
		t.Errorf("markdown block: %v", err)
	}
	got := f.BotMessages("C1")
	if len(got) != 1 {
		t.Fatalf("failed posts were recorded: %+v", got)
	}
	var blocks []map[string]any
	if err := json.Unmarshal(got[0].Blocks, &blocks); err != nil || len(blocks) != 1 || blocks[0]["type"] != "markdown" {
		t.Errorf("markdown block not kept: %s (%v)", got[0].Blocks, err)
	}
}

func TestMissingScope(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	api := client(f, BotToken)
	file := f.AddFile("a.txt", "text/plain", []byte("data"))
	f.SetScopes("users:read")
	_, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false))
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err != "missing_scope" || se.Needed != "chat:write" || se.Provided != "users:read" {
		t.Errorf("post without chat:write: %#v", err)
	}
	if _, err := api.GetUserInfoContext(ctx, "U1"); err != nil {
		t.Errorf("users.info with users:read: %v", err)
	}
	if err := api.GetFileContext(ctx, file.URLPrivate, io.Discard); err == nil {
		t.Error("download without files:read succeeded")
	}
}

func TestChallenge(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	answer := func(echo bool) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			ev, err := slackevents.ParseEvent(body, slackevents.OptionNoVerifyToken())
			if err != nil || ev.Type != slackevents.URLVerification {
				http.Error(w, "not a verification", http.StatusBadRequest)
				return
			}
			c := ev.Data.(*slackevents.EventsAPIURLVerificationEvent).Challenge
			if !echo {
				c = "something else"
			}
			_ = json.NewEncoder(w).Encode(slackevents.ChallengeResponse{Challenge: c})
		}))
	}
	good, bad := answer(true), answer(false)
	defer good.Close()
	defer bad.Close()
	if err := f.Challenge(ctx, good.URL, "sec"); err != nil {
		t.Errorf("echoing endpoint: %v", err)
	}
	if err := f.Challenge(ctx, bad.URL, "sec"); err == nil {
		t.Error("a wrong answer passed")
	}
}

func TestEventsURLDeliversAndRetries(t *testing.T) {
	f := New(t)
	f.SetRedelivery(10*time.Millisecond, 0)
	ctx := testCtx(t)
	type hit struct {
		retry   string
		form    bool   // payload=…
		command string // a slash command's form field
	}
	hits := make(chan hit, 10)
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sv, err := slack.NewSecretsVerifier(r.Header, "sec")
		if err == nil {
			_, _ = sv.Write(body)
			err = sv.Ensure()
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		form, _ := url.ParseQuery(string(body))
		hits <- hit{r.Header.Get("X-Slack-Retry-Num"), form.Has("payload"), form.Get("command")}
		if calls++; calls == 1 {
			http.Error(w, "busy", http.StatusInternalServerError) // the first delivery fails
		}
	}))
	defer srv.Close()
	f.SetEventsURL(srv.URL+"/events", srv.URL+"/interact", "sec")

	ts := f.Say(UserMessage{Channel: "D1", User: "U1", Text: "over http"})
	if err := f.WaitAllAcked(ctx); err != nil {
		t.Fatal(err)
	}
	if h1, h2 := <-hits, <-hits; h1.retry != "" || h2.retry != "1" {
		t.Errorf("retry headers %q then %q, want none then 1", h1.retry, h2.retry)
	}
	if e := f.Envelopes()[0]; e.Sent != 2 || !e.Acked || e.TS != ts {
		t.Errorf("envelope %+v", e)
	}

	btn := slack.NewButtonBlockElement("go", "v", slack.NewTextBlockObject(slack.PlainTextType, "Go", false, false))
	_, bts, err := client(f, BotToken).PostMessageContext(ctx, "D1", slack.MsgOptionBlocks(slack.NewActionBlock("", btn)))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.WaitAcked(ctx, f.Click(Click{Channel: "D1", TS: bts, User: "U1", ActionID: "go"})); err != nil {
		t.Fatal(err)
	}
	if h := <-hits; !h.form {
		t.Error("interaction not form-encoded")
	}
	if err := f.WaitAcked(ctx, f.SlashCommand(SlashCommand{Channel: "D1", User: "U1", Command: "/new"})); err != nil {
		t.Fatal(err)
	}
	if h := <-hits; h.command != "/new" {
		t.Errorf("slash command form has command %q", h.command)
	}
	if f.Connects() != 0 {
		t.Error("a socket was opened in Events API mode")
	}
}

func TestLimitsWithLeavesDefaultsAlone(t *testing.T) {
	before := DefaultLimits.Methods["apps.connections.open"]
	l := DefaultLimits.With("apps.connections.open", Rate{PerMinute: 600, Burst: 100})
	if DefaultLimits.Methods["apps.connections.open"] != before || l.Methods["apps.connections.open"].Burst != 100 {
		t.Errorf("With changed the defaults or did not apply: %+v / %+v", DefaultLimits.Methods["apps.connections.open"], l.Methods["apps.connections.open"])
	}
	f := New(t)
	ctx := testCtx(t)
	f.SetLimits(DefaultLimits.With("auth.test", Rate{PerMinute: 1, Burst: 1}))
	api := client(f, BotToken)
	if _, err := api.AuthTestContext(ctx); err != nil {
		t.Fatal(err)
	}
	var rl *slack.RateLimitedError
	if _, err := api.AuthTestContext(ctx); !errors.As(err, &rl) || rl.RetryAfter != time.Minute {
		t.Errorf("second auth.test at 1/min: %v, want a 60 s Retry-After", err)
	}
}

// A lost acknowledgement (UserMessage.LoseFirstAck) leaves the envelope unacknowledged:
// it is sent again, and the next acknowledgement counts.
func TestLostAckIsRedelivered(t *testing.T) {
	f := New(t)
	f.SetRedelivery(20*time.Millisecond, 0)
	ctx := testCtx(t)
	sm := socket(t, f)
	f.Say(UserMessage{Channel: "D1", User: "U1", Text: "hello", LoseFirstAck: true})
	first := next(t, ctx, sm, socketmode.EventTypeEventsAPI)
	sm.Ack(*first.Request) // lost
	again := next(t, ctx, sm, socketmode.EventTypeEventsAPI)
	if again.Request.EnvelopeID != first.Request.EnvelopeID || again.Request.RetryAttempt != 1 {
		t.Fatalf("after a lost ack got %s attempt %d, want %s attempt 1", again.Request.EnvelopeID, again.Request.RetryAttempt, first.Request.EnvelopeID)
	}
	sm.Ack(*again.Request)
	if err := f.WaitAcked(ctx, first.Request.EnvelopeID); err != nil {
		t.Fatal(err)
	}
	if e := f.Envelopes()[0]; e.LostAcks != 1 || e.Sent != 2 || !e.Acked {
		t.Errorf("envelope %+v, want one lost ack, two sends, acknowledged", e)
	}
}
