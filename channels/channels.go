// Package channels owns the normalised message types every chat adapter
// produces and consumes, and the whole adapter contract: Channel and every
// optional capability (here and in capabilities.go). Adapters live in
// sub-packages (console, telegram, discord, chatapi); nothing here imports
// a chat SDK.
package channels

import (
	"context"
	"errors"
	"strings"
	"time"
)

// ChatType says whether a chat is a private conversation or a group.
type ChatType string

const (
	DM    ChatType = "dm"    // private chat with one user
	Group ChatType = "group" // group, server channel, thread or forum topic
)

// Inbound is a normalised message from a user.
type Inbound struct {
	Channel   string   // adapter name: "console", "telegram", "discord", "http"
	ChatID    string   // the conversation key within the channel; a thread or forum topic has its own key
	ChatType  ChatType // DM or Group
	ChatTitle string   // group or channel name, if any
	MessageID string   // unique within (Channel, ChatID); the idempotency key for intake
	// Space is the container of a group chat where the platform has one (a
	// Discord server id), for allowlists; empty otherwise.
	Space string

	UserID      string // stable platform id of the author
	UserName    string // @handle without the @, if any
	DisplayName string // human name

	Text        string       // text or caption, with bot mentions stripped
	Quote       *Quote       // the message this one replies to or quotes, if any
	Attachments []Attachment // photos, documents, voice notes

	// Mentioned is true when the bot was addressed: mentioned by name, replied
	// to, or sent a command addressed to it. Always true in a DM.
	Mentioned bool
	Time      time.Time

	// Action is set when the user pressed a button the bot offered (see
	// Asker): the button's Action value, such as "approve:12". Text may be
	// empty then.
	Action string
}

// Quote is a message that an inbound message replies to or quotes.
type Quote struct {
	MessageID string
	Author    string
	Text      string
	FromBot   bool
}

// AttachmentKind classifies an attachment.
type AttachmentKind string

// DefaultMaxInputChars caps the text of one inbound message
// (channels.max_input_chars): 32,000 characters is far above what a chat
// platform lets a person type at once (Telegram 4096, Discord 4000 with
// Nitro) and a small share of a 128k-token context. Past it a message is
// refused before it is stored (the chat API answers 413).
const DefaultMaxInputChars = 32_000

const (
	Image    AttachmentKind = "image"
	File     AttachmentKind = "file"
	Audio    AttachmentKind = "audio"
	Video    AttachmentKind = "video"
	Sticker  AttachmentKind = "sticker"
	Location AttachmentKind = "location"
)

// Attachment is a file that came with a message. Adapters fill Data for
// small files they downloaded and Text for text they extracted (a small text
// document, a voice transcription); Note explains what could not be done.
type Attachment struct {
	Kind AttachmentKind
	Name string
	MIME string
	Size int64
	Data []byte
	Text string
	Note string
}

// Outbound is a message to send to a chat. Text is Markdown as the model
// wrote it; adapters render it to the platform's format and split it to the
// platform's length limit.
type Outbound struct {
	ChatID  string
	Text    string
	ReplyTo string // platform message id to reply to, if any
	// Parts, when set, is the durable record of this reply's parts (see
	// Parts); nil: every part is sent and nothing is recorded.
	Parts Parts
}

// Parts is the durable record of the parts of one reply, kept by the router
// so that a reply cut off by a crash between its parts is completed, not
// sent again whole. An adapter that splits a text skips every part Sent
// reports and calls Confirmed for each part it sends, as soon as the
// platform accepted it. Splitting must be deterministic: the same text
// gives the same parts after a restart.
type Parts interface {
	// Sent returns the platform message id of part i (from 0) if the
	// platform accepted it before, possibly in a process that has since
	// died. Ask it right before sending part i: the record may finish
	// recording the part before then.
	Sent(i int) (id string, ok bool)
	// Confirmed records that the platform accepted part i as message id.
	// Call it right after the platform's answer, before anything else
	// (logging, metrics, the next part): until it returns, a crash sends
	// the part again.
	Confirmed(ctx context.Context, i int, id string)
}

// Sink receives inbound messages from an adapter. Deliver returns once the
// message is stored durably (or recognised as a duplicate); only then may an
// adapter confirm it to its platform. An error means it was not stored.
type Sink interface {
	Deliver(ctx context.Context, in Inbound) error
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(ctx context.Context, in Inbound) error

// Deliver calls f.
func (f SinkFunc) Deliver(ctx context.Context, in Inbound) error { return f(ctx, in) }

// Channel is a chat adapter.
type Channel interface {
	// Name is the adapter's name as used in config and Inbound.Channel.
	Name() string
	// Run receives messages and hands them to sink until ctx ends. It
	// returns nil when ctx ends and an error when the adapter cannot go on.
	Run(ctx context.Context, sink Sink) error
	// Send delivers a message and returns the platform id of the (last) sent
	// message. Long texts are split by the adapter.
	Send(ctx context.Context, m Outbound) (string, error)
}

// Typer is a channel that can show a typing indicator. A single call shows
// it for a few seconds; the router refreshes it while a turn runs.
type Typer interface {
	Typing(ctx context.Context, chatID string) error
}

// Reactor is a channel that can put an emoji reaction on a message.
type Reactor interface {
	React(ctx context.Context, chatID, messageID, emoji string) error
}

// Editor is a channel that can edit a message it sent (streaming previews).
type Editor interface {
	Edit(ctx context.Context, chatID, messageID, text string) error
}

// Deleter is a channel that can delete a message it sent (a preview or a
// progress line that no reply took over).
type Deleter interface {
	Delete(ctx context.Context, chatID, messageID string) error
}

// Fitter is a channel that says whether a text goes out as one message
// (as the channel renders and splits it): an edit can then carry it whole.
// Without it the router assumes texts up to 3,500 characters fit.
type Fitter interface {
	Fits(text string) bool
}

// FileSender is a channel that can send a file (a local path or an URL).
type FileSender interface {
	SendFile(ctx context.Context, chatID string, f OutboundFile) (string, error)
}

// OutboundFile is a file to send. Exactly one of Path and URL is set.
type OutboundFile struct {
	Path    string
	URL     string
	Caption string
	Photo   bool // send as a photo (inline image) rather than a document
}

// Button is a choice offered under a message.
type Button struct {
	Label  string // what the user sees
	Action string // what comes back in Inbound.Action when pressed
}

// Asker is a channel that can show buttons under a message (Telegram inline
// keyboards, Discord message buttons). A press arrives as an Inbound with
// Action set, from the user who pressed it, in the same chat. Channels
// without buttons get the question as text and the user answers in words.
type Asker interface {
	Ask(ctx context.Context, m Outbound, buttons []Button) (string, error)
}

// Drafter is a channel that can show a message while it is being written
// as an animated draft (Telegram's sendMessageDraft, private chats only).
// A draft is not a message: the final reply is sent with Send, and the
// draft disappears. Draft returns ErrNoDrafts for a chat without drafts
// (a group); the router then previews with Editor.
type Drafter interface {
	// Draft shows text as the draft draftID (non-zero; one id per message
	// being written) in chatID.
	Draft(ctx context.Context, chatID string, draftID int64, text string) error
}

// ErrNoDrafts is returned by Drafter.Draft for a chat that has no drafts.
var ErrNoDrafts = errors.New("channels: this chat has no drafts")

// Priority says what an adapter's outbound pacing may do with a call when
// the platform's rate limits are reached.
type Priority int

const (
	// PriorityReply waits for its turn and is never dropped: replies,
	// files, the edit that turns a preview into the final reply.
	PriorityReply Priority = iota
	// PriorityPreview is dropped rather than made to wait long: drafts,
	// preview edits, tool progress, typing indicators, reactions. A dropped
	// call returns ErrPaced.
	PriorityPreview
)

type priorityKey struct{}

// WithPriority marks the outbound calls made with ctx as of priority p.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityOf returns the priority WithPriority put in ctx, PriorityReply
// if none.
func PriorityOf(ctx context.Context) Priority {
	p, _ := ctx.Value(priorityKey{}).(Priority)
	return p
}

// ErrPaced is returned for a PriorityPreview call that outbound pacing
// dropped instead of waiting for the platform's rate limit.
var ErrPaced = errors.New("channels: dropped by outbound pacing (rate limit)")

// ApprovalCall is one tool call waiting for approval.
type ApprovalCall struct {
	Tool      string `json:"tool"`
	Arguments string `json:"arguments"` // as the model wrote them (JSON)
}

// ApprovalQuestion is a paused turn's question to its user.
type ApprovalQuestion struct {
	ID       int64          `json:"id"` // answers name it: Action "approve:ID" or "deny:ID"
	Calls    []ApprovalCall `json:"calls"`
	Question string         `json:"question"` // in words, as other channels show it
}

// ApprovalAsker is a channel that delivers approval questions itself, in a
// form its clients can read (the chat API answers the paused request with
// the question and a structured field). Its users answer only through
// Inbound.Action ("approve:ID" or "deny:ID"), which the channel sets when
// the client the question was delivered to answers yes or no: a text "yes"
// from such a channel is an ordinary message. The ctx of AskApproval is
// marked with the message whose turn paused (WithInbound).
type ApprovalAsker interface {
	AskApproval(ctx context.Context, m Outbound, q ApprovalQuestion) (string, error)
}

// ApprovalAnswer reads a reply in words to an approval question: yes
// (approve is true), no, or neither (ok is false).
func ApprovalAnswer(text string) (approve, ok bool) {
	switch strings.ToLower(strings.Trim(strings.TrimSpace(text), ".!")) {
	case "yes", "y", "approve", "ok", "okay", "go", "go ahead", "sure":
		return true, true
	case "no", "n", "deny", "don't", "dont", "stop", "cancel":
		return false, true
	}
	return false, false
}
