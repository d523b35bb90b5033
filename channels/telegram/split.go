package telegram

import (
	"strings"
	"unicode"

	"github.com/switchboard-gateway/switchboard/internal/tghtml"
)

// partLimit is the size of one message part in UTF-16 units. Telegram
// allows 4096 counted after entity parsing; we count the raw HTML, which is
// never shorter, and keep some headroom on top.
const partLimit = 4000

// element is an open tag.
type element struct {
	open string // the start tag as written, attributes included
	name string
}

func (e *element) close() string { return "</" + e.name + ">" }

// atom is the smallest piece the splitter moves: one character, or one
// character reference, with the tags open around it.
type atom struct {
	raw   string
	text  string // the visible character
	units int    // UTF-16 length of raw
	stack []*element
}

// splitHTML splits Telegram HTML into parts of at most limit UTF-16 units.
// A split never falls inside a tag or a character reference; tags open at
// a split are closed at the end of one part and reopened at the start of
// the next (a code block continues as <pre><code class=…> in the next
// part). It prefers to split at a blank line, then at a line break, then
// at a space. Parts that would show only whitespace are dropped. For
// limits too small to hold the open tags, a part is sent without them.
func splitHTML(s string, limit int) []string {
	toks, err := tghtml.Tokenize(s)
	if err != nil { // not ours; degrade to escaped text
		toks, _ = tghtml.Tokenize(tghtml.Escape(tghtml.PlainText(s)))
	}
	atoms := atomize(toks)
	var parts []string
	for i := 0; i < len(atoms); {
		part, next, visible := buildPart(atoms, i, limit)
		if visible {
			parts = append(parts, part)
		}
		i = next
	}
	return parts
}

func atomize(toks []tghtml.Token) []atom {
	n := 0
	for _, t := range toks {
		n += len(t.Raw)
	}
	var (
		atoms = make([]atom, 0, n)
		stack []*element // replaced, never mutated, so atoms can share it
	)
	for _, t := range toks {
		switch t.Kind {
		case tghtml.StartTag:
			next := make([]*element, len(stack), len(stack)+1)
			copy(next, stack)
			stack = append(next, &element{open: t.Raw, name: t.Name})
		case tghtml.EndTag:
			for j := len(stack) - 1; j >= 0; j-- {
				if stack[j].name == t.Name {
					stack = stack[:j:j]
					break
				}
			}
		case tghtml.Entity:
			atoms = append(atoms, atom{raw: t.Raw, text: t.Text, units: tghtml.UTF16Len(t.Raw), stack: stack})
		case tghtml.Text:
			for _, r := range t.Raw {
				c := string(r)
				atoms = append(atoms, atom{raw: c, text: c, units: tghtml.UTF16Len(c), stack: stack})
			}
		}
	}
	return atoms
}

// partBuilder accumulates one part and tracks the tags open in it.
type partBuilder struct {
	buf   []byte
	units int
	stack []*element
}

func commonPrefix(a, b []*element) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// transitionCost is the cost of moving from the open tags of b to stack.
func (b *partBuilder) transitionCost(stack []*element) int {
	n, c := commonPrefix(b.stack, stack), 0
	for _, e := range b.stack[n:] {
		c += len(e.close())
	}
	for _, e := range stack[n:] {
		c += tghtml.UTF16Len(e.open)
	}
	return c
}

func (b *partBuilder) transition(stack []*element) {
	n := commonPrefix(b.stack, stack)
	for j := len(b.stack) - 1; j >= n; j-- {
		b.write(b.stack[j].close())
	}
	for _, e := range stack[n:] {
		b.write(e.open)
	}
	b.stack = stack
}

func (b *partBuilder) write(s string) {
	b.buf = append(b.buf, s...)
	b.units += tghtml.UTF16Len(s)
}

func closeCost(stack []*element) int {
	c := 0
	for _, e := range stack {
		c += len(e.close())
	}
	return c
}

// Split points by preference, and how full a part must be to use them.
const (
	cutSpace = iota + 1
	cutLine
	cutParagraph
)

var minFill = [...]float64{cutSpace: 0.5, cutLine: 0.5, cutParagraph: 0.25}

type cutPoint struct {
	next  int // first atom of the next part
	buf   int
	units int
	stack []*element
}

// buildPart builds the part that starts at atoms[start]. It returns the
// part, the index of the next part's first atom and whether the part shows
// anything but whitespace.
func buildPart(atoms []atom, start, limit int) (string, int, bool) {
	var b partBuilder
	first := atoms[start]
	// If the open tags don't fit around even one atom, go without them.
	plain := tghtml.UTF16Len(openTags(first.stack))+first.units+closeCost(first.stack) > limit
	var cuts [cutParagraph + 1]cutPoint
	visible := false
	i := start
	for ; i < len(atoms); i++ {
		a := atoms[i]
		stack := a.stack
		if plain {
			stack = nil
		}
		if b.units+b.transitionCost(stack)+a.units+closeCost(stack) > limit && i > start {
			break
		}
		b.transition(stack)
		b.write(a.raw)
		if !isSpace(a.text) {
			visible = true
			continue
		}
		if !visible {
			continue // a part must not end before it shows something
		}
		kind := cutSpace
		if a.text == "\n" {
			kind = cutLine
			if i > start && atoms[i-1].text == "\n" {
				kind = cutParagraph
			}
		}
		cuts[kind] = cutPoint{next: i + 1, buf: len(b.buf), units: b.units, stack: b.stack}
	}
	if i < len(atoms) {
		for kind := cutParagraph; kind >= cutSpace; kind-- {
			c := cuts[kind]
			if c.next > start && float64(c.units) >= minFill[kind]*float64(limit) {
				b.buf, b.units, b.stack, i = b.buf[:c.buf], c.units, c.stack, c.next
				break
			}
		}
	}
	b.transition(nil)
	if !visible { // only whitespace so far, but a cut may have dropped content: recheck
		visible = hasVisible(atoms[start:i])
	}
	return string(b.buf), i, visible
}

func openTags(stack []*element) string {
	var b strings.Builder
	for _, e := range stack {
		b.WriteString(e.open)
	}
	return b.String()
}

func isSpace(s string) bool {
	for _, r := range s {
		if !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

func hasVisible(atoms []atom) bool {
	for _, a := range atoms {
		if !isSpace(a.text) {
			return true
		}
	}
	return false
}
