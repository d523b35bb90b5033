package email

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/emersion/go-imap"
	"github.com/emersion/go-imap/client"

	"github.com/switchboard-gateway/switchboard/channels"
)

// dialIMAP connects and logs in.
func (a *Adapter) dialIMAP(ctx context.Context) (*client.Client, error) {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", a.o.IMAPAddr)
	if err != nil {
		return nil, fmt.Errorf("email: imap: connect to %s: %w", a.o.IMAPAddr, err)
	}
	if a.o.IMAPTLS == TLSImplicit {
		conn = tls.Client(conn, a.tlsConfig(a.o.IMAPAddr))
	}
	c, err := client.New(conn)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("email: imap: greeting of %s: %w", a.o.IMAPAddr, err)
	}
	c.ErrorLog = quietLog{}
	c.Timeout = max(2*a.o.PollInterval, 2*time.Minute) // longer than an IDLE
	if a.o.IMAPTLS == TLSStart {
		if err := c.StartTLS(a.tlsConfig(a.o.IMAPAddr)); err != nil {
			c.Terminate()
			return nil, fmt.Errorf("email: imap: STARTTLS with %s: %w", a.o.IMAPAddr, err)
		}
	}
	if err := c.Login(a.o.Username, a.o.Password); err != nil {
		c.Terminate()
		var ne net.Error
		if errors.As(err, &ne) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("email: imap: login at %s: %w", a.o.IMAPAddr, err)
		}
		return nil, loginError{fmt.Errorf("email: imap: %s refused the login of %s: %w", a.o.IMAPAddr, a.o.Username, err)}
	}
	return c, nil
}

// session reads the mailbox on one connection: a scan for unseen mail,
// then IDLE (or a wait of PollInterval) until new mail, again and again.
func (a *Adapter) session(ctx context.Context, sink channels.Sink) error {
	c, err := a.dialIMAP(ctx)
	if err != nil {
		return err
	}
	// The library's commands take no context: closing the connection ends
	// the one in flight.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-ctx.Done():
			c.Terminate()
		case <-stop:
			c.Logout() //nolint:errcheck // leaving anyway
		}
	}()
	// Unilateral updates (new mail) poke the loop; the library blocks
	// while this channel is full, so it is drained all the time.
	updates := make(chan client.Update, 16)
	poke := make(chan struct{}, 1)
	c.Updates = updates
	go func() {
		for {
			select {
			case u := <-updates:
				if _, ok := u.(*client.MailboxUpdate); ok {
					select {
					case poke <- struct{}{}:
					default:
					}
				}
			case <-stop:
				return
			}
		}
	}()

	status, err := c.Select(a.o.Mailbox, false)
	if err != nil {
		return fmt.Errorf("email: imap: select %s: %w", a.o.Mailbox, err)
	}
	idle, err := c.Support("IDLE")
	if err != nil {
		return fmt.Errorf("email: imap: capabilities: %w", err)
	}
	a.connected.Store(true)
	a.log.Info("email: reading the mailbox", "mailbox", a.o.Mailbox, "idle", idle)
	for {
		if err := a.scan(ctx, c, status.UidValidity, sink); err != nil {
			return err
		}
		if err := a.wait(ctx, c, idle, poke); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// wait returns when there may be new mail: a notification during IDLE,
// or PollInterval passed.
func (a *Adapter) wait(ctx context.Context, c *client.Client, idle bool, poke chan struct{}) error {
	if !idle {
		timer := time.NewTimer(a.o.PollInterval)
		defer timer.Stop()
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
		return nil
	}
	select {
	case <-poke: // came while scanning
		return nil
	default:
	}
	// An IDLE is renewed every PollInterval (a rescan that catches what
	// a notification missed), and within 25 minutes even with a longer
	// one: servers may end one after 30 (RFC 2177).
	renew := time.NewTimer(min(a.o.PollInterval, 25*time.Minute))
	defer renew.Stop()
	done := make(chan error, 1)
	stopIdle := make(chan struct{})
	go func() { done <- c.Idle(stopIdle, &client.IdleOptions{LogoutTimeout: -1}) }()
	select {
	case <-ctx.Done():
	case <-renew.C:
	case <-poke:
	case err := <-done:
		if err != nil {
			return fmt.Errorf("email: imap: idle: %w", err)
		}
		return nil // the server ended it: scan, and idle again
	}
	close(stopIdle)
	if err := <-done; err != nil && ctx.Err() == nil {
		return fmt.Errorf("email: imap: idle: %w", err)
	}
	return nil
}

// scan delivers every unseen mail, oldest first, and flags each \Seen
// once it is stored (or dropped on purpose).
func (a *Adapter) scan(ctx context.Context, c *client.Client, validity uint32, sink channels.Sink) error {
	criteria := imap.NewSearchCriteria()
	criteria.WithoutFlags = []string{imap.SeenFlag}
	uids, err := c.UidSearch(criteria)
	if err != nil {
		return fmt.Errorf("email: imap: search unseen: %w", err)
	}
	slices.Sort(uids)
	for _, uid := range uids {
		if ctx.Err() != nil {
			return nil
		}
		size, err := fetchSize(c, uid)
		if err != nil {
			return err
		}
		if limit := a.maxMail(); size > limit {
			a.log.Error("email: dropped a mail larger than a mail may be; not read", "uid", fmt.Sprintf("%d:%d", validity, uid),
				"bytes", size, "limit", limit)
		} else {
			raw, err := fetch(c, uid)
			if err != nil {
				return err
			}
			if raw == nil {
				continue // gone meanwhile
			}
			if err := a.take(ctx, sink, validity, uid, raw); err != nil {
				return err
			}
		}
		set := new(imap.SeqSet)
		set.AddNum(uid)
		if err := c.UidStore(set, imap.FormatFlagsOp(imap.AddFlags, true), []any{imap.SeenFlag}, nil); err != nil {
			return fmt.Errorf("email: imap: flag mail %d seen: %w", uid, err)
		}
	}
	return nil
}

// maxMail is the largest mail read: two attachments at the cap, in
// base64, and some room.
func (a *Adapter) maxMail() int64 { return a.o.MaxAttachmentBytes*8/3 + 1<<20 }

// fetchSize returns the size of mail uid (0 when it is gone).
func fetchSize(c *client.Client, uid uint32) (int64, error) {
	set := new(imap.SeqSet)
	set.AddNum(uid)
	ch := make(chan *imap.Message, 1)
	done := make(chan error, 1)
	go func() { done <- c.UidFetch(set, []imap.FetchItem{imap.FetchRFC822Size, imap.FetchUid}, ch) }()
	var size int64
	for m := range ch {
		if m.Uid == uid {
			size = int64(m.Size)
		}
	}
	if err := <-done; err != nil {
		return 0, fmt.Errorf("email: imap: fetch the size of mail %d: %w", uid, err)
	}
	return size, nil
}

// fetch returns the whole mail uid, without flagging it seen; nil when
// it is gone.
func fetch(c *client.Client, uid uint32) ([]byte, error) {
	section := &imap.BodySectionName{Peek: true}
	set := new(imap.SeqSet)
	set.AddNum(uid)
	ch := make(chan *imap.Message, 1)
	done := make(chan error, 1)
	go func() { done <- c.UidFetch(set, []imap.FetchItem{section.FetchItem(), imap.FetchUid}, ch) }()
	var raw []byte
	for m := range ch {
		if m.Uid != uid {
			continue
		}
		if body := m.GetBody(section); body != nil {
			var buf bytes.Buffer
			if _, err := buf.ReadFrom(body); err != nil {
				return nil, fmt.Errorf("email: imap: read mail %d: %w", uid, err)
			}
			raw = buf.Bytes()
		}
	}
	if err := <-done; err != nil {
		return nil, fmt.Errorf("email: imap: fetch mail %d: %w", uid, err)
	}
	return raw, nil
}

// take turns one mail into a message for sink, or drops it with the
// reason logged; an error means it was not stored.
func (a *Adapter) take(ctx context.Context, sink channels.Sink, validity, uid uint32, raw []byte) error {
	log := a.log.With("uid", fmt.Sprintf("%d:%d", validity, uid))
	m, err := parseMail(raw, a.o.MaxAttachmentBytes)
	if err != nil {
		log.Error("email: dropped a mail that cannot be read", "err", err)
		return nil
	}
	log = log.With("from", m.from, "message_id", m.id)
	if reason := a.loopReason(m); reason != "" {
		log.Info("email: not answered: " + reason)
		return nil
	}
	if m.bodyErr != nil {
		log.Error("email: dropped a mail whose body cannot be read", "err", m.bodyErr)
		return nil
	}
	if !a.o.AllowUnauthenticated {
		how, ok := a.proven(ctx, raw, m)
		if !ok {
			log.Warn("email: refused a mail whose sender is not proven (From: domain not vouched for by DKIM or a trusted Authentication-Results); not answered, not paired", "why", how)
			return nil
		}
		log.Debug("email: sender proven", "by", how)
	}
	in := a.inbound(m, validity, uid)
	a.remember(in.ChatID, m)
	if err := sink.Deliver(ctx, in); err != nil {
		return fmt.Errorf("email: deliver mail %d:%d: %w", validity, uid, err)
	}
	return nil
}

// lookupSubject finds the subject of the mail id in the mailbox, for a
// reply whose thread this process has not seen (sent after a restart);
// "" when it cannot.
func (a *Adapter) lookupSubject(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := a.dialIMAP(ctx)
	if err != nil {
		a.log.Debug("email: could not look a thread's subject up", "err", err)
		return ""
	}
	stop := context.AfterFunc(ctx, func() { c.Terminate() })
	defer stop()
	defer c.Logout() //nolint:errcheck // leaving anyway
	if _, err := c.Select(a.o.Mailbox, true); err != nil {
		return ""
	}
	criteria := imap.NewSearchCriteria()
	criteria.Header.Add("Message-Id", "<"+id+">")
	uids, err := c.UidSearch(criteria)
	if err != nil || len(uids) == 0 {
		return ""
	}
	set := new(imap.SeqSet)
	set.AddNum(uids[0])
	ch := make(chan *imap.Message, 1)
	done := make(chan error, 1)
	go func() { done <- c.UidFetch(set, []imap.FetchItem{imap.FetchEnvelope}, ch) }()
	subject := ""
	for m := range ch {
		if m.Envelope != nil && subject == "" {
			subject = m.Envelope.Subject
		}
	}
	<-done
	return subject
}

// quietLog drops the IMAP library's own log lines; errors reach us as
// return values.
type quietLog struct{}

func (quietLog) Printf(string, ...any) {}
func (quietLog) Println(...any)        {}
