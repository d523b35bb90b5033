// Package email is the email channel: mail comes in by IMAP (IDLE, or
// polling where the server has no IDLE) and replies go out by SMTP
// submission, in the thread of the mail they answer.
//
// Intake is at-least-once: a mail is flagged \Seen only after
// Sink.Deliver returned nil (it is stored), or after it was dropped on
// purpose (an auto-reply, a bounce, the bot's own mail, a sender whose
// domain does not vouch for it). A crash in between leaves it unseen, and
// the next scan delivers it again; its Message-ID is its MessageID, so the
// store takes it as the message it already has.
//
// A thread is a session: the chat of a mail is its sender plus the first
// Message-ID of its References (or In-Reply-To, or its own), so the
// user's answers to the bot's reply continue the same conversation.
//
// With require_authenticated_sender (the default), a mail is admitted only
// when its From: domain vouches for it (auth.go): a valid DKIM signature
// of that domain, verified here, or the Authentication-Results of the
// receiving server (a configured authserv-id) saying DMARC, DKIM or SPF
// passed aligned with From:. Mail cannot be edited: no live previews, no
// progress lines; approvals are asked as a mail and answered by "yes" or
// "no" in the thread.
package email

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// TLS modes of the IMAP and SMTP connections.
const (
	TLSImplicit = "tls"      // TLS from the first byte (IMAPS 993, submissions 465)
	TLSStart    = "starttls" // plain, then STARTTLS (IMAP 143, submission 587)
	TLSNone     = "none"     // no TLS at all: only to a loopback address
)

// Options configure an Adapter.
type Options struct {
	IMAPAddr, IMAPTLS string // host:port and TLS mode of the IMAP server
	SMTPAddr, SMTPTLS string // host:port and TLS mode of SMTP submission
	Username          string
	Password          string
	// Address is the bot's own address: the From: of its replies, and
	// mail from it is never answered.
	Address string
	// Mailbox is where mail is read; default INBOX.
	Mailbox string
	// AllowUnauthenticated admits mail whose From: domain does not vouch
	// for it (require_authenticated_sender: false).
	AllowUnauthenticated bool
	// TrustedAuthservID is the authserv-id of the receiving server whose
	// Authentication-Results are believed; empty: none are.
	TrustedAuthservID string
	// LookupTXT looks DKIM keys up; nil: DKIMResolver, else the system's
	// resolver.
	LookupTXT func(ctx context.Context, name string) ([]string, error)
	// DKIMResolver is a DNS server's host:port for DKIM keys; empty: the
	// system's resolver.
	DKIMResolver string
	// PollInterval is how often the mailbox is scanned without IDLE, and
	// how often an IDLE is renewed; default one minute.
	PollInterval time.Duration
	// TLSConfig (nil: the system's roots) checks the servers.
	TLSConfig *tls.Config
	// MaxAttachmentBytes caps one attachment (default 25 MiB); a larger
	// one comes with a note instead of its data.
	MaxAttachmentBytes int64
	// Sleep waits between reconnects; default: a timer that ends with ctx.
	Sleep  func(ctx context.Context, d time.Duration) error
	Now    func() time.Time
	Logger *slog.Logger
}

// Adapter is the email channel. Create it with New.
type Adapter struct {
	o         Options
	domain    string // of the bot's address: its Message-IDs
	log       *slog.Logger
	lookupTXT func(ctx context.Context, name string) ([]string, error)

	running   atomic.Bool
	connected atomic.Bool

	mu      sync.Mutex
	threads map[string]*thread // by chat id: what a reply needs
}

// thread is what the adapter knows of a chat to reply in it.
type thread struct {
	subject string            // the subject of the thread's newest mail
	last    string            // the newest mail's Message-ID
	refs    map[string]string // Message-ID → the References a reply to it carries
}

// New checks o; nothing is contacted until Run or Send.
func New(o Options) (*Adapter, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	o.Mailbox = cmp.Or(o.Mailbox, "INBOX")
	o.PollInterval = cmp.Or(max(o.PollInterval, 0), time.Minute)
	o.MaxAttachmentBytes = cmp.Or(max(o.MaxAttachmentBytes, 0), 25<<20)
	o.Logger = cmp.Or(o.Logger, slog.Default())
	if o.Sleep == nil {
		o.Sleep = waitfor.Sleep
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	addr := strings.ToLower(strings.TrimSpace(o.Address))
	o.Address = addr
	a := &Adapter{o: o, domain: addr[strings.LastIndexByte(addr, '@')+1:], log: o.Logger.With("channel", Name),
		threads: map[string]*thread{}}
	a.lookupTXT = o.LookupTXT
	if a.lookupTXT == nil {
		a.lookupTXT = resolver(o.DKIMResolver).LookupTXT
	}
	return a, nil
}

func (o *Options) check() error {
	for _, s := range []struct{ addr, mode, what string }{{o.IMAPAddr, o.IMAPTLS, "imap"}, {o.SMTPAddr, o.SMTPTLS, "smtp"}} {
		if err := checkServer(s.addr, s.mode); err != nil {
			return fmt.Errorf("email: %s: %w", s.what, err)
		}
	}
	switch {
	case strings.TrimSpace(o.Username) == "":
		return errors.New("email: the username is required")
	case o.Password == "":
		return errors.New("email: the password is required")
	case !validAddress(o.Address):
		return fmt.Errorf("email: the bot's address %q is not an address such as bot@example.org", o.Address)
	}
	return nil
}

// checkServer checks a host:port and its TLS mode: none only to loopback.
func checkServer(addr, mode string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("%q is not host:port, such as mail.example.org:993", addr)
	}
	switch mode {
	case TLSImplicit, TLSStart:
	case TLSNone:
		if !loopback(host) {
			return fmt.Errorf("TLS mode none sends the password in clear: only allowed to a loopback address, not %s; use tls or starttls", host)
		}
	default:
		return fmt.Errorf("TLS mode %q must be tls, starttls or none", mode)
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validAddress reports whether s looks like local@domain.
func validAddress(s string) bool {
	local, domain, ok := strings.Cut(strings.TrimSpace(s), "@")
	return ok && local != "" && strings.Contains(domain, ".") || ok && local != "" && domain == "localhost"
}

// resolver asks the DNS server addr (empty: the system's).
func resolver(addr string) *net.Resolver {
	if addr == "" {
		return net.DefaultResolver
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

// Name is "email".
func (a *Adapter) Name() string { return Name }

// Connected reports whether the IMAP connection is up.
func (a *Adapter) Connected() bool { return a.connected.Load() }

// tlsConfig returns the TLS settings for host.
func (a *Adapter) tlsConfig(addr string) *tls.Config {
	host, _, _ := net.SplitHostPort(addr)
	c := &tls.Config{}
	if a.o.TLSConfig != nil {
		c = a.o.TLSConfig.Clone()
	}
	if c.ServerName == "" {
		c.ServerName = host
	}
	return c
}

// Run reads the mailbox until ctx ends, reconnecting with backoff when the
// connection is lost. It returns an error when the server refuses the
// login (the supervisor tries again later).
func (a *Adapter) Run(ctx context.Context, sink channels.Sink) error {
	if !a.running.CompareAndSwap(false, true) {
		return errors.New("email: run: already running")
	}
	defer a.running.Store(false)
	backoff := time.Second
	for {
		started := a.o.Now()
		err := a.session(ctx, sink)
		a.connected.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		var le loginError
		if errors.As(err, &le) {
			return err
		}
		if a.o.Now().Sub(started) > 2*time.Minute {
			backoff = time.Second // it ran a while: a new loss, not the same one
		}
		a.log.Warn("email: intake stopped; reconnecting", "err", err, "in", backoff)
		if a.o.Sleep(ctx, backoff) != nil {
			return nil
		}
		backoff = min(backoff*2, 2*time.Minute)
	}
}

// loginError is a login the server refused.
type loginError struct{ err error }

func (e loginError) Error() string { return e.err.Error() }
func (e loginError) Unwrap() error { return e.err }

var (
	_ channels.Channel    = (*Adapter)(nil)
	_ channels.FileSender = (*Adapter)(nil)
	_ channels.Connecter  = (*Adapter)(nil)
)
