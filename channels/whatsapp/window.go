package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The 24-hour customer-service window: a business may send free-form
// messages to a user only within 24 hours of the user's last message;
// outside it only an approved template goes through (Meta answers
// anything else with error 131047). The adapter knows each chat's last
// message from its webhook and, after a restart or from another replica,
// from the store (Options.LatestInboundAt). A message outside the window
// goes out as the reminder template when one is configured; otherwise it
// is refused with an *OutsideWindowError, which is not
// channels.ErrUnavailable: the outbox drops it (an ERROR and
// switchboard_replies_dropped_total) instead of retrying it, and a direct
// send fails (switchboard_send_failures_total), after the adapter's own
// ERROR line. Never silently.

// Window is how long after a user's message the business may write freely.
const Window = 24 * time.Hour

// OutsideWindowError is a message not sent because the chat's 24-hour
// window is closed and no reminder template is configured.
type OutsideWindowError struct {
	ChatID string
	Last   time.Time     // the user's last message; zero: none known
	Age    time.Duration // how long ago that was
}

func (e *OutsideWindowError) Error() string {
	if e.Last.IsZero() {
		return fmt.Sprintf("whatsapp: not sent to %s: the user has never written, so only a template may start the conversation and channels.whatsapp.templates.reminder is not configured (or outside_window is drop)", e.ChatID)
	}
	return fmt.Sprintf("whatsapp: not sent to %s: the user's last message is %s old, past WhatsApp's 24-hour window, and channels.whatsapp.templates.reminder is not configured (or outside_window is drop)",
		e.ChatID, e.Age.Round(time.Minute))
}

// ErrOutsideWindow matches every *OutsideWindowError with errors.Is.
var ErrOutsideWindow = errors.New("whatsapp: outside the 24-hour window")

// Is makes errors.Is(err, ErrOutsideWindow) true.
func (e *OutsideWindowError) Is(target error) bool { return target == ErrOutsideWindow }

// windowOpen reports whether chatID's window is open now, and the user's
// last message as known. What the store cannot answer counts as open:
// Meta refuses a message outside the window (131047), and Send then
// tries the template.
func (a *Adapter) windowOpen(ctx context.Context, chatID string) (bool, time.Time) {
	a.mu.Lock()
	c := a.chat(chatID)
	last, closed := c.lastIn, c.closed
	a.mu.Unlock()
	now := a.now()
	if !last.IsZero() && now.Sub(last) < Window {
		return true, last
	}
	if a.latestAt != nil && !closed {
		stored, err := a.latestAt(ctx, chatID)
		if err != nil {
			a.log.Warn("whatsapp: the chat's last message is not known; sending as within the window", "chat", chatID, "err", err)
			return true, last
		}
		if stored.After(last) {
			last = stored
			a.mu.Lock()
			if c := a.chat(chatID); stored.After(c.lastIn) {
				c.lastIn = stored
			}
			a.mu.Unlock()
		}
	}
	return !last.IsZero() && now.Sub(last) < Window, last
}

// templateText is a text made fit for a template's body parameter: Meta
// refuses new lines, tabs and more than four spaces in a row there, and
// more than 1,024 characters.
func templateText(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	if r := []rune(text); len(r) > 1000 {
		text = string(r[:999]) + "…"
	}
	return text
}
