package e2e

// The email part of TestChaos (chaos_test.go), on the real servers: the
// users write DKIM-signed mail through Postfix into the bot's Dovecot
// mailbox, one thread per chat, and the children read it by IMAP and answer
// by SMTP through a tap of this file in front of Postfix.
//   - Nothing lost: a mail is flagged \Seen only after it is stored, so a
//     mail a dead child had read and not stored is read again by the next.
//   - Doubles: SMTP has no idempotency key either. The adapter derives a
//     reply's Message-ID from the chat, the mail answered and the text, so
//     a reply sent again after a crash carries the same Message-ID: the
//     copy is recognisable, not prevented. A copy is allowed only in the
//     window of the Telegram check (the child was killed after Postfix
//     accepted the mail and before the delivery record committed, and a
//     later child sent it again); which copy the record is of cannot be
//     told by its id, so each copy is told apart by Postfix's queue id
//     (chaosReply.platformID) and the record is matched by Message-ID
//     (deliveryKey).
//
// Kill points: a timer, the nth model request, and on the tap the nth mail
// Postfix accepted (its "250 … queued as" held from the child) or answered
// (passed on). The intake has no kill point of its own: the timer and the
// model requests cover a child that read mail and died before or after
// storing it.

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/email"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/mailservers"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

type emailChaos struct {
	w     *emailWorld
	users [chaosChats]mailservers.Account
	roots [chaosChats]string // each chat's first Message-ID: its thread
	prev  [chaosChats]string // each chat's newest Message-ID

	mu      sync.Mutex
	tap     *smtpTap          // the current child's
	ids     map[string]string // Postfix queue id → Message-ID, of every mail the taps saw accepted
	readers [chaosChats]*mailservers.Reader
}

func newEmailChaos(t *testing.T) *emailChaos {
	c := &emailChaos{w: newEmailWorld(t), ids: map[string]string{}}
	for i := range c.users {
		c.users[i] = c.w.srv.NewAccount(fmt.Sprintf("chaos%02d", i), emailDomain)
		r, err := c.users[i].Reader()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		c.readers[i] = r
	}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.tap != nil {
			c.tap.close()
		}
	})
	return c
}

func (c *emailChaos) name() string { return email.Name }

func (c *emailChaos) events() []chaosEvent {
	return []chaosEvent{evTimer, evModelCall, evSendAccepted, evSendAnswered}
}

// upstream: no HTTP goes through the chaos tap; mail goes through the
// SMTP tap (cycleStarts).
func (c *emailChaos) upstream() string { return "http://127.0.0.1:1" }

// cycleStarts puts a new SMTP tap for cycle cy in front of Postfix; the
// child's configuration (config) aims at it.
func (c *emailChaos) cycleStarts(cy *chaosCycle, rec *chaosRecord, delays *chaosDelays) {
	tap := newSMTPTap(c, cy, rec, delays)
	c.mu.Lock()
	old := c.tap
	c.tap = tap
	c.mu.Unlock()
	if old != nil {
		old.close()
	}
	go func() {
		<-cy.killed
		tap.close()
	}()
}

func (c *emailChaos) config(string) func(*config.Channels) {
	c.mu.Lock()
	addr := c.tap.addr
	c.mu.Unlock()
	return func(ch *config.Channels) {
		c.w.section(addr)(ch)
		s := channels.SectionOf[*email.Config](ch.Sections)
		s.PollInterval = 5 * time.Second // IDLE renewals; Dovecot has IDLE
	}
}

func (c *emailChaos) classify(*http.Request, []byte) tapCall { return tapCall{} }
func (c *emailChaos) sentID([]byte) string                   { return "" }
func (c *emailChaos) handedOver([]byte) []string             { return nil }

// post sends each message as a DKIM-signed mail in its chat's thread.
func (c *emailChaos) post(ctx context.Context, cyc *chaosCycle, msgs []*chaosMsg) int {
	for _, m := range msgs {
		i := m.chat
		out := outMail{from: c.users[i].Address, to: c.w.bot.Address, subject: fmt.Sprintf("chaos chat %d", i),
			id: newMailID(emailDomain), body: "question " + m.id}
		if c.roots[i] == "" {
			c.roots[i] = out.id
		} else {
			out.subject, out.inReplyTo, out.references = "Re: "+out.subject, c.prev[i], "<"+c.roots[i]+">"
		}
		c.prev[i] = out.id
		raw := c.w.key.Sign(tb{}, out.raw())
		if err := c.w.srv.Send(ctx, out.from, []string{out.to}, raw); err != nil {
			panic(err) // Postfix is ours: it does not refuse
		}
		m.cycle, m.chatKey, m.platformID = cyc.n, c.users[i].Address+":<"+c.roots[i]+">", out.id
	}
	return len(msgs)
}

// settle: a dead child's IMAP session ends with it; its SMTP tap is shut.
func (c *emailChaos) settle(context.Context) error { return nil }

var postfixQueueID = regexp.MustCompile(`\(Postfix\) with E?SMTPS?A? id ([0-9A-Z]+)`)

// replies reads the users' mailboxes: each reply's chat is its user and
// thread, its platform id Postfix's queue id.
func (c *emailChaos) replies() []chaosReply {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []chaosReply
	for i, r := range c.readers {
		ms, err := r.Read()
		if err != nil {
			panic(err)
		}
		for _, m := range ms {
			id := ""
			if q := postfixQueueID.FindStringSubmatch(strings.Join(m.Header["Received"], "\n")); q != nil {
				id = q[1]
			}
			out = append(out, chaosReply{chatKey: c.users[i].Address + ":<" + c.roots[i] + ">", text: replyText(m.Raw), platformID: id})
		}
	}
	return out
}

func (c *emailChaos) waitReplies(ctx context.Context, done func([]chaosReply) bool) error {
	return waitfor.Poll(ctx, 100*time.Millisecond, func() bool { return done(c.replies()) }) // the mailboxes: another process's state
}

// deliveryKey is what the store's delivery record of a reply holds: the
// Message-ID of the mail Postfix queued as id.
func (c *emailChaos) deliveryKey(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Trim(c.ids[id], "<>")
}

func (c *emailChaos) armLate() bool     { return false }
func (c *emailChaos) exactlyOnce() bool { return false }
func (c *emailChaos) warmUp() bool      { return false }
func (c *emailChaos) secrets() []string { return []string{c.w.bot.Password, e2eAPIKey} }

// check: the bot's INBOX has every mail flagged \Seen (taken) at the end.
func (c *emailChaos) check(t *testing.T) {
	ms, err := c.w.bot.Mails(waitCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if !m.Seen {
			t.Errorf("the bot's mail %s was never flagged \\Seen", m.Header.Get("Message-Id"))
		}
	}
}

// tb is the testing.TB of a signature made off the test's goroutine: Sign
// only calls Fatalf on a key that cannot sign, which is a bug.
type tb struct{ testing.TB }

func (tb) Helper()                        {}
func (tb) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }

// smtpTap passes one child's SMTP connections to Postfix, reading the
// dialogue: after the end of a mail's data ("."), Postfix's answer is held
// by a drawn delay on each side (as the chaos tap holds an HTTP send), and
// a "250 … queued as ID" is the send accepted (and answered once passed
// on). A dead child's connections are cut.
type smtpTap struct {
	c      *emailChaos
	cycle  *chaosCycle
	rec    *chaosRecord
	delays *chaosDelays
	ln     net.Listener
	addr   string

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

func newSMTPTap(c *emailChaos, cy *chaosCycle, rec *chaosRecord, delays *chaosDelays) *smtpTap {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	p := &smtpTap{c: c, cycle: cy, rec: rec, delays: delays, ln: ln, addr: ln.Addr().String(), conns: map[net.Conn]bool{}}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(conn)
		}
	}()
	return p
}

func (p *smtpTap) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
}

func (p *smtpTap) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = true
	}
	return !p.closed
}

var messageIDHeader = regexp.MustCompile(`(?i)^message-id:\s*(<[^>]+>)`)

// serve pipes one connection. Client lines are passed on as they come;
// within a mail's data the Message-ID is noted, and the final "." waits
// for a drawn delay first. The server's answer to it is held likewise.
func (p *smtpTap) serve(child net.Conn) {
	up, err := net.Dial("tcp", p.c.w.srv.SMTP)
	if err != nil {
		child.Close()
		return
	}
	defer child.Close()
	defer up.Close()
	if !p.track(child, up) {
		return
	}
	hold := (&chaosTap{cycle: p.cycle, delays: p.delays}).hold
	ended := make(chan string, 1) // the Message-ID of a mail whose "." went to Postfix
	go func() {
		defer up.Close()
		r := bufio.NewReader(child)
		inData, id := false, ""
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			switch {
			case !inData && strings.EqualFold(strings.TrimSpace(line), "DATA"):
				inData, id = true, ""
			case inData && line == ".\r\n":
				inData = false
				if !hold() {
					return // the child died with its mail on the way: Postfix never takes it
				}
				ended <- cmp.Or(id, "<none>")
			case inData && id == "":
				if m := messageIDHeader.FindStringSubmatch(strings.TrimRight(line, "\r\n")); m != nil {
					id = m[1]
				}
			}
			if _, err := io.WriteString(up, line); err != nil {
				return
			}
		}
	}()
	r := bufio.NewReader(up)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		var id string
		select {
		case id = <-ended:
		default:
		}
		if id != "" {
			// The answer to the end of a mail's data.
			queued := ""
			if strings.HasPrefix(line, "250") {
				if i := strings.LastIndex(line, "queued as "); i >= 0 {
					queued = strings.TrimSpace(line[i+len("queued as "):])
				}
			}
			if queued != "" {
				p.c.mu.Lock()
				p.c.ids[queued] = id
				p.c.mu.Unlock()
				p.cycle.first(&p.cycle.answered)
				p.rec.mu.Lock()
				p.rec.sentBy[queued] = p.cycle.n
				p.rec.mu.Unlock()
				p.cycle.event(evSendAccepted)
			}
			if !hold() {
				return // the answer is on its way back to a dead process
			}
			if _, err := io.WriteString(child, line); err != nil {
				return
			}
			if queued != "" {
				p.cycle.event(evSendAnswered)
			}
			continue
		}
		if p.cycle.dead() {
			return
		}
		if _, err := io.WriteString(child, line); err != nil {
			return
		}
	}
}
