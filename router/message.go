package router

import (
	"fmt"
	"strings"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
)

// toMessage turns an inbound message into the model's user message. In a
// group it starts with its author ("[from Ada (@ada)]"), so the history
// says who wrote each message; an attached file's text carries the
// untrusted label (it is data, whoever sent it).
func toMessage(in channels.Inbound, vision bool) llm.Message {
	var b strings.Builder
	if in.ChatType == channels.Group {
		fmt.Fprintf(&b, "[from %s]\n", author(in))
	}
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
			fmt.Fprintf(&b, "[file %s (%s, %d bytes)]\n%s\n```\n%s\n```", nameOr(a.Name, "file"), a.MIME, a.Size,
				agent.UntrustedLabel("the attached file "+nameOr(a.Name, "file")), a.Text)
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

// author names who wrote a group message: their display name and
// @handle, else their id. Brackets and line breaks are taken out of names,
// so that no name can close the line and start another.
func author(in channels.Inbound) string {
	clean := strings.NewReplacer("[", "(", "]", ")", "\n", " ", "\r", " ").Replace
	if who := agent.UserLabel(clean(strings.TrimSpace(in.DisplayName)), clean(strings.TrimSpace(in.UserName))); who != "" {
		return who
	}
	if in.UserID != "" {
		return "user " + clean(in.UserID)
	}
	return "someone"
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
