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
	mustCompile(t)
	return StaticSource{SourceName: "builtin", List: []*Tool{t}}
}

var sendMessageParams = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"The message to send, in Markdown."}},"required":["text"],"additionalProperties":false}`)

// ChannelContext is the tool source bound to the turn's chat: send_message
// (always, when the turn has a chat).
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
				if err != nil {
					return "", fmt.Errorf("sending failed: %w", err)
				}
				if id == "" {
					return "sent", nil
				}
				return "sent (message id " + id + ")", nil
			},
		}
		t.schema = sendMessageSchema
		return []*Tool{t}
	}}
}

var sendMessageSchema = func() *Tool {
	t := &Tool{Name: "send_message", Parameters: sendMessageParams}
	mustCompile(t)
	return t
}().schema

func mustCompile(t *Tool) {
	if err := t.Compile(); err != nil {
		panic(err)
	}
}
