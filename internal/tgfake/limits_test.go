package tgfake

import (
	"net/http"
	"strings"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"golang.org/x/time/rate"
)

// slow is a rate that refills nothing during a test: what a bucket allows
// is exactly its burst.
var slow = rate.Every(time.Hour)

func TestDefaultLimitsAreTelegrams(t *testing.T) {
	l := DefaultLimits
	if l.PerBot != 30 || l.PerChat != 1 || float64(l.PerGroup)*60 < 19.99 || float64(l.PerGroup)*60 > 20.01 {
		t.Errorf("DefaultLimits = %+v, want 30/s per bot, 1/s per chat, 20/min per group", l)
	}
	f := New(t, token)
	f.mu.Lock()
	got := f.limits
	f.mu.Unlock()
	if got != DefaultLimits {
		t.Errorf("a new fake enforces %+v, want DefaultLimits", got)
	}
	if s := l.Scaled(10); s.PerBot != 300 || s.PerChat != 10 || s.BotBurst != l.BotBurst {
		t.Errorf("Scaled(10) = %+v", s)
	}
}

func TestLimits(t *testing.T) {
	send := func(b *tgbotapi.BotAPI, chat int64) error {
		_, err := b.Send(tgbotapi.NewMessage(chat, "hi"))
		return err
	}
	tests := []struct {
		name   string
		limits Limits
		calls  func(b *tgbotapi.BotAPI) []error // the last one is expected to be refused
		wantRA int                              // retry_after of the refusal
	}{
		{"per chat", Limits{PerChat: slow, ChatBurst: 3}, func(b *tgbotapi.BotAPI) []error {
			return []error{send(b, 7), send(b, 7), send(b, 8), send(b, 7), send(b, 7)}
		}, 3600},
		{"per group, and a group is also a chat", Limits{PerGroup: slow, GroupBurst: 2, PerChat: 1, ChatBurst: 5},
			func(b *tgbotapi.BotAPI) []error {
				return []error{send(b, -100), send(b, 9), send(b, -100), send(b, -100)}
			}, 3600},
		{"per bot", Limits{PerBot: slow, BotBurst: 3}, func(b *tgbotapi.BotAPI) []error {
			return []error{send(b, 1), send(b, 2), send(b, 3), send(b, 4)}
		}, 3600},
		{"edits count", Limits{PerChat: slow, ChatBurst: 1}, func(b *tgbotapi.BotAPI) []error {
			m, err := b.Send(tgbotapi.NewMessage(7, "hi"))
			_, err2 := b.Send(tgbotapi.NewEditMessageText(7, m.MessageID, "ho"))
			return []error{err, err2}
		}, 3600},
		{"typing and reactions do not count", Limits{PerChat: slow, ChatBurst: 1}, func(b *tgbotapi.BotAPI) []error {
			m, err := b.Send(tgbotapi.NewMessage(7, "hi"))
			_, err2 := b.Request(tgbotapi.NewChatAction(7, tgbotapi.ChatTyping))
			_, err3 := b.MakeRequest("setMessageReaction", tgbotapi.Params{"chat_id": "7",
				"message_id": itoa(m.MessageID), "reaction": `[{"type":"emoji","emoji":"👍"}]`})
			return []error{err, err2, err3, send(b, 7)}
		}, 3600},
		{"a second later", Limits{PerChat: 2, ChatBurst: 1}, func(b *tgbotapi.BotAPI) []error {
			return []error{send(b, 7), send(b, 7)}
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := New(t, token)
			f.SetLimits(tt.limits)
			errs := tt.calls(bot(t, f, t.Context()))
			for i, err := range errs[:len(errs)-1] {
				if err != nil {
					t.Errorf("call %d: %v, want it accepted", i+1, err)
				}
			}
			e := apiErr(t, errs[len(errs)-1])
			if e.Code != http.StatusTooManyRequests || e.RetryAfter != tt.wantRA ||
				!strings.HasPrefix(e.Message, "Too Many Requests: retry after ") {
				t.Errorf("last call: %+v, want 429 with retry_after %d", e, tt.wantRA)
			}
			if th := f.Throttled(); len(th) != 1 || th[0].RetryAfter != tt.wantRA {
				t.Errorf("Throttled() = %+v, want the last call", th)
			}
		})
	}
}

func TestNoLimits(t *testing.T) {
	f := New(t, token)
	f.SetLimits(NoLimits)
	b := bot(t, f, t.Context())
	for i := range 50 {
		if _, err := b.Send(tgbotapi.NewMessage(-100, "hi")); err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
	}
}

func TestSendMessageDraft(t *testing.T) {
	f := New(t, token)
	f.SetLimits(Limits{PerChat: slow, ChatBurst: 2})
	b := bot(t, f, t.Context())
	draft := func(chat int64, id, text string) error {
		_, err := b.MakeRequest("sendMessageDraft", tgbotapi.Params{"chat_id": itoa(int(chat)), "draft_id": id,
			"text": text, "parse_mode": "HTML"})
		return err
	}
	for _, tt := range []struct {
		name   string
		chat   int64
		id     string
		text   string
		status int
		want   string
	}{
		{"group", -100, "7", "x", 400, "Bad Request: TEXTDRAFT_PEER_INVALID"},
		{"zero id", 42, "0", "x", 400, "draft_id"},
		{"no id", 42, "", "x", 400, "draft_id"},
		{"bad HTML", 42, "7", "<b>x", 400, "can't parse entities"},
		{"too long", 42, "7", strings.Repeat("a", MaxTextUnits+1), 400, "message is too long"},
	} {
		e := apiErr(t, draft(tt.chat, tt.id, tt.text))
		if e.Code != tt.status || !strings.Contains(e.Message, tt.want) {
			t.Errorf("%s: %d %q, want %d %q", tt.name, e.Code, e.Message, tt.status, tt.want)
		}
	}
	// Refused drafts took no token: two drafts go, a third is over the
	// chat's burst of 2.
	if err := draft(42, "7", "<b>Hel</b>"); err != nil {
		t.Fatalf("draft in a DM: %v", err)
	}
	if err := draft(42, "7", ""); err != nil {
		t.Fatalf("empty draft (Thinking… placeholder): %v", err)
	}
	if e := apiErr(t, draft(42, "7", "x")); e.Code != http.StatusTooManyRequests {
		t.Errorf("third draft: %+v, want 429: drafts count against the chat's limit", e)
	}
	got, err := f.WaitDrafts(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []Draft{{ChatID: 42, DraftID: 7, Text: "<b>Hel</b>", ParseMode: "HTML"}, {ChatID: 42, DraftID: 7, ParseMode: "HTML"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Drafts() = %+v, want %+v", got, want)
	}
	if len(f.Sent()) != 0 {
		t.Errorf("a draft is not a message, but Sent() = %+v", f.Sent())
	}
}
