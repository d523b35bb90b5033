package slack

import (
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/switchboard-gateway/switchboard/channels"
)

// The normalisation from slack-go's event structs to channels.Inbound is a
// chain of small pure functions, each table-tested on Slack's payloads.
//
// Chats. A DM's main timeline is one chat, its ChatID the conversation id
// ("D123"). Everything else is a thread: one session per thread, ChatID
// "<conversation id>:<thread_ts>" ("C123:1700000000.000100"). A top-level
// message that mentions the bot in a channel starts a thread, rooted at
// itself, and is answered there; a reply in a DM's thread is that thread's
// chat. Slack's conversation ids are upper-case letters and digits and
// its timestamps digits and one dot, so ":" never occurs in either.
// A ChatID without a thread in a channel (a scheduled job's) posts to
// the channel's main timeline.

// threadSep separates a conversation id from a thread's ts in a ChatID.
const threadSep = ":"

// chatKey is the ChatID of a conversation, or of one of its threads.
func chatKey(channel, threadTS string) string {
	if threadTS == "" {
		return channel
	}
	return channel + threadSep + threadTS
}

// splitChat is the inverse of chatKey.
func splitChat(chatID string) (channel, threadTS string) {
	channel, threadTS, _ = strings.Cut(chatID, threadSep)
	return channel, threadTS
}

// post is the part of a message event (message, message.im, app_mention,
// message_changed's new message) the adapter reads.
type post struct {
	Team        string
	Channel     string
	ChannelType string // "im", "mpim", "channel", "group"; "" when unknown (app_mention)
	User        string
	BotID       string
	SubType     string
	Text        string
	TS          string
	ThreadTS    string
	ParentUser  string
	EditTS      string // set for an edit (message_changed)
	Mention     bool   // an app_mention event: the bot was addressed
	Files       []slack.File
}

// postOfMessage reads a message event. For message_changed, the new
// message is the post, marked with its edit's ts; deletions and other
// subtypes keep their subtype, for ignore.
func postOfMessage(team string, ev *slackevents.MessageEvent) post {
	p := post{Team: team, Channel: ev.Channel, ChannelType: ev.ChannelType, SubType: ev.SubType,
		User: ev.User, BotID: ev.BotID, Text: ev.Text, TS: ev.TimeStamp, ThreadTS: ev.ThreadTimeStamp}
	m := ev.Message
	if m == nil {
		return p
	}
	if ev.SubType == "message_changed" {
		p.User, p.BotID, p.Text, p.TS, p.ThreadTS = m.User, m.BotID, m.Text, m.Timestamp, m.ThreadTimestamp
		if m.SubType == "bot_message" {
			p.BotID = firstNonEmpty(p.BotID, "bot_message")
		}
		if m.Edited != nil {
			p.EditTS = m.Edited.Timestamp
		}
		if prev := ev.PreviousMessage; prev != nil && prev.Text == m.Text {
			p.EditTS = "" // an unfurl or a file added: the text did not change
		}
	}
	p.ParentUser, p.Files = m.ParentUserId, m.Files
	if p.ThreadTS == "" {
		p.ThreadTS = m.ThreadTimestamp
	}
	return p
}

// postOfMention reads an app_mention event.
func postOfMention(team string, ev *slackevents.AppMentionEvent) post {
	return post{Team: team, Channel: ev.Channel, User: ev.User, BotID: ev.BotID, Text: ev.Text,
		TS: ev.TimeStamp, ThreadTS: ev.ThreadTimeStamp, Mention: true, Files: ev.Files}
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// self is who the bot is, from auth.test.
type self struct {
	UserID string // U…: how users mention it
	BotID  string // B…: what its own messages carry as bot_id
	TeamID string // its workspace
}

// ignorePost reports why a message event is not for the bot: its own
// messages and other bots', system messages (joins, topics, pins),
// deletions, edits that changed no text. It returns "" for a message to
// deliver.
func ignorePost(p post, me self) string {
	switch p.SubType {
	case "", "file_share", "thread_broadcast", "me_message":
	case "message_changed":
		if p.EditTS == "" {
			return "edit without a text change"
		}
	case "message_deleted":
		return "deletion" // as on Telegram: what was taken in stays
	case "bot_message":
		return "from a bot"
	default:
		return "system message " + p.SubType
	}
	switch {
	case p.Channel == "" || p.TS == "":
		return "no channel or ts"
	case p.User != "" && p.User == me.UserID, p.BotID != "" && p.BotID == me.BotID:
		return "own message"
	case p.BotID != "":
		return "from a bot"
	case p.User == "":
		return "no author"
	}
	return ""
}

// isDM reports whether the post is in a direct message with the bot.
// app_mention carries no channel_type; DM ids start with D.
func isDM(p post) bool {
	if p.ChannelType != "" {
		return p.ChannelType == slackevents.ChannelTypeIM
	}
	return strings.HasPrefix(p.Channel, "D")
}

// editedPrefix starts the text of an edited message, as on Telegram.
const editedPrefix = "(edited) "

// inbound normalises a post for delivery (without attachments, user names
// and chat title, which need I/O).
func inbound(p post, me self) channels.Inbound {
	text, mentioned := messageText(p.Text, me.UserID)
	in := channels.Inbound{
		Channel:   Name,
		ChatType:  channels.Group,
		Space:     p.Team,
		MessageID: p.TS,
		UserID:    p.User,
		Text:      text,
		Time:      tsTime(p.TS),
	}
	thread := p.ThreadTS
	if isDM(p) {
		in.ChatType = channels.DM
	} else if thread == "" {
		thread = p.TS // a channel message starts a thread, answered there
	}
	in.ChatID = chatKey(p.Channel, thread)
	in.Mentioned = in.ChatType == channels.DM || mentioned || p.Mention || (p.ParentUser != "" && p.ParentUser == me.UserID)
	if p.ParentUser != "" && p.ParentUser == me.UserID && p.ThreadTS != "" {
		in.Quote = &channels.Quote{MessageID: p.ThreadTS, FromBot: true}
	}
	if p.EditTS != "" {
		in.MessageID = editMessageID(p.TS, p.EditTS)
		in.Text = editedPrefix + in.Text
		in.Time = tsTime(p.EditTS)
	}
	return in
}

// editMessageID is the MessageID of an edit: a new message, stored apart
// from the original, and one message however often Slack sends the edit.
func editMessageID(ts, editTS string) string { return ts + ":edit:" + editTS }

// tsTime reads a Slack ts ("1700000000.000100") as a time.
func tsTime(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}
	}
	var ns int64
	if frac != "" {
		frac = (frac + "000000000")[:9]
		ns, _ = strconv.ParseInt(frac, 10, 64)
	}
	return time.Unix(s, ns).UTC()
}

// markup matches Slack's angle-bracket markup: <@U123>, <@U123|name>,
// <#C123|general>, <!here>, <https://x|label>.
var markup = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<([@#!]?)([^<>|]*)(?:\|([^<>]*))?>`) })

// messageText returns the text as the user wrote it: the bot's mention
// removed, other mentions, channels and links as plain text, entities
// unescaped; and whether the bot was mentioned.
func messageText(text, botUserID string) (string, bool) {
	mentioned := false
	out := markup().ReplaceAllStringFunc(text, func(s string) string {
		m := markup().FindStringSubmatch(s)
		kind, id, label := m[1], m[2], m[3]
		switch kind {
		case "@":
			if botUserID != "" && id == botUserID {
				mentioned = true
				return ""
			}
			return "@" + firstNonEmpty(label, id)
		case "#":
			return "#" + firstNonEmpty(label, id)
		case "!":
			name, _, _ := strings.Cut(id, "^")
			return "@" + firstNonEmpty(label, name)
		}
		if label != "" && label != id {
			return label + " (" + id + ")"
		}
		return id
	})
	out = html.UnescapeString(out)
	return strings.TrimSpace(collapseSpaces(out)), mentioned
}

// collapseSpaces joins the spaces a removed mention leaves ("hi  there").
func collapseSpaces(s string) string {
	for strings.Contains(s, "  ") {
		s = strings.ReplaceAll(s, "  ", " ")
	}
	return s
}

// pressPrefix starts the MessageID of a button press: "act:<action_ts>".
// action_ts is unique per press, so a redelivered envelope is a duplicate
// while a second press is a new message.
const pressPrefix = "act:"

// commandPrefix starts the MessageID of a slash command: "cmd:<trigger_id>".
const commandPrefix = "cmd:"

// pressInbound normalises a block_actions interaction: a press of one of
// the buttons Ask put under a message. Action is the button's value; the
// press comes from the user who clicked, in the chat of the message the
// button is on.
func pressInbound(cb slack.InteractionCallback) (channels.Inbound, bool) {
	if cb.Type != slack.InteractionTypeBlockActions || len(cb.ActionCallback.BlockActions) == 0 {
		return channels.Inbound{}, false
	}
	act := cb.ActionCallback.BlockActions[0]
	if act == nil || act.Value == "" {
		return channels.Inbound{}, false
	}
	channel := firstNonEmpty(cb.Container.ChannelID, cb.Channel.ID)
	thread := firstNonEmpty(cb.Container.ThreadTs, cb.Message.ThreadTimestamp)
	msgTS := firstNonEmpty(cb.Container.MessageTs, cb.Message.Timestamp)
	stamp := firstNonEmpty(act.ActionTs, cb.ActionTs, cb.TriggerID)
	if channel == "" || cb.User.ID == "" || stamp == "" {
		return channels.Inbound{}, false
	}
	in := channels.Inbound{
		Channel: Name, ChatID: chatKey(channel, thread), ChatType: channels.Group, Space: cb.Team.ID,
		MessageID: pressPrefix + stamp, UserID: cb.User.ID, UserName: cb.User.Name, DisplayName: cb.User.Name,
		Mentioned: true, Action: act.Value, Time: tsTime(firstNonEmpty(act.ActionTs, cb.ActionTs)),
	}
	if strings.HasPrefix(channel, "D") || cb.Channel.IsIM {
		in.ChatType = channels.DM
	}
	if msgTS != "" {
		in.Quote = &channels.Quote{MessageID: msgTS, Text: cb.Message.Text, FromBot: true}
	}
	return in, true
}

// commandInbound normalises a slash command (/new, /stop, /status,
// /plan): its text is "/name args", in the conversation's main timeline
// (Slack sends no thread with a command).
func commandInbound(c slack.SlashCommand) (channels.Inbound, bool) {
	name := strings.TrimPrefix(strings.TrimSpace(c.Command), "/")
	if name == "" || c.UserID == "" || c.ChannelID == "" || c.TriggerID == "" {
		return channels.Inbound{}, false
	}
	in := channels.Inbound{
		Channel: Name, ChatID: c.ChannelID, ChatType: channels.Group, Space: c.TeamID, Mentioned: true,
		MessageID: commandPrefix + c.TriggerID, UserID: c.UserID, UserName: c.UserName, DisplayName: c.UserName,
		Text: strings.TrimSpace("/" + name + " " + c.Text), ChatTitle: c.ChannelName,
	}
	if strings.HasPrefix(c.ChannelID, "D") || c.ChannelName == "directmessage" {
		in.ChatType = channels.DM
	}
	return in, true
}

// describe is a short name for a post in logs.
func describe(p post) string { return fmt.Sprintf("%s/%s", p.Channel, p.TS) }
