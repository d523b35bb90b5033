package tgfake

import (
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

const token = "123:ABC"

// ctxClient binds tgbotapi requests to a context, as the adapter does.
type ctxClient struct{ ctx context.Context }

func (c ctxClient) Do(r *http.Request) (*http.Response, error) {
	return http.DefaultClient.Do(r.WithContext(c.ctx))
}

func bot(t *testing.T, f *Fake, ctx context.Context) *tgbotapi.BotAPI {
	t.Helper()
	b, err := tgbotapi.NewBotAPIWithClient(token, f.URL+"/bot%s/%s", ctxClient{ctx})
	if err != nil {
		t.Fatalf("NewBotAPIWithClient: %v", err)
	}
	return b
}

func apiErr(t *testing.T, err error) *tgbotapi.Error {
	t.Helper()
	var e *tgbotapi.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *tgbotapi.Error", err, err)
	}
	return e
}

func TestGetMe(t *testing.T) {
	f := New(t, token)
	b := bot(t, f, t.Context())
	if b.Self.ID != 123 || b.Self.UserName != "switchboard_bot" || !b.Self.IsBot {
		t.Errorf("Self = %+v", b.Self)
	}
	_, err := tgbotapi.NewBotAPIWithClient("123:WRONG", f.URL+"/bot%s/%s", ctxClient{t.Context()})
	if e := apiErr(t, err); e.Code != 401 || e.Message != "Unauthorized" {
		t.Errorf("wrong token: %+v", e)
	}
}

func TestGetUpdatesOffsets(t *testing.T) {
	f := New(t, token)
	b := bot(t, f, t.Context())
	u1, m1 := f.PushText(42, 42, "ada", "one")
	u2, _ := f.PushText(42, 42, "ada", "two /start @someone_else")

	got, err := b.GetUpdates(tgbotapi.UpdateConfig{Timeout: 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].UpdateID != u1 || got[0].Message.MessageID != m1 || got[0].Message.Text != "one" {
		t.Fatalf("updates = %+v", got)
	}
	ents := got[1].Message.Entities
	if len(ents) != 2 || ents[0].Type != "bot_command" || ents[0].Offset != 4 || ents[1].Type != "mention" || ents[1].Length != 13 {
		t.Errorf("entities = %+v", ents)
	}
	// unconfirmed updates come again
	if again, _ := b.GetUpdates(tgbotapi.UpdateConfig{}); len(again) != 2 {
		t.Errorf("without offset: %d updates, want 2", len(again))
	}
	// offset confirms everything below it
	rest, err := b.GetUpdates(tgbotapi.UpdateConfig{Offset: u2})
	if err != nil || len(rest) != 1 || rest[0].UpdateID != u2 {
		t.Fatalf("offset %d: %+v, %v", u2, rest, err)
	}
	if f.Pending() != 1 {
		t.Errorf("pending = %d, want 1", f.Pending())
	}
	if got := f.Offsets(); len(got) != 3 || got[0] != 0 || got[2] != u2 {
		t.Errorf("offsets = %v", got)
	}
}

func TestLongPollWakesAndCancels(t *testing.T) {
	f := New(t, token)
	b := bot(t, f, t.Context())
	res := make(chan []tgbotapi.Update, 1)
	go func() {
		u, _ := b.GetUpdates(tgbotapi.UpdateConfig{Timeout: 30})
		res <- u
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := f.WaitCalls(ctx, "getUpdates", 1); err != nil {
		t.Fatal(err)
	}
	f.PushText(42, 42, "ada", "wake up")
	select {
	case u := <-res:
		if len(u) != 1 || u[0].Message.Text != "wake up" {
			t.Errorf("updates = %+v", u)
		}
	case <-ctx.Done():
		t.Fatal("long poll did not wake up on a new update")
	}

	// cancelling the client's context ends the poll at once
	pctx, pcancel := context.WithCancel(t.Context())
	cb := bot(t, f, pctx)
	errc := make(chan error, 1)
	go func() {
		_, err := cb.GetUpdates(tgbotapi.UpdateConfig{Offset: 1 << 30, Timeout: 30})
		errc <- err
	}()
	if err := f.WaitCalls(ctx, "getUpdates", 2); err != nil {
		t.Fatal(err)
	}
	pcancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled poll returned %v", err)
		}
	case <-ctx.Done():
		t.Fatal("cancelled poll did not return")
	}
}

func TestNewerPollEndsOlderWithConflict(t *testing.T) {
	f := New(t, token)
	b := bot(t, f, t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := b.GetUpdates(tgbotapi.UpdateConfig{Timeout: 30})
		errc <- err
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// The first poll holds its place once its offset is recorded (a call
	// counted is not yet a poll: under load the second could overtake it).
	if err := f.WaitOffset(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetUpdates(tgbotapi.UpdateConfig{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if e := apiErr(t, err); e.Code != 409 || !strings.Contains(e.Message, "terminated by other getUpdates") {
			t.Errorf("older poll: %+v", e)
		}
	case <-ctx.Done():
		t.Fatal("older poll still running")
	}
	// a webhook blocks polling until deleted
	if _, err := b.MakeRequest("setWebhook", tgbotapi.Params{"url": "https://example.com/hook", "secret_token": "abc"}); err != nil {
		t.Fatal(err)
	}
	_, err := b.GetUpdates(tgbotapi.UpdateConfig{})
	if e := apiErr(t, err); e.Code != 409 || !strings.Contains(e.Message, "webhook is active") {
		t.Errorf("poll with webhook: %+v", e)
	}
	if _, err := b.Request(tgbotapi.DeleteWebhookConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetUpdates(tgbotapi.UpdateConfig{}); err != nil {
		t.Errorf("poll after deleteWebhook: %v", err)
	}
}

func TestSendMessageChecks(t *testing.T) {
	f := New(t, token)
	f.SetLimits(NoLimits) // many calls in one chat: this test checks the contents
	b := bot(t, f, t.Context())
	send := func(text, mode string) error {
		m := tgbotapi.NewMessage(42, text)
		m.ParseMode = mode
		_, err := b.Send(m)
		return err
	}
	tests := []struct {
		name, text, mode, wantErr string
	}{
		{"4096 ASCII fits", strings.Repeat("a", 4096), "", ""},
		{"4095 ASCII + emoji is 4097 units", strings.Repeat("a", 4095) + "😀", "", "message is too long"},
		{"HTML counted after parsing", "<b>" + strings.Repeat("a", 4096) + "</b>", "HTML", ""},
		{"bad HTML", "<div>x</div>", "HTML", `can't parse entities: unsupported start tag "div"`},
		{"unclosed tag", "<b>x", "HTML", "can't parse entities"},
		{"empty", "", "", "message text is empty"},
		{"empty after parsing", "<b> </b>", "HTML", "message text is empty"},
		{"pre code language", `<pre><code class="language-go">x</code></pre>`, "HTML", ""},
	}
	for _, tt := range tests {
		err := send(tt.text, tt.mode)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.wantErr)
		case tt.wantErr != "" && apiErr(t, err).Code != 400:
			t.Errorf("%s: code %d, want 400", tt.name, apiErr(t, err).Code)
		}
	}
	if n := len(f.Sent()); n != 3 {
		t.Errorf("recorded %d messages, want only the 3 accepted ones", n)
	}
	// replies: an unknown target fails unless allowed
	_, err := b.MakeRequest("sendMessage", tgbotapi.Params{"chat_id": "42", "text": "x", "reply_parameters": `{"message_id":999}`})
	if err == nil || !strings.Contains(err.Error(), "message to be replied not found") {
		t.Errorf("reply to unknown: %v", err)
	}
	_, err = b.MakeRequest("sendMessage", tgbotapi.Params{"chat_id": "42", "text": "x",
		"reply_parameters": `{"message_id":999,"allow_sending_without_reply":true}`})
	if err != nil {
		t.Errorf("reply allowing none: %v", err)
	}
	if last := f.Sent()[len(f.Sent())-1]; last.ReplyTo != 999 || !last.AllowNoReply {
		t.Errorf("recorded reply = %+v", last)
	}
}

func TestFailNextAndDisable(t *testing.T) {
	f := New(t, token)
	b := bot(t, f, t.Context())
	f.FailNext("sendMessage", 429, "", 3)
	_, err := b.Send(tgbotapi.NewMessage(42, "x"))
	e := apiErr(t, err)
	if e.Code != 429 || e.RetryAfter != 3 || e.Message != "Too Many Requests: retry after 3" {
		t.Errorf("429: %+v", e)
	}
	if _, err := b.Send(tgbotapi.NewMessage(42, "x")); err != nil {
		t.Errorf("after the failure: %v", err)
	}
	f.FailNextRaw("sendMessage", 502, "<html>Bad Gateway</html>")
	if _, err := b.Send(tgbotapi.NewMessage(42, "x")); err == nil {
		t.Error("raw 502 page decoded without error")
	}
	f.Disable("sendChatAction")
	_, err = b.Request(tgbotapi.NewChatAction(42, tgbotapi.ChatTyping))
	if e := apiErr(t, err); e.Code != 404 || e.Message != "Not Found" {
		t.Errorf("disabled: %+v", e)
	}
	if f.Calls("sendChatAction") != 1 || f.Calls("sendMessage") != 3 {
		t.Errorf("calls = %d, %d", f.Calls("sendChatAction"), f.Calls("sendMessage"))
	}
}

func TestEditReactionsFiles(t *testing.T) {
	f := New(t, token)
	f.SetLimits(NoLimits) // many calls in one chat: this test checks the contents
	b := bot(t, f, t.Context())
	m, err := b.Send(tgbotapi.NewMessage(42, "draft"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(tgbotapi.NewEditMessageText(42, m.MessageID, "final")); err != nil {
		t.Fatalf("edit: %v", err)
	}
	_, err = b.Send(tgbotapi.NewEditMessageText(42, m.MessageID, "final"))
	if err == nil || !strings.Contains(err.Error(), "message is not modified") {
		t.Errorf("same text: %v", err)
	}
	if _, err := b.MakeRequest("setMessageReaction", tgbotapi.Params{"chat_id": "42", "message_id": itoa(m.MessageID),
		"reaction": `[{"type":"emoji","emoji":"👍"}]`}); err != nil {
		t.Errorf("reaction: %v", err)
	}
	if r := f.Reactions(); len(r) != 1 || r[0].Emoji[0] != "👍" {
		t.Errorf("reactions = %+v", r)
	}

	f.AddFile("f1", "documents/a.txt", []byte("contents"))
	url, err := b.GetFileDirectURL("f1")
	if err != nil {
		t.Fatal(err)
	}
	url = strings.Replace(url, "https://api.telegram.org", f.URL, 1)
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(data) != "contents" {
		t.Errorf("downloaded %q", data)
	}
	if _, err := b.GetFile(tgbotapi.FileConfig{FileID: "nope"}); err == nil {
		t.Error("unknown file_id accepted")
	}

	doc := tgbotapi.NewDocument(42, tgbotapi.FileBytes{Name: "r.csv", Bytes: []byte("a,b")})
	doc.Caption = "<b>report</b>"
	doc.ParseMode = "HTML"
	if _, err := b.Send(doc); err != nil {
		t.Fatalf("sendDocument: %v", err)
	}
	last := f.Sent()[len(f.Sent())-1]
	if last.Method != "sendDocument" || last.FileName != "r.csv" || string(last.FileData) != "a,b" || last.Text != "<b>report</b>" {
		t.Errorf("document = %+v", last)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestInlineKeyboardAndCallbacks(t *testing.T) {
	f := New(t, token)
	f.SetLimits(NoLimits) // many calls in one chat: this test checks the contents
	b := bot(t, f, t.Context())
	f.PushText(-100, 42, "ada", "hello", InGroup("Engines")) // makes the group's chat object known

	// The keyboard is checked like Telegram checks it.
	bad := []struct{ name, markup, wantErr string }{
		{"callback_data over 64 bytes", `{"inline_keyboard":[[{"text":"Go","callback_data":"` + strings.Repeat("x", 65) + `"}]]}`, "BUTTON_DATA_INVALID"},
		{"empty callback_data", `{"inline_keyboard":[[{"text":"Go","callback_data":""}]]}`, "BUTTON_DATA_INVALID"},
		{"no text", `{"inline_keyboard":[[{"text":" ","callback_data":"go"}]]}`, "BUTTON_TEXT_INVALID"},
		{"text button", `{"inline_keyboard":[[{"text":"Go"}]]}`, "text buttons are unallowed"},
		{"not JSON", `{"inline_keyboard":`, "can't parse reply keyboard markup"},
	}
	for _, tt := range bad {
		_, err := b.MakeRequest("sendMessage", tgbotapi.Params{"chat_id": "-100", "text": "q", "reply_markup": tt.markup})
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) || apiErr(t, err).Code != 400 {
			t.Errorf("%s: error %v, want 400 %q", tt.name, err, tt.wantErr)
		}
	}
	if n := len(f.Sent()); n != 0 {
		t.Fatalf("recorded %d refused messages", n)
	}

	msg := tgbotapi.NewMessage(-100, "<b>Delete</b> the build?")
	msg.ParseMode = "HTML"
	msg.ReplyMarkup = tgbotapi.NewInlineKeyboardMarkup(tgbotapi.NewInlineKeyboardRow(
		tgbotapi.NewInlineKeyboardButtonData("Approve", "approve:1"),
		tgbotapi.NewInlineKeyboardButtonData("Deny", "deny:1"),
	))
	sent, err := b.Send(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]InlineButton{{{Text: "Approve", CallbackData: "approve:1"}, {Text: "Deny", CallbackData: "deny:1"}}}
	if got := f.Sent()[0].Buttons(); !reflect.DeepEqual(got, want) {
		t.Errorf("Buttons() = %+v, want %+v", got, want)
	}
	if got := f.CurrentButtons(-100, sent.MessageID); !reflect.DeepEqual(got, want) {
		t.Errorf("CurrentButtons = %+v, want %+v", got, want)
	}

	// A press arrives as a callback_query carrying the bot's message.
	upd := f.PushCallback(-100, 7, "charles", sent.MessageID, "deny:1")
	got, err := b.GetUpdates(tgbotapi.UpdateConfig{Offset: upd})
	if err != nil || len(got) != 1 || got[0].CallbackQuery == nil {
		t.Fatalf("updates = %+v, %v; want one callback query", got, err)
	}
	cq := got[0].CallbackQuery
	if cq.ID == "" || cq.From.ID != 7 || cq.From.UserName != "charles" || cq.Data != "deny:1" || cq.ChatInstance == "" {
		t.Errorf("callback query = %+v", cq)
	}
	m := cq.Message
	if m == nil || m.MessageID != sent.MessageID || m.Text != "Delete the build?" || m.From.ID != f.BotID ||
		m.Chat.Title != "Engines" || m.Date == 0 || m.ReplyMarkup == nil || *m.ReplyMarkup.InlineKeyboard[0][1].CallbackData != "deny:1" {
		t.Errorf("callback message = %+v", m)
	}
	cbs := f.Callbacks()
	if len(cbs) != 1 || cbs[0] != (Callback{ID: cq.ID, UpdateID: upd, ChatID: -100, MessageID: sent.MessageID, UserID: 7, Data: "deny:1"}) {
		t.Errorf("Callbacks() = %+v", cbs)
	}

	// Each query is answered once.
	if _, err := b.Request(tgbotapi.NewCallback(cq.ID, "")); err != nil {
		t.Fatalf("answer: %v", err)
	}
	if err := f.WaitAnswered(t.Context(), cq.ID); err != nil {
		t.Fatal(err)
	}
	_, err = b.Request(tgbotapi.NewCallback(cq.ID, ""))
	if err == nil || !strings.Contains(err.Error(), "query is too old") {
		t.Errorf("second answer: %v, want 'query is too old'", err)
	}
	_, err = b.Request(tgbotapi.NewCallback("no-such-query", ""))
	if err == nil || !strings.Contains(err.Error(), "query ID is invalid") {
		t.Errorf("unknown query: %v", err)
	}
	if a := f.CallbackAnswers(); len(a) != 1 || a[0].CallbackQueryID != cq.ID {
		t.Errorf("answers = %+v, want one for %s", a, cq.ID)
	}

	// Editing the text without reply_markup removes the keyboard.
	if _, err := b.Send(tgbotapi.NewEditMessageText(-100, sent.MessageID, "Denied.")); err != nil {
		t.Fatal(err)
	}
	if kb := f.CurrentButtons(-100, sent.MessageID); kb != nil {
		t.Errorf("keyboard after a plain edit = %+v, want none", kb)
	}
	upd = f.PushCallback(-100, 7, "charles", sent.MessageID, "deny:1")
	got, err = b.GetUpdates(tgbotapi.UpdateConfig{Offset: upd})
	if err != nil || len(got) != 1 || got[0].CallbackQuery.Message.Text != "Denied." || got[0].CallbackQuery.Message.ReplyMarkup != nil {
		t.Errorf("press after the edit: %+v, %v; want the edited message without keyboard", got, err)
	}

	// A message the fake does not know comes as an InaccessibleMessage.
	upd = f.PushCallback(42, 42, "ada", 9999, "approve:9")
	got, err = b.GetUpdates(tgbotapi.UpdateConfig{Offset: upd})
	if err != nil || len(got) != 1 {
		t.Fatalf("updates = %+v, %v", got, err)
	}
	if m := got[0].CallbackQuery.Message; m.MessageID != 9999 || m.Date != 0 || m.Chat.ID != 42 || m.From != nil || m.Text != "" {
		t.Errorf("inaccessible message = %+v", m)
	}
}

// An outage fails every call of its method, without effect, until it ends.
func TestOutage(t *testing.T) {
	f := New(t, token)
	b := bot(t, f, t.Context())
	f.Outage("sendMessage", http.StatusBadGateway, "<html>502 Bad Gateway</html>")
	for i := range 3 {
		if _, err := b.Send(tgbotapi.NewMessage(42, "during")); err == nil {
			t.Fatalf("call %d during the outage succeeded", i+1)
		}
	}
	if _, err := b.Request(tgbotapi.NewChatAction(42, tgbotapi.ChatTyping)); err != nil {
		t.Errorf("another method failed during the outage: %v", err)
	}
	f.EndOutage("sendMessage")
	if _, err := b.Send(tgbotapi.NewMessage(42, "after")); err != nil {
		t.Fatalf("after the outage: %v", err)
	}
	if sent := f.Sent(); len(sent) != 1 || sent[0].Text != "after" || f.Calls("sendMessage") != 4 {
		t.Errorf("sent %+v after %d calls, want only the message after the outage, after 4 calls", sent, f.Calls("sendMessage"))
	}

	f.OutageAfter("sendMessage", 1, http.StatusBadGateway, "<html>502 Bad Gateway</html>")
	if _, err := b.Send(tgbotapi.NewMessage(42, "still ok")); err != nil {
		t.Fatalf("the call before the outage: %v", err)
	}
	if _, err := b.Send(tgbotapi.NewMessage(42, "down")); err == nil {
		t.Fatal("the call after the outage began succeeded")
	}
	f.EndOutage("sendMessage")
	if n := len(f.Sent()); n != 2 {
		t.Errorf("%d messages sent, want 2", n)
	}
}
