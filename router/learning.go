package router

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/store"
)

// Learning is what the /memory and /profile commands need from what the bot
// learns about people (packages memory and profile, wired in gateway). Every
// method answers for the author of in, in in's chat: a group chat sees and
// deletes only the group's memories, never private ones or profiles.
type Learning interface {
	Memories(ctx context.Context, in channels.Inbound) ([]store.Memory, error)
	ForgetMemory(ctx context.Context, in channels.Inbound, id int64) (bool, error)
	Profile(ctx context.Context, in channels.Inbound) ([]store.ProfileEntry, error)
	ForgetProfile(ctx context.Context, in channels.Inbound, dimension string) (int64, error)
}

// learningHelp is added to /help when learning is on.
const learningHelp = `
/memory — what I remember (/memory forget N deletes one, /memory forget all deletes all)
/profile — what I know about you (/profile forget DIMENSION or all)`

// learningCommand answers /memory and /profile. ok is false when learning
// is off, so the command goes through the queue like any other text.
func learningCommand(ctx context.Context, l Learning, name, args string, in channels.Inbound) (string, bool) {
	if l == nil {
		return "", false
	}
	if name == "profile" {
		return profileCommand(ctx, l, in, args), true
	}
	return memoryCommand(ctx, l, in, args), true
}

func memoryCommand(ctx context.Context, l Learning, in channels.Inbound, args string) string {
	group := in.ChatType == channels.Group
	about := "you"
	if group {
		about = "this group"
	}
	list, err := l.Memories(ctx, in)
	if err != nil {
		return "Sorry, I can't read my memory right now."
	}
	verb, arg, _ := strings.Cut(strings.TrimSpace(args), " ")
	switch strings.ToLower(verb) {
	case "":
		if len(list) == 0 {
			return fmt.Sprintf("I don't remember anything about %s yet.", about)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "What I remember about %s:\n", about)
		for _, m := range list {
			fmt.Fprintf(&b, "%d. %s\n", m.ID, strings.Join(strings.Fields(m.Text), " "))
		}
		b.WriteString("Send /memory forget N to delete one, /memory forget all to delete everything.")
		if group {
			b.WriteString(" (What I remember about each of you privately is only shown in a private chat with me.)")
		}
		return b.String()
	case "forget":
		arg = strings.TrimPrefix(strings.TrimSpace(arg), "#")
		if strings.EqualFold(arg, "all") {
			n := 0
			for _, m := range list {
				if ok, err := l.ForgetMemory(ctx, in, m.ID); err == nil && ok {
					n++
				}
			}
			return fmt.Sprintf("Forgot %d memories about %s.", n, about)
		}
		id, err := strconv.ParseInt(arg, 10, 64)
		if err != nil {
			return "Send /memory forget N with a number from /memory, or /memory forget all."
		}
		ok, err := l.ForgetMemory(ctx, in, id)
		switch {
		case err != nil:
			return "Sorry, I couldn't forget that right now."
		case !ok:
			return fmt.Sprintf("There is no memory %d about %s; /memory lists them.", id, about)
		}
		return fmt.Sprintf("Forgotten: %d.", id)
	}
	return "Send /memory to list what I remember, or /memory forget N to delete one."
}

func profileCommand(ctx context.Context, l Learning, in channels.Inbound, args string) string {
	if in.ChatType == channels.Group {
		return "Your profile is private: send /profile in a private chat with me."
	}
	verb, arg, _ := strings.Cut(strings.TrimSpace(args), " ")
	switch strings.ToLower(verb) {
	case "":
		es, err := l.Profile(ctx, in)
		if err != nil {
			return "Sorry, I can't read your profile right now."
		}
		if len(es) == 0 {
			return "I don't know anything about you yet: tell me your name, where you live or how you like answers, and I'll remember."
		}
		var b strings.Builder
		b.WriteString("What I know about you:\n")
		for _, e := range es {
			fmt.Fprintf(&b, "- %s: %s (since %s)\n", profileLabels[e.Dimension], strings.Join(strings.Fields(e.Value), " "),
				e.CreatedAt.Format("2 Jan 2006"))
		}
		b.WriteString("Send /profile forget " + strings.Join(store.ProfileDimensions, "|") + " to delete one, /profile forget all to delete everything.")
		return b.String()
	case "forget":
		dim := strings.ToLower(strings.TrimSpace(arg))
		if dim == "all" {
			dim = ""
		} else if _, ok := profileLabels[dim]; !ok {
			return "Send /profile forget with one of " + strings.Join(store.ProfileDimensions, ", ") + ", or all."
		}
		n, err := l.ForgetProfile(ctx, in, dim)
		switch {
		case err != nil:
			return "Sorry, I couldn't change your profile right now."
		case n == 0:
			return "There was nothing to forget."
		case dim == "":
			return "Forgot your whole profile."
		}
		return "Forgot your " + strings.ToLower(profileLabels[dim]) + "."
	}
	return "Send /profile to see what I know about you, or /profile forget DIMENSION."
}

var profileLabels = map[string]string{
	store.ProfileName:        "Name",
	store.ProfileLanguage:    "Language",
	store.ProfileTimezone:    "Time zone",
	store.ProfilePreferences: "Preferences",
	store.ProfileStyle:       "Communication style",
}
