package discord

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// splitLimit is the size of one message part in characters. Discord allows
// 2000; the headroom covers the fence lines a split adds.
const splitLimit = 1900

// fence is an open fenced code block: its marker (``` or ~~~, possibly
// longer) and the whole opening line, e.g. "```go".
type fence struct{ marker, open string }

// splitMessage cuts text into parts of at most limit characters. It cuts at
// line ends where it can, at spaces inside over-long lines, and hard only
// inside a word longer than a part. A fenced code block that spans a cut is
// closed at the end of one part and reopened, with its language, at the
// start of the next, so each part renders on its own.
func splitMessage(text string, limit int) []string {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	if utf8.RuneCountInString(text) <= limit {
		return []string{text}
	}
	var (
		parts    []string
		cur      strings.Builder
		n        int    // characters in cur
		hdr      int    // bytes at the start of cur that reopen a fence
		open     *fence // fence open at the end of cur
		openedAt = -1   // byte offset in cur of the line that opened open
		openedTo int    // cur.Len() right after that line
	)
	flush := func() {
		s := cur.String()
		reopen := open
		if open != nil && openedAt >= 0 && cur.Len() == openedTo {
			// The fence opened on the last line and has no content yet:
			// move the opening line to the next part.
			s, open = s[:openedAt], nil
		}
		if strings.TrimSpace(s[min(hdr, len(s)):]) != "" {
			if open != nil {
				s = strings.TrimRight(s, "\n") + "\n" + open.marker
			}
			parts = append(parts, strings.TrimRightFunc(strings.TrimLeft(s, "\n"), unicode.IsSpace))
		}
		open = reopen
		cur.Reset()
		n, hdr, openedAt = 0, 0, -1
		if open != nil {
			cur.WriteString(open.open + "\n")
			n, hdr = utf8.RuneCountInString(open.open)+1, cur.Len()
		}
	}
	for _, line := range strings.SplitAfter(text, "\n") {
		next := fenceAfter(open, line)
		// The line's newline is not counted: at the end of a part it is
		// trimmed, or shared with the fence-closing line.
		size := func() int { return utf8.RuneCountInString(strings.TrimSuffix(line, "\n")) }
		if n+size()+closing(next) > limit && cur.Len() > hdr {
			flush()
		}
		// A line longer than a part: cut it, staying in the same fence.
		stay := open
		if next == nil {
			stay = nil
		}
		for size() > 0 && n+size()+closing(stay) > limit {
			avail := limit - n - closing(stay)
			if avail < 1 && cur.Len() > hdr {
				flush()
				continue
			}
			// A limit too small even for the fence lines a part repeats:
			// a character a part, over the limit, rather than no progress.
			avail = max(avail, 1)
			head, tail := cutLine(line, avail)
			cur.WriteString(head)
			n += utf8.RuneCountInString(head)
			flush()
			if open == nil {
				tail = strings.TrimLeft(tail, " ")
			}
			line = tail
		}
		if open == nil && next != nil {
			openedAt = cur.Len()
			openedTo = openedAt + len(line)
		}
		cur.WriteString(line)
		n += utf8.RuneCountInString(line)
		open = next
	}
	flush()
	return parts
}

// closing is the size of the line that closes f.
func closing(f *fence) int {
	if f == nil {
		return 0
	}
	return utf8.RuneCountInString(f.marker) + 1
}

// fenceAfter returns the fence state after line, given the state before.
func fenceAfter(open *fence, line string) *fence {
	t := strings.TrimRight(line, "\r\n")
	indent := len(t) - len(strings.TrimLeft(t, " "))
	if indent > 3 {
		return open
	}
	t = t[indent:]
	if open != nil {
		if strings.HasPrefix(t, open.marker) && strings.Trim(t, open.marker[:1]) == "" {
			return nil
		}
		return open
	}
	for _, c := range []string{"`", "~"} {
		if strings.HasPrefix(t, c+c+c) {
			m := t[:len(t)-len(strings.TrimLeft(t, c))]
			if c == "`" && strings.Contains(t[len(m):], "`") || len(t) > 64 {
				return nil // inline code, or too long an info string to reopen
			}
			return &fence{marker: m, open: t}
		}
	}
	return nil
}

// cutLine splits line after at most max characters: at the last space if
// there is one in the second half, else hard.
func cutLine(line string, max int) (head, tail string) {
	if max < 1 {
		max = 1
	}
	i, count := 0, 0
	for i < len(line) && count < max {
		_, size := utf8.DecodeRuneInString(line[i:])
		i += size
		count++
	}
	if sp := strings.LastIndexAny(line[:i], " \t"); sp > i/2 {
		return line[:sp+1], line[sp+1:]
	}
	return line[:i], line[i:]
}
