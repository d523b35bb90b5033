package channels

import (
	"slices"
	"strings"
)

// Access is a channel's admission rule. Users holds platform user ids and
// @usernames; "*" admits everyone. The zero value admits nobody. Spaces and
// Chats, when not empty, further restrict group chats to those servers
// (Inbound.Space) and chats (Inbound.ChatID); private chats are not affected.
type Access struct {
	AllowAll bool
	Users    []string
	Spaces   []string
	Chats    []string
	// Pairing lets an unknown user in a private chat ask for access with a
	// one-time code the operator approves (switchboard pairing approve).
	Pairing bool
	// Admins holds the platform user ids of the operators (no usernames:
	// a name can pass to someone else). They are admitted like Users and
	// see operator matters in /status; everyone else sees their own
	// chat's status only. AllAdmins makes every user an operator (the
	// terminal of `switchboard chat`).
	Admins    []string
	AllAdmins bool
}

// Allows reports whether the author of in may use the bot here.
func (a Access) Allows(in Inbound) bool {
	if a.AllowAll {
		return true
	}
	return a.AllowsPlace(in) && (a.allowsUser(in) || a.IsAdmin(in))
}

// IsAdmin reports whether the author of in is an operator.
func (a Access) IsAdmin(in Inbound) bool {
	if a.AllAdmins {
		return true
	}
	return in.UserID != "" && slices.Contains(a.Admins, in.UserID)
}

// AllowsPlace applies the server and chat restrictions to group chats.
func (a Access) AllowsPlace(in Inbound) bool {
	if in.ChatType != Group {
		return true
	}
	return (len(a.Spaces) == 0 || slices.Contains(a.Spaces, in.Space)) &&
		(len(a.Chats) == 0 || slices.Contains(a.Chats, in.ChatID))
}

func (a Access) allowsUser(in Inbound) bool {
	for _, u := range a.Users {
		u = strings.TrimSpace(u)
		switch {
		case u == "*":
			return true
		case strings.HasPrefix(u, "@"):
			if in.UserName != "" && strings.EqualFold(u[1:], in.UserName) {
				return true
			}
		case u != "" && u == in.UserID:
			return true
		}
	}
	return false
}
