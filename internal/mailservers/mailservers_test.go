package mailservers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(testkit.RunTests(m)) }

func message(from, to, id, subject, body string) []byte {
	return []byte(fmt.Sprintf("From: %s\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%s>\r\n"+
		"Date: Sun, 06 Dec 2026 11:00:00 +0000\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n%s\r\n",
		from, to, subject, id, body))
}

// A mail sent by SMTP arrives, unseen and whole, in the recipient's IMAP
// INBOX and in no one else's; an authenticated submission (as the bot
// sends) arrives too, and a wrong password is refused.
func TestSendBySMTPReadByIMAP(t *testing.T) {
	s := Need(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	alice := s.NewAccount("alice", "example.org")
	bot := s.NewAccount("bot", "switchboard.test")

	body := strings.Repeat("x", 70) + "\r\nhello from alice"
	if err := s.Send(ctx, alice.Address, []string{bot.Address}, message(alice.Address, bot.Address, "m1@example.org", "hi", body)); err != nil {
		t.Fatal(err)
	}
	got := bot.WaitMails(t, ctx, 1)
	if len(got) != 1 {
		t.Fatalf("bot's INBOX has %d mails, want 1", len(got))
	}
	m := got[0]
	if m.Seen {
		t.Error("a new mail is flagged \\Seen")
	}
	if id := m.Header.Get("Message-Id"); id != "<m1@example.org>" {
		t.Errorf("Message-ID = %q", id)
	}
	if !bytes.Contains(m.Raw, []byte("hello from alice")) {
		t.Errorf("the body is lost:\n%s", m.Raw)
	}
	if m.Header.Get("Received") == "" {
		t.Errorf("no Received header: not delivered through Postfix?\n%s", m.Raw)
	}

	// The bot answers with SMTP AUTH, as the adapter submits; a wrong
	// password is refused (Postfix then hangs up: go-smtp answers the
	// failure with "*").
	c, err := dial(ctx, s.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Auth(sasl.NewPlainClient("", bot.Address, "wrong")); err == nil {
		t.Fatal("SMTP AUTH with a wrong password succeeded")
	}
	c.Close()
	c, err = dial(ctx, s.SMTP)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Auth(sasl.NewPlainClient("", bot.Address, bot.Password)); err != nil {
		t.Fatalf("SMTP AUTH as %s: %v", bot.Address, err)
	}
	reply := message(bot.Address, alice.Address, "r1@switchboard.test", "Re: hi", "hello alice")
	if err := c.SendMail(bot.Address, []string{alice.Address}, bytes.NewReader(reply)); err != nil {
		t.Fatal(err)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
	got = alice.WaitMails(t, ctx, 1)
	if id := got[0].Header.Get("Message-Id"); len(got) != 1 || id != "<r1@switchboard.test>" {
		t.Fatalf("alice's INBOX: %d mails, first Message-ID %q", len(got), id)
	}
	if got, err := bot.Mails(ctx); err != nil || len(got) != 1 {
		t.Fatalf("bot's INBOX after the reply: %d mails, %v; want 1", len(got), err)
	}
}

// Mail of a few megabytes (the 3 MB attachment of the e2e test, base64)
// goes through.
func TestLargeMail(t *testing.T) {
	s := Need(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	from, to := s.NewAccount("big", "example.org"), s.NewAccount("bot", "switchboard.test")
	line := strings.Repeat("A", 76) + "\r\n"
	body := strings.Repeat(line, 4<<20/len(line))
	if err := s.Send(ctx, from.Address, []string{to.Address}, message(from.Address, to.Address, "big@example.org", "big", body)); err != nil {
		t.Fatal(err)
	}
	got := to.WaitMails(t, ctx, 1)
	if n := len(got[0].Raw); n < 4<<20 {
		t.Fatalf("the mail arrived with %d bytes, want over %d", n, 4<<20)
	}
}
