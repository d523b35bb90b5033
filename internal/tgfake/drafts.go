package tgfake

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
)

// Draft is a successful sendMessageDraft call: a message being written,
// shown to the user as an animated draft (Bot API 9.3; private chats only).
// A draft is not a message: it gets no message id and is not in Sent.
type Draft struct {
	ChatID          int64
	DraftID         int64 // non-zero; calls with the same id animate one draft
	MessageThreadID int
	Text            string // as sent; empty shows a "Thinking…" placeholder
	ParseMode       string
}

// Drafts returns the successful sendMessageDraft calls, in order.
func (f *Fake) Drafts() []Draft {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.drafts)
}

// WaitDrafts waits until at least n drafts were shown and returns them.
func (f *Fake) WaitDrafts(ctx context.Context, n int) ([]Draft, error) {
	err := f.wait(ctx, fmt.Sprintf("%d drafts", n), func() bool { return len(f.drafts) >= n })
	return f.Drafts(), err
}

// sendMessageDraft serves sendMessageDraft as the Bot API documents it:
// chat_id of a private chat (anything else is refused with Telegram's
// TEXTDRAFT_PEER_INVALID), a non-zero integer draft_id, text of 0-4096
// characters after entity parsing, optional parse_mode, entities (accepted,
// not checked) and message_thread_id.
func (f *Fake) sendMessageDraft(_ *http.Request, p url.Values) (any, *apiError) {
	chat, aerr := chatID(p)
	if aerr != nil {
		return nil, aerr
	}
	f.mu.Lock()
	typ, _ := f.chatLocked(chat)["type"].(string)
	f.mu.Unlock()
	if typ != "private" {
		return nil, &apiError{code: http.StatusBadRequest, description: "Bad Request: TEXTDRAFT_PEER_INVALID"}
	}
	draft, err := strconv.ParseInt(p.Get("draft_id"), 10, 64)
	if err != nil || draft == 0 {
		return nil, badRequest("invalid draft_id: must be a non-zero integer")
	}
	text, mode := p.Get("text"), p.Get("parse_mode")
	if _, aerr := checkText(text, mode, MaxTextUnits, "message is too long"); aerr != nil {
		return nil, aerr
	}
	thread, _ := strconv.Atoi(p.Get("message_thread_id"))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drafts = append(f.drafts, Draft{ChatID: chat, DraftID: draft, MessageThreadID: thread, Text: text, ParseMode: mode})
	f.notifyLocked()
	return true, nil
}
