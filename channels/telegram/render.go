package telegram

import (
	"bytes"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"github.com/switchboard-gateway/switchboard/internal/tghtml"
)

// mdParser parses the model's Markdown: CommonMark plus the GitHub
// extensions models use (tables, strikethrough, task lists, bare links).
// Made at the first reply, not at every start.
var mdParser = sync.OnceValue(func() parser.Parser {
	return goldmark.New(goldmark.WithExtensions(
		extension.Strikethrough, extension.Table, extension.TaskList, extension.Linkify,
	)).Parser()
})

const (
	maxHrefLen = 2048 // longer link targets are shown as text
	maxLangLen = 32
)

// renderMarkdown converts Markdown to the HTML subset Telegram accepts.
// Bold, italic, strikethrough, inline code, code blocks (with language),
// links and blockquotes map to tags; headings become bold lines, lists
// become text bullets, tables become preformatted text; everything else is
// escaped text. The result always passes tghtml.Validate.
func renderMarkdown(md string) string {
	src := []byte(strings.ToValidUTF8(md, "\uFFFD"))
	doc := mdParser().Parse(text.NewReader(src))
	r := &renderer{src: src}
	r.blocks(doc, "")
	return strings.TrimSpace(string(r.out))
}

type renderer struct {
	src   []byte
	out   []byte
	quote int // blockquote depth; Telegram blockquotes don't nest
}

// inline is the inline context: tags Telegram forbids inside it.
type inline struct {
	link bool // inside <a>: no nested links, no code
	fmt  bool // inside b/i/s: no code
}

func (r *renderer) raw(s string)  { r.out = append(r.out, s...) }
func (r *renderer) text(s string) { r.out = append(r.out, tghtml.Escape(s)...) }

// wrap writes <open>…</tag> around body, or nothing if body wrote nothing.
func (r *renderer) wrap(open, tag string, body func()) {
	start := len(r.out)
	r.raw(open)
	inner := len(r.out)
	body()
	if len(r.out) == inner {
		r.out = r.out[:start]
		return
	}
	r.raw("</" + tag + ">")
}

// blocks renders the block children of n separated by blank lines.
func (r *renderer) blocks(n ast.Node, indent string) {
	first := true
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		mark := len(r.out)
		if !first {
			r.raw("\n\n" + indent)
		}
		body := len(r.out)
		r.block(c, indent)
		if len(r.out) == body { // nothing rendered: drop the separator
			r.out = r.out[:mark]
			continue
		}
		first = false
	}
}

func (r *renderer) block(n ast.Node, indent string) {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		r.inlines(n, inline{})
	case *ast.Heading:
		r.wrap("<b>", "b", func() { r.inlines(n, inline{fmt: true}) })
	case *ast.ThematicBreak:
		r.raw("———")
	case *ast.FencedCodeBlock:
		r.codeBlock(n, sanitizeLang(string(n.Language(r.src))))
	case *ast.CodeBlock:
		r.codeBlock(n, "")
	case *ast.HTMLBlock:
		var b strings.Builder
		b.Write(r.lines(n))
		if n.HasClosure() {
			b.Write(n.ClosureLine.Value(r.src))
		}
		r.text(strings.TrimRight(b.String(), "\n"))
	case *ast.Blockquote:
		if r.quote > 0 {
			r.blocks(n, indent)
			return
		}
		r.quote++
		r.wrap("<blockquote>", "blockquote", func() { r.blocks(n, "") })
		r.quote--
	case *ast.List:
		r.list(n, indent)
	case *east.Table:
		r.table(n)
	default:
		r.blocks(n, indent)
	}
}

func (r *renderer) lines(n ast.Node) []byte {
	var b []byte
	ls := n.Lines()
	for i := 0; i < ls.Len(); i++ {
		seg := ls.At(i)
		b = append(b, seg.Value(r.src)...)
	}
	return b
}

func (r *renderer) codeBlock(n ast.Node, lang string) {
	code := strings.TrimRight(string(r.lines(n)), "\n")
	code = strings.ReplaceAll(code, "\x00", "\uFFFD")
	if strings.TrimSpace(code) == "" {
		return
	}
	if lang != "" {
		r.raw(`<pre><code class="language-` + lang + `">`)
		r.text(code)
		r.raw("</code></pre>")
		return
	}
	r.raw("<pre>")
	r.text(code)
	r.raw("</pre>")
}

// sanitizeLang keeps a fence's language if it is a plain identifier.
func sanitizeLang(s string) string {
	if s == "" || len(s) > maxLangLen {
		return ""
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_+#.-", c) >= 0
		if !ok {
			return ""
		}
	}
	return s
}

// list renders items as text bullets ("• ", "1. "), nested lists indented.
func (r *renderer) list(l *ast.List, indent string) {
	num := l.Start
	first := true
	for item := l.FirstChild(); item != nil; item = item.NextSibling() {
		if !first {
			r.raw("\n")
			if !l.IsTight {
				r.raw("\n")
			}
		}
		first = false
		marker := "• "
		if l.IsOrdered() {
			marker = strconv.Itoa(num) + ". "
			num++
		}
		r.raw(indent + marker)
		inner := indent + strings.Repeat(" ", utf8.RuneCountInString(marker))
		firstBlock := true
		for c := item.FirstChild(); c != nil; c = c.NextSibling() {
			if !firstBlock {
				r.raw("\n")
				if _, nested := c.(*ast.List); !nested {
					r.raw(inner)
				}
			}
			if nl, ok := c.(*ast.List); ok {
				if firstBlock {
					r.raw("\n")
				}
				r.list(nl, inner)
			} else {
				r.block(c, inner)
			}
			firstBlock = false
		}
	}
}

// table renders a GFM table as aligned preformatted text; cells lose
// their formatting because <pre> can't contain tags.
func (r *renderer) table(t *east.Table) {
	var rows [][]string
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			cells = append(cells, strings.TrimSpace(r.plain(c)))
		}
		rows = append(rows, cells)
	}
	var width []int
	for _, row := range rows {
		for i, c := range row {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for ri, row := range rows {
		if ri > 0 {
			b.WriteByte('\n')
		}
		for i, c := range row {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(c)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(c)))
			}
		}
		if ri == 0 && len(rows) > 1 {
			b.WriteByte('\n')
			for i, w := range width {
				if i > 0 {
					b.WriteString("-|-")
				}
				b.WriteString(strings.Repeat("-", max(w, 1)))
			}
		}
	}
	if s := strings.TrimRight(b.String(), " \n"); strings.TrimSpace(s) != "" {
		r.raw("<pre>")
		r.text(s)
		r.raw("</pre>")
	}
}

func (r *renderer) inlines(n ast.Node, c inline) {
	for ch := n.FirstChild(); ch != nil; ch = ch.NextSibling() {
		r.inline(ch, c)
	}
}

func (r *renderer) inline(n ast.Node, c inline) {
	switch n := n.(type) {
	case *ast.Text:
		seg := n.Segment.Value(r.src)
		if n.IsRaw() {
			r.text(rawText(seg))
		} else {
			r.text(unescapeMarkdown(seg))
		}
		if n.SoftLineBreak() || n.HardLineBreak() {
			r.raw("\n")
		}
	case *ast.String:
		if n.IsRaw() || n.IsCode() {
			r.text(rawText(n.Value))
		} else {
			r.text(unescapeMarkdown(n.Value))
		}
	case *ast.CodeSpan:
		code := r.codeSpan(n)
		if c.link || c.fmt {
			r.text(code) // Telegram forbids code inside links and formatting
			return
		}
		r.wrap("<code>", "code", func() { r.text(code) })
	case *ast.Emphasis:
		tag := "i"
		if n.Level >= 2 {
			tag = "b"
		}
		r.wrap("<"+tag+">", tag, func() { r.inlines(n, inline{link: c.link, fmt: true}) })
	case *east.Strikethrough:
		r.wrap("<s>", "s", func() { r.inlines(n, inline{link: c.link, fmt: true}) })
	case *ast.Link:
		r.link(string(n.Destination), c, func(c inline) { r.inlines(n, c) })
	case *ast.AutoLink:
		dest, label := string(n.URL(r.src)), string(n.Label(r.src))
		if n.AutoLinkType == ast.AutoLinkEmail && !strings.HasPrefix(strings.ToLower(dest), "mailto:") {
			dest = "mailto:" + dest
		}
		r.link(dest, c, func(inline) { r.text(label) })
	case *ast.Image:
		alt := r.plain(n)
		if alt == "" {
			alt = "image"
		}
		r.link(string(n.Destination), c, func(inline) { r.text(alt) })
	case *ast.RawHTML:
		var b []byte
		for i := 0; i < n.Segments.Len(); i++ {
			seg := n.Segments.At(i)
			b = append(b, seg.Value(r.src)...)
		}
		switch strings.ToLower(strings.ReplaceAll(string(b), " ", "")) {
		case "<br>", "<br/>":
			r.raw("\n")
		default:
			r.text(rawText(b))
		}
	case *east.TaskCheckBox:
		if n.IsChecked {
			r.raw("☑ ")
		} else {
			r.raw("☐ ")
		}
	default:
		r.inlines(n, c)
	}
}

func (r *renderer) codeSpan(n *ast.CodeSpan) string {
	var b []byte
	for ch := n.FirstChild(); ch != nil; ch = ch.NextSibling() {
		switch t := ch.(type) {
		case *ast.Text:
			v := t.Segment.Value(r.src)
			if bytes.HasSuffix(v, []byte("\n")) {
				v = append(v[:len(v)-1:len(v)-1], ' ') // copy: never write into src
			}
			b = append(b, v...)
		case *ast.String:
			b = append(b, t.Value...)
		}
	}
	return rawText(b)
}

// link renders <a href> around label, or only the label when the target is
// not a safe absolute URL or we are already inside a link.
func (r *renderer) link(dest string, c inline, label func(inline)) {
	href := string(util.URLEscape([]byte(dest), true))
	if c.link || !linkAllowed(href) {
		label(c)
		return
	}
	r.raw(`<a href="` + tghtml.EscapeAttr(href) + `">`)
	inner := len(r.out)
	label(inline{link: true, fmt: c.fmt})
	if strings.TrimSpace(tghtml.PlainText(string(r.out[inner:]))) == "" {
		// an empty label would hide the link: show the URL instead
		r.out = r.out[:inner]
		r.text(dest)
	}
	r.raw("</a>")
}

func linkAllowed(href string) bool {
	if href == "" || len(href) > maxHrefLen {
		return false
	}
	u, err := url.Parse(href)
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "ftp":
		return u.Host != ""
	case "tg", "mailto":
		return u.Opaque != "" || u.Host != "" || u.Path != ""
	}
	return false
}

// plain returns the text of n's inline descendants, without markup.
func (r *renderer) plain(n ast.Node) string {
	var b strings.Builder
	var walk func(n ast.Node)
	walk = func(n ast.Node) {
		for ch := n.FirstChild(); ch != nil; ch = ch.NextSibling() {
			switch t := ch.(type) {
			case *ast.Text:
				if t.IsRaw() {
					b.WriteString(rawText(t.Segment.Value(r.src)))
				} else {
					b.WriteString(unescapeMarkdown(t.Segment.Value(r.src)))
				}
				if t.SoftLineBreak() || t.HardLineBreak() {
					b.WriteByte(' ')
				}
			case *ast.String:
				b.WriteString(rawText(t.Value))
			case *ast.CodeSpan:
				b.WriteString(r.codeSpan(t))
			case *ast.AutoLink:
				b.WriteString(string(t.Label(r.src)))
			case *ast.RawHTML:
				for i := 0; i < t.Segments.Len(); i++ {
					seg := t.Segments.At(i)
					b.WriteString(rawText(seg.Value(r.src)))
				}
			default:
				walk(ch)
			}
		}
	}
	walk(n)
	return b.String()
}

func rawText(b []byte) string {
	return strings.ReplaceAll(string(b), "\x00", "\uFFFD")
}

// unescapeMarkdown resolves what CommonMark resolves in text: backslash
// escapes of punctuation and entity/numeric character references.
func unescapeMarkdown(b []byte) string {
	var out strings.Builder
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '\\' && i+1 < len(b) && util.IsPunct(b[i+1]):
			out.WriteByte(b[i+1])
			i++
		case c == '&':
			if r, n := charRef(b[i:]); n > 0 {
				out.WriteString(r)
				i += n - 1
			} else {
				out.WriteByte(c)
			}
		case c == 0:
			out.WriteString("\uFFFD")
		default:
			out.WriteByte(c)
		}
	}
	return out.String()
}

// charRef decodes a character reference at the start of b, returning the
// text and the bytes consumed (0 if none).
func charRef(b []byte) (string, int) {
	end := bytes.IndexByte(b, ';')
	if end < 2 || end > 40 {
		return "", 0
	}
	body := string(b[1:end])
	if body[0] == '#' {
		digits, base := body[1:], 10
		if len(digits) > 0 && (digits[0] == 'x' || digits[0] == 'X') {
			digits, base = digits[1:], 16
		}
		if digits == "" || len(digits) > 7 || strings.ContainsAny(digits, "+-_") {
			return "", 0
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return "", 0
		}
		r := rune(v)
		if r == 0 || !utf8.ValidRune(r) {
			r = utf8.RuneError
		}
		return string(r), end + 1
	}
	for _, c := range []byte(body) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return "", 0
		}
	}
	if e, ok := util.LookUpHTML5EntityByName(body); ok {
		return string(e.Characters), end + 1
	}
	return "", 0
}
