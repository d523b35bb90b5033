package tgfake

import (
	"errors"
	"syscall"
	"testing"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// ResetNext resets the connection of one call, which has no effect; the
// next call goes through.
func TestResetNext(t *testing.T) {
	f := New(t, token)
	b := bot(t, f, t.Context())
	f.ResetNext("sendMessage")
	_, err := b.Send(tgbotapi.NewMessage(42, "lost"))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Send = %v, want a connection reset", err)
	}
	if n := f.Calls("sendMessage"); n != 1 || len(f.Sent()) != 0 {
		t.Fatalf("calls = %d, sent = %+v; want 1 call that sent nothing", n, f.Sent())
	}
	if _, err := b.Send(tgbotapi.NewMessage(42, "arrives")); err != nil {
		t.Fatalf("Send after the reset: %v", err)
	}
	if s := f.Sent(); len(s) != 1 || s[0].Text != "arrives" {
		t.Errorf("sent = %+v, want the second message only", s)
	}
}
