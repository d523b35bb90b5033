package reply_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-gateway/switchboard/internal/redact"
	"github.com/switchboard-gateway/switchboard/reply"
	"github.com/switchboard-gateway/switchboard/router"
)

// Issue 29: a 200 KB reply is cut at channels.reply_max_chars and says so,
// and a secret in a reply never reaches the chat.
func TestRepliesAreCutAndRedacted(t *testing.T) {
	const secret = "bot-token-0123456789-SECRET"
	red := redact.New([]redact.Secret{{Name: "TELEGRAM_BOT_TOKEN", Value: secret}})
	// The fake agent echoes the input: the input limit is off to get a
	// 200 KB reply.
	ch := newFakeChannel()
	r := startRouter(t, router.Config{Agent: newFakeRunner(), Replies: reply.Options{Redact: red.String}, MaxInputChars: -1}, ch)
	t.Cleanup(func() { _ = r.Shutdown(context.Background()) })
	huge := "token " + secret + " " + strings.Repeat("lorem ipsum ", 200_000/12)
	if err := r.Deliver(t.Context(), msg("c1", "u", huge)); err != nil {
		t.Fatal(err)
	}
	<-ch.Notify
	got := ch.Texts()
	if len(got) != 1 {
		t.Fatalf("sent %d messages, want 1", len(got))
	}
	if n := utf8.RuneCountInString(got[0]); n > reply.DefaultReplyMaxChars {
		t.Errorf("reply of %d characters sent, want at most %d", n, reply.DefaultReplyMaxChars)
	}
	if !strings.HasSuffix(got[0], "[reply cut at 16000 characters]") {
		t.Errorf("the cut reply does not say so: …%q", got[0][len(got[0])-60:])
	}
	if strings.Contains(got[0], secret) || !strings.Contains(got[0], "token [redacted:TELEGRAM_BOT_TOKEN] lorem") {
		t.Errorf("the secret was not replaced: %q…", got[0][:80])
	}
}
