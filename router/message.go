package router

import (
	"fmt"
	"strings"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
)

// toMessage turns an inbound message into the model's user message.
func toMessage(in channels.Inbound, vision bool) llm.Message {
	var b strings.Builder
	if q := in.Quote; q != nil && strings.TrimSpace(q.Text) != "" {
		who := q.Author
		if q.FromBot {
			who = "you"
		}
		if who == "" {
			who = "a message"
		}
		fmt.Fprintf(&b, "[replying to %s: %q]\n", who, clip(q.Text, 1000))
	}
	b.WriteString(in.Text)
	m := llm.Message{Role: llm.RoleUser}
	for _, a := range in.Attachments {
		b.WriteString("\n")
		switch {
		case a.Kind == channels.Image && vision && len(a.Data) > 0:
			m.Images = append(m.Images, llm.Image{MIME: a.MIME, Data: a.Data})
			fmt.Fprintf(&b, "[image attached: %s]", nameOr(a.Name, "photo"))
		case a.Kind == channels.Image:
			fmt.Fprintf(&b, "[image attached: %s; this model cannot see images]", nameOr(a.Name, "photo"))
		case a.Kind == channels.Audio && a.Text != "":
			fmt.Fprintf(&b, "[voice message, transcribed]: %s", a.Text)
		case a.Kind == channels.Audio && a.Note != "":
			b.WriteString("[voice message]")
		case a.Kind == channels.Audio:
			b.WriteString("[voice message: transcription is not configured, so its content is unknown]")
		case a.Text != "":
			fmt.Fprintf(&b, "[file %s (%s, %d bytes)]\n```\n%s\n```", nameOr(a.Name, "file"), a.MIME, a.Size, a.Text)
		default:
			fmt.Fprintf(&b, "[%s attached: %s (%s, %d bytes)]", a.Kind, nameOr(a.Name, "file"), a.MIME, a.Size)
		}
		if a.Note != "" {
			b.WriteString(" " + a.Note)
		}
	}
	m.Content = strings.TrimSpace(b.String())
	return m
}

func nameOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
