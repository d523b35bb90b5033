package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/switchboard-gateway/switchboard/channels"
)

// update is the part of a Bot API update the adapter reads. Other kinds
// (channel posts, member updates) are ignored.
type update struct {
	UpdateID      int            `json:"update_id"`
	Message       *message       `json:"message"`
	EditedMessage *message       `json:"edited_message"`
	CallbackQuery *callbackQuery `json:"callback_query"`
}

// callbackQuery is a press of an inline keyboard button (see Ask). Message
// is the message the keyboard is on; Telegram sends it with date 0 and only
// chat and message_id when it is too old to show (an InaccessibleMessage),
// and omits it for messages sent in inline mode, which the bot never does.
type callbackQuery struct {
	ID              string         `json:"id"`
	From            *tgbotapi.User `json:"from"`
	Message         *message       `json:"message"`
	InlineMessageID string         `json:"inline_message_id"`
	Data            string         `json:"data"`
}

// message is tgbotapi's Message plus the fields v5.5.1 does not know:
// forum topics (Bot API 6.0) and quotes (7.0). ReplyToMessage shadows the
// embedded field so that replies carry those fields too.
type message struct {
	tgbotapi.Message
	MessageThreadID   int           `json:"message_thread_id"`
	IsTopicMessage    bool          `json:"is_topic_message"`
	Quote             *textQuote    `json:"quote"`
	ReplyToMessage    *message      `json:"reply_to_message"`
	ForumTopicCreated *topicCreated `json:"forum_topic_created"`
}

type textQuote struct {
	Text string `json:"text"`
}

type topicCreated struct {
	Name string `json:"name"`
}

// Telegram's placeholder senders: anonymous group admins post as
// GroupAnonymousBot, linked channel posts arrive from "Telegram".
const (
	groupAnonymousBotID = 1087968824
	telegramServiceID   = 777000
)

// editMessageID builds the MessageID of an edited message.
//
// Policy: an edit is delivered as a new Inbound whose MessageID is
// "<id>:edit:<edit_date>" (so the sink stores it as a distinct message and a
// repeated delivery of the same edit is still deduplicated) and whose text
// starts with "(edited) ".
func editMessageID(id, editDate int) string {
	return strconv.Itoa(id) + ":edit:" + strconv.Itoa(editDate)
}

const editedPrefix = "(edited) "

// normalizer turns Bot API messages into channels.Inbound.
type normalizer struct {
	botID   int64
	botName string
	// fetch downloads a file; nil leaves attachments undownloaded (tests).
	fetch       func(ctx context.Context, fileID string, known, max int64) ([]byte, error)
	maxDownload int64
	textMax     int64
	log         *slog.Logger
	// now stamps button presses, which carry no date; nil means time.Now.
	now func() time.Time
}

// step fills part of an Inbound from a message.
type step func(ctx context.Context, in *channels.Inbound, m *message)

// inbound runs the chain of steps. edited marks an edited_message update.
func (n *normalizer) inbound(ctx context.Context, m *message, edited bool) channels.Inbound {
	in := channels.Inbound{Channel: name}
	for _, s := range []step{n.chat, n.id(edited), n.author, n.text, n.quote, n.attachments} {
		s(ctx, &in, m)
	}
	if edited {
		in.Text = editedPrefix + in.Text
	}
	return in
}

// chat sets ChatID, ChatType and ChatTitle. A forum topic is its own
// conversation: "<chat id>:topic:<thread id>".
func (n *normalizer) chat(_ context.Context, in *channels.Inbound, m *message) {
	ref := chatRef{id: m.Chat.ID}
	if m.IsTopicMessage && m.MessageThreadID != 0 {
		ref.thread = m.MessageThreadID
	}
	in.ChatID = ref.String()
	in.ChatType = channels.Group
	if m.Chat.Type == "private" {
		in.ChatType = channels.DM
	}
	in.ChatTitle = m.Chat.Title
	if r := m.ReplyToMessage; ref.thread != 0 && r != nil && r.ForumTopicCreated != nil && r.ForumTopicCreated.Name != "" {
		in.ChatTitle = strings.TrimSpace(in.ChatTitle + " / " + r.ForumTopicCreated.Name)
	}
}

// id sets MessageID and Time.
func (n *normalizer) id(edited bool) step {
	return func(_ context.Context, in *channels.Inbound, m *message) {
		in.MessageID = strconv.Itoa(m.MessageID)
		in.Time = time.Unix(int64(m.Date), 0).UTC()
		if edited {
			in.MessageID = editMessageID(m.MessageID, m.EditDate)
			if m.EditDate != 0 {
				in.Time = time.Unix(int64(m.EditDate), 0).UTC()
			}
		}
	}
}

// author sets UserID, UserName and DisplayName. Messages sent on behalf of
// a chat (anonymous admins, linked channels) are attributed to that chat.
func (n *normalizer) author(_ context.Context, in *channels.Inbound, m *message) {
	if c := m.SenderChat; c != nil && (m.From == nil || m.From.ID == groupAnonymousBotID || m.From.ID == telegramServiceID) {
		in.UserID = strconv.FormatInt(c.ID, 10)
		in.UserName = c.UserName
		in.DisplayName = c.Title
		return
	}
	setUser(in, m.From)
}

func setUser(in *channels.Inbound, u *tgbotapi.User) {
	if u != nil {
		in.UserID = strconv.FormatInt(u.ID, 10)
		in.UserName = u.UserName
		in.DisplayName = displayName(u)
	}
}

func displayName(u *tgbotapi.User) string {
	if n := strings.TrimSpace(u.FirstName + " " + u.LastName); n != "" {
		return n
	}
	return u.UserName
}

// text sets Text (text or caption, bot mentions stripped) and Mentioned.
func (n *normalizer) text(_ context.Context, in *channels.Inbound, m *message) {
	text, ents := m.Text, m.Entities
	if text == "" {
		text, ents = m.Caption, m.CaptionEntities
	}
	in.Mentioned = m.Chat.Type == "private" || n.addressed(text, ents) || n.repliesToBot(m)
	in.Text = n.stripMentions(text, ents)
}

// entitySpan returns the text an entity covers; offsets are UTF-16 units.
func entitySpan(u []uint16, e tgbotapi.MessageEntity) (string, bool) {
	if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > len(u) {
		return "", false
	}
	return string(utf16.Decode(u[e.Offset : e.Offset+e.Length])), true
}

// addressed reports whether the entities address the bot: an @mention, a
// text mention of the bot user, or a leading /command (bare, or
// /command@thisbot; /command@otherbot is not for us).
func (n *normalizer) addressed(text string, ents []tgbotapi.MessageEntity) bool {
	u := utf16.Encode([]rune(text))
	for _, e := range ents {
		s, ok := entitySpan(u, e)
		if !ok {
			continue
		}
		switch e.Type {
		case "mention":
			if n.isBot(strings.TrimPrefix(s, "@")) {
				return true
			}
		case "text_mention":
			if e.User != nil && e.User.ID == n.botID {
				return true
			}
		case "bot_command":
			if e.Offset != 0 {
				continue
			}
			_, target, at := strings.Cut(s, "@")
			if !at || n.isBot(target) {
				return true
			}
		}
	}
	return false
}

func (n *normalizer) isBot(username string) bool {
	return n.botName != "" && strings.EqualFold(username, n.botName)
}

// repliesToBot reports whether m replies to a message of this bot. In a
// forum topic, reply_to_message of an ordinary message is the topic's
// creation message; that is not a reply.
func (n *normalizer) repliesToBot(m *message) bool {
	r := realReply(m)
	return r != nil && r.From != nil && r.From.ID == n.botID
}

func realReply(m *message) *message {
	r := m.ReplyToMessage
	if r == nil || r.ForumTopicCreated != nil || (m.IsTopicMessage && r.MessageID == m.MessageThreadID) {
		return nil
	}
	return r
}

// stripMentions removes "@botname" mentions of this bot from text, and the
// "@botname" suffix of commands ("/new@bot" becomes "/new").
func (n *normalizer) stripMentions(text string, ents []tgbotapi.MessageEntity) string {
	u := utf16.Encode([]rune(text))
	type span struct{ from, to int }
	var cut []span
	for _, e := range ents {
		s, ok := entitySpan(u, e)
		if !ok {
			continue
		}
		switch e.Type {
		case "mention":
			if n.isBot(strings.TrimPrefix(s, "@")) {
				cut = append(cut, span{e.Offset, e.Offset + e.Length})
			}
		case "bot_command":
			if cmd, target, at := strings.Cut(s, "@"); at && n.isBot(target) {
				from := e.Offset + len(utf16.Encode([]rune(cmd)))
				cut = append(cut, span{from, e.Offset + e.Length})
			}
		}
	}
	if len(cut) == 0 {
		return strings.TrimSpace(text)
	}
	slices.SortFunc(cut, func(a, b span) int { return a.from - b.from })
	var out []uint16
	last := 0
	for _, c := range cut {
		if c.from < last { // overlapping entities: malformed, keep the first
			continue
		}
		out = append(out, u[last:c.from]...)
		// "hey @bot how" → "hey how", not "hey  how"
		if len(out) > 0 && out[len(out)-1] == ' ' && c.to < len(u) && u[c.to] == ' ' {
			out = out[:len(out)-1]
		}
		last = c.to
	}
	out = append(out, u[last:]...)
	s := strings.TrimSpace(string(utf16.Decode(out)))
	// "@bot, do this" → "do this"
	s = strings.TrimLeftFunc(strings.TrimLeft(s, ",:"), unicode.IsSpace)
	return s
}

// quote sets Quote from the replied-to message; the quoted part (Bot API
// 7.0 "quote") wins over the whole replied-to text.
func (n *normalizer) quote(_ context.Context, in *channels.Inbound, m *message) {
	r := realReply(m)
	if r == nil {
		return
	}
	in.Quote = n.quoteOf(r)
	if m.Quote != nil && m.Quote.Text != "" {
		in.Quote.Text = m.Quote.Text
	}
}

// quoteOf describes message r as a Quote: its author and its text, caption
// or a description of its media.
func (n *normalizer) quoteOf(r *message) *channels.Quote {
	q := &channels.Quote{MessageID: strconv.Itoa(r.MessageID)}
	if r.From != nil {
		q.FromBot = r.From.ID == n.botID
		q.Author = displayName(r.From)
		if r.From.UserName != "" {
			q.Author = "@" + r.From.UserName
		}
	} else if r.SenderChat != nil {
		q.Author = r.SenderChat.Title
	}
	switch {
	case r.Text != "":
		q.Text = r.Text
	case r.Caption != "":
		q.Text = r.Caption
	default:
		q.Text = describeMedia(r)
	}
	return q
}

// pressMessageID builds the MessageID of a button press. Telegram's
// callback query id is unique per press, so a press delivered twice (a
// retried update) is recognised as a duplicate, while a second press of
// the same button is a new message.
func pressMessageID(callbackID string) string { return "cb:" + callbackID }

// press normalises a button press on a message of the bot. The press is in
// the chat (and forum topic) of that message, from the user who pressed,
// always addressed to the bot, and quotes the message the buttons are on.
// cb.Message and its Chat must be set.
func (n *normalizer) press(ctx context.Context, cb *callbackQuery) channels.Inbound {
	m := cb.Message
	in := channels.Inbound{
		Channel:   name,
		MessageID: pressMessageID(cb.ID),
		Action:    cb.Data,
		Mentioned: true,
		Time:      time.Now().UTC(),
	}
	if n.now != nil {
		in.Time = n.now().UTC()
	}
	n.chat(ctx, &in, m)
	setUser(&in, cb.From)
	in.Quote = n.quoteOf(m)
	if m.From == nil && n.botName != "" {
		// An inaccessible message names no author, but only the bot's own
		// messages carry its buttons.
		in.Quote.Author, in.Quote.FromBot = "@"+n.botName, true
	}
	return in
}

// describeMedia names the media of a message without text.
func describeMedia(m *message) string {
	switch {
	case len(m.Photo) > 0:
		return "[photo]"
	case m.Document != nil:
		return "[document " + m.Document.FileName + "]"
	case m.Voice != nil:
		return "[voice message]"
	case m.Audio != nil:
		return "[audio]"
	case m.Video != nil, m.VideoNote != nil, m.Animation != nil:
		return "[video]"
	case m.Sticker != nil:
		return "[sticker " + m.Sticker.Emoji + "]"
	case m.Location != nil:
		return "[location]"
	}
	return ""
}

// attachments sets Attachments: photos, documents, audio and voice are
// downloaded (within the caps), other media are described in Note.
func (n *normalizer) attachments(ctx context.Context, in *channels.Inbound, m *message) {
	var out []channels.Attachment
	if len(m.Photo) > 0 {
		out = append(out, n.photo(ctx, m.Photo))
	}
	switch {
	case m.Animation != nil: // also sets Document, for old clients
		a := m.Animation
		out = append(out, channels.Attachment{Kind: channels.Video, Name: a.FileName, MIME: a.MimeType,
			Size: int64(a.FileSize), Note: "animation, not downloaded"})
	case m.Document != nil:
		out = append(out, n.document(ctx, m.Document))
	}
	if v := m.Voice; v != nil {
		out = append(out, n.fetched(ctx, channels.Attachment{Kind: channels.Audio, Name: "voice.ogg",
			MIME: orDefault(v.MimeType, "audio/ogg"), Size: int64(v.FileSize)}, v.FileID, n.maxDownload))
	}
	if au := m.Audio; au != nil {
		out = append(out, n.fetched(ctx, channels.Attachment{Kind: channels.Audio, Name: au.FileName,
			MIME: orDefault(au.MimeType, "audio/mpeg"), Size: int64(au.FileSize)}, au.FileID, n.maxDownload))
	}
	if v := m.Video; v != nil {
		out = append(out, channels.Attachment{Kind: channels.Video, Name: v.FileName, MIME: v.MimeType,
			Size: int64(v.FileSize), Note: fmt.Sprintf("video, %d s, not downloaded", v.Duration)})
	}
	if v := m.VideoNote; v != nil {
		out = append(out, channels.Attachment{Kind: channels.Video, Size: int64(v.FileSize),
			Note: fmt.Sprintf("round video message, %d s, not downloaded", v.Duration)})
	}
	if s := m.Sticker; s != nil {
		note := "sticker " + s.Emoji
		if s.SetName != "" {
			note += " from set " + s.SetName
		}
		out = append(out, channels.Attachment{Kind: channels.Sticker, Name: s.SetName, Note: strings.TrimSpace(note)})
	}
	switch {
	case m.Venue != nil:
		v := m.Venue
		out = append(out, channels.Attachment{Kind: channels.Location, Note: fmt.Sprintf("venue %q, %s (%.6f, %.6f)",
			v.Title, v.Address, v.Location.Latitude, v.Location.Longitude)})
	case m.Location != nil:
		l := m.Location
		note := fmt.Sprintf("location %.6f, %.6f", l.Latitude, l.Longitude)
		if l.LivePeriod > 0 {
			note += " (live)"
		}
		out = append(out, channels.Attachment{Kind: channels.Location, Note: note})
	}
	in.Attachments = out
}

// photo downloads the largest size of a photo.
func (n *normalizer) photo(ctx context.Context, sizes []tgbotapi.PhotoSize) channels.Attachment {
	best := sizes[0]
	for _, s := range sizes[1:] {
		if s.Width*s.Height > best.Width*best.Height || (s.Width*s.Height == best.Width*best.Height && s.FileSize > best.FileSize) {
			best = s
		}
	}
	att := n.fetched(ctx, channels.Attachment{Kind: channels.Image, Name: "photo.jpg", MIME: "image/jpeg",
		Size: int64(best.FileSize)}, best.FileID, n.maxDownload)
	if len(att.Data) > 0 {
		// Telegram re-encodes photos as JPEG; trust the bytes if they say otherwise.
		if ct := http.DetectContentType(att.Data); strings.HasPrefix(ct, "image/") {
			att.MIME = ct
		}
	}
	return att
}

// document describes a document and inlines small text files.
func (n *normalizer) document(ctx context.Context, d *tgbotapi.Document) channels.Attachment {
	att := channels.Attachment{Kind: channels.File, Name: d.FileName, MIME: d.MimeType, Size: int64(d.FileSize)}
	if !isTextFile(d.MimeType, d.FileName) {
		att.Note = "not downloaded"
		return att
	}
	att = n.fetched(ctx, att, d.FileID, n.textMax)
	if len(att.Data) > 0 {
		if utf8.Valid(att.Data) {
			att.Text = string(att.Data)
		} else {
			att.Note = "not valid UTF-8 text"
		}
	}
	return att
}

// fetched downloads fileID into att.Data, or explains in att.Note why not.
func (n *normalizer) fetched(ctx context.Context, att channels.Attachment, fileID string, max int64) channels.Attachment {
	if n.fetch == nil || fileID == "" {
		att.Note = "not downloaded"
		return att
	}
	data, err := n.fetch(ctx, fileID, att.Size, max)
	switch {
	case errors.Is(err, errTooLarge):
		att.Note = fmt.Sprintf("not downloaded: larger than %d bytes", max)
	case err != nil:
		if ctx.Err() == nil {
			n.log.Warn("telegram: attachment download failed", "kind", att.Kind, "err", err)
		}
		att.Note = "download failed: " + err.Error()
	default:
		att.Data = data
		if att.Size == 0 {
			att.Size = int64(len(data))
		}
	}
	return att
}

var textMIMEs = map[string]bool{
	"application/json": true, "application/x-ndjson": true, "application/xml": true,
	"application/yaml": true, "application/x-yaml": true, "application/toml": true,
	"application/javascript": true, "application/x-sh": true, "application/sql": true,
	"application/csv": true, "application/x-subrip": true,
}

var textExts = map[string]bool{
	".txt": true, ".md": true, ".markdown": true, ".json": true, ".jsonl": true, ".yaml": true,
	".yml": true, ".csv": true, ".tsv": true, ".xml": true, ".toml": true, ".ini": true,
	".log": true, ".go": true, ".py": true, ".js": true, ".ts": true, ".sh": true, ".sql": true,
	".html": true, ".css": true, ".rs": true, ".java": true, ".c": true, ".h": true, ".cpp": true,
	".rb": true, ".conf": true, ".srt": true, ".diff": true, ".patch": true,
}

// isTextFile guesses from MIME type and name whether a document is text.
func isTextFile(mimeType, fileName string) bool {
	mt, _, _ := mime.ParseMediaType(mimeType)
	if strings.HasPrefix(mt, "text/") || textMIMEs[mt] || strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml") {
		return true
	}
	return textExts[strings.ToLower(path.Ext(fileName))]
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
