package email

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

func TestMain(m *testing.M) { testkit.RunTests(m) }

// One proven mail in, one reply out in its thread, and the mail flagged
// seen only once it was delivered.
func TestMailInReplyOut(t *testing.T) {
	r := newRig(t)
	r.run()
	uid := r.imap.Deliver(t, r.key.Sign(t, hello("m1@example.org", "What is the capital of France?")))
	in := r.next()
	want := channels.Inbound{Channel: "email", ChatID: "alice@example.org:<m1@example.org>", ChatType: channels.DM,
		MessageID: "m1@example.org", UserID: "alice@example.org", UserName: "example.org", DisplayName: "Alice",
		Text: "Subject: Hello there\n\nWhat is the capital of France?", Mentioned: true}
	in.Time = want.Time
	if in.Channel != want.Channel || in.ChatID != want.ChatID || in.MessageID != want.MessageID || in.UserID != want.UserID ||
		in.UserName != want.UserName || in.DisplayName != want.DisplayName || in.Text != want.Text || in.ChatType != want.ChatType || !in.Mentioned {
		t.Fatalf("got %+v\nwant %+v", in, want)
	}
	if err := r.imap.WaitSeen(t.Context(), t, uid); err != nil {
		t.Fatal(err)
	}

	text := "It is **Paris**.\n\n| city | people |\n|---|---|\n| Paris | 2.1 M |\n\n<script>alert(1)</script>"
	id, err := r.a.Send(channels.WithInbound(context.Background(), in), channels.Outbound{ChatID: in.ChatID, Text: text})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	mails := r.waitMails(1)
	if got := mails[0].To; len(got) != 1 || got[0] != "alice@example.org" {
		t.Errorf("RCPT TO %v, want alice@example.org", got)
	}
	if mails[0].From != botAddr {
		t.Errorf("MAIL FROM %q, want %q", mails[0].From, botAddr)
	}
	s := parseSent(t, mails[0])
	for k, v := range map[string]string{
		"In-Reply-To": "<m1@example.org>", "References": "<m1@example.org>", "Subject": "Re: Hello there",
		"To": "<alice@example.org>", "From": "<" + botAddr + ">", "Message-Id": "<" + id + ">", "Auto-Submitted": "auto-replied",
	} {
		if got := s.header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	if !strings.HasSuffix(id, "@bot.example") {
		t.Errorf("Message-ID %q is not at the bot's domain", id)
	}
	if strings.ReplaceAll(strings.TrimSpace(s.plain), "\r\n", "\n") != text {
		t.Errorf("text/plain %q, want the Markdown %q", s.plain, text)
	}
	for _, want := range []string{"<strong>Paris</strong>", "<td>2.1 M</td>"} {
		if !strings.Contains(s.htm, want) {
			t.Errorf("text/html %q has no %s", s.htm, want)
		}
	}
	if strings.Contains(s.htm, "<script>") {
		t.Errorf("text/html carries the model's raw HTML: %q", s.htm)
	}
}
