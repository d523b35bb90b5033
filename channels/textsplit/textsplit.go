// Package textsplit cuts a reply's text into the parts a platform takes,
// counted in UTF-16 code units (WhatsApp's and Matrix's measure): at a
// blank line, else a line break, else a space, with code blocks closed and
// reopened across a cut.
package textsplit

import (
	"strings"
	"unicode/utf8"
)

// Units is the length of s in UTF-16 code units, as WhatsApp and Matrix
// count a message.
func Units(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// Split cuts text into parts of at most max UTF-16 units: at a blank
// line, else a line break, else a space, else anywhere (between runes).
// A code block cut in two is closed and opened again. The same text
// always gives the same parts.
func Split(text string, max int) []string {
	const fence = "```"
	var out []string
	reopen := false
	for text != "" {
		if reopen {
			text = fence + "\n" + text
		}
		if Units(text) <= max {
			if text = strings.TrimRight(text, " \n"); strings.TrimSpace(text) != "" {
				out = append(out, text)
			}
			break
		}
		cut := cutAt(text, max-len("\n"+fence))
		part, rest := strings.TrimRight(text[:cut], " \n"), strings.TrimLeft(text[cut:], " \n")
		reopen = strings.Count(part, fence)%2 == 1
		if reopen {
			part += "\n" + fence
		}
		if strings.TrimSpace(part) != "" {
			out = append(out, part)
		}
		text = rest
	}
	return out
}

// cutAt is the byte offset where a part of at most max units ends.
func cutAt(text string, max int) int {
	end, n := 0, 0
	for i, r := range text {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if n+w > max {
			break
		}
		n += w
		end = i + utf8.RuneLen(r)
	}
	window := text[:end]
	for _, sep := range []string{"\n\n", "\n", " "} {
		if i := strings.LastIndex(window, sep); i > len(window)/3 {
			return i + len(sep)
		}
	}
	return end
}
