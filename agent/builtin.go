package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Builtin returns the builtin tool source: tools that need nothing but the
// process (current_time). now and loc may be nil for the real clock and UTC.
func Builtin(now func() time.Time, loc *time.Location) Source {
	if now == nil {
		now = time.Now
	}
	if loc == nil {
		loc = time.UTC
	}
	t := &Tool{
		Name:            "current_time",
		Description:     "Get the current date and time, optionally in a given IANA time zone (e.g. Europe/Berlin).",
		Parameters:      json.RawMessage(`{"type":"object","properties":{"timezone":{"type":"string","description":"IANA time zone name; default: the assistant's zone"}},"additionalProperties":false}`),
		ConcurrencySafe: true,
		Source:          "builtin",
		Fn: func(_ context.Context, args json.RawMessage) (string, error) {
			var a struct {
				Timezone string `json:"timezone"`
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return "", fmt.Errorf("bad arguments: %w", err)
			}
			l := loc
			if a.Timezone != "" {
				var err error
				if l, err = time.LoadLocation(a.Timezone); err != nil {
					return "", fmt.Errorf("unknown time zone %q: use an IANA name such as Europe/Berlin", a.Timezone)
				}
			}
			n := now().In(l)
			return fmt.Sprintf("%s (%s, UTC%s)", n.Format("Monday, 2 January 2006 15:04:05"), l, n.Format("-07:00")), nil
		},
	}
	t.CompileLater()
	return StaticSource{SourceName: "builtin", List: []*Tool{t}}
}

var sendMessageParams = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"The message to send, in Markdown."}},"required":["text"],"additionalProperties":false}`)

// ChannelContext is the tool source bound to the turn's chat: send_message
// (always, when the turn has a chat), send_file and send_photo where the
// chat takes files, react where it takes reactions.
func ChannelContext() Source {
	return SourceFunc{SourceName: "channel", Fn: func(info TurnInfo) []*Tool {
		chat := info.Chat
		if chat == nil {
			return nil
		}
		t := &Tool{
			Name:        "send_message",
			Description: "Send a message to the user in the current chat. This is how you reply; call it once per message.",
			Parameters:  sendMessageParams,
			Delivers:    true,
			Source:      "channel",
			Fn: func(ctx context.Context, args json.RawMessage) (string, error) {
				var a struct {
					Text string `json:"text"`
				}
				if err := json.Unmarshal(args, &a); err != nil {
					return "", fmt.Errorf("bad arguments: %w", err)
				}
				if strings.TrimSpace(a.Text) == "" {
					return "", errors.New("text must not be empty")
				}
				id, err := chat.Send(ctx, a.Text)
				if errors.Is(err, ErrSendQueued) {
					return "queued: the chat's platform is not reachable right now; the message is kept and will be delivered, in order, when it is back. Do not send it again.", nil
				}
				if err != nil {
					return "", fmt.Errorf("sending failed: %w", err)
				}
				if id == "" {
					return "sent", nil
				}
				return "sent (message id " + id + ")", nil
			},
		}
		t.later = sendMessageSchema.later
		tools := []*Tool{t}
		if c, ok := chat.(ChatFiles); ok && c.CanSendFiles() {
			tools = append(tools, fileTool("send_file", "Send a file to the user: a path in the workspace or an http(s) URL.", false, c),
				fileTool("send_photo", "Send an image to the user, shown inline: a path in the workspace or an http(s) URL.", true, c))
		}
		if c, ok := chat.(ChatReactions); ok && c.CanReact() {
			tools = append(tools, reactTool(c))
		}
		return tools
	}}
}

// ChatFiles is a chat that can receive files (optional capability).
type ChatFiles interface {
	CanSendFiles() bool
	// SendFile sends a workspace path or an http(s) URL; photo shows an image inline.
	SendFile(ctx context.Context, ref, caption string, photo bool) (string, error)
}

// ChatReactions is a chat where the bot can react to the user's message.
type ChatReactions interface {
	CanReact() bool
	React(ctx context.Context, emoji string) error
}

var (
	fileParams  = json.RawMessage(`{"type":"object","properties":{"file":{"type":"string","description":"a path in the workspace, or an http(s) URL"},"caption":{"type":"string"}},"required":["file"],"additionalProperties":false}`)
	reactParams = json.RawMessage(`{"type":"object","properties":{"emoji":{"type":"string","description":"one emoji, such as 👍"}},"required":["emoji"],"additionalProperties":false}`)
	fileSchema  = compiled("send_file", fileParams)
	reactSchema = compiled("react", reactParams)
)

// compiled is a tool of the program with a constant schema, resolved
// later (CompileLater), whose resolution the tools made with it share.
func compiled(name string, params json.RawMessage) *Tool {
	t := &Tool{Name: name, Parameters: params}
	t.CompileLater()
	return t
}

func fileTool(name, desc string, photo bool, c ChatFiles) *Tool {
	return &Tool{Name: name, Description: desc, Parameters: fileParams, Delivers: true, Source: "channel",
		later: fileSchema.later,
		Fn: func(ctx context.Context, args json.RawMessage) (string, error) {
			var a struct{ File, Caption string }
			if err := json.Unmarshal(args, &a); err != nil {
				return "", fmt.Errorf("bad arguments: %w", err)
			}
			id, err := c.SendFile(ctx, a.File, a.Caption, photo)
			if errors.Is(err, ErrSendQueued) {
				return "queued: the chat's platform is not reachable right now; the file is kept and will be delivered, in order, when it is back. Do not send it again.", nil
			}
			if err != nil {
				return "", fmt.Errorf("sending failed: %w", err)
			}
			return "sent (message id " + id + ")", nil
		}}
}

func reactTool(c ChatReactions) *Tool {
	return &Tool{Name: "react", Description: "React to the user's message with an emoji (a light acknowledgement; not a reply).",
		Parameters: reactParams, Source: "channel", ConcurrencySafe: true, later: reactSchema.later,
		Fn: func(ctx context.Context, args json.RawMessage) (string, error) {
			var a struct{ Emoji string }
			if err := json.Unmarshal(args, &a); err != nil {
				return "", fmt.Errorf("bad arguments: %w", err)
			}
			if strings.TrimSpace(a.Emoji) == "" {
				return "", errors.New("emoji must not be empty")
			}
			if err := c.React(ctx, a.Emoji); err != nil {
				return "", fmt.Errorf("reaction failed: %w", err)
			}
			return "reacted", nil
		}}
}

var sendMessageSchema = compiled("send_message", sendMessageParams)
