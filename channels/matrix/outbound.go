package matrix

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto/attachment"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/format"
	"maunium.net/go/mautrix/id"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/textsplit"
)

const (
	// partLimit is the longest part of a reply, in UTF-16 units of its
	// Markdown: with its HTML rendering beside it, and encrypted (base64,
	// a third more), it stays well within Matrix's 65,536-byte event.
	partLimit = 12_000
	// previewEvery bounds the rate of a preview's edits.
	previewEvery = time.Second
	// typingFor is how long one typing notification lasts.
	typingFor = 10 * time.Second
	// maxUpload caps an outbound file.
	maxUpload = 50 << 20
)

// parts renders nothing; it splits Markdown into parts (deterministic).
func parts(text string) []string { return textsplit.Split(text, partLimit) }

// Fits reports whether text goes out as one event.
func (a *Adapter) Fits(text string) bool { return len(parts(text)) <= 1 }

// Send posts m.Text as org.matrix.custom.html with a plain body, split at
// partLimit; the first part replies to m.ReplyTo. In a thread's chat it
// posts in the thread. Each part's transaction id is derived from the
// message being answered and the part, so a part sent again after a crash
// is the same event. It returns the last part's event id.
func (a *Adapter) Send(ctx context.Context, m channels.Outbound) (string, error) {
	list := parts(m.Text)
	if len(list) == 0 {
		return "", fmt.Errorf("matrix: send to %s: empty message", m.ChatID)
	}
	room, thread := splitChat(m.ChatID)
	var last string
	for i, p := range list {
		if m.Parts != nil {
			if eventID, ok := m.Parts.Sent(i); ok {
				last = eventID
				continue
			}
		}
		c := render(p)
		relate(&c, thread, m.ReplyTo, i == 0)
		eventID, err := a.send(ctx, room, event.EventMessage, &c, txnID(ctx, m.ChatID, fmt.Sprint(i), p))
		if err != nil {
			return last, fmt.Errorf("%w (part %d/%d)", err, i+1, len(list))
		}
		last = eventID
		if m.Parts != nil {
			m.Parts.Confirmed(ctx, i, eventID)
		}
		a.remember(ctx, eventID, m.ChatID, thread)
	}
	return last, nil
}

// render is Markdown as a text message: HTML and a plain body, mentioning
// nobody (m.mentions empty: what the model writes pings no one).
func render(md string) event.MessageEventContent {
	c := format.RenderMarkdown(md, true, false)
	c.MsgType = event.MsgText
	c.Mentions = &event.Mentions{}
	return c
}

// relate puts c in thread (when set), or makes it a reply to replyTo when
// first.
func relate(c *event.MessageEventContent, thread id.EventID, replyTo string, first bool) {
	switch {
	case thread != "":
		c.RelatesTo = (&event.RelatesTo{}).SetThread(thread, thread)
	case first && replyTo != "":
		c.RelatesTo = (&event.RelatesTo{}).SetReplyTo(id.EventID(replyTo))
	}
}

// remember notes an event the bot sent (a reply to it mentions the bot)
// and the thread it went to (later messages there are answered).
func (a *Adapter) remember(ctx context.Context, eventID, chatID string, thread id.EventID) {
	a.mu.Lock()
	if len(a.sent) > 10_000 {
		clear(a.sent)
	}
	a.sent[eventID] = true
	a.mu.Unlock()
	if thread != "" {
		if err := a.state.SetState(ctx, keyThread+chatID, "1"); err != nil {
			a.log.Warn("matrix: could not keep a thread", "chat", chatID, "err", err)
		}
	}
}

// send PUTs one event with txn (encrypted when the room is), with do's
// retries; the same txn is the same event.
func (a *Adapter) send(ctx context.Context, room id.RoomID, typ event.Type, content any, txn string) (string, error) {
	if a.crypto == nil && typ != event.EventReaction {
		if enc, err := a.states.IsEncrypted(ctx, room); err != nil || enc {
			return "", fmt.Errorf("matrix: send to %s: the room is encrypted and encryption is off (set channels.matrix.encryption: true); nothing sent", room)
		}
	}
	var eventID string
	err := a.do(ctx, "send to "+string(room), func() error {
		resp, err := a.cli.SendMessageEvent(ctx, room, typ, content, mautrix.ReqSendEvent{TransactionID: txn})
		if err != nil {
			return err
		}
		eventID = string(resp.EventID)
		return nil
	})
	return eventID, err
}

// txnID is a part's transaction id: derived from the chat, the message
// being answered (the turn's Inbound), the part and its text, so a resend
// after a crash is one event; random without a message to answer.
func txnID(ctx context.Context, chatID, part, text string) string {
	h, ok := channels.ReplyDigest(ctx, chatID, part, text)
	if !ok {
		_, _ = rand.Read(h[:16])
	}
	return "sb." + hex.EncodeToString(h[:16])
}

// Edit replaces the text of the bot's event messageID (m.replace): the
// preview's updates, and the final reply as its last edit. A preview's
// edits (channels.PriorityPreview) come at most once a second; one
// sooner is dropped with channels.ErrPaced.
func (a *Adapter) Edit(ctx context.Context, chatID, messageID, text string) error {
	if !a.Fits(text) {
		return fmt.Errorf("matrix: edit %s: the text does not fit in one event", messageID)
	}
	if channels.PriorityOf(ctx) == channels.PriorityPreview {
		a.mu.Lock()
		last := a.edited[messageID]
		if time.Since(last) < previewEvery {
			a.mu.Unlock()
			return fmt.Errorf("matrix: edit %s: %w", messageID, channels.ErrPaced)
		}
		if len(a.edited) > 1000 {
			clear(a.edited)
		}
		a.edited[messageID] = time.Now()
		a.mu.Unlock()
	}
	room, thread := splitChat(chatID)
	c := render(text)
	c.SetEdit(id.EventID(messageID))
	if thread != "" {
		c.NewContent.RelatesTo = nil
	}
	_, err := a.send(ctx, room, event.EventMessage, &c, txnID(ctx, chatID, "edit:"+messageID, text))
	return err
}

// Delete redacts the bot's event messageID (a preview no reply took over).
func (a *Adapter) Delete(ctx context.Context, chatID, messageID string) error {
	room, _ := splitChat(chatID)
	return a.do(ctx, "redact "+messageID, func() error {
		_, err := a.cli.RedactEvent(ctx, room, id.EventID(messageID), mautrix.ReqRedact{TxnID: txnID(ctx, chatID, "redact:"+messageID, "")})
		return err
	})
}

// React puts emoji on messageID (reactions are not encrypted in Matrix).
func (a *Adapter) React(ctx context.Context, chatID, messageID, emoji string) error {
	room, _ := splitChat(chatID)
	c := event.ReactionEventContent{RelatesTo: *(&event.RelatesTo{}).SetAnnotation(id.EventID(messageID), emoji)}
	_, err := a.send(ctx, room, event.EventReaction, &c, txnID(ctx, chatID, "react:"+messageID, emoji))
	return err
}

// Typing shows the typing notification for a few seconds.
func (a *Adapter) Typing(ctx context.Context, chatID string) error {
	room, _ := splitChat(chatID)
	return a.do(channels.WithPriority(ctx, channels.PriorityPreview), "typing in "+string(room), func() error {
		_, err := a.cli.UserTyping(ctx, room, true, typingFor)
		return err
	})
}

// The emoji a question's answers are given by: ✅ for an approval, ❌ for
// a denial, numbers for other choices.
var numberEmoji = []string{"1️⃣", "2️⃣", "3️⃣", "4️⃣", "5️⃣", "6️⃣", "7️⃣", "8️⃣", "9️⃣"}

// Ask sends m with a line saying which reaction chooses which button, puts
// those reactions under it for a click, and keeps the choices: a reaction
// arrives from Run as an Inbound with Action set (only the asker decides:
// the router answers anyone else).
func (a *Adapter) Ask(ctx context.Context, m channels.Outbound, buttons []channels.Button) (string, error) {
	if len(buttons) == 0 || len(buttons) > len(numberEmoji) {
		return "", fmt.Errorf("matrix: ask in %s: %d buttons, want 1 to %d", m.ChatID, len(buttons), len(numberEmoji))
	}
	q := question{ChatID: m.ChatID, Actions: map[string]string{}}
	var order, legend []string
	for i, b := range buttons {
		emoji := numberEmoji[i]
		switch {
		case strings.HasPrefix(b.Action, "approve") && q.Actions["✅"] == "":
			emoji = "✅"
		case (strings.HasPrefix(b.Action, "deny") || strings.HasPrefix(b.Action, "stop")) && q.Actions["❌"] == "":
			emoji = "❌"
		}
		q.Actions[normalEmoji(emoji)] = b.Action
		order = append(order, emoji)
		legend = append(legend, emoji+" "+b.Label)
	}
	m.Text += "\n\nReact with " + strings.Join(legend, " · ")
	eventID, err := a.Send(ctx, m)
	if err != nil {
		return eventID, err
	}
	b, _ := json.Marshal(q)
	if err := a.state.SetState(ctx, keyAskPrefix+eventID, string(b)); err != nil {
		return eventID, fmt.Errorf("matrix: ask in %s: keep the question: %w", m.ChatID, err)
	}
	for _, emoji := range order {
		if err := a.React(ctx, m.ChatID, eventID, emoji); err != nil {
			a.log.Warn("matrix: could not offer a reaction", "emoji", emoji, "err", err)
		}
	}
	return eventID, nil
}

// SendFile uploads a file (a local path, or an URL fetched through the
// guarded transport) and posts it; in an encrypted room the file is
// encrypted before it leaves.
func (a *Adapter) SendFile(ctx context.Context, chatID string, f channels.OutboundFile) (string, error) {
	data, name, mimeType, err := a.readFile(ctx, f)
	if err != nil {
		return "", fmt.Errorf("matrix: send file to %s: %w", chatID, err)
	}
	room, thread := splitChat(chatID)
	c := event.MessageEventContent{MsgType: event.MsgFile, Body: name, FileName: name,
		Info: &event.FileInfo{MimeType: mimeType, Size: len(data)}, Mentions: &event.Mentions{}}
	if f.Caption != "" {
		c.Body = f.Caption
	}
	if f.Photo || strings.HasPrefix(mimeType, "image/") {
		c.MsgType = event.MsgImage
	}
	relate(&c, thread, "", false)
	txn := txnID(ctx, chatID, "file:"+name, fmt.Sprintf("%x", sha256.Sum256(data)))
	encrypted, err := a.states.IsEncrypted(ctx, room)
	if err != nil {
		return "", fmt.Errorf("matrix: send file to %s: %w", chatID, err)
	}
	upload, uploadType := data, mimeType
	var file *attachment.EncryptedFile
	if encrypted {
		file = attachment.NewEncryptedFile()
		upload = file.Encrypt(data)
		uploadType = "application/octet-stream"
	}
	var uri id.ContentURI
	err = a.do(ctx, "upload "+name, func() error {
		resp, err := a.cli.UploadBytesWithName(ctx, upload, uploadType, name)
		if err != nil {
			return err
		}
		uri = resp.ContentURI
		return nil
	})
	if err != nil {
		return "", err
	}
	if file != nil {
		c.File = &event.EncryptedFileInfo{EncryptedFile: *file, URL: uri.CUString()}
	} else {
		c.URL = uri.CUString()
	}
	eventID, err := a.send(ctx, room, event.EventMessage, &c, txn)
	if err == nil {
		a.remember(ctx, eventID, chatID, thread)
	}
	return eventID, err
}

// readFile reads f whole: a path, or an URL.
func (a *Adapter) readFile(ctx context.Context, f channels.OutboundFile) (data []byte, name, mimeType string, err error) {
	switch {
	case f.Path != "":
		data, err = channels.ReadUpload(f.Path, maxUpload, "the bot's upload limit")
		name = filepath.Base(f.Path)
		mimeType = mime.TypeByExtension(filepath.Ext(name))
	case f.URL != "":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.URL, nil)
		if err != nil {
			return nil, "", "", err
		}
		resp, err := a.files.Do(req)
		if err != nil {
			return nil, "", "", err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, "", "", fmt.Errorf("%s: status %d", f.URL, resp.StatusCode)
		}
		data, err = io.ReadAll(io.LimitReader(resp.Body, maxUpload+1))
		if err == nil && len(data) > maxUpload {
			err = fmt.Errorf("%s is over the limit of %d bytes", f.URL, maxUpload)
		}
		name = filepath.Base(req.URL.Path)
		mimeType, _, _ = mime.ParseMediaType(resp.Header.Get("Content-Type"))
	default:
		return nil, "", "", errors.New("no path or URL")
	}
	if name == "" || name == "." || name == "/" {
		name = "file"
	}
	if mimeType == "" {
		mimeType = http.DetectContentType(data)
	}
	return data, name, mimeType, err
}
