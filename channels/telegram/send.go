package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/tghtml"
)

// Retry policy for outgoing calls. 429 waits what Telegram asks (up to
// maxRetryAfter; longer waits fail so a turn is not held for minutes), 5xx
// and transport errors back off exponentially.
const (
	maxAttempts   = 4
	firstBackoff  = time.Second
	maxBackoff    = 30 * time.Second
	maxRetryAfter = 60 * time.Second
	captionLimit  = 1000 // Telegram allows 1024 UTF-16 units
)

// ErrReactionsUnsupported is returned by React when the Bot API server does
// not offer setMessageReaction.
var ErrReactionsUnsupported = errors.New("telegram: reactions are not supported by this Bot API server")

// retryDelay says whether err is worth retrying and after how long.
func retryDelay(err error, backoff time.Duration) (time.Duration, bool) {
	if isPaced(err) {
		return 0, false // a preview dropped by pacing: it must not wait
	}
	if e, ok := asAPIError(err); ok {
		switch {
		case e.RetryAfter > 0:
			return time.Duration(e.RetryAfter) * time.Second, true
		case e.Code == http.StatusTooManyRequests || e.Code >= 500:
			return backoff, true
		}
		return 0, false // a real answer: retrying won't change it
	}
	return backoff, true // transport error, or a failed answer that is not the Bot API's (*httpError)
}

// withRetry runs fn until it succeeds, fails for good or runs out of
// attempts; an error still worth retrying then is marked
// channels.ErrUnavailable.
func (a *Adapter) withRetry(ctx context.Context, what string, fn func() error) error {
	backoff := firstBackoff
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || ctx.Err() != nil {
			return err
		}
		wait, ok := retryDelay(err, backoff)
		if !ok {
			return err
		}
		if attempt == maxAttempts || wait > maxRetryAfter {
			// Telegram or the way to it is down, or a flood limit longer
			// than we wait here: worth trying later, not before its
			// retry_after (the outbox waits it out).
			if e, ok := asAPIError(err); ok && e.RetryAfter > 0 {
				return channels.UnavailableFor(err, time.Duration(e.RetryAfter)*time.Second)
			}
			return channels.Unavailable(err)
		}
		a.log.Warn("telegram: call failed, retrying", "call", what, "attempt", attempt, "wait", wait, "err", err)
		if a.sleep(ctx, wait) != nil {
			return err
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

func isParseError(err error) bool {
	e, ok := asAPIError(err)
	return ok && e.Code == http.StatusBadRequest && strings.Contains(e.Message, "can't parse entities")
}

func isNotModified(err error) bool {
	e, ok := asAPIError(err)
	return ok && strings.Contains(e.Message, "message is not modified")
}

// lacksMethod reports an answer meaning the server has no such method.
func lacksMethod(err error) bool {
	e, ok := asAPIError(err)
	return ok && (e.Code == http.StatusNotFound || e.Code == http.StatusNotImplemented || e.Code == http.StatusMethodNotAllowed)
}

// sentID decodes the message_id of a sent Message.
func sentID(raw json.RawMessage) (string, error) {
	var m struct {
		MessageID int `json:"message_id"`
	}
	if err := json.Unmarshal(raw, &m); err != nil || m.MessageID == 0 {
		return "", fmt.Errorf("telegram: unreadable message in answer: %s", strings.TrimSpace(string(raw)))
	}
	return strconv.Itoa(m.MessageID), nil
}

// Send renders m.Text (Markdown) as Telegram HTML, splits it into parts
// that fit one message, and sends them in order; the first part replies to
// m.ReplyTo. It returns the id of the last part. With m.Parts, parts sent
// before (a crash cut the reply off) are skipped and each part sent is
// recorded as soon as Telegram accepted it.
func (a *Adapter) Send(ctx context.Context, m channels.Outbound) (string, error) {
	return a.send(ctx, m, "")
}

// maxCallbackData is Telegram's limit on a button's callback_data, in bytes.
const maxCallbackData = 64

// Ask sends m like Send, with the buttons in one row of an inline keyboard
// under the last part. A press arrives from Run as an Inbound with Action
// set to the button's Action. Every Action must be 1-64 bytes (Telegram's
// callback_data) and different from the others; every Label must show
// something.
func (a *Adapter) Ask(ctx context.Context, m channels.Outbound, buttons []channels.Button) (string, error) {
	markup, err := inlineKeyboard(buttons)
	if err != nil {
		return "", fmt.Errorf("telegram: ask in chat %s: %w", m.ChatID, err)
	}
	return a.send(ctx, m, markup)
}

// inlineKeyboard checks buttons and encodes them as the reply_markup of a
// one-row inline keyboard.
func inlineKeyboard(buttons []channels.Button) (string, error) {
	if len(buttons) == 0 {
		return "", errors.New("no buttons")
	}
	row := make([]tgbotapi.InlineKeyboardButton, 0, len(buttons))
	seen := make(map[string]bool, len(buttons))
	for i, b := range buttons {
		switch {
		case strings.TrimSpace(b.Label) == "":
			return "", fmt.Errorf("button %d has no label", i+1)
		case b.Action == "":
			return "", fmt.Errorf("button %d (%q) has no action", i+1, b.Label)
		case len(b.Action) > maxCallbackData:
			return "", fmt.Errorf("button %d (%q): action is %d bytes, Telegram allows at most %d",
				i+1, b.Label, len(b.Action), maxCallbackData)
		case seen[b.Action]:
			return "", fmt.Errorf("button %d (%q): action %q is used twice", i+1, b.Label, b.Action)
		}
		seen[b.Action] = true
		row = append(row, tgbotapi.NewInlineKeyboardButtonData(b.Label, b.Action))
	}
	markup, err := json.Marshal(tgbotapi.NewInlineKeyboardMarkup(row))
	if err != nil {
		return "", fmt.Errorf("encode keyboard: %w", err)
	}
	return string(markup), nil
}

// send is Send with an optional reply_markup on the last part.
func (a *Adapter) send(ctx context.Context, m channels.Outbound, markup string) (string, error) {
	chat, err := parseChatID(m.ChatID)
	if err != nil {
		return "", err
	}
	parts := splitHTML(renderMarkdown(m.Text), partLimit)
	if len(parts) == 0 {
		return "", fmt.Errorf("telegram: send to chat %s: message is empty", chat)
	}
	replyTo := 0
	if m.ReplyTo != "" {
		if replyTo, err = parseMessageID(m.ReplyTo); err != nil {
			a.log.Warn("telegram: ignoring reply target", "err", err)
		}
	}
	t, err := a.outbound(ctx, chat)
	if err != nil {
		return "", err
	}
	defer t.leave()
	var last string
	for i, part := range parts {
		if id, ok := sentBefore(m.Parts, i); ok {
			last, replyTo = id, 0 // sent before a restart
			continue
		}
		partMarkup := ""
		if i == len(parts)-1 {
			partMarkup = markup
		}
		if last, err = a.sendPart(ctx, t, chat, part, replyTo, partMarkup); err != nil {
			return "", fmt.Errorf("telegram: send part %d/%d to chat %s: %w", i+1, len(parts), chat, err)
		}
		// Recorded before anything else: the Bot API has no idempotency
		// key, so a crash from here until the record commits sends the
		// part again after the restart.
		if m.Parts != nil {
			m.Parts.Confirmed(ctx, i, last)
		}
		replyTo = 0
	}
	return last, nil
}

// sentBefore reports whether part i of a reply was sent before (see
// channels.Parts), and as which message.
func sentBefore(p channels.Parts, i int) (string, bool) {
	if p == nil {
		return "", false
	}
	return p.Sent(i)
}

// sendPart sends one HTML part, with a reply_markup (keyboard) unless
// markup is empty; if Telegram can't parse the HTML, it sends the part as
// plain text instead, keyboard included.
func (a *Adapter) sendPart(ctx context.Context, t *paced, chat chatRef, html string, replyTo int, markup string) (string, error) {
	p := chat.params()
	p["text"], p["parse_mode"] = html, tgbotapi.ModeHTML
	p.AddNonEmpty("reply_markup", markup)
	if replyTo != 0 {
		// allow_sending_without_reply: the message still goes out if the
		// user deleted the one we answer.
		p["reply_parameters"] = fmt.Sprintf(`{"message_id":%d,"allow_sending_without_reply":true}`, replyTo)
	}
	var id string
	err := a.htmlOrPlain(chat, p, "text", func() error {
		return a.withRetry(ctx, "sendMessage", func() error {
			raw, err := t.call(ctx, a, "sendMessage", p)
			if err != nil {
				return err
			}
			id, err = sentID(raw)
			return err
		})
	})
	return id, err
}

// htmlOrPlain calls send with the HTML in p[key] and, if Telegram can't
// parse it, again with it as plain text.
func (a *Adapter) htmlOrPlain(chat chatRef, p tgbotapi.Params, key string, send func() error) error {
	err := send()
	if !isParseError(err) || p["parse_mode"] == "" {
		return err
	}
	a.log.Warn("telegram: HTML rejected, sending as plain text", "chat", chat.String(), "err", err)
	p[key] = tghtml.PlainText(p[key])
	delete(p, "parse_mode")
	return send()
}

// Edit replaces the text of a message the bot sent (a streaming preview).
// A preview longer than one message shows its first part. "Message is not
// modified" counts as success.
func (a *Adapter) Edit(ctx context.Context, chatID, messageID, text string) error {
	chat, id, err := parseMessageRef(chatID, messageID)
	if err != nil {
		return err
	}
	parts := splitHTML(renderMarkdown(text), partLimit)
	if len(parts) == 0 {
		return fmt.Errorf("telegram: edit message %d in chat %s: text is empty", id, chat)
	}
	p := tgbotapi.Params{"chat_id": strconv.FormatInt(chat.id, 10), "message_id": strconv.Itoa(id),
		"text": parts[0], "parse_mode": tgbotapi.ModeHTML}
	t, err := a.outbound(ctx, chat)
	if err != nil {
		return err
	}
	defer t.leave()
	err = a.htmlOrPlain(chat, p, "text", func() error {
		return a.withRetry(ctx, "editMessageText", func() error {
			_, err := t.call(ctx, a, "editMessageText", p)
			return err
		})
	})
	if err != nil && !isNotModified(err) {
		return fmt.Errorf("telegram: edit message %d in chat %s: %w", id, chat, err)
	}
	return nil
}

// Typing shows "typing…" for about five seconds. It is cosmetic: API and
// transport failures are logged, not returned (only an invalid chatID is,
// and channels.ErrPaced when outbound pacing dropped it).
// When the server rejects the method itself (it lacks it, or refuses it
// for reasons not tied to one chat) the adapter logs that once and stops
// calling it.
func (a *Adapter) Typing(ctx context.Context, chatID string) error {
	if a.typingOff.Load() {
		return nil
	}
	chat, err := parseChatID(chatID)
	if err != nil {
		return err
	}
	p := chat.params()
	p["action"] = tgbotapi.ChatTyping
	t, err := a.cosmetic(ctx, chat)
	if err != nil {
		return err
	}
	defer t.leave()
	_, err = t.call(ctx, a, "sendChatAction", p) // the result is `true`, not a Message
	if err == nil || ctx.Err() != nil {
		return nil
	}
	if isPaced(err) {
		return err
	}
	e, api := asAPIError(err)
	switch {
	case !api, e.Code == http.StatusTooManyRequests, e.Code >= 500:
		a.log.Debug("telegram: typing indicator failed", "chat", chat.String(), "err", err)
	case chatSpecific(e):
		a.log.Debug("telegram: typing indicator refused for chat", "chat", chat.String(), "err", err)
	default:
		if !a.typingOff.Swap(true) {
			a.log.Warn("telegram: the server rejects sendChatAction; typing indicator disabled", "err", err)
		}
	}
	return nil
}

// chatSpecific reports a refusal that concerns one chat (blocked by the
// user, chat gone, topic closed) rather than the method.
func chatSpecific(e *tgbotapi.Error) bool {
	d := strings.ToLower(e.Message)
	return e.Code == http.StatusForbidden || strings.Contains(d, "chat") || strings.Contains(d, "topic") || strings.Contains(d, "thread")
}

// React sets an emoji reaction on a message. Telegram accepts only its own
// list of reaction emoji; others fail with an error that says so.
func (a *Adapter) React(ctx context.Context, chatID, messageID, emoji string) error {
	if a.reactOff.Load() {
		return ErrReactionsUnsupported
	}
	chat, id, err := parseMessageRef(chatID, messageID)
	if err != nil {
		return err
	}
	emoji = strings.ReplaceAll(strings.TrimSpace(emoji), "\uFE0F", "") // Telegram's list has no variation selectors
	if emoji == "" {
		return errors.New("telegram: react: empty emoji")
	}
	reaction, _ := json.Marshal([]map[string]string{{"type": "emoji", "emoji": emoji}})
	p := tgbotapi.Params{"chat_id": strconv.FormatInt(chat.id, 10), "message_id": strconv.Itoa(id), "reaction": string(reaction)}
	t, err := a.cosmetic(ctx, chat)
	if err != nil {
		return err
	}
	defer t.leave()
	err = a.withRetry(ctx, "setMessageReaction", func() error {
		_, err := t.call(ctx, a, "setMessageReaction", p)
		return err
	})
	if err == nil || isPaced(err) {
		return err
	}
	if lacksMethod(err) {
		if !a.reactOff.Swap(true) {
			a.log.Warn("telegram: the server lacks setMessageReaction; reactions disabled", "err", err)
		}
		return fmt.Errorf("%w: %v", ErrReactionsUnsupported, err)
	}
	if !a.reactLogged.Swap(true) {
		a.log.Warn("telegram: reaction failed (further reaction failures are only returned)", "chat", chat.String(), "err", err)
	}
	if e, ok := asAPIError(err); ok && strings.Contains(e.Message, "REACTION_INVALID") {
		return fmt.Errorf("telegram: react with %q: Telegram does not allow this emoji as a reaction: %w", emoji, err)
	}
	return fmt.Errorf("telegram: react to message %d in chat %s: %w", id, chat, err)
}

// SendFile sends a local file or a URL as a photo or a document, with the
// caption rendered like a message (plain text if it is too long for HTML).
func (a *Adapter) SendFile(ctx context.Context, chatID string, f channels.OutboundFile) (string, error) {
	chat, err := parseChatID(chatID)
	if err != nil {
		return "", err
	}
	if (f.Path == "") == (f.URL == "") {
		return "", errors.New("telegram: send file: set exactly one of Path and URL")
	}
	method, field := "sendDocument", "document"
	if f.Photo {
		method, field = "sendPhoto", "photo"
	}
	p := chat.params()
	if strings.TrimSpace(f.Caption) != "" {
		if parts := splitHTML(renderMarkdown(f.Caption), captionLimit); len(parts) == 1 {
			p["caption"], p["parse_mode"] = parts[0], tgbotapi.ModeHTML
		} else {
			p["caption"] = truncateUTF16(f.Caption, captionLimit)
		}
	}
	var files []tgbotapi.RequestFile
	if f.Path != "" {
		if st, err := os.Stat(f.Path); err != nil {
			return "", fmt.Errorf("telegram: send file: %w", err)
		} else if st.IsDir() {
			return "", fmt.Errorf("telegram: send file: %s is a directory", f.Path)
		}
		files = []tgbotapi.RequestFile{{Name: field, Data: tgbotapi.FilePath(f.Path)}}
	} else {
		p[field] = f.URL
	}
	t, err := a.outbound(ctx, chat)
	if err != nil {
		return "", err
	}
	defer t.leave()
	var id string
	err = a.htmlOrPlain(chat, p, "caption", func() error {
		return a.withRetry(ctx, method, func() error {
			var raw []byte
			var err error
			if files != nil {
				raw, err = t.upload(ctx, a, method, p, files)
			} else {
				raw, err = t.call(ctx, a, method, p)
			}
			if err != nil {
				return err
			}
			id, err = sentID(raw)
			return err
		})
	})
	if err != nil {
		return "", fmt.Errorf("telegram: send file to chat %s: %w", chat, err)
	}
	return id, nil
}

// truncateUTF16 cuts s to at most n UTF-16 units, marking the cut with "…".
func truncateUTF16(s string, n int) string {
	if tghtml.UTF16Len(s) <= n {
		return s
	}
	units := 0
	for i, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if units+w > n-1 {
			return s[:i] + "…"
		}
		units += w
	}
	return s
}
