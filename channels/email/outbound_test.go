package email

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/mailfake"
)

const aliceChat = "alice@example.org:<m1@example.org>"

// A temporary refusal or a server out of reach is ErrUnavailable (the
// outbox keeps the reply); a permanent refusal is not, and is logged.
func TestSendFailures(t *testing.T) {
	r := newRig(t)
	out := channels.Outbound{ChatID: aliceChat, Text: "hi"}
	r.smtp.FailNext(451)
	if _, err := r.a.Send(t.Context(), out); !errors.Is(err, channels.ErrUnavailable) {
		t.Errorf("451: %v, want ErrUnavailable", err)
	}
	r.smtp.FailNext(550)
	_, err := r.a.Send(t.Context(), out)
	if err == nil || errors.Is(err, channels.ErrUnavailable) {
		t.Errorf("550: %v, want a permanent error", err)
	}
	if !strings.Contains(r.log(), "refused the reply for good") {
		t.Errorf("a permanent refusal is not logged:\n%s", r.log())
	}
	r.smtp.Stop()
	if _, err := r.a.Send(t.Context(), out); !errors.Is(err, channels.ErrUnavailable) {
		t.Errorf("server down: %v, want ErrUnavailable", err)
	}
	r.smtp.Start(t)
	if _, err := r.a.Send(t.Context(), out); err != nil {
		t.Errorf("after the outage: %v", err)
	}
	if n := len(r.smtp.Mails()); n != 1 {
		t.Errorf("%d mails accepted, want 1", n)
	}
	// A wrong password is refused for good and names the login.
	bad := newRig(t, func(o *Options) { o.Password = "wrong-password-1" })
	_, err = bad.a.Send(t.Context(), out)
	if err == nil || !strings.Contains(err.Error(), "refused the login") || strings.Contains(err.Error(), "wrong-password-1") {
		t.Errorf("wrong password: %v", err)
	}
}

// parts is a record of one reply's parts, as the router keeps it.
type parts struct {
	mu   sync.Mutex
	sent map[int]string
}

func (p *parts) Sent(i int) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.sent[i]
	return id, ok
}

func (p *parts) Confirmed(_ context.Context, i int, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent[i] = id
}

// A reply is one mail whatever its length; a resend after a crash carries
// the same Message-ID, and one recorded as sent is not sent again.
func TestOneMailPerReplyWithAStableID(t *testing.T) {
	r := newRig(t)
	long := strings.Repeat("A long paragraph of the answer. ", 2000) // 64 KB
	p := &parts{sent: map[int]string{}}
	id1, err := r.a.Send(t.Context(), channels.Outbound{ChatID: aliceChat, Text: long, Parts: p})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := p.Sent(0); got != id1 {
		t.Errorf("part 0 recorded as %q, want %q", got, id1)
	}
	if _, err := r.a.Send(t.Context(), channels.Outbound{ChatID: aliceChat, Text: long, Parts: p}); err != nil {
		t.Fatal(err)
	}
	if n := len(r.smtp.Mails()); n != 1 {
		t.Fatalf("%d mails for one reply, want 1", n)
	}
	// A process that never saw the record (a crash before Confirmed).
	again := newRig(t)
	again.smtp = r.smtp
	again.a.o.SMTPAddr = r.smtp.Addr()
	id2, err := again.a.Send(t.Context(), channels.Outbound{ChatID: aliceChat, Text: long})
	if err != nil {
		t.Fatal(err)
	}
	if id2 != id1 {
		t.Errorf("resend has Message-ID %q, want %q", id2, id1)
	}
	id3, _ := again.a.Send(t.Context(), channels.Outbound{ChatID: aliceChat, Text: "another reply"})
	if id3 == id1 {
		t.Error("another text has the same Message-ID")
	}
	if s := parseSent(t, r.smtp.Mails()[0]); !strings.Contains(s.plain, long[:100]) || len(s.plain) < len(long) {
		t.Errorf("the reply was cut: %d of %d bytes", len(s.plain), len(long))
	}
}

// A reply after a restart (no thread in memory) finds the subject of the
// mail it answers in the mailbox.
func TestReplyAfterRestartFindsTheSubject(t *testing.T) {
	r := newRig(t)
	r.imap.Deliver(t, hello("m1@example.org", "hi"))
	in := channels.Inbound{Channel: Name, ChatID: aliceChat, MessageID: "m1@example.org"}
	if _, err := r.a.Send(channels.WithInbound(t.Context(), in), channels.Outbound{ChatID: aliceChat, Text: "late"}); err != nil {
		t.Fatal(err)
	}
	s := parseSent(t, r.waitMails(1)[0])
	for k, v := range map[string]string{"Subject": "Re: Hello there", "In-Reply-To": "<m1@example.org>", "References": "<m1@example.org>"} {
		if got := s.header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
}

// A file goes out as an attachment of one mail in the thread.
func TestSendFile(t *testing.T) {
	r := newRig(t)
	path := filepath.Join(t.TempDir(), "report.csv")
	data := bytes.Repeat([]byte("a,b,c\n"), 1000)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.a.SendFile(t.Context(), aliceChat, channels.OutboundFile{Path: path, Caption: "The report."}); err != nil {
		t.Fatal(err)
	}
	s := parseSent(t, r.waitMails(1)[0])
	if !bytes.Equal(s.files["report.csv"], data) {
		t.Errorf("attachment: %d bytes, want %d", len(s.files["report.csv"]), len(data))
	}
	if strings.TrimSpace(s.plain) != "The report." {
		t.Errorf("text %q", s.plain)
	}
	if _, err := r.a.SendFile(t.Context(), "not-a-chat", channels.OutboundFile{Path: path}); err == nil {
		t.Error("a chat id that is no thread: no error")
	}
}

// The IMAP connection lost is taken up again, and mail that came
// meanwhile is delivered.
func TestReconnects(t *testing.T) {
	r := newRig(t, func(o *Options) {
		o.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	})
	r.run()
	uid := r.imap.Deliver(t, r.key.Sign(t, hello("c1@example.org", "one")))
	r.next()
	// (Dropped before the flag, it would come again: at least once.)
	if err := r.imap.WaitSeen(t.Context(), t, uid); err != nil {
		t.Fatal(err)
	}
	r.imap.DropConnections()
	r.imap.Deliver(t, r.key.Sign(t, hello("c2@example.org", "two")))
	if in := r.next(); in.MessageID != "c2@example.org" {
		t.Errorf("delivered %q", in.MessageID)
	}
	if n := r.imap.Logins(); n < 2 {
		t.Errorf("%d logins, want a second one", n)
	}
}

// DKIM keys are asked from the configured DNS server.
func TestDKIMResolver(t *testing.T) {
	key := mailfake.NewDKIMKey(t, "example.org", "s2048")
	dns := mailfake.NewDNS(t, key.Records())
	r := newRig(t, func(o *Options) { o.LookupTXT, o.DKIMResolver = nil, dns.Addr() })
	r.run()
	r.imap.Deliver(t, key.Sign(t, hello("d1@example.org", "hi")))
	if in := r.next(); in.MessageID != "d1@example.org" {
		t.Errorf("delivered %q", in.MessageID)
	}
	if dns.Asked() == 0 {
		t.Error("the DNS server was not asked")
	}
}

// The doctor logs in to both servers and names the one that fails.
func TestDoctor(t *testing.T) {
	im, sm := mailfake.NewIMAP(t, testUser, testPass), mailfake.NewSMTP(t, testUser, testPass)
	c := NewConfig()
	c.Enabled, c.Username, c.Password, c.Address = true, testUser, testPass, botAddr
	c.IMAP, c.SMTP = Server{Address: im.Addr(), TLS: TLSNone}, Server{Address: sm.Addr(), TLS: TLSNone}
	if got := doctor(t.Context(), c, nil); got.Failed || !strings.Contains(got.Message, "logged in to IMAP") {
		t.Errorf("doctor: %+v", got)
	}
	sm.Stop()
	if got := doctor(t.Context(), c, nil); !got.Failed || !strings.HasPrefix(got.Message, "SMTP: ") {
		t.Errorf("doctor with SMTP down: %+v", got)
	}
	c.Password = "wrong-password-2"
	got := doctor(t.Context(), c, nil)
	if !got.Failed || !strings.HasPrefix(got.Message, "IMAP: ") || strings.Contains(got.Message, c.Password) {
		t.Errorf("doctor with a wrong password: %+v", got)
	}
}

// A chat that is an address (a scheduled job's) gets a new mail, its
// subject the text's first line.
func TestSendToAnAddress(t *testing.T) {
	r := newRig(t)
	if _, err := r.a.Send(t.Context(), channels.Outbound{ChatID: "Alice@example.org", Text: "## Your morning digest\n\nThree things today."}); err != nil {
		t.Fatal(err)
	}
	m := r.waitMails(1)[0]
	s := parseSent(t, m)
	if got := s.header.Get("Subject"); got != "Your morning digest" {
		t.Errorf("Subject %q", got)
	}
	if s.header.Has("In-Reply-To") || s.header.Has("References") || m.To[0] != "alice@example.org" {
		t.Errorf("a new mail to %v with In-Reply-To %q", m.To, s.header.Get("In-Reply-To"))
	}
	if _, err := r.a.Send(t.Context(), channels.Outbound{ChatID: "Alice <alice@example.org>", Text: "x"}); err == nil {
		t.Error("a chat with a display name: no error")
	}
}
