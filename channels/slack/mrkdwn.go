package slack

import (
	"net/url"
	"regexp"
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
)

// mdParser reads the model's Markdown: CommonMark with the GitHub
// extensions models write (tables, strikethrough, task lists, bare links).
// Made at the first reply, not at every start.
var mdParser = sync.OnceValue(func() parser.Parser {
	return goldmark.New(goldmark.WithExtensions(
		extension.Strikethrough, extension.Table, extension.TaskList, extension.Linkify,
	)).Parser()
})

const maxURLLen = 2048 // longer link targets are shown as text

// slackToken matches Slack's own markup a model may copy from the messages
// it reads: user and channel mentions, dates and labelled links, which
// Render keeps, and broadcasts (<!here>, <!channel>, <!everyone>,
// <!subteam^…>), which it shows as text on purpose: a reply doesn't ping
// a whole channel or group.
var slackToken = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`<(?:@[UWB][A-Z0-9]{2,}|#[CG][A-Z0-9]{2,}|!date\^[^<>|\n]+)(?:\|[^<>\n]*)?>` +
		`|<(?:https?|mailto):[^<>|\s]+\|[^<>\n]*>` +
		`|<!(?:here|channel|everyone|subteam\^)[^<>\n]*>`)
})

func isBroadcast(tok string) bool {
	return strings.HasPrefix(tok, "<!") && !strings.HasPrefix(tok, "<!date^")
}

// A kept token stands in the Markdown as \uE000 index \uE001 (characters of
// the private use area, removed from the input first), so that goldmark
// neither parses nor splits it.
const tokOpen, tokClose = '\uE000', '\uE001'

// Render converts the Markdown a model writes into Slack's mrkdwn: **bold**
// becomes *bold*, *italic* _italic_, ~~strike~~ ~strike~; inline code and
// fenced code blocks stay (a fence without its language, which Slack would
// show); [text](url) becomes <url|text>, a bare URL <url>; headings become
// bold lines, lists text bullets, blockquotes "> " lines and tables a code
// block of aligned columns. &, < and > are escaped as Slack requires, except
// in the Slack mentions, dates and <url|text> links the model wrote (see
// slackToken). Same input, same output.
func Render(md string) string {
	md = strings.ToValidUTF8(md, "\uFFFD")
	md = strings.Map(func(r rune) rune {
		if r == tokOpen || r == tokClose || r == 0 {
			return '\uFFFD'
		}
		return r
	}, md)
	r := &renderer{out: new(strings.Builder)}
	md = slackToken().ReplaceAllStringFunc(md, func(tok string) string {
		r.toks = append(r.toks, tok)
		return string(tokOpen) + strconv.Itoa(len(r.toks)-1) + string(tokClose)
	})
	r.src = []byte(md)
	r.blocks(mdParser().Parse(text.NewReader(r.src)))
	r.flush()
	return strings.TrimSpace(r.out.String())
}

type renderer struct {
	src     []byte
	toks    []string // kept Slack tokens, by placeholder index
	out     *strings.Builder
	pending strings.Builder // text not yet escaped: placeholders resolve on flush
	quote   int             // blockquote depth: Slack's quotes don't nest
	depth   int             // list depth, for the bullet
}

// style is the inline context: Slack can't nest a marker in itself.
type style struct{ bold, italic, strike bool }

// raw writes markup; text writes text to escape.
func (r *renderer) raw(s string)  { r.flush(); r.out.WriteString(s) }
func (r *renderer) text(s string) { r.pending.WriteString(s) }

func (r *renderer) flush() {
	if r.pending.Len() > 0 {
		r.out.WriteString(r.escape(r.pending.String(), true))
		r.pending.Reset()
	}
}

// escape escapes &, < and > for Slack. With keep, a placeholder becomes
// its token as written (with bare & escaped); without, the token is text.
func (r *renderer) escape(s string, keep bool) string {
	var b strings.Builder
	for s != "" {
		i := strings.IndexRune(s, tokOpen)
		if i < 0 {
			b.WriteString(escapeText(s))
			break
		}
		b.WriteString(escapeText(s[:i]))
		s = s[i:]
		tok, n := r.token(s)
		if n == 0 {
			b.WriteString(escapeText(s[:utf8.RuneLen(tokOpen)]))
			s = s[utf8.RuneLen(tokOpen):]
			continue
		}
		if keep && !isBroadcast(tok) {
			b.WriteString(escapeAmp(tok))
		} else {
			b.WriteString(escapeText(tok))
		}
		s = s[n:]
	}
	return b.String()
}

// token reads a placeholder at the start of s: its token and length.
func (r *renderer) token(s string) (string, int) {
	end := strings.IndexRune(s, tokClose)
	if end < 0 {
		return "", 0
	}
	i, err := strconv.Atoi(s[utf8.RuneLen(tokOpen):end])
	if err != nil || i < 0 || i >= len(r.toks) {
		return "", 0
	}
	return r.toks[i], end + utf8.RuneLen(tokClose)
}

// restore puts the tokens back into s, unescaped.
func (r *renderer) restore(s string) string {
	var b strings.Builder
	for {
		i := strings.IndexRune(s, tokOpen)
		if i < 0 {
			return b.String() + s
		}
		b.WriteString(s[:i])
		if tok, n := r.token(s[i:]); n > 0 {
			b.WriteString(tok)
			s = s[i+n:]
		} else {
			b.WriteRune(tokOpen)
			s = s[i+utf8.RuneLen(tokOpen):]
		}
	}
}

var (
	textEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	bareAmp     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`&(?:amp;|lt;|gt;)?`) })
)

func escapeText(s string) string { return textEscaper.Replace(s) }

// escapeAmp escapes each & that does not already start &amp;, &lt; or &gt;.
func escapeAmp(s string) string {
	return bareAmp().ReplaceAllStringFunc(s, func(m string) string {
		if m == "&" {
			return "&amp;"
		}
		return m
	})
}

// sub renders f into a string of its own.
func (r *renderer) sub(f func()) string {
	r.flush()
	saved := r.out
	r.out = new(strings.Builder)
	f()
	r.flush()
	s := r.out.String()
	r.out = saved
	return s
}

// blocks renders n's block children, a blank line between two.
func (r *renderer) blocks(n ast.Node) {
	first := true
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		s := r.sub(func() { r.block(c) })
		if strings.TrimSpace(s) == "" {
			continue
		}
		if !first {
			r.raw("\n\n")
		}
		r.raw(s)
		first = false
	}
}

func (r *renderer) block(n ast.Node) {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		r.inlines(n, style{})
	case *ast.Heading:
		r.wrap("*", func() { r.inlines(n, style{bold: true}) })
	case *ast.ThematicBreak:
		r.raw("───")
	case *ast.FencedCodeBlock:
		r.codeBlock(string(r.lines(n)))
	case *ast.CodeBlock:
		r.codeBlock(string(r.lines(n)))
	case *ast.HTMLBlock:
		s := string(r.lines(n))
		if n.HasClosure() {
			s += string(n.ClosureLine.Value(r.src))
		}
		r.text(strings.TrimRight(s, "\n"))
	case *ast.Blockquote:
		if r.quote > 0 {
			r.blocks(n)
			return
		}
		r.quote++
		body := r.sub(func() { r.blocks(n) })
		r.quote--
		if strings.TrimSpace(body) != "" {
			r.raw(prefixLines(body, "> ", ">"))
		}
	case *ast.List:
		r.list(n)
	case *east.Table:
		r.table(n)
	default:
		r.blocks(n)
	}
}

// prefixLines puts p before each line of s, or blank before an empty one.
func prefixLines(s, p, blank string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l == "" {
			lines[i] = blank
		} else {
			lines[i] = p + l
		}
	}
	return strings.Join(lines, "\n")
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

// codeBlock writes a ``` block. Slack would show a language tag as the
// first line of code, so there is none; a ``` inside the code would end
// the block, so runs of backticks are broken with zero-width spaces.
func (r *renderer) codeBlock(code string) {
	code = strings.TrimRight(code, "\n")
	if strings.TrimSpace(code) == "" {
		return
	}
	r.raw("```\n" + breakTicks(r.escape(code, false)) + "\n```")
}

// breakTicks puts a zero-width space after every second backtick of a run.
func breakTicks(s string) string {
	if !strings.Contains(s, "```") {
		return s
	}
	var b strings.Builder
	run := 0
	for _, c := range s {
		if c != '`' {
			run = 0
		} else if run++; run == 3 {
			b.WriteString("\u200b")
			run = 1
		}
		b.WriteRune(c)
	}
	return b.String()
}

// bullets are the list markers by depth.
var bullets = []string{"•", "◦", "▪"}

// list writes one line per item ("• ", "1. "), a nested list or an
// item's later blocks indented under the item's text.
func (r *renderer) list(l *ast.List) {
	num := l.Start
	bullet := bullets[min(r.depth, len(bullets)-1)]
	r.depth++
	defer func() { r.depth-- }()
	sep := "\n"
	if !l.IsTight {
		sep = "\n\n"
	}
	first := true
	for item := l.FirstChild(); item != nil; item = item.NextSibling() {
		marker := bullet + " "
		if l.IsOrdered() {
			marker = strconv.Itoa(num) + ". "
			num++
		}
		var body []string
		for c := item.FirstChild(); c != nil; c = c.NextSibling() {
			if s := r.sub(func() { r.block(c) }); strings.TrimSpace(s) != "" {
				body = append(body, s)
			}
		}
		text := strings.Join(body, sep)
		indent := strings.Repeat(" ", utf8.RuneCountInString(marker)+1)
		text = strings.ReplaceAll(text, "\n", "\n"+indent)
		text = strings.ReplaceAll(text, "\n"+indent+"\n", "\n\n") // no trailing spaces on blank lines
		if !first {
			r.raw(sep)
		}
		r.raw(marker + text)
		first = false
	}
}

// table writes a GFM table as aligned columns in a code block, as Slack
// has no tables; cells lose their formatting.
func (r *renderer) table(t *east.Table) {
	var rows [][]string
	var width []int
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for i, c := 0, row.FirstChild(); c != nil; i, c = i+1, c.NextSibling() {
			cell := strings.TrimSpace(r.plain(c))
			cells = append(cells, cell)
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], utf8.RuneCountInString(r.restore(cell)))
		}
		rows = append(rows, cells)
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
				b.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(r.restore(c))))
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
	r.codeBlock(strings.TrimRight(b.String(), " \n"))
}

// wrap writes marker body marker, or nothing if body writes nothing.
func (r *renderer) wrap(marker string, body func()) {
	s := r.sub(body)
	if strings.TrimSpace(s) == "" {
		r.raw(s)
		return
	}
	r.raw(marker + s + marker)
}

func (r *renderer) inlines(n ast.Node, st style) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		r.inline(c, st)
	}
}

func (r *renderer) inline(n ast.Node, st style) {
	switch n := n.(type) {
	case *ast.Text:
		r.text(r.textValue(n))
		if n.SoftLineBreak() || n.HardLineBreak() {
			r.text("\n")
		}
	case *ast.String:
		if n.IsRaw() || n.IsCode() {
			r.text(string(n.Value))
		} else {
			r.text(unescapeMarkdown(n.Value))
		}
	case *ast.CodeSpan:
		code := r.codeSpan(n)
		if strings.Contains(code, "`") {
			r.text(code) // Slack's inline code can't hold a backtick
			return
		}
		r.raw("`" + r.escape(code, false) + "`")
	case *ast.Emphasis:
		switch {
		case n.Level >= 2 && !st.bold:
			st.bold = true
			r.wrap("*", func() { r.inlines(n, st) })
		case n.Level == 1 && !st.italic:
			st.italic = true
			r.wrap("_", func() { r.inlines(n, st) })
		default:
			r.inlines(n, st)
		}
	case *east.Strikethrough:
		if st.strike {
			r.inlines(n, st)
			return
		}
		st.strike = true
		r.wrap("~", func() { r.inlines(n, st) })
	case *ast.Link:
		r.link(string(n.Destination), r.plain(n), func() { r.inlines(n, st) })
	case *ast.AutoLink:
		dest, label := string(n.URL(r.src)), string(n.Label(r.src))
		if n.AutoLinkType == ast.AutoLinkEmail && !strings.HasPrefix(strings.ToLower(dest), "mailto:") {
			dest = "mailto:" + dest
		}
		r.link(dest, label, func() { r.text(label) })
	case *ast.Image:
		alt := r.plain(n)
		if strings.TrimSpace(alt) == "" {
			alt = "image"
		}
		r.link(string(n.Destination), alt, func() { r.text(alt) })
	case *ast.RawHTML:
		var b []byte
		for i := 0; i < n.Segments.Len(); i++ {
			seg := n.Segments.At(i)
			b = append(b, seg.Value(r.src)...)
		}
		switch strings.ToLower(strings.ReplaceAll(string(b), " ", "")) {
		case "<br>", "<br/>":
			r.text("\n")
		default:
			r.text(string(b))
		}
	case *east.TaskCheckBox:
		if n.IsChecked {
			r.text("☑ ")
		} else {
			r.text("☐ ")
		}
	default:
		r.inlines(n, st)
	}
}

func (r *renderer) textValue(n *ast.Text) string {
	v := n.Segment.Value(r.src)
	if n.IsRaw() {
		return string(v)
	}
	return unescapeMarkdown(v)
}

func (r *renderer) codeSpan(n *ast.CodeSpan) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch t := c.(type) {
		case *ast.Text:
			b.WriteString(strings.ReplaceAll(string(t.Segment.Value(r.src)), "\n", " "))
		case *ast.String:
			b.WriteString(string(t.Value))
		}
	}
	return b.String()
}

// link writes <url|label>, <url> when the label is the URL, or only the
// body when the target is not a safe absolute URL. The label is plain text.
func (r *renderer) link(dest, label string, body func()) {
	dest = r.restore(dest)
	href := slackURL(dest)
	if !linkAllowed(href) {
		body()
		return
	}
	label = strings.Join(strings.Fields(r.restore(label)), " ")
	if label == "" || label == dest || "mailto:"+label == dest || "http://"+label == dest {
		r.raw("<" + escapeText(href) + ">")
		return
	}
	r.raw("<" + escapeText(href) + "|" + escapeText(label) + ">")
}

// slackURL percent-encodes what Slack's link syntax can't hold: spaces,
// non-ASCII, < > and the | that would end the URL.
func slackURL(dest string) string {
	href := string(util.URLEscape([]byte(dest), true))
	return strings.NewReplacer("|", "%7C", "<", "%3C", ">", "%3E").Replace(href)
}

func linkAllowed(href string) bool {
	if href == "" || len(href) > maxURLLen {
		return false
	}
	u, err := url.Parse(href)
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "ftp":
		return u.Host != ""
	case "mailto":
		return u.Opaque != "" || u.Path != ""
	}
	return false
}

// plain returns the text of n's inline descendants, without markup.
func (r *renderer) plain(n ast.Node) string {
	var b strings.Builder
	var walk func(n ast.Node)
	walk = func(n ast.Node) {
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			switch t := c.(type) {
			case *ast.Text:
				b.WriteString(r.textValue(t))
				if t.SoftLineBreak() || t.HardLineBreak() {
					b.WriteByte(' ')
				}
			case *ast.String:
				b.WriteString(string(t.Value))
			case *ast.CodeSpan:
				b.WriteString(r.codeSpan(t))
			case *ast.AutoLink:
				b.Write(t.Label(r.src))
			case *ast.RawHTML:
				for i := 0; i < t.Segments.Len(); i++ {
					seg := t.Segments.At(i)
					b.Write(seg.Value(r.src))
				}
			default:
				walk(c)
			}
		}
	}
	walk(n)
	return b.String()
}

// unescapeMarkdown resolves what CommonMark resolves in text: backslash
// escapes and character references.
func unescapeMarkdown(b []byte) string {
	b = util.UnescapePunctuations(b)
	b = util.ResolveNumericReferences(b)
	b = util.ResolveEntityNames(b)
	return strings.ReplaceAll(string(b), "\x00", "\uFFFD")
}
