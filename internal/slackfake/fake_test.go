package slackfake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// client is the real slack-go client aimed at f.
func client(f *Fake, token string) *slack.Client {
	return slack.New(token, slack.OptionAPIURL(f.APIURL()), slack.OptionAppLevelToken(AppToken))
}

// socket runs slack-go's Socket Mode client against f until the test ends.
func socket(t *testing.T, f *Fake) *socketmode.Client {
	t.Helper()
	sm := socketmode.New(client(f, BotToken))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = sm.RunContext(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return sm
}

// next returns the next event of type typ from sm, skipping the client's
// own (connecting, connected, hello…).
func next(t *testing.T, ctx context.Context, sm *socketmode.Client, typ socketmode.EventType) socketmode.Event {
	t.Helper()
	for {
		select {
		case ev := <-sm.Events:
			if ev.Type == typ {
				return ev
			}
			switch ev.Type {
			case socketmode.EventTypeConnecting, socketmode.EventTypeConnected, socketmode.EventTypeHello,
				socketmode.EventTypeConnectionError, socketmode.EventTypeIncomingError:
				continue
			}
			t.Fatalf("event %s (%+v), want %s", ev.Type, ev.Data, typ)
		case <-ctx.Done():
			t.Fatalf("no %s event: %v", typ, ctx.Err())
		}
	}
}

func TestPostUpdateDeleteRoundTrip(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	api := client(f, BotToken)

	blocks := slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "*hi*", false, false), nil, nil)
	ch, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("hi", false), slack.MsgOptionTS("111.000001"),
		slack.MsgOptionBlocks(blocks))
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	if ch != "C1" || ts == "" {
		t.Fatalf("post answered channel %q ts %q", ch, ts)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("hi again", false)); err != nil {
		t.Fatalf("update: %v", err)
	}
	got := f.BotMessages("C1")
	if len(got) != 1 || got[0].Text != "hi again" || got[0].Edits != 1 || got[0].ThreadTS != "111.000001" || got[0].Deleted {
		t.Fatalf("after update: %+v", got)
	}
	if len(got[0].Versions) != 2 || got[0].Versions[0] != "hi" || got[0].Versions[1] != "hi again" {
		t.Errorf("Versions = %q", got[0].Versions)
	}
	if !strings.Contains(string(got[0].Blocks), `"*hi*"`) {
		t.Errorf("blocks not kept through an update without blocks: %s", got[0].Blocks)
	}
	if _, _, err := api.DeleteMessageContext(ctx, "C1", ts); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if got := f.BotMessages("C1"); !got[0].Deleted {
		t.Errorf("not marked deleted: %+v", got[0])
	}
	_, _, _, err = api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("x", false))
	if err == nil || err.Error() != "message_not_found" {
		t.Errorf("update of a deleted message: %v, want message_not_found", err)
	}
	if n := f.Calls("chat.update"); n != 2 {
		t.Errorf("Calls(chat.update) = %d, want 2", n)
	}
}

func TestTokensAndAuthTest(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	at, err := client(f, BotToken).AuthTestContext(ctx)
	if err != nil {
		t.Fatalf("auth.test: %v", err)
	}
	if at.UserID != BotUserID || at.BotID != BotID || at.TeamID != TeamID {
		t.Errorf("auth.test = %+v", at)
	}
	for token, want := range map[string]string{"xoxb-wrong": "invalid_auth", "": "not_authed", AppToken: "not_allowed_token_type"} {
		if _, err := client(f, token).AuthTestContext(ctx); err == nil || err.Error() != want {
			t.Errorf("token %q: %v, want %s", token, err, want)
		}
	}
	// apps.connections.open takes the app-level token only.
	bad := slack.New(BotToken, slack.OptionAPIURL(f.APIURL()), slack.OptionAppLevelToken(BotToken))
	if _, _, err := bad.StartSocketModeContext(ctx); err == nil || err.Error() != "not_allowed_token_type" {
		t.Errorf("connections.open with the bot token: %v", err)
	}
}

func TestMessageLimits(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	api := client(f, BotToken)
	_, _, err := api.PostMessageContext(ctx, "D1", slack.MsgOptionText(strings.Repeat("a", MaxMessageText+1), false))
	if err == nil || err.Error() != "msg_too_long" {
		t.Errorf("41k text: %v, want msg_too_long", err)
	}
	if _, _, err := api.PostMessageContext(ctx, "D1", slack.MsgOptionText(strings.Repeat("é", MaxMessageText), false)); err != nil {
		t.Errorf("40k characters: %v", err)
	}
	if _, _, err := api.PostMessageContext(ctx, "D1", slack.MsgOptionText("", false)); err == nil || err.Error() != "no_text" {
		t.Errorf("empty: %v, want no_text", err)
	}
}

func TestSocketModeMessageAck(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	sm := socket(t, f)
	if err := f.WaitConnected(ctx, 1); err != nil {
		t.Fatal(err)
	}
	ts := f.Say(UserMessage{Channel: "D1", User: "U1", Text: "hello"})

	ev := next(t, ctx, sm, socketmode.EventTypeEventsAPI)
	api := ev.Data.(slackevents.EventsAPIEvent)
	msg, ok := api.InnerEvent.Data.(*slackevents.MessageEvent)
	if !ok {
		t.Fatalf("inner event %T", api.InnerEvent.Data)
	}
	if msg.Channel != "D1" || msg.User != "U1" || msg.Text != "hello" || msg.TimeStamp != ts || !msg.IsIM() {
		t.Errorf("message event %+v", msg)
	}
	if ev.Request.RetryAttempt != 0 {
		t.Errorf("retry_attempt %d on first delivery", ev.Request.RetryAttempt)
	}
	sm.Ack(*ev.Request)
	if err := f.WaitAcked(ctx, ev.Request.EnvelopeID); err != nil {
		t.Fatal(err)
	}
	if got := f.EnvelopesOf(ts); len(got) != 1 || got[0] != ev.Request.EnvelopeID {
		t.Errorf("EnvelopesOf = %v", got)
	}
	if e := f.Envelopes()[0]; e.AckedIn <= 0 || e.AckedIn > 3*time.Second {
		t.Errorf("AckedIn = %v", e.AckedIn)
	}
}

func TestChannelMentionSendsMessageAndAppMention(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	sm := socket(t, f)
	ts := f.Say(UserMessage{Channel: "C9", User: "U1", Text: "<@UBOT> help", ThreadTS: "100.000001"})
	kinds := map[string]bool{}
	for range 2 {
		ev := next(t, ctx, sm, socketmode.EventTypeEventsAPI)
		sm.Ack(*ev.Request)
		switch e := ev.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(type) {
		case *slackevents.MessageEvent:
			kinds["message"] = e.ThreadTimeStamp == "100.000001" && e.IsChannel() && e.TimeStamp == ts
		case *slackevents.AppMentionEvent:
			kinds["app_mention"] = e.ThreadTimeStamp == "100.000001" && e.TimeStamp == ts
		}
	}
	if !kinds["message"] || !kinds["app_mention"] {
		t.Errorf("got %v, want a message and an app_mention of the thread reply", kinds)
	}
	if err := f.WaitAllAcked(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestUnackedEnvelopeIsRedelivered(t *testing.T) {
	f := New(t)
	f.SetRedelivery(50*time.Millisecond, 0)
	ctx := testCtx(t)
	sm := socket(t, f)
	f.Say(UserMessage{Channel: "D1", User: "U1", Text: "once"})

	first := next(t, ctx, sm, socketmode.EventTypeEventsAPI) // not acked
	again := next(t, ctx, sm, socketmode.EventTypeEventsAPI)
	if again.Request.EnvelopeID != first.Request.EnvelopeID {
		t.Fatalf("redelivered envelope %s, want %s", again.Request.EnvelopeID, first.Request.EnvelopeID)
	}
	if again.Request.RetryAttempt != 1 || again.Request.RetryReason != "timeout" {
		t.Errorf("retry_attempt %d reason %q, want 1 timeout", again.Request.RetryAttempt, again.Request.RetryReason)
	}
	id1 := first.Data.(slackevents.EventsAPIEvent).Data.(*slackevents.EventsAPICallbackEvent).EventID
	id2 := again.Data.(slackevents.EventsAPIEvent).Data.(*slackevents.EventsAPICallbackEvent).EventID
	if id1 == "" || id1 != id2 {
		t.Errorf("event_id %q then %q, want the same", id1, id2)
	}
	sm.Ack(*again.Request)
	if err := f.WaitAcked(ctx, first.Request.EnvelopeID); err != nil {
		t.Fatal(err)
	}
}

func TestEnvelopeWaitsForReconnect(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	sm := socket(t, f)
	if err := f.WaitConnected(ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.DropConnections()
	ts := f.Say(UserMessage{Channel: "D1", User: "U1", Text: "while away"})
	ev := next(t, ctx, sm, socketmode.EventTypeEventsAPI)
	if got := ev.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent).TimeStamp; got != ts {
		t.Errorf("got ts %s, want %s", got, ts)
	}
	sm.Ack(*ev.Request)
	if f.Connects() < 2 {
		t.Errorf("Connects = %d, want a reconnect", f.Connects())
	}
	f.Refresh()
	if err := f.WaitConnected(ctx, 3); err != nil {
		t.Fatalf("no reconnect after refresh: %v", err)
	}
}

func TestClickArrivesAsInteractive(t *testing.T) {
	f := New(t)
	f.SetEchoBot(false)
	ctx := testCtx(t)
	api := client(f, BotToken)
	approve := slack.NewButtonBlockElement("approve", "req-7", slack.NewTextBlockObject(slack.PlainTextType, "Approve", false, false))
	deny := slack.NewButtonBlockElement("deny", "req-7", slack.NewTextBlockObject(slack.PlainTextType, "Deny", false, false))
	_, ts, err := api.PostMessageContext(ctx, "D1", slack.MsgOptionText("run it?", false),
		slack.MsgOptionBlocks(slack.NewActionBlock("", approve, deny)))
	if err != nil {
		t.Fatal(err)
	}
	sm := socket(t, f)
	id := f.Click(Click{Channel: "D1", TS: ts, User: "U1", ActionID: "deny"})
	ev := next(t, ctx, sm, socketmode.EventTypeInteractive)
	cb := ev.Data.(slack.InteractionCallback)
	if cb.Type != slack.InteractionTypeBlockActions || cb.User.ID != "U1" || cb.Channel.ID != "D1" ||
		cb.Container.MessageTs != ts || cb.Message.Timestamp != ts {
		t.Errorf("callback %+v", cb)
	}
	if len(cb.ActionCallback.BlockActions) != 1 {
		t.Fatalf("actions %+v", cb.ActionCallback)
	}
	if a := cb.ActionCallback.BlockActions[0]; a.ActionID != "deny" || a.Value != "req-7" {
		t.Errorf("action %+v", a)
	}
	sm.Ack(*ev.Request)
	if err := f.WaitAcked(ctx, id); err != nil {
		t.Fatal(err)
	}
}

func TestRateLimitAndOutage(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	api := client(f, BotToken)

	f.RateLimit("chat.postMessage", 2*time.Second, 1)
	_, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false))
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 2*time.Second {
		t.Fatalf("injected 429: %v, want RateLimitedError 2s", err)
	}

	// The per-channel limit: a burst of 3, then 429 (1 a minute here, so
	// that a slow machine cannot refill the bucket mid-test).
	f.SetLimits(Limits{PostPerChannel: Rate{PerMinute: 1, Burst: 3}})
	for i := range 3 {
		if _, _, err := api.PostMessageContext(ctx, "C2", slack.MsgOptionText("x", false)); err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
	}
	_, _, err = api.PostMessageContext(ctx, "C2", slack.MsgOptionText("x", false))
	if !errors.As(err, &rl) || rl.RetryAfter < 59*time.Second {
		t.Fatalf("4th post: %v, want RateLimitedError of about a minute", err)
	}
	if len(f.Throttled()) != 1 || len(f.BotMessages("C2")) != 3 {
		t.Errorf("throttled %v, posted %d", f.Throttled(), len(f.BotMessages("C2")))
	}
	f.NoLimits()
	if _, _, err := api.PostMessageContext(ctx, "C2", slack.MsgOptionText("x", false)); err != nil {
		t.Errorf("with no limits: %v", err)
	}

	end := f.Outage("chat.postMessage", http.StatusServiceUnavailable)
	_, _, err = api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false))
	var sc slack.StatusCodeError
	if !errors.As(err, &sc) || sc.Code != http.StatusServiceUnavailable {
		t.Fatalf("outage: %v, want StatusCodeError 503", err)
	}
	end()
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false)); err != nil {
		t.Errorf("after the outage: %v", err)
	}
	f.Fail("*", http.StatusInternalServerError, 1)
	if _, err := api.AuthTestContext(ctx); !errors.As(err, &sc) || sc.Code != 500 {
		t.Errorf("Fail(*): %v", err)
	}
}

func TestEventsAPISignedPost(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	const secret = "s3cret"
	type got struct {
		err      error
		ev       slackevents.EventsAPIEvent
		retryNum string
	}
	gotc := make(chan got, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sv, err := slack.NewSecretsVerifier(r.Header, secret)
		if err == nil {
			_, _ = sv.Write(body)
			err = sv.Ensure()
		}
		var ev slackevents.EventsAPIEvent
		if err == nil {
			ev, err = slackevents.ParseEvent(body, slackevents.OptionNoVerifyToken())
		}
		gotc <- got{err, ev, r.Header.Get("X-Slack-Retry-Num")}
	}))
	defer srv.Close()

	ts, bodies := f.SayEvents(UserMessage{Channel: "D1", User: "U1", Text: "hi"})
	if len(bodies) != 1 {
		t.Fatalf("%d bodies for a DM", len(bodies))
	}
	for _, retry := range []int{0, 1} {
		status, err := f.PostEvent(ctx, srv.URL, secret, bodies[0], retry)
		if err != nil || status != http.StatusOK {
			t.Fatalf("post: %d %v", status, err)
		}
		g := <-gotc
		if g.err != nil {
			t.Fatalf("verify: %v", g.err)
		}
		if m := g.ev.InnerEvent.Data.(*slackevents.MessageEvent); m.TimeStamp != ts || m.Text != "hi" {
			t.Errorf("event %+v", m)
		}
		if want := map[int]string{0: "", 1: "1"}[retry]; g.retryNum != want {
			t.Errorf("X-Slack-Retry-Num %q, want %q", g.retryNum, want)
		}
	}
	if _, err := f.PostEvent(ctx, srv.URL, "wrong", bodies[0], 0); err != nil {
		t.Fatal(err)
	}
	if g := <-gotc; !errors.Is(g.err, slack.ErrInvalidSignature) {
		t.Errorf("wrong secret verified: %v", g.err)
	}
}

func TestFileDownloadNeedsToken(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	file := f.AddFile("notes.txt", "text/plain", []byte("secret notes"))
	var buf bytes.Buffer
	if err := client(f, BotToken).GetFileContext(ctx, file.URLPrivate, &buf); err != nil {
		t.Fatalf("download: %v", err)
	}
	if buf.String() != "secret notes" {
		t.Errorf("downloaded %q", buf.String())
	}
	buf.Reset()
	if err := client(f, "xoxb-wrong").GetFileContext(ctx, file.URLPrivate, &buf); err == nil {
		t.Errorf("download with a wrong token succeeded: %q", buf.String())
	}
	resp, err := http.Get(file.URLPrivate)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), "secret") {
		t.Errorf("served without a token: %q", body)
	}

	// The file arrives with a user's message as file_share.
	sm := socket(t, f)
	f.Say(UserMessage{Channel: "D1", User: "U1", Text: "see", Files: []File{file}})
	ev := next(t, ctx, sm, socketmode.EventTypeEventsAPI)
	m := ev.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent)
	if m.SubType != "file_share" || len(m.Message.Files) != 1 || m.Message.Files[0].URLPrivate != file.URLPrivate {
		t.Errorf("file message %+v files %+v", m, m.Message.Files)
	}
}

func TestUploadFlow(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	data := []byte("report body")
	sum, err := client(f, BotToken).UploadFileContext(ctx, slack.UploadFileParameters{
		Reader: bytes.NewReader(data), Filename: "report.md", FileSize: len(data), Title: "Report",
		Channel: "D1", ThreadTimestamp: "123.000001", InitialComment: "here",
	})
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	ups := f.Uploads()
	if len(ups) != 1 {
		t.Fatalf("uploads %+v", ups)
	}
	u := ups[0]
	if u.ID != sum.ID || u.Title != "Report" || u.Name != "report.md" || string(u.Data) != string(data) ||
		u.Channel != "D1" || u.ThreadTS != "123.000001" || u.InitialComment != "here" {
		t.Errorf("upload %+v (summary %+v)", u, sum)
	}
}

func TestOtherMethods(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	api := client(f, BotToken)
	f.AddUser(User{ID: "U1", Name: "ada", RealName: "Ada L"})
	u, err := api.GetUserInfoContext(ctx, "U1")
	if err != nil || u.Name != "ada" || u.RealName != "Ada L" || u.TeamID != TeamID {
		t.Errorf("users.info: %+v %v", u, err)
	}
	c, err := api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: "D7"})
	if err != nil || !c.IsIM || c.ID != "D7" {
		t.Errorf("conversations.info: %+v %v", c, err)
	}
	ts := f.Say(UserMessage{Channel: "D7", User: "U1", Text: "hi"})
	if err := api.AddReactionContext(ctx, "eyes", slack.NewRefToMessage("D7", ts)); err != nil {
		t.Fatalf("reactions.add: %v", err)
	}
	if err := api.AddReactionContext(ctx, "eyes", slack.NewRefToMessage("D7", ts)); err == nil || err.Error() != "already_reacted" {
		t.Errorf("second reaction: %v", err)
	}
	if got := f.Reactions("D7", ts); len(got) != 1 || got[0] != "eyes" {
		t.Errorf("Reactions = %v", got)
	}
	err = api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{ChannelID: "D7", ThreadTS: ts, Status: "is thinking…"})
	if err != nil {
		t.Fatalf("setStatus: %v", err)
	}
	if st := f.Statuses(); len(st) != 1 || st[0].Status != "is thinking…" {
		t.Errorf("Statuses = %+v", st)
	}
	raw, _ := json.Marshal(f.History("D7"))
	if !strings.Contains(string(raw), `"hi"`) {
		t.Errorf("history %s", raw)
	}
}
