package discord

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/switchboard-gateway/switchboard/channels"
)

// maxTextAttachment is the largest text file whose content is inlined.
const maxTextAttachment = 64 << 10

// The normalisation from discordgo's structs to channels.Inbound is a chain
// of small pure functions, each table-tested.

// ignoreMessage reports why a MESSAGE_CREATE is not for the bot: its own
// messages, other bots and webhooks, and system messages (joins, pins,
// thread starters...). It returns "" for messages to deliver.
func ignoreMessage(m *discordgo.Message, botID string) string {
	switch {
	case m == nil || m.Author == nil:
		return "no author"
	case m.Author.ID == botID:
		return "own message"
	case m.Author.Bot || m.Author.System || m.WebhookID != "":
		return "from a bot"
	case m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply:
		return "system message"
	}
	return ""
}

func chatType(guildID string) channels.ChatType {
	if guildID == "" {
		return channels.DM
	}
	return channels.Group
}

// messageText returns the content with user mentions resolved to @name and
// the bot's own mention removed, and whether the bot was mentioned. The
// bot's mention is found in what the author wrote, before other users'
// names are put in: a name can never address the bot.
func messageText(m *discordgo.Message, botID string) (text string, mentioned bool) {
	text = m.Content
	if botID != "" {
		re := regexp.MustCompile(`[ \t]*<@!?` + regexp.QuoteMeta(botID) + `>`)
		if re.MatchString(text) {
			mentioned = true
			text = re.ReplaceAllString(text, "")
		}
		for _, u := range m.Mentions {
			if u != nil && u.ID == botID {
				mentioned = true
			}
		}
	}
	for _, u := range m.Mentions {
		if u == nil || u.ID == botID {
			continue
		}
		text = strings.NewReplacer("<@"+u.ID+">", "@"+u.Username, "<@!"+u.ID+">", "@"+u.Username).Replace(text)
	}
	return strings.TrimSpace(text), mentioned
}

// quoteOf returns the message m replies to, if any, and whether that
// message is the bot's.
func quoteOf(m *discordgo.Message, botID string) (*channels.Quote, bool) {
	ref := m.ReferencedMessage
	if ref == nil {
		if m.MessageReference != nil && m.MessageReference.MessageID != "" {
			// Discord sends no referenced_message when it was deleted.
			return &channels.Quote{MessageID: m.MessageReference.MessageID}, false
		}
		return nil, false
	}
	q := quoteMessage(ref, botID)
	return q, q.FromBot
}

// quoteMessage describes m as a Quote.
func quoteMessage(m *discordgo.Message, botID string) *channels.Quote {
	q := &channels.Quote{MessageID: m.ID}
	q.Text, _ = messageText(m, "")
	if m.Author != nil {
		q.Author = m.Author.Username
		q.FromBot = m.Author.ID == botID && botID != ""
	}
	return q
}

func displayName(m *discordgo.Message) string {
	switch {
	case m.Member != nil && m.Member.Nick != "":
		return m.Member.Nick
	case m.Author.GlobalName != "":
		return m.Author.GlobalName
	}
	return m.Author.Username
}

// attachmentPlan says what to do with one attachment.
type attachmentPlan int

const (
	describeOnly  attachmentPlan = iota // name, type and size, with a note
	downloadData                        // fetch into Data (images)
	downloadText                        // fetch into Text (small text files)
	tooLargeImage                       // an image over MaxDownloadBytes
)

// planAttachment classifies an attachment by MIME type (or, without one,
// by extension) and size.
func planAttachment(a *discordgo.MessageAttachment, maxDownload int64) (channels.AttachmentKind, string, attachmentPlan) {
	ct := a.ContentType
	if ct == "" {
		ct = mime.TypeByExtension(strings.ToLower(path.Ext(a.Filename)))
	}
	media, _, _ := mime.ParseMediaType(ct)
	if media == "" {
		media = "application/octet-stream"
	}
	size := int64(a.Size)
	switch {
	case strings.HasPrefix(media, "image/"):
		if size > maxDownload {
			return channels.Image, media, tooLargeImage
		}
		return channels.Image, media, downloadData
	case strings.HasPrefix(media, "audio/"):
		return channels.Audio, media, describeOnly
	case strings.HasPrefix(media, "video/"):
		return channels.Video, media, describeOnly
	case isText(media, a.Filename) && size <= maxTextAttachment:
		return channels.File, media, downloadText
	}
	return channels.File, media, describeOnly
}

func isText(media, name string) bool {
	if strings.HasPrefix(media, "text/") {
		return true
	}
	switch media {
	case "application/json", "application/xml", "application/yaml", "application/x-yaml", "application/toml",
		"application/javascript", "application/x-sh", "application/sql":
		return true
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".txt", ".md", ".csv", ".tsv", ".json", ".yaml", ".yml", ".toml", ".log", ".ini", ".go", ".py", ".js", ".ts", ".sh", ".sql", ".html", ".xml", ".c", ".h", ".rs", ".java":
		return true
	}
	return false
}

// attachments turns a message's attachments (the first maxN) and stickers
// into ours, downloading images and small text files with get; left counts
// the attachments past maxN, neither read nor described.
func attachments(ctx context.Context, m *discordgo.Message, maxDownload int64, maxN int, get func(ctx context.Context, url string, max int64) ([]byte, error)) (out []channels.Attachment, left int) {
	for _, a := range m.Attachments {
		if a == nil {
			continue
		}
		if len(out) >= maxN {
			left++
			continue
		}
		kind, media, plan := planAttachment(a, maxDownload)
		at := channels.Attachment{Kind: kind, Name: a.Filename, MIME: media, Size: int64(a.Size)}
		switch plan {
		case downloadData:
			data, err := get(ctx, a.URL, maxDownload)
			if err != nil {
				at.Note = fmt.Sprintf("could not download %q: %v", a.Filename, err)
				break
			}
			at.Data = data
		case downloadText:
			data, err := get(ctx, a.URL, maxTextAttachment)
			switch {
			case err != nil:
				at.Note = fmt.Sprintf("could not download %q: %v", a.Filename, err)
			case !utf8.Valid(data):
				at.Note = fmt.Sprintf("%q is not UTF-8 text", a.Filename)
			default:
				at.Text = string(data)
			}
		case tooLargeImage:
			at.Note = fmt.Sprintf("image %q (%d bytes) is over the %d-byte download limit", a.Filename, a.Size, maxDownload)
		default:
			at.Note = fmt.Sprintf("attachment %q (%s, %d bytes) was not downloaded", a.Filename, media, a.Size)
		}
		out = append(out, at)
	}
	for _, s := range m.StickerItems {
		if s != nil {
			out = append(out, channels.Attachment{Kind: channels.Sticker, Name: s.Name, Note: "sticker " + s.Name})
		}
	}
	return out, left
}

// inbound normalises a message for delivery (without attachments and chat
// title, which need I/O).
func inbound(m *discordgo.Message, botID string) channels.Inbound {
	text, mentioned := messageText(m, botID)
	quote, replyToBot := quoteOf(m, botID)
	t := m.Timestamp
	if t.IsZero() {
		t, _ = discordgo.SnowflakeTimestamp(m.ID)
	}
	return channels.Inbound{
		Channel:     name,
		ChatID:      m.ChannelID,
		ChatType:    chatType(m.GuildID),
		Space:       m.GuildID,
		MessageID:   m.ID,
		UserID:      m.Author.ID,
		UserName:    m.Author.Username,
		DisplayName: displayName(m),
		Text:        text,
		Quote:       quote,
		Mentioned:   m.GuildID == "" || mentioned || replyToBot,
		Time:        t,
	}
}

// pressPrefix starts the MessageID of a button press: "ia:<interaction
// id>". The interaction id is unique per press, so a replayed event is a
// duplicate while a second press is a new message.
const pressPrefix = "ia:"

// interactionInbound normalises the interactions the adapter handles. A
// slash command's text is "/name" and its MessageID the interaction id. A
// button press (a message component of type button) has Action set to the
// button's custom_id, no text, MessageID "ia:<interaction id>", and quotes
// the message the button is on. Both are addressed to the bot and come from
// the user who invoked them.
func interactionInbound(i *discordgo.Interaction, botID string) (channels.Inbound, bool) {
	in := channels.Inbound{
		Channel: name, ChatID: i.ChannelID, ChatType: chatType(i.GuildID), Space: i.GuildID, Mentioned: true,
	}
	switch i.Type {
	case discordgo.InteractionApplicationCommand:
		data, ok := i.Data.(discordgo.ApplicationCommandInteractionData)
		if !ok || data.Name == "" {
			return channels.Inbound{}, false
		}
		in.MessageID, in.Text = i.ID, "/"+data.Name
	case discordgo.InteractionMessageComponent:
		data, ok := i.Data.(discordgo.MessageComponentInteractionData)
		if !ok || data.ComponentType != discordgo.ButtonComponent || data.CustomID == "" {
			return channels.Inbound{}, false
		}
		in.MessageID, in.Action = pressPrefix+i.ID, data.CustomID
		if i.Message != nil {
			in.Quote = quoteMessage(i.Message, botID)
		}
	default:
		return channels.Inbound{}, false
	}
	u := i.User
	nick := ""
	if i.Member != nil && i.Member.User != nil {
		u, nick = i.Member.User, i.Member.Nick
	}
	// Admission goes by the user's id, and the router de-duplicates by
	// the interaction's: without them there is nothing to deliver.
	if u == nil || u.ID == "" || in.ChatID == "" || i.ID == "" {
		return channels.Inbound{}, false
	}
	in.UserID, in.UserName, in.DisplayName = u.ID, u.Username, u.Username
	switch {
	case nick != "":
		in.DisplayName = nick
	case u.GlobalName != "":
		in.DisplayName = u.GlobalName
	}
	in.Time, _ = discordgo.SnowflakeTimestamp(i.ID)
	return in, true
}

// download fetches url with the adapter's client (so tests reach the fake),
// refusing bodies over max bytes. It sends no token.
// attachmentURL refuses an attachment URL that is not on Discord's CDN
// (https://cdn.discordapp.com, https://media.discordapp.net) or, with an
// APIBase other than Discord's (a fake in tests), on exactly that host: a
// crafted message cannot make the gateway fetch from anywhere else.
func (a *Adapter) attachmentURL(u *url.URL) error {
	if (u.Scheme == "https" && cdnHosts[u.Host]) || (a.fileHost != "" && u.Scheme+"://"+u.Host == a.fileHost) {
		return nil
	}
	return fmt.Errorf("not fetched: %s://%s is not Discord's CDN", u.Scheme, u.Host)
}

func (a *Adapter) download(ctx context.Context, url string, max int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if err := a.attachmentURL(req.URL); err != nil {
		return nil, err
	}
	resp, err := a.files.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return data, nil
}
