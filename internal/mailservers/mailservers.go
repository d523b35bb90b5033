// Package mailservers gives tests the real mail servers: Debian's Dovecot
// (IMAP) and Postfix (SMTP, delivering into Dovecot) on 127.0.0.1, started
// by .ci/run through .ci/mailservers and named in the environment. Every
// address at any domain is a mailbox with the one password, so a test makes
// its own accounts (NewAccount) and sees only its own mail.
//
// Without the environment, Need starts a pair for the test when the
// binaries are installed and the test runs as root (Postfix needs it), and
// otherwise reports them missing (a counted skip; a failure under CI=true).
package mailservers

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-imap"
	"github.com/emersion/go-imap/client"
	"github.com/emersion/go-smtp"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// The environment .ci/mailservers prints and .ci/run exports.
const (
	IMAPEnv     = "SWITCHBOARD_TEST_IMAP"          // Dovecot's IMAP, host:port, plaintext
	SMTPEnv     = "SWITCHBOARD_TEST_SMTP"          // Postfix's SMTP, host:port, plaintext, AUTH offered
	PasswordEnv = "SWITCHBOARD_TEST_MAIL_PASSWORD" // every mailbox's password
)

// Servers are a running IMAP and SMTP pair.
type Servers struct {
	IMAP, SMTP string // host:port on 127.0.0.1
	Password   string // every account's
}

// Need returns the servers named by the environment; without them it
// starts a pair for this test (stopped when it ends) if it can, or reports
// them missing.
func Need(t testing.TB) *Servers {
	t.Helper()
	s := &Servers{IMAP: os.Getenv(IMAPEnv), SMTP: os.Getenv(SMTPEnv), Password: os.Getenv(PasswordEnv)}
	if s.IMAP != "" && s.SMTP != "" && s.Password != "" {
		return s
	}
	why := IMAPEnv + ", " + SMTPEnv + " and " + PasswordEnv + " are not set (.ci/run starts the servers)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: .ci/run should have started them)", why)
	}
	for _, b := range []string{"/usr/sbin/dovecot", "/usr/sbin/postfix"} {
		if _, err := os.Stat(b); err != nil {
			testkit.SkipFor(t, "mail server", why+", and "+b+" is missing: apt-get install dovecot-imapd dovecot-lmtpd postfix")
		}
	}
	if os.Geteuid() != 0 {
		testkit.SkipFor(t, "mail server", why+", and Postfix can only be started as root")
	}
	return start(t)
}

// start runs .ci/mailservers for the test.
func start(t testing.TB) *Servers {
	t.Helper()
	script := filepath.Join(testkit.ModuleRoot(t), ".ci", "mailservers")
	dir, err := os.MkdirTemp("", "switchboard-mail.")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script, "start", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, script, "stop", dir).CombinedOutput(); err != nil {
			t.Errorf("%s stop: %v\n%s", script, err, out)
		}
	})
	if err != nil {
		t.Fatalf("%s start: %v\n%s", script, err, stderr.String())
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	s := &Servers{IMAP: env[IMAPEnv], SMTP: env[SMTPEnv], Password: env[PasswordEnv]}
	if s.IMAP == "" || s.SMTP == "" || s.Password == "" {
		t.Fatalf("%s start printed no addresses: %q", script, out)
	}
	return s
}

var accounts atomic.Int64

// Account is a mailbox on the servers.
type Account struct {
	Address  string // also the IMAP and SMTP user name
	Password string
	servers  *Servers
}

// NewAccount returns a fresh mailbox at domain (any domain will do), named
// after name and unique to this process.
func (s *Servers) NewAccount(name, domain string) Account {
	addr := fmt.Sprintf("%s-%d-%d@%s", name, os.Getpid(), accounts.Add(1), domain)
	return Account{Address: addr, Password: s.Password, servers: s}
}

// Account is the mailbox of address, which may be shared: prefer
// NewAccount.
func (s *Servers) Account(address string) Account {
	return Account{Address: address, Password: s.Password, servers: s}
}

// Send submits raw (a whole RFC 5322 message) from from to to over SMTP,
// unauthenticated (the servers relay for loopback clients): how a test
// plays the outside world, forged senders included.
func (s *Servers) Send(ctx context.Context, from string, to []string, raw []byte) error {
	c, err := dial(ctx, s.SMTP)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SendMail(from, to, bytes.NewReader(raw)); err != nil {
		return fmt.Errorf("smtp %s: send from %s: %w", s.SMTP, from, err)
	}
	return c.Quit()
}

func dial(ctx context.Context, addr string) (*smtp.Client, error) {
	c, err := smtp.Dial(addr)
	if err != nil {
		return nil, fmt.Errorf("smtp %s: %w", addr, err)
	}
	if d, ok := ctx.Deadline(); ok {
		c.CommandTimeout, c.SubmissionTimeout = time.Until(d), time.Until(d)
	}
	return c, nil
}

// Mail is one message of a mailbox.
type Mail struct {
	UID    uint32
	Seen   bool
	Header mail.Header
	Raw    []byte
}

// Mails lists the account's INBOX, oldest first; it never marks a mail
// seen.
func (a Account) Mails(ctx context.Context) ([]Mail, error) {
	r, err := a.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if d, ok := ctx.Deadline(); ok {
		r.c.Timeout = time.Until(d)
	}
	return r.Read()
}

// WaitMails waits until the account's INBOX holds at least n mails and
// returns them; the test fails when ctx ends first.
func (a Account) WaitMails(t testing.TB, ctx context.Context, n int) []Mail {
	t.Helper()
	return a.Wait(t, ctx, fmt.Sprintf("%d mails", n), func(ms []Mail) bool { return len(ms) >= n })
}

// Wait waits until cond holds for the account's INBOX and returns it; the
// test fails, naming what, when ctx ends first. (Another process's state:
// it is polled.)
func (a Account) Wait(t testing.TB, ctx context.Context, what string, cond func([]Mail) bool) []Mail {
	t.Helper()
	var got []Mail
	var last error
	err := waitfor.Poll(ctx, 50*time.Millisecond, func() bool {
		got, last = a.Mails(ctx)
		return last == nil && cond(got)
	})
	if err != nil {
		t.Fatalf("%s: waiting for %s: %v; the INBOX holds %d mails (last error: %v)", a.Address, what, err, len(got), last)
	}
	return got
}

// Find returns the mail whose Message-ID is id (with or without <>).
func Find(ms []Mail, id string) (Mail, bool) {
	id = "<" + strings.Trim(id, "<>") + ">"
	for _, m := range ms {
		if m.Header.Get("Message-Id") == id {
			return m, true
		}
	}
	return Mail{}, false
}

// Reader reads an account's INBOX over one IMAP connection, fetching only
// the mails that are new since its last Read: for tests that watch many
// mailboxes often.
type Reader struct {
	a     Account
	c     *client.Client
	last  uint32
	mails []Mail
}

// Reader logs in to the account's INBOX.
func (a Account) Reader() (*Reader, error) {
	c, err := a.login()
	if err != nil {
		return nil, err
	}
	return &Reader{a: a, c: c}, nil
}

func (a Account) login() (*client.Client, error) {
	c, err := client.Dial(a.servers.IMAP)
	if err != nil {
		return nil, fmt.Errorf("imap %s: %w", a.servers.IMAP, err)
	}
	c.Timeout = time.Minute
	if err := c.Login(a.Address, a.Password); err != nil {
		c.Logout()
		return nil, fmt.Errorf("imap %s: login %s: %w", a.servers.IMAP, a.Address, err)
	}
	return c, nil
}

// Read returns every mail of the INBOX, oldest first (flags as first
// seen); it never marks a mail seen. A connection that was closed while
// idle (go-imap's Timeout) is opened again.
func (r *Reader) Read() ([]Mail, error) {
	box, err := r.c.Select("INBOX", true)
	if err != nil {
		r.c.Logout()
		c, lerr := r.a.login()
		if lerr != nil {
			return nil, fmt.Errorf("imap: select INBOX of %s: %w; again: %w", r.a.Address, err, lerr)
		}
		r.c = c
		if box, err = r.c.Select("INBOX", true); err != nil {
			return nil, fmt.Errorf("imap: select INBOX of %s: %w", r.a.Address, err)
		}
	}
	if box.UidNext <= r.last+1 || box.Messages == 0 {
		return r.mails, nil
	}
	seq := new(imap.SeqSet)
	seq.AddRange(r.last+1, 0)
	section := &imap.BodySectionName{Peek: true}
	// Fetch runs on while its results are read: go-imap v1 hands it the
	// server's unsolicited FETCH responses too (flags another session
	// changed), so a channel that is not drained can block it for good.
	ch := make(chan *imap.Message, 16)
	errc := make(chan error, 1)
	go func() {
		errc <- r.c.UidFetch(seq, []imap.FetchItem{imap.FetchUid, imap.FetchFlags, section.FetchItem()}, ch)
	}()
	var fresh []Mail
	var bad error
	for m := range ch {
		if m.Uid <= r.last {
			continue // "N:*" names the newest mail even when it is older than N
		}
		body := m.GetBody(section)
		if body == nil {
			continue // an unsolicited FETCH (flags): the mail comes whole on a later Read
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			bad = err
			continue
		}
		msg, err := mail.ReadMessage(bytes.NewReader(raw))
		if err != nil {
			bad = fmt.Errorf("mail %d of %s: %w", m.Uid, r.a.Address, err)
			continue
		}
		seen := false
		for _, f := range m.Flags {
			seen = seen || f == imap.SeenFlag
		}
		fresh = append(fresh, Mail{UID: m.Uid, Seen: seen, Header: msg.Header, Raw: raw})
	}
	if err := <-errc; err != nil {
		return nil, fmt.Errorf("imap: fetch from %s: %w", r.a.Address, err)
	}
	if bad != nil {
		return nil, bad
	}
	for _, m := range fresh {
		r.mails = append(r.mails, m)
		r.last = max(r.last, m.UID)
	}
	return r.mails, nil
}

// Close logs out.
func (r *Reader) Close() { r.c.Logout() }
