package slack

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxMessageChars is the size of one message part in characters. Slack
// truncates a message's text past 40,000 characters (its hard cap), but
// asks apps to keep it under 4,000 for readability: a longer message is a
// wall the reader scrolls through, so a long reply goes out as several
// messages of at most 4,000, each cut at a paragraph where it can be.
// (A section block's text holds at most 3,000: Split(text, 3000) for one.)
const MaxMessageChars = 4000

// fence is Slack's code block marker; a part that ends inside a block
// closes it with closeFence and the next reopens it with openFence.
const (
	fence      = "```"
	openFence  = fence + "\n"
	closeFence = "\n" + fence
	// minFenced is the smallest max at which parts repeat fences: below
	// it the fence lines would leave no room for the text.
	minFenced = 16
)

// Split cuts text into parts of at most max characters (MaxMessageChars
// when max < 1). It cuts at a blank line if there is one in the second
// half of a part, else at a line end, else at a space, and inside a word
// only when a part holds no boundary. It never cuts inside a <…> link or
// mention, a character reference (&amp;) or a ``` marker unless that one
// alone is longer than a part. A code block open at a cut is closed at the
// end of the part and reopened at the start of the next, so each part
// renders on its own. The whitespace at a cut is dropped; parts are
// trimmed and never blank. Same input, same parts.
func Split(text string, max int) []string {
	if max < 1 {
		max = MaxMessageChars
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	if utf8.RuneCountInString(text) <= max {
		return []string{text}
	}
	sc := scan(text, max >= minFenced)
	var parts []string
	for s := 0; s < len(text); {
		prefix := ""
		if sc.code[s] {
			prefix = openFence
		}
		room := max - utf8.RuneCountInString(prefix)
		var e int
		if sc.runes[len(text)]-sc.runes[s] <= room-sc.closing(len(text)) {
			e = len(text)
		} else {
			e = sc.cut(s, room)
		}
		body := strings.TrimRightFunc(text[s:e], unicode.IsSpace)
		if strings.TrimSpace(body) != "" {
			part := prefix + body
			if sc.code[e] && sc.fenced {
				part += closeFence
			}
			parts = append(parts, part)
		}
		s = sc.skip(e)
	}
	return parts
}

// scanned is text with, for each byte offset, what a cut there would do.
type scanned struct {
	text   string
	fenced bool   // fences are repeated across parts
	runes  []int  // runes before each offset
	atom   []bool // the offset is inside a rune, <…>, &…; or ```
	code   []bool // a code block is open at the offset
	filled []bool // the open block has something visible before the offset
	next   []int  // the first offset at or after it that is not whitespace
}

func scan(text string, fenced bool) *scanned {
	n := len(text)
	sc := &scanned{text: text, fenced: fenced,
		runes: make([]int, n+1), atom: make([]bool, n+1),
		code: make([]bool, n+1), filled: make([]bool, n+1), next: make([]int, n+1)}
	count := 0
	for i := 0; i < n; count++ {
		_, size := utf8.DecodeRuneInString(text[i:])
		for j := i; j < i+size; j++ {
			sc.runes[j] = count
		}
		i += size
	}
	sc.runes[n] = count
	inCode, filled := false, false
	for i := 0; i < n; {
		size := atomLen(text[i:])
		for j := i; j < i+size; j++ {
			sc.atom[j] = j > i
			sc.code[j], sc.filled[j] = inCode, filled
		}
		if fenced && strings.HasPrefix(text[i:], fence) {
			inCode, filled = !inCode, false
		} else if !isSpace(text[i]) {
			filled = true
		}
		i += size
	}
	sc.code[n], sc.filled[n] = inCode, filled
	sc.next[n] = n
	for i := n - 1; i >= 0; i-- {
		sc.next[i] = i
		if isSpace(text[i]) {
			sc.next[i] = sc.next[i+1]
		}
	}
	return sc
}

// atomLen is the length of what must stay whole at the start of s: a
// ``` marker, a <…> without a line break, a character reference, or
// one rune.
func atomLen(s string) int {
	switch {
	case strings.HasPrefix(s, fence):
		return len(fence)
	case s[0] == '<':
		if end := strings.IndexAny(s[1:], "<>\n"); end >= 0 && s[1+end] == '>' {
			return end + 2
		}
	case s[0] == '&':
		if end := strings.IndexByte(s, ';'); end > 1 && end <= 10 && isRefName(s[1:end]) {
			return end + 1
		}
	}
	_, size := utf8.DecodeRuneInString(s)
	return size
}

func isRefName(s string) bool {
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '#') {
			return false
		}
	}
	return true
}

// closing is the size of the fence a part ending at e adds.
func (sc *scanned) closing(e int) int {
	if sc.code[e] {
		return utf8.RuneCountInString(closeFence)
	}
	return 0
}

// fits reports whether text[s:e] and its closing fence fit in room.
func (sc *scanned) fits(s, e, room int) bool {
	return sc.runes[e]-sc.runes[s]+sc.closing(e) <= room
}

// cut picks where the part starting at s ends, holding at most room
// characters: the last blank line, line end or space in its second half,
// in that order (a code block only at a line end); then the last of them
// anywhere; then the last offset outside an atom; then, for an atom
// longer than a part, any rune.
func (sc *scanned) cut(s, room int) int {
	const para, line, word, safe, kinds = 0, 1, 2, 3, 4
	var best [kinds]int
	end := s
	for end < len(sc.text) && sc.runes[end]-sc.runes[s] < room {
		_, size := utf8.DecodeRuneInString(sc.text[end:])
		end += size
	}
	for e := end; e > s; e-- {
		if sc.atom[e] || !sc.fits(s, e, room) || sc.emptyBlock(e) {
			continue
		}
		if best[safe] == 0 {
			best[safe] = e
		}
		c := sc.text[e]
		switch {
		case c == '\n' && e+1 < len(sc.text) && sc.text[e+1] == '\n':
			if best[para] == 0 {
				best[para] = e
			}
			fallthrough
		case c == '\n':
			if best[line] == 0 {
				best[line] = e
			}
		case (c == ' ' || c == '\t') && !sc.code[e]: // code is cut at line ends
			if best[word] == 0 {
				best[word] = e
			}
		}
	}
	half := sc.runes[s] + room/2
	for k := para; k <= word; k++ {
		if best[k] > 0 && sc.runes[best[k]] >= half {
			return best[k]
		}
	}
	for k := para; k <= safe; k++ {
		if best[k] > 0 {
			return best[k]
		}
	}
	return sc.cutHard(s, room)
}

// emptyBlock reports whether a cut at e, in a code block, would leave an
// empty block at the end of this part (the block opened just before) or
// at the start of the next (it closes just after).
func (sc *scanned) emptyBlock(e int) bool {
	if !sc.code[e] {
		return false
	}
	return !sc.filled[e] || strings.HasPrefix(sc.text[sc.next[e]:], fence)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// cutHard cuts inside an atom longer than a part: the most runes that fit.
func (sc *scanned) cutHard(s, room int) int {
	e := s
	for e < len(sc.text) {
		_, size := utf8.DecodeRuneInString(sc.text[e:])
		if !sc.fits(s, e+size, room) {
			break
		}
		e += size
	}
	if e == s { // room for not even one rune: send it over the limit rather than loop
		_, size := utf8.DecodeRuneInString(sc.text[e:])
		e += size
	}
	return e
}

// skip returns where the next part starts after a cut at e: past the
// whitespace, but inside a code block only past one line break, so the
// next line keeps its indentation.
func (sc *scanned) skip(e int) int {
	if sc.code[e] {
		if e < len(sc.text) && (sc.text[e] == '\n' || sc.text[e] == ' ') {
			return e + 1
		}
		return e
	}
	for e < len(sc.text) {
		c, size := utf8.DecodeRuneInString(sc.text[e:])
		if !unicode.IsSpace(c) {
			break
		}
		e += size
	}
	return e
}
