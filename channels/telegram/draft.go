package telegram

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/switchboard-gateway/switchboard/channels"
)

// Draft shows text (Markdown, as the model writes it) as the animated draft
// draftID in a private chat, with Telegram's sendMessageDraft (Bot API 9.3;
// tgbotapi v5.5.1 predates it, so the call is made raw). A text longer than
// one message shows its last part: the one being written. An empty text
// shows Telegram's "Thinking…" placeholder.
//
// Groups have no drafts: Draft returns channels.ErrNoDrafts for them
// without calling Telegram, and also when Telegram refuses the chat
// (TEXTDRAFT_PEER_INVALID) or the Bot API server lacks the method (then
// for every chat from then on). Drafts are paced like other calls; a
// draft made with channels.PriorityPreview is dropped (channels.ErrPaced)
// rather than made to wait.
func (a *Adapter) Draft(ctx context.Context, chatID string, draftID int64, text string) error {
	chat, err := parseChatID(chatID)
	if err != nil {
		return err
	}
	if chat.id < 0 || a.draftsOff.Load() {
		return fmt.Errorf("telegram: draft in chat %s: %w", chat, channels.ErrNoDrafts)
	}
	if draftID == 0 {
		return fmt.Errorf("telegram: draft in chat %s: the draft id must not be 0", chat)
	}
	p := chat.params()
	p["draft_id"] = strconv.FormatInt(draftID, 10)
	p["text"] = ""
	if parts := splitHTML(renderMarkdown(text), partLimit); len(parts) > 0 {
		p["text"], p["parse_mode"] = parts[len(parts)-1], tgbotapi.ModeHTML
	}
	t, err := a.outbound(ctx, chat)
	if err != nil {
		return err
	}
	defer t.leave()
	err = a.htmlOrPlain(chat, p, "text", func() error {
		return a.withRetry(ctx, "sendMessageDraft", func() error {
			_, err := t.call(ctx, a, "sendMessageDraft", p)
			return err
		})
	})
	switch {
	case err == nil:
		return nil
	case lacksMethod(err):
		if !a.draftsOff.Swap(true) {
			a.log.Warn("telegram: the server lacks sendMessageDraft; previews use edits", "err", err)
		}
		return fmt.Errorf("telegram: draft in chat %s: %w: %w", chat, channels.ErrNoDrafts, err)
	case noDraftsHere(err):
		return fmt.Errorf("telegram: draft in chat %s: %w: %w", chat, channels.ErrNoDrafts, err)
	}
	return fmt.Errorf("telegram: draft in chat %s: %w", chat, err)
}

// noDraftsHere reports Telegram's refusal of drafts in a chat.
func noDraftsHere(err error) bool {
	e, ok := asAPIError(err)
	return ok && strings.Contains(e.Message, "TEXTDRAFT_PEER_INVALID")
}
