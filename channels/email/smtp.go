package email

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/switchboard-gateway/switchboard/channels"
)

// maxFileBytes caps a file sent as an attachment: most servers refuse mail
// above 25 MB, and base64 adds a third.
const maxFileBytes = 18 << 20

// Send mails m.Text to the chat's sender, in the thread, as one mail:
// text/plain (the Markdown) and HTML rendered from it. Its Message-ID is
// derived from the chat, the mail answered and the text, so a resend after
// a crash carries the same one.
func (a *Adapter) Send(ctx context.Context, m channels.Outbound) (string, error) {
	r, err := a.replyTo(ctx, m.ChatID, m.ReplyTo, m.Text)
	if err != nil {
		return "", err
	}
	if m.Parts != nil {
		if id, ok := m.Parts.Sent(0); ok {
			return id, nil // sent before a crash
		}
	}
	id := a.messageID("t", m.ChatID, r.inReplyTo, m.Text)
	raw, err := a.compose(r, id, m.Text, nil)
	if err != nil {
		return "", err
	}
	if err := a.submit(ctx, r.to, raw); err != nil {
		return "", err
	}
	if m.Parts != nil {
		m.Parts.Confirmed(ctx, 0, id)
	}
	return id, nil
}

// SendFile mails a file of the workspace as an attachment (a URL as a
// link), with the caption as the text.
func (a *Adapter) SendFile(ctx context.Context, chatID string, f channels.OutboundFile) (string, error) {
	r, err := a.replyTo(ctx, chatID, "", f.Caption)
	if err != nil {
		return "", err
	}
	text := f.Caption
	var files []outFile
	switch {
	case f.Path != "":
		data, err := channels.ReadUpload(f.Path, maxFileBytes, "what a mail carries")
		if err != nil {
			return "", fmt.Errorf("email: send file: %w", err)
		}
		files = append(files, outFile{name: filepath.Base(f.Path), data: data})
	case f.URL != "":
		text = strings.TrimSpace(text + "\n\n" + f.URL)
	}
	key := f.Path + f.URL
	id := a.messageID("f", chatID, r.inReplyTo, key+"\x00"+f.Caption)
	raw, err := a.compose(r, id, text, files)
	if err != nil {
		return "", err
	}
	if err := a.submit(ctx, r.to, raw); err != nil {
		return "", err
	}
	return id, nil
}

// reply is where a mail goes and the thread it continues.
type reply struct {
	to, subject, inReplyTo, references string
}

// replyTo finds the thread of chat: the mail answered is the one the
// router marked ctx with, else replyTo, else the thread's newest.
func (a *Adapter) replyTo(ctx context.Context, chat, replyTo, text string) (reply, error) {
	to, root, ok := splitChatID(chat)
	if !ok {
		if !validAddress(chat) || strings.ContainsAny(chat, " <>:,") {
			return reply{}, fmt.Errorf("email: %q is neither an email chat (address:<message-id>) nor an address", chat)
		}
		// A new mail to an address (a scheduled job's chat): a thread of
		// its own, its subject the text's first line.
		return reply{to: strings.ToLower(chat), subject: firstLine(text, 70)}, nil
	}
	answered := replyTo
	if in, ok := channels.InboundOf(ctx); ok && in.ChatID == chat && in.MessageID != "" && !strings.HasPrefix(in.MessageID, "imap:") {
		answered = in.MessageID
	}
	a.mu.Lock()
	t := a.threads[chat]
	r := reply{to: to}
	if t != nil {
		r.subject = t.subject
		if answered == "" {
			answered = t.last
		}
		r.references = t.refs[answered]
	}
	a.mu.Unlock()
	if answered == "" {
		answered = root
	}
	r.inReplyTo = "<" + answered + ">"
	if r.references == "" {
		r.references = strings.Join(brackets(dedupe(root, answered)), " ")
	}
	if r.subject == "" {
		r.subject = a.lookupSubject(ctx, answered)
	}
	r.subject = reSubject(r.subject)
	return r, nil
}

// firstLine is the first non-empty line of s without Markdown marks, at
// most n runes; "A message from your assistant" when there is none.
func firstLine(s string, n int) string {
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(strings.Trim(strings.TrimSpace(l), "#*_`>-"))
		if l == "" {
			continue
		}
		if r := []rune(l); len(r) > n {
			l = string(r[:n-1]) + "…"
		}
		return l
	}
	return "A message from your assistant"
}

func dedupe(ids ...string) []string {
	var out []string
	for _, id := range ids {
		if len(out) == 0 || out[len(out)-1] != id {
			out = append(out, id)
		}
	}
	return out
}

// reSubject is "Re: " and the subject, without "Re: Re: ".
func reSubject(s string) string {
	s = strings.TrimSpace(s)
	for {
		l := strings.ToLower(s)
		if strings.HasPrefix(l, "re:") || strings.HasPrefix(l, "aw:") {
			s = strings.TrimSpace(s[3:])
			continue
		}
		break
	}
	if s == "" {
		s = "your mail"
	}
	return "Re: " + s
}

// messageID is <sb.HASH.kind@domain>: the same for the same reply to the
// same mail, so a resend after a crash is recognisable.
func (a *Adapter) messageID(kind, chat, inReplyTo, text string) string {
	sum := sha256.Sum256([]byte(chat + "\x00" + inReplyTo + "\x00" + text))
	return "sb." + hex.EncodeToString(sum[:12]) + "." + kind + "@" + a.domain
}

// isOwnID reports whether id is one of the bot's Message-IDs.
func isOwnID(id, domain string) bool {
	return strings.HasPrefix(id, "sb.") && strings.HasSuffix(strings.ToLower(id), "@"+domain)
}

// markdown renders replies to HTML: CommonMark with GitHub's tables,
// strikethrough, task lists and links; raw HTML the model writes is left
// out (goldmark's default), so a reply cannot carry markup of its own.
// Made at the first reply, not at every start.
var markdown = sync.OnceValue(func() goldmark.Markdown { return goldmark.New(goldmark.WithExtensions(extension.GFM)) })

type outFile struct {
	name string
	data []byte
}

// compose writes the reply: text/plain and HTML, and files.
func (a *Adapter) compose(r reply, id, text string, files []outFile) ([]byte, error) {
	var h mail.Header
	h.SetDate(a.o.Now())
	h.SetAddressList("From", []*mail.Address{{Address: a.o.Address}})
	h.SetAddressList("To", []*mail.Address{{Address: r.to}})
	h.SetSubject(r.subject)
	h.SetMessageID(id)
	if r.inReplyTo != "" {
		h.Set("In-Reply-To", r.inReplyTo)
		h.Set("References", r.references)
	}
	// RFC 3834: other robots do not answer this one.
	h.Set("Auto-Submitted", "auto-replied")
	var html bytes.Buffer
	if err := markdown().Convert([]byte(text), &html); err != nil {
		html.Reset()
		html.WriteString("<pre>" + mimeEscape(text) + "</pre>")
	}
	var buf bytes.Buffer
	w, err := mail.CreateWriter(&buf, h)
	if err != nil {
		return nil, fmt.Errorf("email: compose: %w", err)
	}
	iw, err := w.CreateInline()
	if err != nil {
		return nil, fmt.Errorf("email: compose: %w", err)
	}
	for _, part := range []struct{ ct, body string }{
		{"text/plain", text},
		{"text/html", "<!DOCTYPE html>\n<html><body>\n" + html.String() + "</body></html>\n"},
	} {
		var ph mail.InlineHeader
		ph.SetContentType(part.ct, map[string]string{"charset": "utf-8"})
		pw, err := iw.CreatePart(ph)
		if err != nil {
			return nil, fmt.Errorf("email: compose: %w", err)
		}
		io.WriteString(pw, part.body) //nolint:errcheck // a bytes.Buffer
		pw.Close()
	}
	iw.Close()
	for _, f := range files {
		var ah mail.AttachmentHeader
		ct := mime.TypeByExtension(filepath.Ext(f.name))
		if ct == "" {
			ct = "application/octet-stream"
		}
		ah.SetContentType(ct, nil)
		ah.SetFilename(f.name)
		aw, err := w.CreateAttachment(ah)
		if err != nil {
			return nil, fmt.Errorf("email: compose: %w", err)
		}
		aw.Write(f.data) //nolint:errcheck // a bytes.Buffer
		aw.Close()
	}
	w.Close()
	return buf.Bytes(), nil
}

func mimeEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// submit hands raw to the SMTP server for to. A temporary refusal (4xx)
// or a connection that fails is channels.ErrUnavailable: the outbox keeps
// the reply and tries again. A permanent one (5xx) is returned as it is.
func (a *Adapter) submit(ctx context.Context, to string, raw []byte) error {
	err := a.trySubmit(ctx, to, raw)
	if err == nil {
		return nil
	}
	var se *smtp.SMTPError
	if errors.As(err, &se) && se.Code >= 500 {
		a.log.Error("email: the SMTP server refused the reply for good; it is dropped", "to", to, "code", se.Code, "err", se.Message)
		return fmt.Errorf("email: send to %s: refused for good: %w", to, err)
	}
	return channels.Unavailable(fmt.Errorf("email: send to %s: %w", to, err))
}

func (a *Adapter) trySubmit(ctx context.Context, to string, raw []byte) error {
	c, err := a.dialSMTP(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Mail(a.o.Address, nil); err != nil {
		return err
	}
	if err := c.Rcpt(to, nil); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(raw); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	c.Quit() //nolint:errcheck // the mail is accepted
	return nil
}

// dialSMTP connects, says hello, upgrades to TLS as configured and
// authenticates.
func (a *Adapter) dialSMTP(ctx context.Context) (*smtp.Client, error) {
	d := &net.Dialer{Timeout: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", a.o.SMTPAddr)
	if err != nil {
		return nil, fmt.Errorf("smtp: connect to %s: %w", a.o.SMTPAddr, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	conn.SetDeadline(deadline) //nolint:errcheck // a net.Conn
	var c *smtp.Client
	switch a.o.SMTPTLS {
	case TLSImplicit:
		c = smtp.NewClient(tls.Client(conn, a.tlsConfig(a.o.SMTPAddr)))
	case TLSStart:
		if c, err = smtp.NewClientStartTLS(conn, a.tlsConfig(a.o.SMTPAddr)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("smtp: STARTTLS with %s: %w", a.o.SMTPAddr, err)
		}
	default:
		c = smtp.NewClient(conn)
	}
	if err := c.Hello(a.domain); err != nil {
		c.Close()
		return nil, fmt.Errorf("smtp: hello to %s: %w", a.o.SMTPAddr, err)
	}
	if ok, _ := c.Extension("AUTH"); ok {
		if err := c.Auth(sasl.NewPlainClient("", a.o.Username, a.o.Password)); err != nil {
			c.Close()
			return nil, fmt.Errorf("smtp: %s refused the login of %s: %w", a.o.SMTPAddr, a.o.Username, err)
		}
	}
	return c, nil
}
