package email

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	_ "github.com/emersion/go-message/charset" // the charsets mail is written in
	"github.com/emersion/go-message/mail"

	"github.com/switchboard-gateway/switchboard/channels"
)

// parsed is what the adapter reads from one mail.
type parsed struct {
	from        string // the From: address, lower case
	name        string // its display name
	id          string // Message-ID without <>; "" when missing
	inReplyTo   string
	references  []string
	subject     string
	date        time.Time
	header      mail.Header
	text        string // the new text: HTML made text, quotes and signature cut
	attachments []channels.Attachment
	// bodyErr says why the body could not be read (the header could).
	bodyErr error
}

// parseMail reads raw; attachments above maxAttach keep a note instead of
// their data.
func parseMail(raw []byte, maxAttach int64) (*parsed, error) {
	r, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil && r == nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	defer r.Close()
	h := r.Header
	from, err := h.AddressList("From")
	if err != nil || len(from) != 1 {
		return nil, fmt.Errorf("parse: the From: header %q is not one address", h.Get("From"))
	}
	m := &parsed{from: strings.ToLower(from[0].Address), name: from[0].Name, header: h}
	if !validAddress(m.from) {
		return nil, fmt.Errorf("parse: the From: address %q is not an address", m.from)
	}
	m.id, _ = h.MessageID()
	if ids, _ := h.MsgIDList("In-Reply-To"); len(ids) > 0 {
		m.inReplyTo = ids[0]
	}
	m.references, _ = h.MsgIDList("References")
	m.subject, _ = h.Subject()
	m.date, _ = h.Date()
	var plain, html string
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if plain == "" && html == "" {
				m.bodyErr = fmt.Errorf("parse: %w", err)
			}
			break // keep what was read before a broken part
		}
		switch ph := p.Header.(type) {
		case *mail.InlineHeader:
			ct, _, _ := ph.ContentType()
			switch {
			case ct == "text/plain" && plain == "":
				b, _ := io.ReadAll(io.LimitReader(p.Body, 1<<20))
				plain = string(b)
			case ct == "text/html" && html == "":
				b, _ := io.ReadAll(io.LimitReader(p.Body, 4<<20))
				html = string(b)
			case !strings.HasPrefix(ct, "text/") && !strings.HasPrefix(ct, "multipart/"):
				name := ""
				if _, params, err := ph.ContentType(); err == nil {
					name = params["name"]
				}
				m.attachments = append(m.attachments, attachment(name, ct, p.Body, maxAttach))
			}
		case *mail.AttachmentHeader:
			name, _ := ph.Filename()
			ct, _, _ := ph.ContentType()
			m.attachments = append(m.attachments, attachment(name, ct, p.Body, maxAttach))
		}
	}
	text := plain
	if strings.TrimSpace(text) == "" && html != "" {
		text = htmlToText(html)
	}
	m.text = trimReply(text)
	return m, nil
}

// maxTextAttachment is the largest textual attachment whose text is read.
const maxTextAttachment = 64 << 10

// attachment reads one attached file, as the other channels give files:
// images and audio with their bytes (for vision and transcription, up to
// maxBytes), small text files as text, other files by name, type and size
// (their bytes are not kept in the store).
func attachment(name, ct string, body io.Reader, maxBytes int64) channels.Attachment {
	if name == "" {
		name = "attachment"
		if exts, _ := mime.ExtensionsByType(ct); len(exts) > 0 {
			name += exts[0]
		}
	}
	at := channels.Attachment{Kind: kindOf(ct), Name: name, MIME: ct}
	data, err := io.ReadAll(io.LimitReader(body, maxBytes+1))
	if err != nil {
		at.Note = "could not be read: " + err.Error()
		return at
	}
	n, _ := io.Copy(io.Discard, body)
	at.Size = int64(len(data)) + n
	switch {
	case at.Size > maxBytes:
		at.Note = fmt.Sprintf("larger than the %d MiB an attachment may have; not read", maxBytes>>20)
	case at.Kind == channels.Image || at.Kind == channels.Audio:
		at.Data = data
	case textual(ct, name) && at.Size <= maxTextAttachment && utf8.Valid(data):
		at.Text = string(data)
	}
	return at
}

// textual reports a file whose text is worth reading.
func textual(ct, name string) bool {
	if strings.HasPrefix(ct, "text/") || strings.HasSuffix(ct, "+json") || strings.HasSuffix(ct, "+xml") ||
		ct == "application/json" || ct == "application/xml" || ct == "application/yaml" || ct == "application/x-yaml" {
		return true
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".txt", ".md", ".csv", ".json", ".yaml", ".yml", ".log", ".xml", ".toml", ".ini":
		return true
	}
	return false
}

func kindOf(ct string) channels.AttachmentKind {
	switch {
	case strings.HasPrefix(ct, "image/"):
		return channels.Image
	case strings.HasPrefix(ct, "audio/"):
		return channels.Audio
	case strings.HasPrefix(ct, "video/"):
		return channels.Video
	}
	return channels.File
}

// loopReason says why m must not be answered: an auto-reply, a bounce, a
// mailing list, the bot's own mail; "" when it may be.
func (a *Adapter) loopReason(m *parsed) string {
	h := m.header
	local, _, _ := strings.Cut(m.from, "@")
	ct, _, _ := h.ContentType()
	switch {
	case m.from == a.o.Address:
		return "mail from the bot's own address"
	case m.id != "" && isOwnID(m.id, a.domain):
		return "the bot's own mail"
	case local == "mailer-daemon" || local == "postmaster":
		return "a bounce (from " + local + ")"
	case ct == "multipart/report":
		return "a delivery or read report"
	case strings.TrimSpace(h.Get("Return-Path")) == "<>":
		return "a bounce (empty Return-Path)"
	}
	if v := strings.ToLower(strings.TrimSpace(h.Get("Auto-Submitted"))); v != "" && v != "no" {
		return "an automatic mail (Auto-Submitted: " + v + ")"
	}
	switch v := strings.ToLower(strings.TrimSpace(h.Get("Precedence"))); v {
	case "bulk", "junk", "list", "auto_reply":
		return "an automatic or bulk mail (Precedence: " + v + ")"
	}
	for _, k := range []string{"X-Autoreply", "X-Autorespond", "X-Auto-Reply-From", "X-Autogenerated"} {
		if h.Has(k) {
			return "an automatic mail (" + k + ")"
		}
	}
	if h.Has("List-Id") || h.Has("List-Unsubscribe") {
		return "a mailing list's mail"
	}
	return ""
}

// inbound is the message of m.
func (a *Adapter) inbound(m *parsed, validity, uid uint32) channels.Inbound {
	id := m.id
	if id == "" {
		id = fmt.Sprintf("imap:%d:%d", validity, uid)
	}
	text := m.text
	if m.inReplyTo == "" && len(m.references) == 0 && strings.TrimSpace(m.subject) != "" {
		text = "Subject: " + strings.TrimSpace(m.subject) + "\n\n" + text
	}
	_, domain, _ := strings.Cut(m.from, "@")
	if m.date.IsZero() {
		m.date = a.o.Now()
	}
	return channels.Inbound{
		Channel: Name, ChatID: chatID(m.from, threadRoot(m, id)), ChatType: channels.DM, MessageID: id,
		// UserName is the sender's domain, so that "@example.org" in
		// allow_senders admits the domain (channels.Access).
		UserID: m.from, UserName: domain, DisplayName: m.name,
		Text: text, Attachments: m.attachments, Mentioned: true, Time: m.date,
	}
}

// threadRoot is the first mail of m's thread.
func threadRoot(m *parsed, id string) string {
	if len(m.references) > 0 {
		return m.references[0]
	}
	if m.inReplyTo != "" {
		return m.inReplyTo
	}
	return id
}

// chatID is a thread of one sender: "alice@example.org:<root@id>".
func chatID(from, root string) string { return from + ":<" + root + ">" }

// splitChatID returns the address and the root of a chat id.
func splitChatID(chat string) (to, root string, ok bool) {
	to, root, ok = strings.Cut(chat, ":<")
	if !ok || !strings.HasSuffix(root, ">") || !validAddress(to) {
		return "", "", false
	}
	return to, strings.TrimSuffix(root, ">"), true
}

// remember keeps what a reply in m's thread needs.
func (a *Adapter) remember(chat string, m *parsed) {
	if m.id == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.threads[chat]
	if t == nil {
		if len(a.threads) > 10_000 {
			clear(a.threads) // a reply without it looks its mail up
		}
		t = &thread{refs: map[string]string{}}
		a.threads[chat] = t
	}
	t.subject, t.last = m.subject, m.id
	refs := m.references
	if len(refs) == 0 && m.inReplyTo != "" {
		refs = []string{m.inReplyTo}
	}
	if len(refs) > 20 { // the root and the newest
		refs = append(refs[:1:1], refs[len(refs)-19:]...)
	}
	t.refs[m.id] = strings.Join(brackets(append(refs[:len(refs):len(refs)], m.id)), " ")
}

func brackets(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = "<" + id + ">"
	}
	return out
}
