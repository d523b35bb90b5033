package email

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-message/mail"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/mailfake"
)

const (
	testUser = "bot@bot.example"
	testPass = "secret-password-123"
	botAddr  = "bot@bot.example"
)

// rig is an adapter running against the fake servers, with a sink that
// records what it is given.
type rig struct {
	t    *testing.T
	imap *mailfake.IMAP
	smtp *mailfake.SMTP
	key  *mailfake.DKIMKey // example.org's signing key
	a    *Adapter
	in   chan channels.Inbound
	// fail, when set, makes Deliver fail (the store is down).
	mu   sync.Mutex
	fail error
	// refused gets one value per Deliver that failed.
	refused chan struct{}
	logs    *bytes.Buffer
	lmu     *sync.Mutex
}

type rigOption func(*Options)

var (
	keyOnce sync.Once
	keyOrg  *mailfake.DKIMKey
)

// exampleKey is example.org's signing key, made once: a 2048-bit key
// takes a while.
func exampleKey(t *testing.T) *mailfake.DKIMKey {
	keyOnce.Do(func() { keyOrg = mailfake.NewDKIMKey(t, "example.org", "sel") })
	return keyOrg
}

func newRig(t *testing.T, opts ...rigOption) *rig {
	t.Helper()
	r := &rig{t: t, imap: mailfake.NewIMAP(t, testUser, testPass), smtp: mailfake.NewSMTP(t, testUser, testPass),
		key: exampleKey(t), in: make(chan channels.Inbound, 100), refused: make(chan struct{}, 100), logs: &bytes.Buffer{}, lmu: &sync.Mutex{}}
	records := r.key.Records()
	o := Options{IMAPAddr: r.imap.Addr(), IMAPTLS: TLSNone, SMTPAddr: r.smtp.Addr(), SMTPTLS: TLSNone,
		Username: testUser, Password: testPass, Address: botAddr, PollInterval: time.Minute,
		LookupTXT: func(_ context.Context, name string) ([]string, error) {
			if txt, ok := records[name]; ok {
				return txt, nil
			}
			return nil, fmt.Errorf("no TXT record for %s", name)
		},
		Logger: slog.New(slog.NewTextHandler(lockedWriter{r.logs, r.lmu}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, f := range opts {
		f(&o)
	}
	a, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r.a = a
	return r
}

// run starts the adapter; it stops when the test ends.
func (r *rig) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- r.a.Run(ctx, channels.SinkFunc(func(_ context.Context, in channels.Inbound) error {
			r.mu.Lock()
			err := r.fail
			r.mu.Unlock()
			if err != nil {
				r.refused <- struct{}{}
				return err
			}
			r.in <- in
			return nil
		}))
	}()
	r.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			r.t.Errorf("Run: %v", err)
		}
	})
}

// next returns the next delivered message.
func (r *rig) next() channels.Inbound {
	r.t.Helper()
	select {
	case in := <-r.in:
		return in
	case <-time.After(10 * time.Second):
		r.t.Fatalf("no message delivered; log:\n%s", r.log())
		return channels.Inbound{}
	}
}

// none checks that nothing was delivered by the time uid is flagged seen
// (the adapter is done with it).
func (r *rig) none(uid uint32) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), 10*time.Second)
	defer cancel()
	if err := r.imap.WaitSeen(ctx, r.t, uid); err != nil {
		r.t.Fatalf("mail %d not flagged seen: %v; log:\n%s", uid, err, r.log())
	}
	select {
	case in := <-r.in:
		r.t.Fatalf("delivered %+v, want nothing", in)
	default:
	}
}

func (r *rig) log() string {
	r.lmu.Lock()
	defer r.lmu.Unlock()
	return r.logs.String()
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// msg builds a mail: headers in order (name, value pairs), then the body.
func msg(body string, headers ...string) []byte {
	var b strings.Builder
	for i := 0; i+1 < len(headers); i += 2 {
		b.WriteString(headers[i] + ": " + headers[i+1] + "\r\n")
	}
	if !strings.Contains(strings.ToLower(b.String()), "content-type:") {
		b.WriteString("Content-Type: text/plain; charset=utf-8\r\n")
	}
	b.WriteString("\r\n" + strings.ReplaceAll(body, "\n", "\r\n"))
	return []byte(b.String())
}

// hello is a first mail from alice@example.org.
func hello(id, text string) []byte {
	return msg(text, "From", "Alice <alice@example.org>", "To", botAddr, "Subject", "Hello there",
		"Date", "Sun, 06 Dec 2026 11:00:00 +0000", "Message-ID", "<"+id+">")
}

// sent is a mail the SMTP fake accepted, parsed.
type sent struct {
	header     mail.Header
	plain, htm string
	files      map[string][]byte
}

func parseSent(t *testing.T, m mailfake.Mail) sent {
	t.Helper()
	r, err := mail.CreateReader(bytes.NewReader(m.Data))
	if err != nil {
		t.Fatalf("sent mail: %v\n%s", err, m.Data)
	}
	s := sent{header: r.Header, files: map[string][]byte{}}
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("sent mail: %v", err)
		}
		b, _ := io.ReadAll(p.Body)
		switch h := p.Header.(type) {
		case *mail.InlineHeader:
			ct, _, _ := h.ContentType()
			if ct == "text/plain" {
				s.plain = string(b)
			} else if ct == "text/html" {
				s.htm = string(b)
			}
		case *mail.AttachmentHeader:
			name, _ := h.Filename()
			s.files[name] = b
		}
	}
	return s
}

// waitMails waits for n sent mails.
func (r *rig) waitMails(n int) []mailfake.Mail {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.t.Context(), 10*time.Second)
	defer cancel()
	got, err := r.smtp.WaitMails(ctx, n)
	if err != nil {
		r.t.Fatalf("%d mails sent, want %d: %v; log:\n%s", len(got), n, err, r.log())
	}
	return got
}
