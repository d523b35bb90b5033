package whatsapp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/textsplit"
)

// WhatsApp's limits on interactive reply buttons.
const (
	maxButtons     = 3    // per message
	maxButtonTitle = 20   // characters
	maxButtonID    = 256  // characters
	maxButtonBody  = 1024 // the text above them
	// maxUpload caps a file the bot uploads (WhatsApp: documents 100 MB).
	maxUpload = 100 << 20
	// maxImage is WhatsApp's limit on an image; a larger one goes as a
	// document.
	maxImage = 5 << 20
	// typingFor is how long a typing indicator shows (WhatsApp: up to
	// 25 s, or until the reply): it is not sent again sooner.
	typingFor = 20 * time.Second
)

// sent is the Graph API's answer to a message sent.
type sent struct {
	Messages []struct {
		ID string `json:"id"`
	} `json:"messages"`
}

// send posts one message (its type and content in body) to chatID and
// returns its wamid.
func (a *Adapter) send(ctx context.Context, op, chatID, replyTo string, body map[string]any) (string, error) {
	body["messaging_product"] = "whatsapp"
	body["recipient_type"] = "individual"
	body["to"] = chatID
	if replyTo != "" {
		body["context"] = map[string]string{"message_id": replyTo}
	}
	var ans sent
	err := a.retry(ctx, op, func() error { return a.call(ctx, http.MethodPost, a.phoneID+"/messages", body, &ans) })
	if err != nil {
		return "", err
	}
	if len(ans.Messages) == 0 || ans.Messages[0].ID == "" {
		return "", errors.New("graph api: the answer names no message id")
	}
	return ans.Messages[0].ID, nil
}

// Send posts m.Text in WhatsApp's formatting, split into parts of at most
// 4,096 characters, and returns the last part's wamid. Parts m.Parts says
// were sent are skipped. Outside the chat's 24-hour window the text goes
// out as the reminder template, or is refused (*OutsideWindowError).
func (a *Adapter) Send(ctx context.Context, m channels.Outbound) (string, error) {
	m.ChatID = normalNumber(m.ChatID) // a job's chat may be written "+1555…"
	ps := parts(m.Text, maxText)
	if len(ps) == 0 {
		return "", fmt.Errorf("whatsapp: send to %s: empty message", m.ChatID)
	}
	n := a.sendStarts()
	id, err := a.deliver(ctx, m, ps, nil)
	return a.delivered(n, id, err)
}

// Fits reports whether text goes out as one message (channels.Fitter).
func (a *Adapter) Fits(text string) bool { return len(parts(text, maxText)) == 1 }

// Ask sends m like Send with reply buttons under its last part: three to
// a message (WhatsApp's limit), further ones in messages of their own. A
// press arrives from the webhook as an Inbound with Action set to the
// button's Action, from the user it was sent to (a WhatsApp chat is one
// user: only the asker can answer). Labels are cut at 20 characters,
// actions must be 1-256.
func (a *Adapter) Ask(ctx context.Context, m channels.Outbound, buttons []channels.Button) (string, error) {
	m.ChatID = normalNumber(m.ChatID)
	groups, err := buttonGroups(buttons)
	if err != nil {
		return "", fmt.Errorf("whatsapp: ask in %s: %w", m.ChatID, err)
	}
	ps := parts(m.Text, maxText)
	if len(ps) == 0 {
		return "", fmt.Errorf("whatsapp: ask in %s: empty message", m.ChatID)
	}
	if last := ps[len(ps)-1]; textsplit.Units(last) > maxButtonBody {
		ps = append(ps[:len(ps)-1], textsplit.Split(last, maxButtonBody)...)
	}
	n := a.sendStarts()
	id, err := a.deliver(ctx, m, ps, groups)
	return a.delivered(n, id, err)
}

// sendStarts notes a Send or Ask under way, until delivered is called with
// the number it returns.
func (a *Adapter) sendStarts() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sends++
	a.sending[a.sends] = true
	return a.sends
}

// delivered ends send number n and notes the message id it returns: the
// one the reply's delivery record will hold, whose statuses keepStatus
// waits for (not the earlier parts', a reaction's or a file's, which no
// record holds).
func (a *Adapter) delivered(n uint64, id string, err error) (string, error) {
	if err == nil {
		a.noteSent(id)
	}
	a.mu.Lock()
	delete(a.sending, n)
	a.mu.Unlock()
	return id, err
}

// buttonGroups checks buttons and puts them in WhatsApp's button objects,
// three to a message.
func buttonGroups(buttons []channels.Button) ([][]map[string]any, error) {
	if len(buttons) == 0 {
		return nil, errors.New("no buttons")
	}
	seen := map[string]bool{}
	var out [][]map[string]any
	for i, b := range buttons {
		switch {
		case b.Action == "" || utf8.RuneCountInString(b.Action) > maxButtonID:
			return nil, fmt.Errorf("button %d: action must be 1-%d characters", i+1, maxButtonID)
		case seen[b.Action]:
			return nil, fmt.Errorf("button %d: action %q is used twice", i+1, b.Action)
		}
		seen[b.Action] = true
		title := firstNonEmpty(strings.TrimSpace(b.Label), b.Action)
		if r := []rune(title); len(r) > maxButtonTitle {
			title = string(r[:maxButtonTitle-1]) + "…"
		}
		if i%maxButtons == 0 {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], map[string]any{"type": "reply", "reply": map[string]string{"id": b.Action, "title": title}})
	}
	return out, nil
}

// deliver sends the text parts and then, if any, the button messages,
// within the window, or the reminder template outside it. Every message
// is a part of m.Parts: those sent before are skipped, each is confirmed
// once Meta took it.
func (a *Adapter) deliver(ctx context.Context, m channels.Outbound, ps []string, groups [][]map[string]any) (string, error) {
	open, wrote := a.windowOpen(ctx, m.ChatID)
	if !open {
		return a.outside(ctx, m, wrote)
	}
	var bodies []map[string]any
	for i, p := range ps {
		if len(groups) > 0 && i == len(ps)-1 {
			break // the last part carries the first buttons
		}
		bodies = append(bodies, map[string]any{"type": "text", "text": map[string]any{"body": p, "preview_url": false}})
	}
	for g, buttons := range groups {
		text := "…"
		if g == 0 {
			text = ps[len(ps)-1]
		}
		bodies = append(bodies, map[string]any{"type": "interactive", "interactive": map[string]any{
			"type": "button", "body": map[string]string{"text": text}, "action": map[string]any{"buttons": buttons}}})
	}
	var last string
	for i, body := range bodies {
		if m.Parts != nil {
			if id, ok := m.Parts.Sent(i); ok {
				last = id
				continue
			}
		}
		replyTo := ""
		if i == 0 {
			replyTo = m.ReplyTo
		}
		id, err := a.send(ctx, "send", m.ChatID, replyTo, body)
		if err != nil {
			var ae *APIError
			if i == 0 && errors.As(err, &ae) && ae.Code == codeReEngagement {
				// Meta knows better: the window is closed.
				a.closeWindow(m.ChatID)
				return a.outside(ctx, m, wrote)
			}
			return last, a.wrap(err, "send part %d/%d to %s", i+1, len(bodies), m.ChatID)
		}
		last = id
		if m.Parts != nil {
			m.Parts.Confirmed(ctx, i, id)
		}
	}
	a.markReadLater(ctx, m.ChatID)
	return last, nil
}

// closeWindow records that Meta said the chat's window is closed: until
// the user writes again, the store's time (when a message was stored,
// not written: a late redelivery) is not asked.
func (a *Adapter) closeWindow(chatID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.chat(chatID)
	c.lastIn, c.closed = time.Time{}, true
}

// outside sends m outside the chat's window: as the reminder template
// with the text as its body parameter, or not at all, with an ERROR and
// an *OutsideWindowError that no retry will change.
func (a *Adapter) outside(ctx context.Context, m channels.Outbound, last time.Time) (string, error) {
	if a.reminder == nil {
		err := &OutsideWindowError{ChatID: m.ChatID, Last: last, Age: a.now().Sub(last)}
		a.log.Error("whatsapp: message dropped: outside the 24-hour window", "chat", m.ChatID, "last_user_message", last,
			"reason", "no reminder template (channels.whatsapp.templates.reminder with outside_window: template)")
		return "", err
	}
	if m.Parts != nil {
		if id, ok := m.Parts.Sent(0); ok {
			return id, nil
		}
	}
	body := map[string]any{"type": "template", "template": map[string]any{
		"name": a.reminder.Name, "language": map[string]string{"code": a.reminder.Language},
		"components": []map[string]any{{"type": "body", "parameters": []map[string]string{{"type": "text", "text": templateText(Render(m.Text))}}}},
	}}
	id, err := a.send(ctx, "template", m.ChatID, "", body)
	if err != nil {
		return "", a.wrap(err, "send template %s to %s (outside the 24-hour window)", a.reminder.Name, m.ChatID)
	}
	if m.Parts != nil {
		m.Parts.Confirmed(ctx, 0, id)
	}
	a.log.Info("whatsapp: outside the 24-hour window: sent as a template", "chat", m.ChatID, "template", a.reminder.Name, "last_user_message", last)
	return id, nil
}

// lastMessage is the wamid a read receipt or typing indicator in chatID
// names: the message the turn answers (ctx), else the user's newest.
func (a *Adapter) lastMessage(ctx context.Context, chatID string) string {
	if in, ok := channels.InboundOf(ctx); ok && in.Channel == Name && in.ChatID == chatID && strings.HasPrefix(in.MessageID, "wamid.") {
		return in.MessageID
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.chat(chatID).lastID
}

// Typing marks the user's message read and shows the typing indicator
// (one call; WhatsApp shows it up to 25 s, or until the reply). It is
// sent again only after 20 s. It does not retry: the router calls it
// again every few seconds.
func (a *Adapter) Typing(ctx context.Context, chatID string) error {
	id := a.lastMessage(ctx, chatID)
	if id == "" {
		return nil // no message of the user's known to this process
	}
	now := a.now()
	a.mu.Lock()
	c := a.chat(chatID)
	if c.typingID == id && now.Sub(c.typingAt) < typingFor {
		a.mu.Unlock()
		return nil
	}
	c.typingID, c.typingAt = id, now
	a.mu.Unlock()
	body := map[string]any{"messaging_product": "whatsapp", "status": "read", "message_id": id,
		"typing_indicator": map[string]string{"type": "text"}}
	err := a.call(ctx, http.MethodPost, a.phoneID+"/messages", body, nil)
	var ae *APIError
	switch {
	case err == nil:
		a.setRead(chatID, id)
		return nil
	case errors.As(err, &ae) && ae.rateLimited():
		return fmt.Errorf("whatsapp: typing in %s: %w", chatID, channels.ErrPaced)
	}
	a.mu.Lock()
	c.typingAt = time.Time{} // try again on the next beat
	a.mu.Unlock()
	return a.wrap(err, "typing in %s", chatID)
}

// setRead records that id was marked read.
func (a *Adapter) setRead(chatID, id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.chat(chatID).readID = id
}

// maxReadsInFlight bounds the read receipts markReadLater has in flight.
const maxReadsInFlight = 8

// markReadLater marks the user's newest message read once a reply went
// out, when the typing indicator has not (a quick answer), in the
// background: a slow Graph API does not hold up Send. Best effort: with
// maxReadsInFlight receipts in flight it is skipped (the next reply or
// typing marks the chat read).
func (a *Adapter) markReadLater(ctx context.Context, chatID string) {
	id := a.unread(chatID)
	if id == "" {
		return
	}
	select {
	case a.reads <- struct{}{}:
	default:
		a.log.Debug("whatsapp: mark read skipped: too many in flight", "chat", chatID)
		return
	}
	go func() {
		defer func() { <-a.reads }()
		a.markRead(context.WithoutCancel(ctx), chatID, id)
	}()
}

// unread is the user's newest wamid in chatID unless it is marked read.
func (a *Adapter) unread(chatID string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.chat(chatID); c.readID != c.lastID {
		return c.lastID
	}
	return ""
}

// markRead marks id read: one try of at most 5 s, its failure logged at
// debug.
func (a *Adapter) markRead(ctx context.Context, chatID, id string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body := map[string]any{"messaging_product": "whatsapp", "status": "read", "message_id": id}
	if err := a.call(ctx, http.MethodPost, a.phoneID+"/messages", body, nil); err != nil {
		a.log.Debug("whatsapp: mark read", "chat", chatID, "err", a.redact(err.Error()))
		return
	}
	a.setRead(chatID, id)
}

// emojiNames are the names models give the common reactions.
var emojiNames = map[string]string{
	"thumbsup": "👍", "+1": "👍", "thumbsdown": "👎", "-1": "👎", "heart": "❤️", "joy": "😂", "tada": "🎉",
	"white_check_mark": "✅", "eyes": "👀", "fire": "🔥", "pray": "🙏", "ok_hand": "👌", "100": "💯", "rocket": "🚀",
	"x": "❌", "warning": "⚠️", "smile": "😄", "wave": "👋", "thinking_face": "🤔", "sparkles": "✨",
}

// React puts emoji (a Unicode emoji, or a common name such as thumbsup)
// on a message.
func (a *Adapter) React(ctx context.Context, chatID, messageID, emoji string) error {
	e := strings.TrimSpace(emoji)
	if u, ok := emojiNames[strings.Trim(e, ":")]; ok {
		e = u
	}
	if e == "" || isASCIIWord(e) {
		return fmt.Errorf("whatsapp: react to %s in %s: %q is not an emoji", messageID, chatID, emoji)
	}
	body := map[string]any{"type": "reaction", "reaction": map[string]string{"message_id": messageID, "emoji": e}}
	_, err := a.send(ctx, "react", chatID, "", body)
	return a.wrap(err, "react to %s in %s", messageID, chatID)
}

func isASCIIWord(s string) bool {
	for _, r := range s {
		if r >= 0x80 {
			return false
		}
	}
	return true
}

// SendFile uploads a local file (POST /PHONE_ID/media) and sends it as an
// image, audio, video or document with the caption, or posts an URL as
// text. It returns the message's wamid.
func (a *Adapter) SendFile(ctx context.Context, chatID string, f channels.OutboundFile) (string, error) {
	chatID = normalNumber(chatID)
	switch {
	case (f.Path == "") == (f.URL == ""):
		return "", fmt.Errorf("whatsapp: send file to %s: exactly one of path and url must be set", chatID)
	case f.URL != "":
		return a.Send(ctx, channels.Outbound{ChatID: chatID, Text: strings.TrimSpace(f.Caption + "\n" + f.URL)})
	}
	name := filepath.Base(f.Path)
	if open, last := a.windowOpen(ctx, chatID); !open {
		return a.outside(ctx, channels.Outbound{ChatID: chatID, Text: strings.TrimSpace(f.Caption + " (a file, " + name + ", could not be sent outside WhatsApp's 24-hour window)")}, last)
	}
	data, err := channels.ReadUpload(f.Path, maxUpload, "WhatsApp's limit")
	if err != nil {
		return "", fmt.Errorf("whatsapp: send file to %s: %w", chatID, err)
	}
	mt := mime.TypeByExtension(strings.ToLower(filepath.Ext(name)))
	if mt == "" {
		mt = http.DetectContentType(data)
	}
	mt, _, _ = strings.Cut(mt, ";")
	kind := mediaKind(mt, len(data))
	if kind == "document" && mt == "" {
		mt = "application/octet-stream"
	}
	body, err := uploadBody(name, mt, data)
	if err != nil {
		return "", fmt.Errorf("whatsapp: send file to %s: %w", chatID, err)
	}
	var up struct {
		ID string `json:"id"`
	}
	if err := a.retry(ctx, "upload", func() error { return a.call(ctx, http.MethodPost, a.phoneID+"/media", body, &up) }); err != nil {
		return "", a.wrap(err, "upload %s for %s", name, chatID)
	}
	obj := map[string]any{"id": up.ID}
	caption := strings.TrimSpace(f.Caption)
	if kind == "document" {
		obj["filename"] = name
	}
	if caption != "" && kind != "audio" { // audio takes no caption: it follows as a text
		obj["caption"] = Render(caption)
	}
	id, err := a.send(ctx, "send "+kind, chatID, "", map[string]any{"type": kind, kind: obj})
	if err != nil {
		return "", a.wrap(err, "send file %s to %s", name, chatID)
	}
	if caption != "" && kind == "audio" {
		return a.Send(ctx, channels.Outbound{ChatID: chatID, Text: caption})
	}
	return id, nil
}

// mediaKind is the WhatsApp message type a file of type mt goes as: an
// image WhatsApp takes is shown inline whether or not it was sent as a
// photo; other images go as documents.
func mediaKind(mt string, size int) string {
	switch {
	case (mt == "image/jpeg" || mt == "image/png") && size <= maxImage:
		return "image"
	case strings.HasPrefix(mt, "audio/"):
		return "audio"
	case mt == "video/mp4" || mt == "video/3gpp":
		return "video"
	}
	return "document"
}

// multipartBody is a form to upload (Adapter.call).
type multipartBody struct {
	data        []byte
	contentType string
}

// uploadBody is the media upload's form: messaging_product, type, file.
func uploadBody(name, mt string, data []byte) (*multipartBody, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	_ = w.WriteField("messaging_product", "whatsapp")
	_ = w.WriteField("type", mt)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, name))
	h.Set("Content-Type", mt)
	part, err := w.CreatePart(h)
	if err != nil {
		return nil, err
	}
	if _, err := part.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return &multipartBody{data: buf.Bytes(), contentType: w.FormDataContentType()}, nil
}
