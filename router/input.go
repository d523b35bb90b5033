package router

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"unicode/utf8"

	"github.com/switchboard-gateway/switchboard/channels"
)

// keptOf is what the store keeps of a message once its turn answered it
// (agent.Turn.InboxKeep): who wrote it where, for the dashboard, without
// its text, quote and files, which the transcript holds. nil if it
// cannot be encoded: then all of it is kept.
func keptOf(in channels.Inbound) []byte {
	b, err := json.Marshal(channels.Inbound{Channel: in.Channel, ChatID: in.ChatID, ChatType: in.ChatType,
		ChatTitle: in.ChatTitle, MessageID: in.MessageID, Space: in.Space, UserID: in.UserID,
		UserName: in.UserName, DisplayName: in.DisplayName, Mentioned: in.Mentioned, Time: in.Time})
	if err != nil {
		return nil
	}
	return b
}

// tooLongNote is the one sentence a chat gets for a message past the input
// limit (%d: its length, the limit).
const tooLongNote = "That message is %d characters; the limit is %d. Send it as a file or in parts."

// refuseTooLong reports whether in's text is past Config.MaxInputChars; if
// so it tells the chat in one sentence and the message is not stored. An
// attachment's text is not counted: the adapters bound what they extract
// (a text file of at most 64 KB), and a file is what the sentence asks for.
func (r *Router) refuseTooLong(ctx context.Context, in channels.Inbound, log *slog.Logger) bool {
	limit := r.cfg.MaxInputChars
	if limit <= 0 || len(in.Text) <= limit {
		return false
	}
	n := utf8.RuneCountInString(in.Text)
	if n <= limit {
		return false
	}
	log.Info("message past channels.max_input_chars refused, not stored", "message_id", in.MessageID,
		"chars", n, "limit", limit)
	if _, err := r.Send(ctx, in, fmt.Sprintf(tooLongNote, n, limit)); err != nil {
		log.Warn("could not tell the chat its message is too long", "err", err)
	}
	return true
}
