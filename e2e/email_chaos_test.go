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
	"math"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

	ledger *smtpLedger // what every tap saw Postfix accept

	mu      sync.Mutex
	tap     *smtpTap // the current child's
	readers [chaosChats]*mailservers.Reader
}

func newEmailChaos(t *testing.T) *emailChaos {
	c := &emailChaos{w: newEmailWorld(t), ledger: newSMTPLedger()}
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
	tap := newSMTPTap(c.w.srv.SMTP, c.ledger, "")
	tap.cycle, tap.rec, tap.delays = cy, rec, delays
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

// post sends each message as a DKIM-signed mail in its chat's thread,
// each once the one before is in the bot's INBOX (sendInOrder): the order
// of a thread is the order its mails arrive in.
// It also times the child's first IMAP session (restart to first poll):
// only its log tells when the mailbox is open.
func (c *emailChaos) post(ctx context.Context, cyc *chaosCycle, msgs []*chaosMsg) int {
	cyc.mu.Lock()
	child := cyc.child
	cyc.mu.Unlock()
	go func() {
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-cyc.killed:
				cancel()
			case <-lctx.Done():
			}
		}()
		if waitLog(lctx, child.stderr, "email: reading the mailbox") == nil {
			cyc.first(&cyc.polled)
		}
	}()
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
		if err := c.w.sendInOrder(tb{}, ctx, out); err != nil {
			panic(err) // Postfix and Dovecot are ours: they do not refuse
		}
		m.cycle, m.chatKey, m.platformID = cyc.n, c.users[i].Address+":<"+c.roots[i]+">", out.id
	}
	return len(msgs)
}

// settle: a dead child's IMAP session ends with it; its SMTP tap is shut.
func (c *emailChaos) settle(context.Context) error { return nil }

var postfixQueueID = regexp.MustCompile(`\(Postfix\) with E?SMTPS?A? id ([0-9A-Z]+)`)

// queueID is the id Postfix queued m as, from its Received header.
func queueID(m mailservers.Mail) string {
	if q := postfixQueueID.FindStringSubmatch(strings.Join(m.Header["Received"], "\n")); q != nil {
		return q[1]
	}
	return ""
}

// replies reads the users' mailboxes: each reply's chat is its user and
// thread, its platform id Postfix's queue id. They are in the order Postfix
// accepted them: it delivers mail accepted close together in any order.
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
			out = append(out, chaosReply{chatKey: c.users[i].Address + ":<" + c.roots[i] + ">", text: replyText(m.Raw), platformID: queueID(m)})
		}
	}
	sortAccepted(c.ledger, out, func(r chaosReply) string { return r.platformID })
	return out
}

func (c *emailChaos) waitReplies(ctx context.Context, done func([]chaosReply) bool) error {
	return waitfor.Poll(ctx, 100*time.Millisecond, func() bool { return done(c.replies()) }) // the mailboxes: another process's state
}

// deliveryKey is what the store's delivery record of a reply holds: the
// Message-ID of the mail Postfix queued as id.
func (c *emailChaos) deliveryKey(id string) string { return strings.Trim(c.ledger.messageID(id), "<>") }

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

// smtpLedger is what taps saw Postfix accept, in order.
type smtpLedger struct {
	mu    sync.Mutex
	ids   map[string]string // Postfix queue id → Message-ID
	order map[string]int    // Postfix queue id → its place in the order of acceptance
}

func newSMTPLedger() *smtpLedger {
	return &smtpLedger{ids: map[string]string{}, order: map[string]int{}}
}

func (l *smtpLedger) add(queued, messageID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids[queued] = messageID
	l.order[queued] = len(l.order)
}

func (l *smtpLedger) messageID(queued string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ids[queued]
}

// sort puts xs in the order Postfix accepted them (queue ids by id), the
// ones no tap saw last: Postfix delivers mail accepted close together in
// any order, so a mailbox's order is not the order of sending.
func sortAccepted[T any](l *smtpLedger, xs []T, id func(T) string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	place := func(x T) int {
		if n, ok := l.order[id(x)]; ok {
			return n
		}
		return math.MaxInt
	}
	slices.SortStableFunc(xs, func(a, b T) int { return cmp.Compare(place(a), place(b)) })
}

// smtpTap passes SMTP connections to Postfix, reading the dialogue: a
// "250 … queued as ID" answering the end of a mail's data is a send
// accepted, noted in the ledger. For a chaos child (cycle set), Postfix's
// answer is held by a drawn delay on each side (as the chaos tap holds an
// HTTP send), the accepted send is the kill point "send accepted" (and
// "send answered" once passed on), and a dead child's connections are cut.
// shut and open make it a server that refuses connections, and back.
type smtpTap struct {
	upstream string
	ledger   *smtpLedger
	addr     string
	cycle    *chaosCycle // nil: no kill points, no delays
	rec      *chaosRecord
	delays   *chaosDelays

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool // the clients'
	closed bool
}

// newSMTPTap listens on addr (empty: a free port of 127.0.0.1).
func newSMTPTap(upstream string, ledger *smtpLedger, addr string) *smtpTap {
	p := &smtpTap{upstream: upstream, ledger: ledger, conns: map[net.Conn]bool{}}
	if err := p.listen(cmp.Or(addr, "127.0.0.1:0")); err != nil {
		panic(err)
	}
	return p
}

func (p *smtpTap) listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.ln, p.addr, p.closed = ln, ln.Addr().String(), false
	p.mu.Unlock()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(conn)
		}
	}()
	return nil
}

// close shuts the port and cuts the clients' connections; a connection to
// Postfix lives on until Postfix has answered a mail whose end was sent
// (Postfix took it, whatever became of the client: the ledger must know).
func (p *smtpTap) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
}

// open listens on the same port again after close.
func (p *smtpTap) open(t *testing.T) {
	t.Helper()
	if err := p.listen(p.addr); err != nil {
		t.Fatalf("reopen the SMTP port %s: %v", p.addr, err)
	}
}

func (p *smtpTap) track(client net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[client] = true
	} else {
		delete(p.conns, client)
	}
	return !p.closed
}

// hold delays a send (a chaos child's), and says whether its child lives.
func (p *smtpTap) hold() bool {
	if p.cycle == nil {
		return true
	}
	return (&chaosTap{cycle: p.cycle, delays: p.delays}).hold()
}

func (p *smtpTap) dead() bool { return p.cycle != nil && p.cycle.dead() }

var messageIDHeader = regexp.MustCompile(`(?i)^message-id:\s*(<[^>]+>)`)

// serve pipes one connection. Client lines are passed on as they come;
// within a mail's data the Message-ID is noted, and the final "." waits
// for a drawn delay first. Postfix's answer to it is held likewise.
func (p *smtpTap) serve(client net.Conn) {
	defer client.Close()
	if !p.track(client, true) {
		return
	}
	defer p.track(client, false)
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer up.Close()
	ended := make(chan string, 1) // the Message-ID of a mail whose "." went to Postfix
	var pending atomic.Bool       // Postfix has not answered it yet
	go func() {
		defer func() {
			if !pending.Load() {
				up.Close()
			} // else the answer is read, then up closed
		}()
		r := bufio.NewReader(client)
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
				if !p.hold() {
					return // the child died with its mail on the way: Postfix never takes it
				}
				ended <- cmp.Or(id, "<none>")
				pending.Store(true)
				_ = up.SetReadDeadline(time.Now().Add(time.Minute))
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
		if id == "" {
			if p.dead() {
				return
			}
			if _, err := io.WriteString(client, line); err != nil {
				return
			}
			continue
		}
		// The answer to the end of a mail's data.
		pending.Store(false)
		queued := ""
		if strings.HasPrefix(line, "250") {
			if i := strings.LastIndex(line, "queued as "); i >= 0 {
				queued = strings.TrimSpace(line[i+len("queued as "):])
			}
		}
		if queued != "" {
			p.ledger.add(queued, id)
			if c := p.cycle; c != nil {
				c.first(&c.answered)
				p.rec.mu.Lock()
				p.rec.sentBy[queued] = c.n
				p.rec.mu.Unlock()
				c.event(evSendAccepted)
			}
		}
		if !p.hold() {
			return // the answer is on its way back to a dead process
		}
		if _, err := io.WriteString(client, line); err != nil {
			return
		}
		if queued != "" {
			p.cycle.event(evSendAnswered)
		}
	}
}
