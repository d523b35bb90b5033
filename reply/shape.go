package reply

import (
	"fmt"
	"unicode/utf8"
)

// DefaultReplyMaxChars caps a reply to a chat: 16,000 characters is four
// Telegram messages or eight Discord ones, far more than an answer needs;
// past it a runaway reply (a dump, a loop) is cut rather than sent as
// dozens of messages.
const DefaultReplyMaxChars = 16_000

// replyCutNote ends a reply cut at the cap (%d: the cap).
const replyCutNote = "\n\n… [reply cut at %d characters]"

// Text is text as it may leave for a chat: the gateway's secrets replaced
// (Options.Redact) and cut at Options.MaxChars with a note. It is
// idempotent, so every send path may apply it.
func (s *Sender) Text(text string) string {
	if s.cfg.Redact != nil {
		text = s.cfg.Redact(text)
	}
	return capReply(text, s.cfg.MaxChars)
}

// capReply cuts text to at most limit characters (runes), the note
// included, at a rune boundary; text within the limit is returned as is.
func capReply(text string, limit int) string {
	if limit <= 0 || len(text) <= limit || utf8.RuneCountInString(text) <= limit {
		return text
	}
	note := fmt.Sprintf(replyCutNote, limit)
	keep := max(limit-utf8.RuneCountInString(note), 0)
	n := 0
	for i := range text {
		if n == keep {
			return text[:i] + note
		}
		n++
	}
	return text + note // not reached: text has more than limit runes
}
