package discordfake

import "slices"

// The gateway payload shapes the fake sends, as Discord documents them
// (only the fields a bot adapter reads).

// User is a Discord user object.
type User struct {
	ID         string `json:"id"`
	Username   string `json:"username"`
	GlobalName string `json:"global_name,omitempty"`
	Bot        bool   `json:"bot,omitempty"`
}

// Member is a guild member object as attached to guild messages.
type Member struct {
	Nick string `json:"nick,omitempty"`
	User *User  `json:"user,omitempty"`
}

// Attachment is a message attachment object.
type Attachment struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type,omitempty"`
	Size        int    `json:"size"`
	URL         string `json:"url"`
	ProxyURL    string `json:"proxy_url"`
}

// MessageReference points at the message a reply answers.
type MessageReference struct {
	MessageID       string `json:"message_id"`
	ChannelID       string `json:"channel_id,omitempty"`
	GuildID         string `json:"guild_id,omitempty"`
	FailIfNotExists *bool  `json:"fail_if_not_exists,omitempty"`
}

// Message is a message object, the data of MESSAGE_CREATE.
type Message struct {
	ID                string            `json:"id"`
	ChannelID         string            `json:"channel_id"`
	GuildID           string            `json:"guild_id,omitempty"`
	Author            User              `json:"author"`
	Member            *Member           `json:"member,omitempty"`
	Content           string            `json:"content"`
	Timestamp         string            `json:"timestamp"`
	Type              int               `json:"type"`
	Mentions          []User            `json:"mentions"`
	Attachments       []Attachment      `json:"attachments"`
	MessageReference  *MessageReference `json:"message_reference,omitempty"`
	ReferencedMessage *Message          `json:"referenced_message,omitempty"`
	Components        []Component       `json:"components,omitempty"`
}

// Component is a message component: an action row (type 1) holding
// buttons (type 2).
type Component struct {
	Type       int         `json:"type"`
	Style      int         `json:"style,omitempty"`
	Label      string      `json:"label,omitempty"`
	CustomID   string      `json:"custom_id,omitempty"`
	URL        string      `json:"url,omitempty"`
	Disabled   bool        `json:"disabled,omitempty"`
	Components []Component `json:"components,omitempty"`
}

// Component types and button styles as Discord numbers them.
const (
	ComponentActionRow = 1
	ComponentButton    = 2

	ButtonPrimary   = 1
	ButtonSecondary = 2
	ButtonSuccess   = 3
	ButtonDanger    = 4
	ButtonLink      = 5
)

// MsgOption adjusts a message built by MessageCreate.
type MsgOption func(*Message)

// ReplyTo makes the message a reply (type 19) to ref.
func ReplyTo(ref Message) MsgOption {
	return func(m *Message) {
		m.Type = 19
		m.MessageReference = &MessageReference{MessageID: ref.ID, ChannelID: ref.ChannelID, GuildID: ref.GuildID}
		r := ref
		r.ReferencedMessage = nil // Discord nests only one level
		m.ReferencedMessage = &r
	}
}

// WithAttachments attaches files (see AddFile).
func WithAttachments(a ...Attachment) MsgOption {
	return func(m *Message) { m.Attachments = append(m.Attachments, a...) }
}

// FromBot marks the author as a bot account.
func FromBot() MsgOption { return func(m *Message) { m.Author.Bot = true } }

// WithNick sets the author's guild nickname.
func WithNick(nick string) MsgOption {
	return func(m *Message) {
		if m.Member != nil {
			m.Member.Nick = nick
		}
	}
}

// MessageCreate builds the data of a MESSAGE_CREATE for Dispatch, with a
// fresh id. guildID "" makes it a DM. Like Discord, it lists the known users
// (the bot, authors seen so far, AddUser) that content mentions as <@id>.
func (f *Fake) MessageCreate(channelID, guildID, authorID, authorName, content string, opts ...MsgOption) Message {
	author := User{ID: authorID, Username: authorName}
	f.mu.Lock()
	if _, ok := f.users[authorID]; !ok {
		f.users[authorID] = author
	}
	id := f.newIDLocked()
	m := Message{
		ID: id, ChannelID: channelID, GuildID: guildID, Author: author, Content: content,
		Timestamp: snowflakeTime(id), Mentions: []User{}, Attachments: []Attachment{},
	}
	seen := map[string]bool{}
	for _, sub := range mentionRE.FindAllStringSubmatch(content, -1) {
		if u, ok := f.users[sub[1]]; ok && !seen[u.ID] {
			seen[u.ID] = true
			m.Mentions = append(m.Mentions, u)
		}
	}
	f.mu.Unlock()
	if guildID != "" {
		m.Member = &Member{}
	}
	for _, o := range opts {
		o(&m)
	}
	return m
}

// Interaction is the data of an INTERACTION_CREATE: a slash command (type
// 2) or a press of a message button (type 3, with the message).
type Interaction struct {
	ID            string           `json:"id"`
	ApplicationID string           `json:"application_id"`
	Type          int              `json:"type"`
	Data          InteractionData  `json:"data"`
	GuildID       string           `json:"guild_id,omitempty"`
	ChannelID     string           `json:"channel_id"`
	Member        *InteractionUser `json:"member,omitempty"`
	User          *User            `json:"user,omitempty"`
	Token         string           `json:"token"`
	Version       int              `json:"version"`
	Message       *Message         `json:"message,omitempty"`
	Locale        string           `json:"locale,omitempty"`
	GuildLocale   string           `json:"guild_locale,omitempty"`
}

// InteractionData names the command invoked (ID, Name, Type) or the
// component used (CustomID, ComponentType).
type InteractionData struct {
	ID            string `json:"id,omitempty"`
	Name          string `json:"name,omitempty"`
	Type          int    `json:"type,omitempty"`
	CustomID      string `json:"custom_id,omitempty"`
	ComponentType int    `json:"component_type,omitempty"`
}

// InteractionUser is the member wrapper of a guild interaction's user.
type InteractionUser struct {
	User *User  `json:"user"`
	Nick string `json:"nick,omitempty"`
}

// SlashCommand builds the data of an INTERACTION_CREATE for the chat-input
// command name, invoked by a user in a channel (guildID "" for a DM).
func (f *Fake) SlashCommand(channelID, guildID, userID, userName, name string) Interaction {
	u := &User{ID: userID, Username: userName}
	f.mu.Lock()
	id, cmdID, tok := f.newIDLocked(), f.newIDLocked(), "interaction-token-"+f.newIDLocked()
	f.mu.Unlock()
	in := Interaction{
		ID: id, ApplicationID: f.AppID, Type: 2, Data: InteractionData{ID: cmdID, Name: name, Type: 1},
		GuildID: guildID, ChannelID: channelID, Token: tok, Version: 1,
	}
	if guildID != "" {
		in.Member = &InteractionUser{User: u}
	} else {
		in.User = u
	}
	f.issue(in)
	return in
}

// ClickButton presses the button customID on message messageID as user
// userID (in guild guildID, "" for a DM): it dispatches an
// INTERACTION_CREATE of type 3 with the message the button is on, as the
// bot posted it (components included), and returns the interaction. A
// message the fake does not know is given with its id and channel only.
// The fake does not check that customID is one of the message's buttons.
func (f *Fake) ClickButton(channelID, guildID, userID, userName, messageID, customID string) Interaction {
	u := &User{ID: userID, Username: userName}
	f.mu.Lock()
	id, tok := f.newIDLocked(), "interaction-token-"+f.newIDLocked()
	msg := Message{ID: messageID, ChannelID: channelID, GuildID: guildID, Author: f.Bot,
		Timestamp: snowflakeTime(messageID), Mentions: []User{}, Attachments: []Attachment{}}
	if i := slices.IndexFunc(f.sent, func(s Sent) bool { return s.ChannelID == channelID && s.ID == messageID }); i >= 0 {
		msg = f.botMessageLocked(f.sent[i])
	}
	f.mu.Unlock()
	in := Interaction{
		ID: id, ApplicationID: f.AppID, Type: 3,
		Data:    InteractionData{CustomID: customID, ComponentType: ComponentButton},
		GuildID: guildID, ChannelID: channelID, Token: tok, Version: 1, Message: &msg, Locale: "en-US",
	}
	if guildID != "" {
		in.Member = &InteractionUser{User: u}
		in.GuildLocale = "en-US"
	} else {
		in.User = u
	}
	f.issue(in)
	f.Dispatch("INTERACTION_CREATE", in)
	return in
}
