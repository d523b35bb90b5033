// Package fallback owns the one rule of auto-sending: when a turn ends and
// the model never delivered a reply through a send tool, its final text is
// sent once; never both, and never the no-reply marker or an empty message.
package fallback

import "strings"

// NoReply is the marker with which the model chooses to stay silent.
const NoReply = "NO_REPLY"

// Decide returns the text to send automatically at the end of a turn and
// whether to send it. delivered is true when a send tool succeeded during the
// turn; final is the model's last text answer.
func Decide(delivered bool, final string) (string, bool) {
	if delivered {
		return "", false
	}
	text := strings.TrimSpace(final)
	if text == "" || IsNoReply(text) {
		return "", false
	}
	return text, true
}

// IsNoReply reports whether text is the no-reply marker (alone, trimmed).
func IsNoReply(text string) bool {
	return strings.TrimSpace(text) == NoReply
}
