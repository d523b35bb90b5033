package email

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/mailservers"
)

// The adapter against Debian's Dovecot and Postfix: a signed mail sent
// through Postfix arrives by IDLE, is flagged seen once delivered, and the
// reply lands in the sender's mailbox in the thread; a reply from a process
// that never saw the mail finds its subject by SEARCH.
func TestRealServers(t *testing.T) {
	s := mailservers.Need(t)
	bot, alice := s.NewAccount("bot", "bot.example"), s.NewAccount("alice", "example.org")
	key := exampleKey(t)
	records := key.Records()
	o := Options{IMAPAddr: s.IMAP, IMAPTLS: TLSNone, SMTPAddr: s.SMTP, SMTPTLS: TLSNone, Username: bot.Address, Password: s.Password,
		Address: bot.Address, LookupTXT: func(_ context.Context, name string) ([]string, error) { return records[name], nil },
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	got := make(chan channels.Inbound, 10)
	done := make(chan error, 1)
	runCtx, stop := context.WithCancel(ctx)
	go func() {
		done <- a.Run(runCtx, channels.SinkFunc(func(_ context.Context, in channels.Inbound) error { got <- in; return nil }))
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	raw := key.Sign(t, msg("Real servers?", "From", "Alice <"+alice.Address+">", "To", bot.Address, "Subject", "Real",
		"Date", time.Now().Format(time.RFC1123Z), "Message-ID", "<real1@example.org>"))
	if err := s.Send(ctx, alice.Address, []string{bot.Address}, raw); err != nil {
		t.Fatal(err)
	}
	var in channels.Inbound
	select {
	case in = <-got:
	case <-ctx.Done():
		t.Fatal("the mail was not delivered")
	}
	if in.MessageID != "real1@example.org" || in.UserID != alice.Address || in.Text != "Subject: Real\n\nReal servers?" {
		t.Errorf("delivered %+v", in)
	}
	// A second adapter (a restarted process) answers it.
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Send(channels.WithInbound(ctx, in), channels.Outbound{ChatID: in.ChatID, Text: "Yes, *real*."}); err != nil {
		t.Fatal(err)
	}
	mails := alice.WaitMails(t, ctx, 1)
	h := mails[0].Header
	for k, v := range map[string]string{"In-Reply-To": "<real1@example.org>", "Subject": "Re: Real"} {
		if got := h.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	inbox, err := bot.Mails(ctx)
	if err != nil || len(inbox) != 1 || !inbox[0].Seen {
		t.Errorf("the bot's inbox: %+v, %v; want the one mail, seen", inbox, err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
