package telegram

import (
	"context"
	"fmt"
	"strconv"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/switchboard-gateway/switchboard/channels"
)

// Fits reports whether text is sent as one message (channels.Fitter).
func (a *Adapter) Fits(text string) bool {
	return len(splitHTML(renderMarkdown(text), partLimit)) == 1
}

// Delete deletes a message the bot sent (a preview or a progress line that
// no reply took over). It is paced like an edit.
func (a *Adapter) Delete(ctx context.Context, chatID, messageID string) error {
	chat, id, err := parseMessageRef(chatID, messageID)
	if err != nil {
		return err
	}
	p := tgbotapi.Params{"chat_id": strconv.FormatInt(chat.id, 10), "message_id": strconv.Itoa(id)}
	t, err := a.outbound(ctx, chat) // in its chat's order, after the sends before it
	if err != nil {
		return err
	}
	defer t.leave()
	err = a.withRetry(ctx, "deleteMessage", func() error {
		_, err := t.call(ctx, a, "deleteMessage", p)
		return err
	})
	if err != nil {
		return fmt.Errorf("telegram: delete message %d in chat %s: %w", id, chat, err)
	}
	return nil
}

var (
	_ channels.Deleter = (*Adapter)(nil)
	_ channels.Fitter  = (*Adapter)(nil)
)
