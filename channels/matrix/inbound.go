package matrix

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/switchboard-gateway/switchboard/channels"
)

// threadSep separates a room id from a thread's root event id in a
// ChatID: "!room:example.org/$root". Event ids start with "$"; room ids
// hold no "/$".
const threadSep = "/"

// chatKey is the ChatID of a room, or of one of its threads.
func chatKey(room id.RoomID, thread id.EventID) string {
	if thread == "" {
		return string(room)
	}
	return string(room) + threadSep + string(thread)
}

// splitChat is chatKey's inverse.
func splitChat(chatID string) (id.RoomID, id.EventID) {
	if i := strings.Index(chatID, threadSep+"$"); i >= 0 {
		return id.RoomID(chatID[:i]), id.EventID(chatID[i+len(threadSep):])
	}
	return id.RoomID(chatID), ""
}

// editedPrefix starts the text of an edited message, as on Telegram.
const editedPrefix = "(edited) "

// message normalises an m.room.message. An edit is a new message (its
// own event id), its text marked; a notice (another bot's) is skipped.
func (a *Adapter) message(ctx context.Context, evt *event.Event) (channels.Inbound, bool) {
	c := evt.Content.AsMessage()
	if c == nil || c.MsgType == event.MsgNotice || c.MsgType == event.MsgVerificationRequest {
		return channels.Inbound{}, false
	}
	text := c.Body
	edit := false
	if c.RelatesTo != nil && c.RelatesTo.Type == event.RelReplace {
		if c.NewContent == nil {
			return channels.Inbound{}, false
		}
		text, edit = c.NewContent.Body, true
	}
	in := channels.Inbound{
		Channel:   Name,
		MessageID: string(evt.ID),
		UserID:    string(evt.Sender),
		UserName:  strings.TrimPrefix(string(evt.Sender), "@"),
		Time:      time.UnixMilli(evt.Timestamp),
	}
	if m, err := a.states.GetMember(ctx, evt.RoomID, evt.Sender); err == nil && m != nil {
		in.DisplayName = m.Displayname
	}
	thread := id.EventID("")
	if c.RelatesTo != nil {
		thread = c.RelatesTo.GetThreadParent()
	}
	in.ChatID = chatKey(evt.RoomID, thread)
	in.ChatType = channels.Group
	if a.isDM(ctx, evt.RoomID) {
		in.ChatType = channels.DM
	}
	if reply := c.GetReplyTo(); reply != "" && (c.RelatesTo == nil || !c.RelatesTo.IsFallingBack) {
		in.Quote = &channels.Quote{MessageID: string(reply), FromBot: a.sentByBot(string(reply))}
	}
	in.Mentioned = in.ChatType == channels.DM || a.mentions(c, text) ||
		(in.Quote != nil && in.Quote.FromBot) || (thread != "" && a.inThread(ctx, in.ChatID))
	if in.ChatType == channels.Group {
		text = a.stripMention(text)
	}
	if c.MsgType.IsMedia() {
		in.Attachments = []channels.Attachment{a.attachment(ctx, c)}
		text = c.GetCaption()
	}
	if edit {
		text = editedPrefix + text
	}
	in.Text = strings.TrimSpace(text)
	if in.Text == "" && len(in.Attachments) == 0 {
		return channels.Inbound{}, false
	}
	return in, true
}

// isDM reports whether room is a DM: the inviter marked it is_direct, or
// it has two members (joined or invited).
func (a *Adapter) isDM(ctx context.Context, room id.RoomID) bool {
	if _, ok, err := a.state.GetState(ctx, keyDMPrefix+string(room)); err == nil && ok {
		return true
	}
	members, err := a.states.GetRoomJoinedOrInvitedMembers(ctx, room)
	return err == nil && len(members) == 2
}

// mentions reports whether c addresses the bot: m.mentions names it, or
// the text holds its MXID, its localpart as @name, or its display name.
func (a *Adapter) mentions(c *event.MessageEventContent, text string) bool {
	if c.Mentions != nil && c.Mentions.Has(id.UserID(a.o.UserID)) {
		return true
	}
	lower := strings.ToLower(text)
	for _, name := range a.names() {
		if name != "" && strings.Contains(lower, strings.ToLower(name)) {
			return true
		}
	}
	return false
}

// names are how a text may address the bot, longest first.
func (a *Adapter) names() []string {
	local, _, _ := strings.Cut(strings.TrimPrefix(a.o.UserID, "@"), ":")
	out := []string{a.o.UserID}
	if d := a.displayName(); d != "" {
		out = append(out, d)
	}
	return append(out, "@"+local)
}

// displayName is the bot's display name, read once.
func (a *Adapter) displayName() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ownName
}

// stripMention removes a leading address of the bot ("Bot: ", "@bot:x ").
func (a *Adapter) stripMention(text string) string {
	t := strings.TrimSpace(text)
	for _, name := range a.names() {
		if len(t) >= len(name) && strings.EqualFold(t[:len(name)], name) {
			return strings.TrimLeft(t[len(name):], " :,")
		}
	}
	return text
}

// reaction normalises a reaction on a question the bot asked (Ask): the
// reaction's emoji is the answer's action. Other reactions are nothing.
func (a *Adapter) reaction(ctx context.Context, evt *event.Event) (channels.Inbound, bool) {
	c := evt.Content.AsReaction()
	if c == nil || c.RelatesTo.Type != event.RelAnnotation {
		return channels.Inbound{}, false
	}
	q, ok := a.question(ctx, string(c.RelatesTo.EventID))
	if !ok {
		return channels.Inbound{}, false
	}
	action, ok := q.Actions[normalEmoji(c.RelatesTo.Key)]
	if !ok {
		return channels.Inbound{}, false
	}
	in := channels.Inbound{Channel: Name, ChatID: q.ChatID, MessageID: string(evt.ID), UserID: string(evt.Sender),
		UserName: strings.TrimPrefix(string(evt.Sender), "@"), Mentioned: true, Action: action,
		Time: time.UnixMilli(evt.Timestamp), ChatType: channels.Group}
	if a.isDM(ctx, evt.RoomID) {
		in.ChatType = channels.DM
	}
	return in, true
}

// normalEmoji drops the variation selector some clients add (✅ vs ✅️).
func normalEmoji(s string) string { return strings.TrimSuffix(s, "\ufe0f") }

// question is what Ask kept about a question: its chat and which emoji
// stands for which action.
type question struct {
	ChatID  string            `json:"chat_id"`
	Actions map[string]string `json:"actions"`
}

func (a *Adapter) question(ctx context.Context, eventID string) (question, bool) {
	v, ok, err := a.state.GetState(ctx, keyAskPrefix+eventID)
	var q question
	if err != nil || !ok || json.Unmarshal([]byte(v), &q) != nil {
		return q, false
	}
	return q, true
}

// sentByBot reports whether this process sent eventID.
func (a *Adapter) sentByBot(eventID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sent[eventID]
}

// inThread reports whether the bot took part in the thread chatID.
func (a *Adapter) inThread(ctx context.Context, chatID string) bool {
	_, ok, err := a.state.GetState(ctx, keyThread+chatID)
	return err == nil && ok
}

// attachment downloads a file from the homeserver (authenticated media),
// decrypting it in an encrypted room; a file too big is described only.
func (a *Adapter) attachment(ctx context.Context, c *event.MessageEventContent) channels.Attachment {
	att := channels.Attachment{Kind: kindOf(c.MsgType), Name: c.GetFileName()}
	if c.Info != nil {
		att.MIME, att.Size = c.Info.MimeType, int64(c.Info.Size)
	}
	if att.Size > a.o.MaxDownloadBytes {
		att.Note = fmt.Sprintf("not downloaded: %d bytes, over the limit of %d", att.Size, a.o.MaxDownloadBytes)
		return att
	}
	raw := c.URL
	if c.File != nil {
		raw = c.File.URL
	}
	uri, err := raw.Parse()
	if err != nil {
		att.Note = "not downloaded: " + err.Error()
		return att
	}
	var data []byte
	err = a.do(ctx, "download "+uri.String(), func() error {
		resp, err := a.cli.Download(ctx, uri)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, err = io.ReadAll(io.LimitReader(resp.Body, a.o.MaxDownloadBytes+1))
		return err
	})
	switch {
	case err != nil:
		att.Note = "not downloaded: " + err.Error()
		return att
	case int64(len(data)) > a.o.MaxDownloadBytes:
		att.Note = fmt.Sprintf("not downloaded: over the limit of %d bytes", a.o.MaxDownloadBytes)
		return att
	}
	if c.File != nil {
		if err := c.File.DecryptInPlace(data); err != nil {
			att.Note = "not decrypted: " + err.Error()
			return att
		}
	}
	att.Data, att.Size = data, int64(len(data))
	return att
}

// kindOf is the attachment kind of a media msgtype.
func kindOf(t event.MessageType) channels.AttachmentKind {
	switch t {
	case event.MsgImage:
		return channels.Image
	case event.MsgAudio:
		return channels.Audio
	case event.MsgVideo:
		return channels.Video
	}
	return channels.File
}
