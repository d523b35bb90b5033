package email

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/mailfake"
)

// Mail whose From: domain does not vouch for it is refused: not
// delivered, flagged seen, logged with the reason.
func TestUnprovenSendersAreRefused(t *testing.T) {
	r := newRig(t)
	r.run()
	other := mailfake.NewDKIMKey(t, "example.org", "sel") // same name, another key: not the published one
	evil := mailfake.NewDKIMKey(t, "evil.example", "sel")
	for _, tc := range []struct {
		name string
		raw  []byte
		why  string
	}{
		{"no signature", hello("f1@example.org", "hi"), "no DKIM signature"},
		{"wrong key", other.Sign(t, hello("f2@example.org", "hi")), "dkim d=example.org"},
		{"another domain's signature", evil.Sign(t, hello("f3@example.org", "hi")), "dkim d=evil.example"},
		{"body changed after signing", []byte(strings.Replace(string(r.key.Sign(t, hello("f4@example.org", "pay 10 EUR"))), "pay 10 EUR", "pay 9999 EUR", 1)), "body hash"},
		{"a passing Authentication-Results nobody trusts", msg("hi", "Authentication-Results", "mx.example.org; dmarc=pass header.from=example.org",
			"From", "alice@example.org", "To", botAddr, "Subject", "x", "Message-ID", "<f5@example.org>"), "no DKIM signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uid := r.imap.Deliver(t, tc.raw)
			r.none(uid)
			if log := r.log(); !strings.Contains(log, "sender is not proven") || !strings.Contains(log, tc.why) {
				t.Errorf("log does not name the refusal (%q):\n%s", tc.why, log)
			}
		})
	}
}

// The trusted server's topmost Authentication-Results decide; one further
// down (which the sender may have written) is not believed.
func TestTrustedAuthenticationResults(t *testing.T) {
	r := newRig(t, func(o *Options) { o.TrustedAuthservID = "mx.bot.example" })
	r.run()
	mail := func(id string, ar ...string) []byte {
		h := []string{}
		for _, v := range ar {
			h = append(h, "Authentication-Results", v)
		}
		h = append(h, "From", "Bob <bob@mail.example.org>", "To", botAddr, "Subject", "hi", "Message-ID", "<"+id+">")
		return msg("hello", h...)
	}
	for _, tc := range []struct {
		name  string
		raw   []byte
		admit bool
	}{
		{"dmarc pass", mail("a1@x", "mx.bot.example; dmarc=pass header.from=mail.example.org"), true},
		{"dkim pass of the organisational domain", mail("a2@x", "mx.bot.example; dkim=pass header.d=example.org"), true},
		{"spf pass aligned", mail("a3@x", "mx.bot.example; spf=pass smtp.mailfrom=bounce@example.org"), true},
		{"dkim pass of another domain", mail("a4@x", "mx.bot.example; dkim=pass header.d=evil.example"), false},
		{"dmarc fail", mail("a5@x", "mx.bot.example; dmarc=fail header.from=mail.example.org"), false},
		{"another server's pass", mail("a6@x", "mx.evil.example; dmarc=pass header.from=mail.example.org"), false},
		{"a forged pass below the server's fail", mail("a7@x", "mx.bot.example; dmarc=fail header.from=mail.example.org",
			"mx.bot.example; dmarc=pass header.from=mail.example.org"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uid := r.imap.Deliver(t, tc.raw)
			if !tc.admit {
				r.none(uid)
				return
			}
			if in := r.next(); in.UserID != "bob@mail.example.org" {
				t.Errorf("delivered %q", in.UserID)
			}
		})
	}
}

// Auto-replies, bounces, lists and the bot's own mail are never answered.
func TestLoopsAreNotAnswered(t *testing.T) {
	r := newRig(t)
	r.run()
	from := func(addr, id string, more ...string) []byte {
		h := append([]string{"From", addr, "To", botAddr, "Subject", "Out of office", "Message-ID", "<" + id + ">"}, more...)
		return msg("I am away.", h...)
	}
	for _, tc := range []struct {
		name string
		raw  []byte
		why  string
	}{
		{"Auto-Submitted", from("alice@example.org", "l1@example.org", "Auto-Submitted", "auto-replied"), "Auto-Submitted"},
		{"Precedence bulk", from("alice@example.org", "l2@example.org", "Precedence", "bulk"), "Precedence"},
		{"X-Autoreply", from("alice@example.org", "l3@example.org", "X-Autoreply", "yes"), "X-Autoreply"},
		{"mailer-daemon", from("MAILER-DAEMON@example.org", "l4@example.org"), "bounce"},
		{"empty Return-Path", from("alice@example.org", "l5@example.org", "Return-Path", "<>"), "bounce"},
		{"delivery report", from("alice@example.org", "l6@example.org", "Content-Type", "multipart/report; report-type=delivery-status; boundary=b"), "report"},
		{"mailing list", from("alice@example.org", "l7@example.org", "List-Id", "<list.example.org>"), "mailing list"},
		{"the bot itself", from(botAddr, "l8@bot.example"), "own address"},
		{"the bot's Message-ID", from("alice@example.org", "sb.0123456789abcdef01234567.t@bot.example"), "own mail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uid := r.imap.Deliver(t, r.key.Sign(t, tc.raw))
			r.none(uid)
			if !strings.Contains(r.log(), tc.why) {
				t.Errorf("log does not say %q:\n%s", tc.why, r.log())
			}
		})
	}
}

// A reply in the thread continues the chat; the quoted history and the
// signature are cut, so "yes" answers an approval.
func TestThreadIsTheSession(t *testing.T) {
	r := newRig(t)
	r.run()
	r.imap.Deliver(t, r.key.Sign(t, hello("t1@example.org", "Delete the old logs?")))
	first := r.next()
	id, err := r.a.Send(channels.WithInbound(context.Background(), first), channels.Outbound{ChatID: first.ChatID, Text: "Shall I run `rm`? Answer yes or no."})
	if err != nil {
		t.Fatal(err)
	}
	answer := msg("Yes.\n\n-- \nAlice\n\nOn Sun, 6 Dec 2026 at 11:00, Bot <bot@bot.example> wrote:\n> Shall I run `rm`?\n",
		"From", "Alice <alice@example.org>", "To", botAddr, "Subject", "Re: Hello there", "Message-ID", "<t2@example.org>",
		"In-Reply-To", "<"+id+">", "References", "<t1@example.org> <"+id+">")
	r.imap.Deliver(t, r.key.Sign(t, answer))
	second := r.next()
	if second.ChatID != first.ChatID {
		t.Errorf("chat %q, want the thread's %q", second.ChatID, first.ChatID)
	}
	if second.Text != "Yes." {
		t.Errorf("text %q, want %q", second.Text, "Yes.")
	}
	if approve, ok := channels.ApprovalAnswer(second.Text); !approve || !ok {
		t.Errorf("ApprovalAnswer(%q) = %v, %v", second.Text, approve, ok)
	}
	if _, err := r.a.Send(channels.WithInbound(context.Background(), second), channels.Outbound{ChatID: second.ChatID, Text: "Done."}); err != nil {
		t.Fatal(err)
	}
	s := parseSent(t, r.waitMails(2)[1])
	if got, want := s.header.Get("In-Reply-To"), "<t2@example.org>"; got != want {
		t.Errorf("In-Reply-To %q, want %q", got, want)
	}
	if got, want := s.header.Get("References"), "<t1@example.org> <"+id+"> <t2@example.org>"; got != want {
		t.Errorf("References %q, want %q", got, want)
	}
	if got := s.header.Get("Subject"); got != "Re: Hello there" {
		t.Errorf("Subject %q", got)
	}
	// Another sender naming Alice's thread gets a chat of their own.
	r.imap.Deliver(t, r.key.Sign(t, msg("me too", "From", "carol@example.org", "To", botAddr, "Subject", "Re: Hello there",
		"Message-ID", "<t3@example.org>", "References", "<t1@example.org>")))
	if third := r.next(); third.ChatID != "carol@example.org:<t1@example.org>" {
		t.Errorf("chat %q, want carol's own", third.ChatID)
	}
}

// A mail whose delivery failed stays unseen and is delivered by the next
// scan: nothing is lost when the store is down (or the process dies).
func TestMailIsSeenOnlyOnceStored(t *testing.T) {
	r := newRig(t, func(o *Options) {
		o.PollInterval = 50 * time.Millisecond // the rescan after a failure
		o.Sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	})
	r.mu.Lock()
	r.fail = errors.New("store is down")
	r.mu.Unlock()
	r.run()
	uid := r.imap.Deliver(t, r.key.Sign(t, hello("s1@example.org", "hi")))
	// Two attempts: the first, and the scan after it failed.
	for range 2 {
		select {
		case <-r.refused:
		case <-time.After(10 * time.Second):
			t.Fatalf("not delivered again after a failure; log:\n%s", r.log())
		}
	}
	if r.imap.Seen(t, uid) {
		t.Fatal("flagged seen although it was not stored")
	}
	r.mu.Lock()
	r.fail = nil
	r.mu.Unlock()
	if in := r.next(); in.MessageID != "s1@example.org" {
		t.Errorf("delivered %q", in.MessageID)
	}
	if err := r.imap.WaitSeen(t.Context(), t, uid); err != nil {
		t.Fatal(err)
	}
}

// A server without IDLE is scanned every PollInterval.
func TestPollsWithoutIdle(t *testing.T) {
	r := newRig(t, func(o *Options) { o.PollInterval = 20 * time.Millisecond })
	r.imap = mailfake.NewIMAP(t, testUser, testPass, mailfake.WithoutIdle())
	r.a.o.IMAPAddr = r.imap.Addr()
	r.run()
	for _, id := range []string{"p1@example.org", "p2@example.org"} {
		r.imap.Deliver(t, r.key.Sign(t, hello(id, "hi")))
		if in := r.next(); in.MessageID != id {
			t.Errorf("delivered %q, want %q", in.MessageID, id)
		}
	}
	if !strings.Contains(r.log(), "idle=false") {
		t.Errorf("the adapter used IDLE:\n%s", r.log())
	}
}

// A mail larger than two attachments at the cap is not read, and is
// flagged seen with an ERROR.
func TestHugeMailIsDropped(t *testing.T) {
	r := newRig(t, func(o *Options) { o.MaxAttachmentBytes = 1 << 10 })
	r.run()
	uid := r.imap.Deliver(t, r.key.Sign(t, hello("h1@example.org", strings.Repeat("x", 2<<20))))
	r.none(uid)
	if !strings.Contains(r.log(), "larger than a mail may be") {
		t.Errorf("no ERROR:\n%s", r.log())
	}
	r.imap.Deliver(t, r.key.Sign(t, hello("h2@example.org", "small")))
	if in := r.next(); in.MessageID != "h2@example.org" {
		t.Errorf("delivered %q", in.MessageID)
	}
}
