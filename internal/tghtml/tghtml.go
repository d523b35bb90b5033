// Package tghtml knows the subset of HTML that the Telegram Bot API accepts
// with parse_mode=HTML. The Telegram adapter renders into it and the fake
// Bot API (internal/tgfake) validates with it, so both sides agree on one
// definition of "well-formed".
//
// The validator is deliberately stricter than Telegram: besides the syntax
// Telegram rejects with "can't parse entities", it also enforces the nesting
// rules of the Bot API documentation (pre and code contain only text, links
// do not nest, blockquotes do not nest), which Telegram itself repairs
// silently. Output that passes Validate therefore renders as intended.
package tghtml

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind is the kind of a Token.
type Kind int

const (
	Text     Kind = iota // literal text, no markup
	Entity               // one character reference such as &amp; or &#128512;
	StartTag             // <name attr="value">
	EndTag               // </name>
)

// Attr is one attribute of a start tag; Value is decoded.
type Attr struct {
	Name  string
	Value string
	Bare  bool // written without a value, as in <blockquote expandable>
}

// Token is one lexical piece of a Telegram HTML string.
type Token struct {
	Kind   Kind
	Raw    string // the exact source bytes
	Name   string // lowercased tag name, for StartTag and EndTag
	Attrs  []Attr // for StartTag
	Text   string // decoded text, for Text and Entity
	Offset int    // byte offset of Raw in the source
}

// Tokenize splits s into tokens. It fails on anything that is not a tag, a
// supported character reference or plain text: a bare '<', '>' or '&', an
// unknown named entity, a malformed tag.
func Tokenize(s string) ([]Token, error) {
	var toks []Token
	i := 0
	for i < len(s) {
		switch s[i] {
		case '<':
			t, n, err := lexTag(s, i)
			if err != nil {
				return nil, err
			}
			toks = append(toks, t)
			i += n
		case '&':
			r, n, ok := lexEntity(s[i:])
			if !ok {
				return nil, fmt.Errorf("unsupported HTML entity at byte offset %d", i)
			}
			toks = append(toks, Token{Kind: Entity, Raw: s[i : i+n], Text: string(r), Offset: i})
			i += n
		case '>':
			return nil, fmt.Errorf("unexpected '>' at byte offset %d", i)
		default:
			j := i
			for j < len(s) && s[j] != '<' && s[j] != '&' && s[j] != '>' {
				j++
			}
			toks = append(toks, Token{Kind: Text, Raw: s[i:j], Text: s[i:j], Offset: i})
			i = j
		}
	}
	return toks, nil
}

// lexEntity reads a character reference at the start of s. Telegram supports
// all numeric references and the named ones &lt; &gt; &amp; &quot;.
func lexEntity(s string) (rune, int, bool) {
	end := strings.IndexByte(s, ';')
	if end < 2 || end > 12 {
		return 0, 0, false
	}
	body := s[1:end]
	switch body {
	case "lt":
		return '<', end + 1, true
	case "gt":
		return '>', end + 1, true
	case "amp":
		return '&', end + 1, true
	case "quot":
		return '"', end + 1, true
	}
	if body[0] != '#' || len(body) < 2 {
		return 0, 0, false
	}
	digits, base := body[1:], 10
	if digits[0] == 'x' || digits[0] == 'X' {
		digits, base = digits[1:], 16
	}
	if digits == "" || strings.ContainsAny(digits, "+-_") {
		return 0, 0, false
	}
	v, err := strconv.ParseUint(digits, base, 32)
	if err != nil || v == 0 || v > utf8.MaxRune || (v >= 0xD800 && v <= 0xDFFF) {
		return 0, 0, false
	}
	return rune(v), end + 1, true
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

// lexTag reads a start or end tag at s[at].
func lexTag(s string, at int) (Token, int, error) {
	i := at + 1
	end := false
	if i < len(s) && s[i] == '/' {
		end = true
		i++
	}
	start := i
	for i < len(s) && isNameByte(s[i]) {
		i++
	}
	if i == start {
		return Token{}, 0, fmt.Errorf("unexpected '<' at byte offset %d", at)
	}
	t := Token{Name: strings.ToLower(s[start:i]), Offset: at}
	if end {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) || s[i] != '>' {
			return Token{}, 0, fmt.Errorf("unclosed end tag at byte offset %d", at)
		}
		t.Kind, t.Raw = EndTag, s[at:i+1]
		return t, i + 1 - at, nil
	}
	t.Kind = StartTag
	for {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) {
			return Token{}, 0, fmt.Errorf("unclosed start tag at byte offset %d", at)
		}
		if s[i] == '>' {
			t.Raw = s[at : i+1]
			return t, i + 1 - at, nil
		}
		ns := i
		for i < len(s) && isNameByte(s[i]) {
			i++
		}
		if i == ns {
			return Token{}, 0, fmt.Errorf("empty attribute name in tag at byte offset %d", at)
		}
		a := Attr{Name: strings.ToLower(s[ns:i])}
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) || s[i] != '=' {
			a.Bare = true
			t.Attrs = append(t.Attrs, a)
			continue
		}
		i++
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) {
			return Token{}, 0, fmt.Errorf("unclosed start tag at byte offset %d", at)
		}
		var raw string
		if q := s[i]; q == '"' || q == '\'' {
			j := strings.IndexByte(s[i+1:], q)
			if j < 0 {
				return Token{}, 0, fmt.Errorf("unclosed attribute value in tag at byte offset %d", at)
			}
			raw = s[i+1 : i+1+j]
			i += j + 2
		} else {
			vs := i
			for i < len(s) && !isSpace(s[i]) && s[i] != '>' && s[i] != '"' && s[i] != '\'' && s[i] != '<' {
				i++
			}
			raw = s[vs:i]
		}
		v, err := decodeAttr(raw)
		if err != nil {
			return Token{}, 0, fmt.Errorf("attribute %q in tag at byte offset %d: %w", a.Name, at, err)
		}
		a.Value = v
		t.Attrs = append(t.Attrs, a)
	}
}

func decodeAttr(raw string) (string, error) {
	if strings.IndexByte(raw, '<') >= 0 {
		return "", fmt.Errorf("unexpected '<' in attribute value")
	}
	if strings.IndexByte(raw, '&') < 0 {
		return raw, nil
	}
	var b strings.Builder
	for i := 0; i < len(raw); {
		if raw[i] != '&' {
			b.WriteByte(raw[i])
			i++
			continue
		}
		r, n, ok := lexEntity(raw[i:])
		if !ok {
			return "", fmt.Errorf("unsupported HTML entity")
		}
		b.WriteRune(r)
		i += n
	}
	return b.String(), nil
}

// formatting tags may contain and be part of any entity except pre and code.
var formatting = map[string]bool{
	"b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true,
	"s": true, "strike": true, "del": true, "tg-spoiler": true, "span": true,
}

// Validate reports whether s is a message Telegram accepts with
// parse_mode=HTML and returns its visible text (tags removed, character
// references decoded). Errors read like Telegram's "can't parse entities"
// details.
func Validate(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("text must be encoded in UTF-8")
	}
	toks, err := Tokenize(s)
	if err != nil {
		return "", err
	}
	var (
		text  strings.Builder
		stack []string
		// inside a <pre>: 0 = nothing yet, 1 = text seen, 2 = inside its
		// <code>, 3 = after its </code>
		preState int
	)
	top := func() string {
		if len(stack) == 0 {
			return ""
		}
		return stack[len(stack)-1]
	}
	for _, t := range toks {
		switch t.Kind {
		case Text, Entity:
			if top() == "pre" {
				if preState == 3 {
					return "", fmt.Errorf("text after </code> inside <pre> at byte offset %d", t.Offset)
				}
				preState = 1
			}
			text.WriteString(t.Text)
		case StartTag:
			if err := checkStart(t, stack, preState); err != nil {
				return "", err
			}
			if t.Name == "pre" {
				preState = 0
			}
			if t.Name == "code" && top() == "pre" {
				preState = 2
			}
			stack = append(stack, t.Name)
		case EndTag:
			if len(stack) == 0 {
				return "", fmt.Errorf("unmatched end tag at byte offset %d, expected end of text, found \"</%s>\"", t.Offset, t.Name)
			}
			if top() != t.Name {
				return "", fmt.Errorf("unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"", t.Offset, top(), t.Name)
			}
			stack = stack[:len(stack)-1]
			if t.Name == "code" && top() == "pre" {
				preState = 3
			}
		}
	}
	if len(stack) > 0 {
		return "", fmt.Errorf("can't find end tag corresponding to start tag \"%s\"", top())
	}
	return text.String(), nil
}

func checkStart(t Token, stack []string, preState int) error {
	parent := ""
	if len(stack) > 0 {
		parent = stack[len(stack)-1]
	}
	if err := checkAttrs(t, parent); err != nil {
		return err
	}
	switch parent {
	case "code":
		return fmt.Errorf("tag \"%s\" inside <code> at byte offset %d", t.Name, t.Offset)
	case "pre":
		if t.Name != "code" || preState != 0 {
			return fmt.Errorf("tag \"%s\" inside <pre> at byte offset %d: only one <code> may be nested in <pre>", t.Name, t.Offset)
		}
	}
	for _, anc := range stack {
		switch {
		case t.Name == "blockquote":
			return fmt.Errorf("blockquote inside <%s> at byte offset %d: blockquotes can't be nested", anc, t.Offset)
		case t.Name == "a" && anc == "a":
			return fmt.Errorf("link inside a link at byte offset %d", t.Offset)
		case (t.Name == "pre" || t.Name == "code") && (formatting[anc] || anc == "a"):
			return fmt.Errorf("tag \"%s\" inside <%s> at byte offset %d", t.Name, anc, t.Offset)
		}
	}
	return nil
}

func checkAttrs(t Token, parent string) error {
	bad := func(a Attr) error {
		return fmt.Errorf("unsupported attribute %q in tag \"%s\" at byte offset %d", a.Name, t.Name, t.Offset)
	}
	switch t.Name {
	case "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "tg-spoiler", "pre":
		if len(t.Attrs) > 0 {
			return bad(t.Attrs[0])
		}
	case "a":
		href := false
		for _, a := range t.Attrs {
			if a.Name != "href" || a.Bare {
				return bad(a)
			}
			href = a.Value != ""
		}
		if !href {
			return fmt.Errorf("tag \"a\" without href at byte offset %d", t.Offset)
		}
	case "code":
		for _, a := range t.Attrs {
			if a.Name != "class" || parent != "pre" || !strings.HasPrefix(a.Value, "language-") || len(a.Value) == len("language-") {
				return bad(a)
			}
		}
	case "span":
		if len(t.Attrs) != 1 || t.Attrs[0].Name != "class" || t.Attrs[0].Value != "tg-spoiler" {
			return fmt.Errorf("tag \"span\" must have class=\"tg-spoiler\" at byte offset %d", t.Offset)
		}
	case "blockquote":
		for _, a := range t.Attrs {
			if a.Name != "expandable" || !a.Bare {
				return bad(a)
			}
		}
	default:
		return fmt.Errorf("unsupported start tag \"%s\" at byte offset %d", t.Name, t.Offset)
	}
	return nil
}

// Escape escapes text for use in Telegram HTML: &, < and >.
func Escape(s string) string {
	if !strings.ContainsAny(s, "&<>") {
		return s
	}
	return textEscaper.Replace(s)
}

// EscapeAttr escapes an attribute value for use inside double quotes.
func EscapeAttr(s string) string {
	return attrEscaper.Replace(s)
}

var (
	textEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	attrEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
)

// PlainText returns the visible text of a Telegram HTML string. Unlike
// Validate it never fails: on malformed input it drops anything that looks
// like a tag and keeps the rest verbatim.
func PlainText(s string) string {
	if toks, err := Tokenize(s); err == nil {
		var b strings.Builder
		for _, t := range toks {
			if t.Kind == Text || t.Kind == Entity {
				b.WriteString(t.Text)
			}
		}
		return b.String()
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '<' {
			if j := strings.IndexByte(s[i:], '>'); j > 0 {
				i += j
				continue
			}
		}
		if s[i] == '&' {
			if r, n, ok := lexEntity(s[i:]); ok {
				b.WriteRune(r)
				i += n - 1
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// UTF16Len returns the length of s in UTF-16 code units, the unit in which
// Telegram measures message length and entity offsets.
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}
