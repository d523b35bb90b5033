package discord

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/switchboard-gateway/switchboard/channels"
)

const (
	// maxAttempts bounds the tries of one REST call (429, 5xx, network).
	maxAttempts = 5
	// maxRateLimitWait is the longest retry_after we wait out; beyond it the
	// call fails and the caller decides.
	maxRateLimitWait = time.Minute
	// firstBackoff and maxBackoff shape the exponential backoff after a 5xx
	// or a network error.
	firstBackoff = 500 * time.Millisecond
	maxBackoff   = 8 * time.Second
	// maxUpload is Discord's default attachment limit for bots.
	maxUpload = 10 << 20
)

// messageCreate is the body of POST /channels/{id}/messages. discordgo's
// MessageSend has no nonce; with enforce_nonce Discord returns the existing
// message for a repeated nonce, which makes our retries after a lost
// response (5xx, timeout) exactly-once.
type messageCreate struct {
	Content         string                            `json:"content,omitempty"`
	Nonce           string                            `json:"nonce,omitempty"`
	EnforceNonce    bool                              `json:"enforce_nonce,omitempty"`
	Reference       *discordgo.MessageReference       `json:"message_reference,omitempty"`
	AllowedMentions *discordgo.MessageAllowedMentions `json:"allowed_mentions,omitempty"`
	Components      []discordgo.MessageComponent      `json:"components,omitempty"`
}

// allowedMentions lets replies ping users the text names and the author
// replied to, but never @everyone, @here or roles, whatever the model wrote.
var allowedMentions = &discordgo.MessageAllowedMentions{
	Parse:       []discordgo.AllowedMentionType{discordgo.AllowedMentionTypeUsers},
	RepliedUser: true,
}

type upload struct {
	name, contentType string
	data              []byte
}

// Send posts m.Text, split into parts below Discord's 2000-character limit;
// the first part replies to m.ReplyTo. It returns the last part's id. Parts
// of one chat go out in order; other chats are not held up by this one's
// rate limit.
func (a *Adapter) Send(ctx context.Context, m channels.Outbound) (string, error) {
	parts := splitMessage(m.Text, splitLimit)
	if len(parts) == 0 {
		return "", fmt.Errorf("discord: send to %s: empty message", m.ChatID)
	}
	unlock, err := a.sends.lock(ctx, m.ChatID)
	if err != nil {
		return "", fmt.Errorf("discord: send to %s: %w", m.ChatID, err)
	}
	defer unlock()
	return a.sendParts(ctx, m.ChatID, m.ReplyTo, parts, lastPart{record: m.Parts})
}

// Discord's limits on message buttons.
const (
	maxCustomID      = 100 // characters of a custom_id
	maxButtonLabel   = 80  // characters of a label
	maxButtonsPerRow = 5
	maxButtonRows    = 5
)

// Ask sends m like Send, with the buttons under the last part, five to an
// action row. A press arrives from Run as an Inbound with Action set to
// the button's Action. Every Action must be 1-100 characters (Discord's
// custom_id) and different from the others; labels over 80 characters are
// cut. Actions starting with "deny" or "stop" get a red button, the others
// the primary colour.
func (a *Adapter) Ask(ctx context.Context, m channels.Outbound, buttons []channels.Button) (string, error) {
	rows, err := buttonRows(buttons)
	if err != nil {
		return "", fmt.Errorf("discord: ask in %s: %w", m.ChatID, err)
	}
	parts := splitMessage(m.Text, splitLimit)
	if len(parts) == 0 {
		return "", fmt.Errorf("discord: ask in %s: empty message", m.ChatID)
	}
	unlock, err := a.sends.lock(ctx, m.ChatID)
	if err != nil {
		return "", fmt.Errorf("discord: ask in %s: %w", m.ChatID, err)
	}
	defer unlock()
	return a.sendParts(ctx, m.ChatID, m.ReplyTo, parts, lastPart{components: rows, record: m.Parts})
}

// buttonRows checks buttons and lays them out in action rows.
func buttonRows(buttons []channels.Button) ([]discordgo.MessageComponent, error) {
	switch {
	case len(buttons) == 0:
		return nil, errors.New("no buttons")
	case len(buttons) > maxButtonsPerRow*maxButtonRows:
		return nil, fmt.Errorf("%d buttons, Discord shows at most %d", len(buttons), maxButtonsPerRow*maxButtonRows)
	}
	var rows []discordgo.MessageComponent
	var row []discordgo.MessageComponent
	seen := make(map[string]bool, len(buttons))
	for i, b := range buttons {
		label := strings.TrimSpace(b.Label)
		n := utf8.RuneCountInString(b.Action)
		switch {
		case label == "":
			return nil, fmt.Errorf("button %d has no label", i+1)
		case n == 0:
			return nil, fmt.Errorf("button %d (%q) has no action", i+1, label)
		case n > maxCustomID:
			return nil, fmt.Errorf("button %d (%q): action is %d characters, Discord allows at most %d", i+1, label, n, maxCustomID)
		case seen[b.Action]:
			return nil, fmt.Errorf("button %d (%q): action %q is used twice", i+1, label, b.Action)
		}
		seen[b.Action] = true
		if utf8.RuneCountInString(label) > maxButtonLabel {
			label = string([]rune(label)[:maxButtonLabel-1]) + "…"
		}
		style := discordgo.PrimaryButton
		if strings.HasPrefix(b.Action, "deny") || strings.HasPrefix(b.Action, "stop") {
			style = discordgo.DangerButton
		}
		row = append(row, discordgo.Button{Label: label, Style: style, CustomID: b.Action})
		if len(row) == maxButtonsPerRow || i == len(buttons)-1 {
			rows = append(rows, discordgo.ActionsRow{Components: row})
			row = nil
		}
	}
	return rows, nil
}

// lastPart is what goes with the last part of a message: a file, buttons;
// and the record of the parts sent (nil: none).
type lastPart struct {
	file       *upload
	components []discordgo.MessageComponent
	record     channels.Parts
}

// sendParts posts parts in order, with last on the last one. Parts the
// record says were sent before (a crash cut the message off) are skipped;
// each part sent is recorded as soon as Discord accepted it. (The nonce
// covers the moment between the two: a part sent again returns the
// message Discord already has.)
func (a *Adapter) sendParts(ctx context.Context, chatID, replyTo string, parts []string, last lastPart) (string, error) {
	var lastID string
	for i, p := range parts {
		if last.record != nil {
			if id, ok := last.record.Sent(i); ok {
				lastID = id
				continue
			}
		}
		body := messageCreate{Content: p, Nonce: partNonce(ctx, chatID, p, i), EnforceNonce: true, AllowedMentions: allowedMentions}
		if i == 0 && replyTo != "" {
			no := false
			body.Reference = &discordgo.MessageReference{MessageID: replyTo, ChannelID: chatID, FailIfNotExists: &no}
		}
		var f *upload
		if i == len(parts)-1 {
			f, body.Components = last.file, last.components
		}
		msg, err := a.postMessage(ctx, chatID, body, f)
		if err != nil {
			return lastID, a.redact.wrap(err, "discord: send part %d/%d to %s", i+1, len(parts), chatID)
		}
		lastID = msg.ID
		if last.record != nil {
			last.record.Confirmed(ctx, i, lastID)
		}
	}
	return lastID, nil
}

func (a *Adapter) postMessage(ctx context.Context, chatID string, body messageCreate, file *upload) (*discordgo.Message, error) {
	endpoint := discordgo.EndpointChannelMessages(chatID)
	var resp []byte
	err := a.retry(ctx, "send message", func(opts ...discordgo.RequestOption) error {
		var err error
		if file == nil {
			resp, err = a.s.RequestWithBucketID(http.MethodPost, endpoint, body, endpoint, opts...)
			return err
		}
		ct, b, err := discordgo.MultipartBodyWithJSON(body, []*discordgo.File{{Name: file.name, ContentType: file.contentType, Reader: bytes.NewReader(file.data)}})
		if err != nil {
			return permanent{err}
		}
		resp, err = a.s.RequestWithLockedBucket(http.MethodPost, endpoint, ct, b, a.s.Ratelimiter.LockBucket(endpoint), 0, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	var msg discordgo.Message
	if err := json.Unmarshal(resp, &msg); err != nil {
		return nil, fmt.Errorf("decode sent message: %w", err)
	}
	return &msg, nil
}

// Typing shows the typing indicator for about 10 s. It does not retry: the
// router calls it again every few seconds.
func (a *Adapter) Typing(ctx context.Context, chatID string) error {
	err := a.s.ChannelTyping(chatID, discordgo.WithContext(ctx), discordgo.WithRetryOnRatelimit(false), discordgo.WithRestRetries(0))
	return a.redact.wrap(err, "discord: typing in %s", chatID)
}

// React adds emoji (a unicode emoji, or name:id for a custom one) to a
// message.
func (a *Adapter) React(ctx context.Context, chatID, messageID, emoji string) error {
	err := a.retry(ctx, "react", func(opts ...discordgo.RequestOption) error {
		return a.s.MessageReactionAdd(chatID, messageID, emoji, opts...)
	})
	return a.redact.wrap(err, "discord: react to %s in %s", messageID, chatID)
}

// Edit replaces a sent message's text. A text over the limit is cut, with
// an open code block closed, and marked with an ellipsis.
func (a *Adapter) Edit(ctx context.Context, chatID, messageID, text string) error {
	parts := splitMessage(text, splitLimit)
	if len(parts) == 0 {
		return fmt.Errorf("discord: edit %s in %s: empty text", messageID, chatID)
	}
	content := parts[0]
	if len(parts) > 1 {
		content += "\n…"
	}
	err := a.retry(ctx, "edit", func(opts ...discordgo.RequestOption) error {
		e := discordgo.NewMessageEdit(chatID, messageID).SetContent(content)
		e.AllowedMentions = allowedMentions
		_, err := a.s.ChannelMessageEditComplex(e, opts...)
		return err
	})
	return a.redact.wrap(err, "discord: edit %s in %s", messageID, chatID)
}

// Fits reports whether text is sent as one message (channels.Fitter).
func (a *Adapter) Fits(text string) bool { return len(splitMessage(text, splitLimit)) == 1 }

// Delete deletes a message the bot sent (a preview or a progress line that
// no reply took over).
func (a *Adapter) Delete(ctx context.Context, chatID, messageID string) error {
	err := a.retry(ctx, "delete", func(opts ...discordgo.RequestOption) error {
		return a.s.ChannelMessageDelete(chatID, messageID, opts...)
	})
	return a.redact.wrap(err, "discord: delete %s in %s", messageID, chatID)
}

// SendFile uploads a local file, with the caption as its message text, or
// posts an URL, which Discord previews.
func (a *Adapter) SendFile(ctx context.Context, chatID string, f channels.OutboundFile) (string, error) {
	switch {
	case (f.Path == "") == (f.URL == ""):
		return "", fmt.Errorf("discord: send file to %s: exactly one of path and url must be set", chatID)
	case f.URL != "":
		return a.Send(ctx, channels.Outbound{ChatID: chatID, Text: strings.TrimSpace(f.Caption + "\n" + f.URL)})
	}
	data, err := channels.ReadUpload(f.Path, maxUpload, "Discord's upload limit")
	if err != nil {
		return "", fmt.Errorf("discord: send file to %s: %w", chatID, err)
	}
	name := filepath.Base(f.Path)
	file := &upload{name: name, contentType: mime.TypeByExtension(strings.ToLower(filepath.Ext(name))), data: data}
	parts := splitMessage(f.Caption, splitLimit)
	if len(parts) == 0 {
		parts = []string{""}
	}
	unlock, err := a.sends.lock(ctx, chatID)
	if err != nil {
		return "", fmt.Errorf("discord: send file to %s: %w", chatID, err)
	}
	defer unlock()
	return a.sendParts(ctx, chatID, "", parts, lastPart{file: file})
}

// permanent marks an error that retrying cannot fix.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// retry runs call until it succeeds, with discordgo's own retries off: a
// 429 waits out retry_after with the injected sleep (in this goroutine only:
// other chats go on), a 5xx or network error backs off exponentially, other
// errors return at once. An error still worth retrying when the attempts
// run out (or a rate limit longer than we wait) is marked
// channels.ErrUnavailable. A preview (channels.PriorityPreview) does not
// wait out a rate limit: it fails with channels.ErrPaced.
func (a *Adapter) retry(ctx context.Context, op string, call func(opts ...discordgo.RequestOption) error) error {
	backoff := firstBackoff
	for attempt := 1; ; attempt++ {
		err := call(discordgo.WithContext(ctx), discordgo.WithRetryOnRatelimit(false), discordgo.WithRestRetries(0))
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		wait, rateLimited, ok := retryWait(err, backoff)
		switch {
		case rateLimited && channels.PriorityOf(ctx) == channels.PriorityPreview:
			return fmt.Errorf("%w: %w", channels.ErrPaced, err)
		case !ok && rateLimited:
			return channels.UnavailableFor(err, rateLimitWait(err)) // a rate limit longer than we wait out
		case !ok:
			return err
		case attempt == maxAttempts:
			return channels.Unavailable(err) // Discord or the way to it is down: worth trying later
		}
		a.log.Warn("discord: retrying", "op", op, "attempt", attempt, "wait", wait, "err", a.redact.string(err.Error()))
		if err := a.sleep(ctx, wait); err != nil {
			return err
		}
		if !rateLimited {
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// rateLimitWait is the retry_after of a rate limit error (0: none).
func rateLimitWait(err error) time.Duration {
	if rl, ok := errors.AsType[*discordgo.RateLimitError](err); ok && rl.RateLimit != nil && rl.TooManyRequests != nil {
		return rl.RetryAfter
	}
	return 0
}

// retryWait says whether err is worth another try, and after how long.
func retryWait(err error, backoff time.Duration) (wait time.Duration, rateLimited, ok bool) {
	var rl *discordgo.RateLimitError
	var re *discordgo.RESTError
	var p permanent
	switch {
	case errors.As(err, &rl):
		if rl.RateLimit == nil || rl.TooManyRequests == nil || rl.RetryAfter > maxRateLimitWait {
			return 0, true, false
		}
		return rl.RetryAfter, true, true
	case errors.As(err, &re):
		if re.Response != nil && re.Response.StatusCode >= 500 {
			return backoff, false, true
		}
		return 0, false, false
	case errors.As(err, &p), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return 0, false, false
	}
	// Transport errors, and discordgo's untyped error for a 502 once its
	// own retries (off here) are spent.
	return backoff, false, true
}

// partNonce is the nonce of part i of a message to chatID: derived from
// the inbound message it answers (when ctx says which) and the part's text,
// so that the same answer sent again after a restart carries the same
// nonce and Discord returns the message it already has; random otherwise.
func partNonce(ctx context.Context, chatID, text string, i int) string {
	h, ok := channels.ReplyDigest(ctx, chatID, strconv.Itoa(i), text)
	if !ok {
		return newNonce()
	}
	return hex.EncodeToString(h[:12])
}

// newNonce is a random message nonce (Discord allows 25 characters).
func newNonce() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
