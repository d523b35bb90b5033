package mailfake

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// Mail is one mail the SMTP fake accepted.
type Mail struct {
	From string   // MAIL FROM
	To   []string // RCPT TO
	Data []byte   // the whole mail as sent
}

// SMTP is a submission server that requires AUTH PLAIN, records the mails
// it accepts, and fails on demand.
type SMTP struct {
	User, Password string

	srv  *smtp.Server
	addr string

	mu    sync.Mutex
	mails []Mail
	fail  []*smtp.SMTPError // answers to the next DATA commands, in order
	got   waitfor.Changed   // notified on each accepted mail
	ln    net.Listener
	down  bool
}

// NewSMTP starts a submission server on 127.0.0.1 for user with password;
// it stops when the test ends.
func NewSMTP(t testing.TB, user, password string) *SMTP {
	t.Helper()
	f := &SMTP{User: user, Password: password}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("mailfake: smtp listen: %v", err)
	}
	f.addr = ln.Addr().String()
	f.serve(ln)
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if !f.down {
			f.srv.Close()
		}
	})
	return f
}

func (f *SMTP) serve(ln net.Listener) {
	f.srv = smtp.NewServer(f)
	f.srv.Domain = "localhost"
	f.srv.AllowInsecureAuth = true
	f.srv.ErrorLog = quietLog{}
	f.ln = ln
	go f.srv.Serve(ln) //nolint:errcheck // ends with Close
}

// Addr is the server's host:port.
func (f *SMTP) Addr() string { return f.addr }

// FailNext makes the next DATA commands fail with these codes (421, 451,
// 550, 554 …), one each, in order.
func (f *SMTP) FailNext(codes ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range codes {
		f.fail = append(f.fail, &smtp.SMTPError{Code: c, EnhancedCode: smtp.NoEnhancedCode, Message: "mailfake: refused on purpose"})
	}
}

// Stop closes the server: connections are refused until Start.
func (f *SMTP) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.down {
		f.srv.Close()
		f.down = true
	}
}

// Start listens again on the same address after Stop.
func (f *SMTP) Start(t testing.TB) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.down {
		return
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		t.Fatalf("mailfake: smtp listen again on %s: %v", f.addr, err)
	}
	f.serve(ln)
	f.down = false
}

// Mails returns the mails accepted so far.
func (f *SMTP) Mails() []Mail {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Mail(nil), f.mails...)
}

// WaitMails waits until n mails were accepted and returns them all, or
// ctx's error.
func (f *SMTP) WaitMails(ctx context.Context, n int) ([]Mail, error) {
	var out []Mail
	err := f.got.Wait(ctx, func() bool {
		out = f.Mails()
		return len(out) >= n
	})
	return out, err
}

// NewSession starts a session (smtp.Backend).
func (f *SMTP) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{f: f}, nil }

type session struct {
	f      *SMTP
	authed bool
	from   string
	to     []string
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, password string) error {
		if user != s.f.User || password != s.f.Password {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "mailfake: bad credentials"}
		}
		s.authed = true
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if !s.authed {
		return smtp.ErrAuthRequired
	}
	s.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.fail) > 0 {
		e := f.fail[0]
		f.fail = f.fail[1:]
		return e
	}
	if len(s.to) == 0 {
		return errors.New("mailfake: no recipients")
	}
	f.mails = append(f.mails, Mail{From: s.from, To: s.to, Data: data})
	f.got.Notify()
	return nil
}

func (s *session) Reset()        { s.from, s.to = "", nil }
func (s *session) Logout() error { return nil }
