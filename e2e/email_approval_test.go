package e2e

// Email approvals and pairing through serve on the real mail servers
// (issue 36): the approval question comes as a mail in the thread and the
// asker's "yes" in the thread runs the tool, once; a proven stranger gets
// one pairing reply, an unproven one nothing.

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/email"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/mailservers"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// textOf is the text/plain part of a mail the bot sent (its first part).
func textOf(m mailservers.Mail) string {
	s := string(m.Raw)
	if i := strings.Index(s, "text/plain"); i >= 0 {
		s = s[i:]
		if j := strings.Index(s, "\r\n\r\n"); j >= 0 {
			s = s[j+4:]
		}
		if k := strings.Index(s, "\r\n--"); k >= 0 {
			s = s[:k]
		}
	}
	return strings.TrimSpace(s)
}

func TestEmailApprovalInTheThread(t *testing.T) {
	w := newEmailWorld(t)
	model := testkit.NewFakeLLM(t)
	script := newModelScript(model)
	cfg := approvalConfig(t, model, w.section(""))
	s := startServe(t, cfg, func(ctx context.Context) error { return nil })
	if err := waitLog(waitCtx(t), s.stderr, "email: reading the mailbox"); err != nil {
		t.Fatalf("%v\n%s", err, s.stderr.String())
	}
	scriptCleanup(script, "clean up tmp please")
	alice := w.srv.NewAccount("alice", emailDomain)
	ask := outMail{from: alice.Address, to: w.bot.Address, id: newMailID(emailDomain), body: "clean up tmp please"}
	w.send(t, ask, true)
	q := alice.WaitMails(t, waitCtx(t), 1)[0]
	if got := q.Header.Get("In-Reply-To"); got != "<"+ask.id+">" {
		t.Errorf("the question's In-Reply-To is %q, want <%s>", got, ask.id)
	}
	if text := textOf(q); !strings.Contains(text, "cleanup") || !strings.Contains(strings.ToLower(text), "yes") {
		t.Fatalf("question %q; want one about cleanup that says to answer yes", text)
	}
	if n := script.requestsMentioning("Report cleaning"); n != 0 {
		t.Fatalf("the tool ran before approval (%d sub-calls)", n)
	}
	qid := strings.Trim(q.Header.Get("Message-Id"), "<>")
	w.send(t, outMail{from: alice.Address, to: w.bot.Address, subject: "Re: your mail", id: newMailID(emailDomain),
		inReplyTo: qid, references: "<" + ask.id + "> <" + qid + ">",
		body: "Yes\n\nOn Sun, 6 Dec 2026 at 12:00, Bot <" + w.bot.Address + "> wrote:\n> Reply yes to approve or no to deny."}, true)
	got := alice.WaitMails(t, waitCtx(t), 2)
	if text := textOf(got[1]); text != "All clean now." {
		t.Errorf("after yes: %q, want %q", text, "All clean now.")
	}
	if got[1].Header.Get("In-Reply-To") == "" {
		t.Error("the answer is not in the thread")
	}
	if n := script.requestsMentioning("Report cleaning"); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
	s.stopOK(t)
	if ms, _ := alice.Mails(waitCtx(t)); len(ms) != 2 {
		t.Errorf("alice got %d mails, want 2", len(ms))
	}
	script.checkAllAsked(t)
}

func TestEmailPairingOnlyForProvenStrangers(t *testing.T) {
	w := newEmailWorld(t)
	model := testkit.NewFakeLLM(t)
	cfg := approvalConfig(t, model, func(c *config.Channels) {
		w.section("")(c)
		s := channels.SectionOf[*email.Config](c.Sections)
		s.AllowSenders, s.Pairing = []string{"nobody@" + emailDomain}, true
	})
	s := startServe(t, cfg, func(ctx context.Context) error { return nil })
	if err := waitLog(waitCtx(t), s.stderr, "email: reading the mailbox"); err != nil {
		t.Fatalf("%v\n%s", err, s.stderr.String())
	}
	carol, dave := w.srv.NewAccount("carol", emailDomain), w.srv.NewAccount("dave", emailDomain)
	ids := []string{newMailID(emailDomain), newMailID(emailDomain), newMailID(emailDomain)}
	w.send(t, outMail{from: carol.Address, to: w.bot.Address, subject: "hi", id: ids[0], body: "let me in"}, true)
	pairing := carol.WaitMails(t, waitCtx(t), 1)[0]
	if text := textOf(pairing); !strings.Contains(text, "pairing code") {
		t.Errorf("carol got %q, want a pairing code", text)
	}
	w.send(t, outMail{from: carol.Address, to: w.bot.Address, subject: "hi", id: ids[1], body: "again"}, true)
	w.send(t, outMail{from: dave.Address, to: w.bot.Address, subject: "hi", id: ids[2], body: "me too"}, false)
	ss := &emailServe{serveRun: s, w: w}
	ss.seen(t, ids[1])
	ss.seen(t, ids[2])
	s.stopOK(t)
	if ms, _ := carol.Mails(waitCtx(t)); len(ms) != 1 {
		t.Errorf("carol got %d mails, want the one pairing reply", len(ms))
	}
	if ms, _ := dave.Mails(waitCtx(t)); len(ms) != 0 {
		t.Errorf("dave (not proven) got %d mails, want none", len(ms))
	}
	if strings.Count(s.stderr.String(), "pairing requested") != 1 {
		t.Errorf("pairing requests in the log: %d, want 1", strings.Count(s.stderr.String(), "pairing requested"))
	}
	if len(model.Requests()) != 0 {
		t.Errorf("the model was asked %d times, want never", len(model.Requests()))
	}
}
