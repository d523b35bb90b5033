// Package mailfake is a small, fast mail world on 127.0.0.1 for the email
// channel's unit tests: an IMAP server (go-imap's server over its memory
// backend, with IDLE notifications), an SMTP submission server (go-smtp's
// server) that records what it accepts and fails on demand, a UDP DNS
// server answering TXT records, and DKIM test keys that sign mail. The
// end-to-end tests use real mail servers; these are for the fast tests.
package mailfake

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap"
	"github.com/emersion/go-imap/backend"
	"github.com/emersion/go-imap/backend/memory"
	"github.com/emersion/go-imap/server"

	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// memoryUser is the one user of go-imap's memory backend; Login maps the
// fake's own credentials to it.
const memoryUser = "username"

// IMAP is an IMAP server with one user and its INBOX.
type IMAP struct {
	User, Password string

	srv    *server.Server
	ln     net.Listener
	mu     sync.Mutex // guards the memory backend, which has no locks of its own
	mem    *memory.Backend
	logins int
	flags  waitfor.Changed // notified when flags change
	noIdle bool

	cmu   sync.Mutex
	conns map[*fakeConn]struct{} // open client connections
}

// IMAPOption changes the IMAP fake.
type IMAPOption func(*imapOptions)

type imapOptions struct{ noIdle bool }

// WithoutIdle makes the server not announce IDLE (as some servers do
// not), so clients fall back to polling.
func WithoutIdle() IMAPOption { return func(o *imapOptions) { o.noIdle = true } }

// NewIMAP starts an IMAP server on 127.0.0.1 for user with password; it
// stops when the test ends.
func NewIMAP(t testing.TB, user, password string, opts ...IMAPOption) *IMAP {
	t.Helper()
	f := &IMAP{User: user, Password: password, mem: memory.New(), conns: map[*fakeConn]struct{}{}}
	f.srv = server.New(f)
	f.srv.AllowInsecureAuth = true
	f.srv.ErrorLog = quietLog{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("mailfake: imap listen: %v", err)
	}
	var o imapOptions
	for _, opt := range opts {
		opt(&o)
	}
	f.ln, f.noIdle = ln, o.noIdle
	go f.srv.Serve(fakeListener{ln, f}) //nolint:errcheck // ends with Close
	t.Cleanup(func() { f.srv.Close() })
	return f
}

// Addr is the server's host:port.
func (f *IMAP) Addr() string { return f.ln.Addr().String() }

// Logins counts the successful logins.
func (f *IMAP) Logins() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.logins
}

// Deliver puts raw (a whole mail, CRLF lines) into INBOX, unseen, and
// tells the clients idling on it. It returns the mail's UID.
func (f *IMAP) Deliver(t testing.TB, raw []byte) uint32 {
	t.Helper()
	f.mu.Lock()
	mb := f.inbox(t)
	if err := mb.CreateMessage(nil, time.Now(), bytes.NewReader(raw)); err != nil {
		f.mu.Unlock()
		t.Fatalf("mailfake: deliver: %v", err)
	}
	uid := mb.Messages[len(mb.Messages)-1].Uid
	n := len(mb.Messages)
	f.mu.Unlock()
	// Tell the clients that idle: "* N EXISTS", as a server does.
	f.cmu.Lock()
	defer f.cmu.Unlock()
	for c := range f.conns {
		c.exists(n)
	}
	return uid
}

// WaitSeen waits until the mail uid carries the \Seen flag, or ctx ends.
func (f *IMAP) WaitSeen(ctx context.Context, t testing.TB, uid uint32) error {
	return f.flags.Wait(ctx, func() bool { return f.Seen(t, uid) })
}

// Seen reports whether the mail uid carries the \Seen flag.
func (f *IMAP) Seen(t testing.TB, uid uint32) bool {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.inbox(t).Messages {
		if m.Uid == uid {
			return slices.Contains(m.Flags, imap.SeenFlag)
		}
	}
	t.Fatalf("mailfake: no mail with uid %d", uid)
	return false
}

// DropConnections closes every open client connection (the listener stays):
// a server restart as the clients see it.
func (f *IMAP) DropConnections() {
	f.cmu.Lock()
	defer f.cmu.Unlock()
	for c := range f.conns {
		c.Conn.Close()
	}
}

func (f *IMAP) inbox(t testing.TB) *memory.Mailbox {
	u, err := f.mem.Login(nil, memoryUser, "password")
	if err != nil {
		t.Fatalf("mailfake: memory backend: %v", err)
	}
	mb, err := u.GetMailbox("INBOX")
	if err != nil {
		t.Fatalf("mailfake: memory backend: %v", err)
	}
	return mb.(*memory.Mailbox)
}

// Login checks the fake's credentials (backend.Backend).
func (f *IMAP) Login(_ *imap.ConnInfo, user, password string) (backend.User, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if user != f.User || password != f.Password {
		return nil, backend.ErrInvalidCredentials
	}
	f.logins++
	u, err := f.mem.Login(nil, memoryUser, "password")
	if err != nil {
		return nil, err
	}
	return lockedUser{User: u, f: f}, nil
}

// lockedUser and lockedMailbox serialise the memory backend's calls.
type lockedUser struct {
	backend.User
	f *IMAP
}

func (u lockedUser) GetMailbox(name string) (backend.Mailbox, error) {
	u.f.mu.Lock()
	defer u.f.mu.Unlock()
	mb, err := u.User.GetMailbox(name)
	if err != nil {
		return nil, err
	}
	return lockedMailbox{Mailbox: mb, mu: &u.f.mu, flags: &u.f.flags}, nil
}

func (u lockedUser) ListMailboxes(subscribed bool) ([]backend.Mailbox, error) {
	u.f.mu.Lock()
	defer u.f.mu.Unlock()
	list, err := u.User.ListMailboxes(subscribed)
	for i, mb := range list {
		list[i] = lockedMailbox{Mailbox: mb, mu: &u.f.mu, flags: &u.f.flags}
	}
	return list, err
}

type lockedMailbox struct {
	backend.Mailbox
	mu    *sync.Mutex
	flags *waitfor.Changed
}

func (m lockedMailbox) Info() (*imap.MailboxInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Mailbox.Info()
}

func (m lockedMailbox) Status(items []imap.StatusItem) (*imap.MailboxStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Mailbox.Status(items)
}

func (m lockedMailbox) ListMessages(uid bool, set *imap.SeqSet, items []imap.FetchItem, ch chan<- *imap.Message) error {
	// The memory backend sends on ch while it reads, and closes it;
	// collect under the lock and hand over after it.
	inner := make(chan *imap.Message)
	var got []*imap.Message
	done := make(chan struct{})
	go func() {
		for msg := range inner {
			got = append(got, msg)
		}
		close(done)
	}()
	m.mu.Lock()
	err := m.Mailbox.ListMessages(uid, set, items, inner)
	m.mu.Unlock()
	<-done
	for _, msg := range got {
		ch <- msg
	}
	close(ch)
	return err
}

func (m lockedMailbox) SearchMessages(uid bool, c *imap.SearchCriteria) ([]uint32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Mailbox.SearchMessages(uid, c)
}

func (m lockedMailbox) CreateMessage(flags []string, date time.Time, body imap.Literal) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Mailbox.CreateMessage(flags, date, body)
}

func (m lockedMailbox) UpdateMessagesFlags(uid bool, set *imap.SeqSet, op imap.FlagsOp, flags []string) error {
	m.mu.Lock()
	err := m.Mailbox.UpdateMessagesFlags(uid, set, op, flags)
	m.mu.Unlock()
	m.flags.Notify()
	return err
}

func (m lockedMailbox) CopyMessages(uid bool, set *imap.SeqSet, dest string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Mailbox.CopyMessages(uid, set, dest)
}

func (m lockedMailbox) Expunge() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Mailbox.Expunge()
}

// quietLog drops the servers' own log lines.
type quietLog struct{}

func (quietLog) Printf(string, ...any) {}
func (quietLog) Println(...any)        {}

// fakeListener wraps the server's connections: it tracks them, tells the
// idling ones about new mail, and leaves IDLE out of the capabilities
// when asked to. (go-imap's own update channel races with its
// connections' state, so the notification is written here instead.)
type fakeListener struct {
	net.Listener
	f *IMAP
}

func (l fakeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	fc := &fakeConn{Conn: c, f: l.f}
	l.f.cmu.Lock()
	l.f.conns[fc] = struct{}{}
	l.f.cmu.Unlock()
	return fc, nil
}

type fakeConn struct {
	net.Conn
	f *IMAP

	wmu     sync.Mutex
	idling  bool // between the server's "+ idling" and its answer to DONE
	pending int  // a mail count not yet told (it came while not idling)
}

func (c *fakeConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	out := p
	if c.f.noIdle {
		lines := bytes.SplitAfter(p, []byte("\r\n"))
		for i, l := range lines {
			if bytes.Contains(l, []byte("CAPABILITY ")) && (bytes.HasPrefix(l, []byte("* ")) || bytes.Contains(l, []byte(" OK ["))) {
				lines[i] = bytes.ReplaceAll(l, []byte(" IDLE"), nil)
			}
		}
		out = bytes.Join(lines, nil)
	}
	c.idling = bytes.HasPrefix(p, []byte("+ idling"))
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	if c.idling && c.pending > 0 {
		fmt.Fprintf(c.Conn, "* %d EXISTS\r\n", c.pending)
		c.pending = 0
	}
	return len(p), nil
}

// exists tells an idling client that the mailbox holds n mails.
func (c *fakeConn) exists(n int) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.idling {
		fmt.Fprintf(c.Conn, "* %d EXISTS\r\n", n)
	} else {
		c.pending = n
	}
}

func (c *fakeConn) Close() error {
	c.f.cmu.Lock()
	delete(c.f.conns, c)
	c.f.cmu.Unlock()
	return c.Conn.Close()
}
