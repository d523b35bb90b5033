package slack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/switchboard-gateway/switchboard/channels"
)

const (
	// partLimit is the length of one message's text: Slack truncates text
	// past 40,000 characters and advises keeping it under 4,000.
	partLimit = 4000
	// sectionLimit is Block Kit's limit on a section's text (Ask's last part).
	sectionLimit = 3000
	// maxAttempts bounds the tries of one Web API call (429, 5xx, network).
	maxAttempts = 5
	// firstBackoff and maxBackoff shape the backoff after a 5xx or a
	// network error.
	firstBackoff = 500 * time.Millisecond
	maxBackoff   = 8 * time.Second
	// maxUpload caps a file the bot uploads.
	maxUpload = 50 << 20
)

// parts renders Markdown to mrkdwn and splits it at max.
func parts(md string, max int) []string {
	var out []string
	for _, p := range Split(Render(md), max) {
		if strings.TrimSpace(p) != "" {
			out = append(out, p)
		}
	}
	return out
}

// target is where a message to chatID goes: the conversation and, for a
// thread, its ts. Without a thread in the ChatID, a reply to a message
// in a channel goes into that message's thread; in a DM it stays in the
// main timeline.
func target(chatID, replyTo string) (channel, thread string) {
	channel, thread = splitChat(chatID)
	if thread == "" && replyTo != "" && !strings.HasPrefix(channel, "D") {
		thread, _, _ = strings.Cut(replyTo, ":") // an edit's id is "<ts>:edit:<ts>"
	}
	return channel, thread
}

// Send posts m.Text rendered to mrkdwn, split into parts of at most 4,000
// characters, in the chat's thread. It returns the last part's ts. Parts
// of one chat go out in order; parts m.Parts says were sent are skipped.
func (a *Adapter) Send(ctx context.Context, m channels.Outbound) (string, error) {
	ps := parts(m.Text, partLimit)
	if len(ps) == 0 {
		return "", fmt.Errorf("slack: send to %s: empty message", m.ChatID)
	}
	return a.sendParts(ctx, m, ps, nil)
}

// Ask sends m like Send, with the buttons under the last part (a section
// block and an actions block). A press arrives from Run as an Inbound
// with Action set to the button's Action. Actions must be 1-2,000
// characters (Slack's value) and different from each other; labels are
// cut at 75 characters. Actions starting with "deny" or "stop" get a red
// button, the first of the others the primary colour.
func (a *Adapter) Ask(ctx context.Context, m channels.Outbound, buttons []channels.Button) (string, error) {
	blocks, err := buttonBlocks(buttons)
	if err != nil {
		return "", fmt.Errorf("slack: ask in %s: %w", m.ChatID, err)
	}
	ps := parts(m.Text, sectionLimit)
	if len(ps) == 0 {
		return "", fmt.Errorf("slack: ask in %s: empty message", m.ChatID)
	}
	return a.sendParts(ctx, m, ps, blocks)
}

// Slack's limits on buttons.
const (
	maxValue       = 2000
	maxButtonLabel = 75
	maxButtons     = 25
)

// buttonBlocks checks buttons and lays them out in one actions block.
func buttonBlocks(buttons []channels.Button) (*slack.ActionBlock, error) {
	switch {
	case len(buttons) == 0:
		return nil, errors.New("no buttons")
	case len(buttons) > maxButtons:
		return nil, fmt.Errorf("%d buttons; Slack shows at most %d", len(buttons), maxButtons)
	}
	seen := map[string]bool{}
	var elems []slack.BlockElement
	primary := false
	for i, b := range buttons {
		switch {
		case b.Action == "" || len(b.Action) > maxValue:
			return nil, fmt.Errorf("button %d: action must be 1-%d characters", i+1, maxValue)
		case seen[b.Action]:
			return nil, fmt.Errorf("button %d: action %q is used twice", i+1, b.Action)
		}
		seen[b.Action] = true
		label := b.Label
		if label == "" {
			label = b.Action
		}
		if utf8.RuneCountInString(label) > maxButtonLabel {
			label = string([]rune(label)[:maxButtonLabel-1]) + "…"
		}
		btn := slack.NewButtonBlockElement("sb_"+strconv.Itoa(i), b.Action, slack.NewTextBlockObject(slack.PlainTextType, label, true, false))
		switch {
		case strings.HasPrefix(b.Action, "deny") || strings.HasPrefix(b.Action, "stop"):
			btn.Style = slack.StyleDanger
		case !primary:
			btn.Style, primary = slack.StylePrimary, true
		}
		elems = append(elems, btn)
	}
	return slack.NewActionBlock("sb_actions", elems...), nil
}

// sendParts posts parts in order in m's chat, the actions under the last
// one. Parts the record says were sent before (a crash cut the reply off)
// are skipped; each part is recorded as soon as Slack accepted it.
func (a *Adapter) sendParts(ctx context.Context, m channels.Outbound, ps []string, actions *slack.ActionBlock) (string, error) {
	channel, thread := target(m.ChatID, m.ReplyTo)
	unlock, err := a.sends.lock(ctx, m.ChatID)
	if err != nil {
		return "", fmt.Errorf("slack: send to %s: %w", m.ChatID, err)
	}
	defer unlock()
	var last string
	for i, p := range ps {
		if m.Parts != nil {
			if id, ok := m.Parts.Sent(i); ok {
				last = id
				continue
			}
		}
		opts := []slack.MsgOption{slack.MsgOptionText(p, false), slack.MsgOptionDisableLinkUnfurl()}
		if thread != "" {
			opts = append(opts, slack.MsgOptionTS(thread))
		}
		if actions != nil && i == len(ps)-1 {
			section := slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, p, false, false), nil, nil)
			opts = append(opts, slack.MsgOptionBlocks(section, actions))
		}
		var ts string
		err := a.retry(ctx, "chat.postMessage", func() error {
			var err error
			_, ts, err = a.api.PostMessageContext(ctx, channel, opts...)
			return err
		})
		if err != nil {
			return last, a.wrap(err, "send part %d/%d to %s", i+1, len(ps), m.ChatID)
		}
		last = ts
		if m.Parts != nil {
			m.Parts.Confirmed(ctx, i, ts)
		}
	}
	a.joinThread(m.ChatID) // a reply there needs no mention from now on
	return last, nil
}

// Edit replaces a sent message's text (chat.update). A text over the limit
// is cut at the first part and marked with an ellipsis.
func (a *Adapter) Edit(ctx context.Context, chatID, messageID, text string) error {
	ps := parts(text, partLimit)
	if len(ps) == 0 {
		return fmt.Errorf("slack: edit %s in %s: empty text", messageID, chatID)
	}
	content := ps[0]
	if len(ps) > 1 {
		content += "\n…"
	}
	channel, _ := splitChat(chatID)
	err := a.retry(ctx, "chat.update", func() error {
		_, _, _, err := a.api.UpdateMessageContext(ctx, channel, messageID, slack.MsgOptionText(content, false))
		return err
	})
	return a.wrap(err, "edit %s in %s", messageID, chatID)
}

// Fits reports whether text goes out as one message (channels.Fitter).
func (a *Adapter) Fits(text string) bool { return len(parts(text, partLimit)) == 1 }

// Delete deletes a message the bot sent (chat.delete).
func (a *Adapter) Delete(ctx context.Context, chatID, messageID string) error {
	channel, _ := splitChat(chatID)
	err := a.retry(ctx, "chat.delete", func() error {
		_, _, err := a.api.DeleteMessageContext(ctx, channel, messageID)
		return err
	})
	return a.wrap(err, "delete %s in %s", messageID, chatID)
}

// React adds an emoji to a message (reactions.add). emoji is a Slack
// emoji name ("thumbsup", ":tada:") or one of the common Unicode emoji.
func (a *Adapter) React(ctx context.Context, chatID, messageID, emoji string) error {
	name, ok := emojiName(emoji)
	if !ok {
		return fmt.Errorf("slack: react to %s in %s: %q is not a Slack emoji name (such as thumbsup or white_check_mark)", messageID, chatID, emoji)
	}
	channel, _ := splitChat(chatID)
	ts, _, _ := strings.Cut(messageID, ":") // an edit's id is "<ts>:edit:<ts>"
	err := a.retry(ctx, "reactions.add", func() error {
		err := a.api.AddReactionContext(ctx, name, slack.NewRefToMessage(channel, ts))
		var se slack.SlackErrorResponse
		if errors.As(err, &se) && se.Err == "already_reacted" {
			return nil
		}
		return err
	})
	return a.wrap(err, "react to %s in %s", messageID, chatID)
}

// unicodeEmoji names the Unicode emoji models use most.
var unicodeEmoji = map[string]string{
	"👍": "thumbsup", "👎": "thumbsdown", "❤️": "heart", "❤": "heart", "😂": "joy", "🎉": "tada", "✅": "white_check_mark",
	"👀": "eyes", "🔥": "fire", "🙏": "pray", "😊": "blush", "🤔": "thinking_face", "👌": "ok_hand", "💯": "100",
	"🚀": "rocket", "❌": "x", "⚠️": "warning", "⚠": "warning", "😄": "smile", "🙂": "slightly_smiling_face", "👋": "wave",
	"✨": "sparkles", "💡": "bulb", "📌": "pushpin", "⏳": "hourglass_flowing_sand", "🤝": "handshake", "😢": "cry", "😮": "open_mouth",
}

// emojiName returns the Slack name of emoji.
func emojiName(emoji string) (string, bool) {
	e := strings.TrimSpace(emoji)
	if n, ok := unicodeEmoji[e]; ok {
		return n, true
	}
	e = strings.Trim(e, ":")
	if e == "" {
		return "", false
	}
	for _, r := range e {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '+' || r == '\'') {
			return "", false
		}
	}
	return e, true
}

// SendFile uploads a local file into the chat's thread, with the caption
// as its comment (the external upload flow: files.getUploadURLExternal,
// the upload, files.completeUploadExternal), or posts a URL as text. It
// returns the file's id.
func (a *Adapter) SendFile(ctx context.Context, chatID string, f channels.OutboundFile) (string, error) {
	switch {
	case (f.Path == "") == (f.URL == ""):
		return "", fmt.Errorf("slack: send file to %s: exactly one of path and url must be set", chatID)
	case f.URL != "":
		return a.Send(ctx, channels.Outbound{ChatID: chatID, Text: strings.TrimSpace(f.Caption + "\n" + f.URL)})
	}
	data, err := channels.ReadUpload(f.Path, maxUpload, "Slack's upload limit")
	if err != nil {
		return "", fmt.Errorf("slack: send file to %s: %w", chatID, err)
	}
	channel, thread := splitChat(chatID)
	name := filepath.Base(f.Path)
	caption := ""
	if strings.TrimSpace(f.Caption) != "" {
		caption = Render(f.Caption)
	}
	unlock, err := a.sends.lock(ctx, chatID)
	if err != nil {
		return "", fmt.Errorf("slack: send file to %s: %w", chatID, err)
	}
	defer unlock()
	var sum *slack.FileSummary
	err = a.retry(ctx, "files.upload", func() error {
		var err error
		sum, err = a.api.UploadFileContext(ctx, slack.UploadFileParameters{
			Reader: strings.NewReader(string(data)), FileSize: len(data), Filename: name, Title: name,
			InitialComment: caption, Channel: channel, ThreadTimestamp: thread,
		})
		return err
	})
	if err != nil {
		return "", a.wrap(err, "send file %s to %s", name, chatID)
	}
	return sum.ID, nil
}

// thinkingStatus is the assistant thread status Typing shows.
const thinkingStatus = "is thinking…"

// Typing shows "is thinking…" in the chat's thread with
// assistant.threads.setStatus, which Slack offers to AI apps (the
// assistant:write scope); the status clears when the reply is posted.
// Where it is not available (no thread, no scope, not an assistant
// thread), Typing does nothing and returns nil. It does not retry: the
// router calls it again every few seconds.
func (a *Adapter) Typing(ctx context.Context, chatID string) error {
	channel, thread := splitChat(chatID)
	if thread == "" || a.noStatus.Load() {
		return nil
	}
	a.mu.Lock()
	skip := a.noStatusIn[chatID]
	a.mu.Unlock()
	if skip {
		return nil
	}
	err := a.api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{
		ChannelID: channel, ThreadTS: thread, Status: thinkingStatus,
	})
	var se slack.SlackErrorResponse
	var rl *slack.RateLimitedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		switch se.Err {
		case "missing_scope", "unknown_method", "not_allowed_token_type", "method_deprecated":
			a.noStatus.Store(true) // not for this app at all
		default:
			a.mu.Lock()
			if len(a.noStatusIn) > 1000 {
				clear(a.noStatusIn)
			}
			a.noStatusIn[chatID] = true // not an assistant thread
			a.mu.Unlock()
		}
		a.log.Debug("slack: no thinking status here", "chat", chatID, "err", se.Err)
		return nil
	case errors.As(err, &rl):
		return fmt.Errorf("slack: typing in %s: %w", chatID, channels.ErrPaced)
	}
	return a.wrap(err, "typing in %s", chatID)
}

// wrap adds context to err, with the tokens removed from its text and its
// chain kept.
func (a *Adapter) wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return &redactedError{msg: a.redact("slack: " + fmt.Sprintf(format, args...) + ": " + err.Error()), err: err}
}

// redactedError hides secrets in an error's text while keeping the chain
// for errors.Is and errors.As.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// retry runs call until it succeeds. A 429 waits Retry-After out (in this
// goroutine only: other chats go on), unless the call is a preview
// (channels.PriorityPreview), which fails with channels.ErrPaced, or the
// wait is longer than MaxRateLimitWait; a 5xx or a network error backs off
// exponentially; Slack's error answers (ok: false) return at once. An
// error still worth retrying when the attempts run out is marked
// channels.ErrUnavailable, so the outbox keeps the reply.
func (a *Adapter) retry(ctx context.Context, op string, call func() error) error {
	backoff := firstBackoff
	for attempt := 1; ; attempt++ {
		err := call()
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
		case rateLimited && wait > a.maxWait:
			return channels.UnavailableFor(err, wait) // the outbox waits it out
		case !ok:
			return err
		case attempt == maxAttempts:
			return channels.Unavailable(err)
		}
		a.log.Warn("slack: retrying", "op", op, "attempt", attempt, "wait", wait, "err", a.redact(err.Error()))
		if err := a.sleep(ctx, wait); err != nil {
			return channels.Unavailable(err)
		}
		if !rateLimited {
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// retryWait says whether err is worth another try, and after how long.
func retryWait(err error, backoff time.Duration) (wait time.Duration, rateLimited, ok bool) {
	var rl *slack.RateLimitedError
	var sc slack.StatusCodeError
	var se slack.SlackErrorResponse
	var ne net.Error
	switch {
	case errors.As(err, &rl):
		return max(rl.RetryAfter, 0), true, true
	case errors.As(err, &sc):
		return backoff, false, sc.Code >= 500
	case errors.As(err, &se):
		switch se.Err {
		case "internal_error", "fatal_error", "service_unavailable", "request_timeout":
			return backoff, false, true
		}
		return 0, false, false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return 0, false, false
	case errors.As(err, &ne):
		return backoff, false, true
	}
	// Other transport errors (a connection reset, EOF).
	return backoff, false, isTransport(err)
}

// isTransport reports whether err is a failure on the way to Slack
// rather than an answer from it.
func isTransport(err error) bool {
	var oe *net.OpError
	s := err.Error()
	return errors.As(err, &oe) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(s, "connection reset") || strings.Contains(s, "connection refused") || strings.Contains(s, "EOF")
}
