package tools

import (
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// markdown renders an HTML tree as Markdown for the model: headings,
// paragraphs, lists, links (made absolute against base), code, quotes and
// tables. Scripts, styles, forms and embedded media are left out.
func markdown(n *html.Node, base *url.URL) string {
	w := &mdWriter{base: base}
	w.node(n)
	return tidy(w.b.String())
}

// skipped are elements whose content is never readable text.
var skipped = map[atom.Atom]bool{
	atom.Head: true, atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Svg: true, atom.Math: true, atom.Canvas: true, atom.Iframe: true, atom.Object: true, atom.Embed: true,
	atom.Form: true, atom.Button: true, atom.Input: true, atom.Select: true, atom.Textarea: true,
	atom.Audio: true, atom.Video: true, atom.Picture: true, atom.Dialog: true,
}

// blocks are elements that start and end a paragraph.
var blocks = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Section: true, atom.Article: true, atom.Main: true,
	atom.Header: true, atom.Footer: true, atom.Aside: true, atom.Nav: true, atom.Figure: true,
	atom.Figcaption: true, atom.Address: true, atom.Details: true, atom.Summary: true,
	atom.Dl: true, atom.Dt: true, atom.Dd: true, atom.Center: true, atom.Fieldset: true,
	atom.Body: true, atom.Html: true,
}

type mdWriter struct {
	b         strings.Builder
	base      *url.URL
	indent    string // written at the start of every line (lists, quotes)
	lineStart bool   // nothing has been written on the current line yet
	space     bool   // a space is pending before the next word
	lists     []list
}

type list struct {
	ordered bool
	n       int
}

// newline ends the current line, unless nothing was written on it.
func (w *mdWriter) newline() {
	w.space = false
	if !w.lineStart && w.b.Len() > 0 {
		w.b.WriteString("\n")
		w.lineStart = true
	}
}

// paragraph ends the current paragraph with a blank line.
func (w *mdWriter) paragraph() {
	w.newline()
	if s := w.b.String(); s != "" && !strings.HasSuffix(s, "\n\n") {
		w.b.WriteString("\n")
	}
}

// raw writes s as is, after the indent or any pending space.
func (w *mdWriter) raw(s string) {
	if s == "" {
		return
	}
	switch {
	case w.lineStart || w.b.Len() == 0:
		w.b.WriteString(w.indent)
		w.lineStart = false
	case w.space && !strings.HasSuffix(w.b.String(), " "):
		w.b.WriteString(" ")
	}
	w.space = false
	w.b.WriteString(s)
}

// text writes flowing text with its whitespace collapsed.
func (w *mdWriter) text(s string) {
	if s == "" {
		return
	}
	if unicode.IsSpace(rune(s[0])) {
		w.space = true
	}
	words := strings.Fields(s)
	for i, word := range words {
		if i > 0 {
			w.space = true
		}
		w.raw(word)
	}
	if len(words) > 0 && unicode.IsSpace(rune(s[len(s)-1])) {
		w.space = true
	}
}

func (w *mdWriter) children(n *html.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.node(c)
	}
}

func (w *mdWriter) node(n *html.Node) {
	switch n.Type {
	case html.DocumentNode:
		w.children(n)
		return
	case html.TextNode:
		w.text(n.Data)
		return
	case html.ElementNode:
	default:
		return
	}
	a := n.DataAtom
	if skipped[a] || hidden(n) {
		return
	}
	switch a {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		w.paragraph()
		level := int(n.Data[1] - '0')
		if t := inline(n, w.base); t != "" {
			w.raw(strings.Repeat("#", level) + " " + t)
		}
		w.paragraph()
	case atom.Br:
		w.b.WriteString("\n")
		w.lineStart, w.space = true, false
	case atom.Hr:
		w.paragraph()
		w.raw("---")
		w.paragraph()
	case atom.A:
		t := inline(n, w.base)
		href := w.link(attr(n, "href"))
		switch {
		case t == "":
		case href == "" || href == t:
			w.raw(t)
		default:
			w.raw("[" + t + "](" + href + ")")
		}
	case atom.Img:
		if alt := strings.TrimSpace(attr(n, "alt")); alt != "" {
			w.raw("[image: " + strings.Join(strings.Fields(alt), " ") + "]")
		}
	case atom.Code, atom.Kbd, atom.Samp, atom.Tt:
		if t := strings.Join(strings.Fields(textOf(n)), " "); t != "" {
			w.raw("`" + t + "`")
		}
	case atom.Pre:
		w.paragraph()
		code := strings.Trim(textOf(n), "\n")
		w.raw("```")
		for line := range strings.SplitSeq(code, "\n") {
			w.b.WriteString("\n" + w.indent + line)
		}
		w.b.WriteString("\n" + w.indent + "```")
		w.lineStart = false
		w.paragraph()
	case atom.Ul, atom.Ol, atom.Menu:
		if len(w.lists) == 0 {
			w.paragraph()
		} else {
			w.newline()
		}
		start := 1
		if s, err := strconv.Atoi(attr(n, "start")); err == nil {
			start = s
		}
		w.lists = append(w.lists, list{ordered: a == atom.Ol, n: start})
		w.children(n)
		w.lists = w.lists[:len(w.lists)-1]
		if len(w.lists) == 0 {
			w.paragraph()
		} else {
			w.newline()
		}
	case atom.Li:
		w.newline()
		marker := "- "
		if k := len(w.lists); k > 0 && w.lists[k-1].ordered {
			marker = strconv.Itoa(w.lists[k-1].n) + ". "
			w.lists[k-1].n++
		}
		w.raw(marker)
		old := w.indent
		w.indent += strings.Repeat(" ", len(marker))
		w.children(n)
		w.indent = old
		w.newline()
	case atom.Blockquote:
		w.paragraph()
		old := w.indent
		w.indent += "> "
		w.children(n)
		w.indent = old
		w.paragraph()
	case atom.Table:
		w.paragraph()
		w.table(n)
		w.paragraph()
	default:
		if blocks[a] {
			w.paragraph()
			w.children(n)
			w.paragraph()
			return
		}
		w.children(n)
	}
}

// table writes the rows of a table as a Markdown table, with a header
// separator after the first row.
func (w *mdWriter) table(n *html.Node) {
	rows := 0
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type != html.ElementNode || skipped[c.DataAtom] {
				continue
			}
			if c.DataAtom != atom.Tr {
				if c.DataAtom != atom.Table { // nested tables are flattened away
					walk(c)
				}
				continue
			}
			var cells []string
			for td := c.FirstChild; td != nil; td = td.NextSibling {
				if td.Type == html.ElementNode && (td.DataAtom == atom.Td || td.DataAtom == atom.Th) {
					cells = append(cells, strings.ReplaceAll(inline(td, w.base), "|", `\|`))
				}
			}
			if len(cells) == 0 {
				continue
			}
			w.newline()
			w.raw("| " + strings.Join(cells, " | ") + " |")
			if rows == 0 {
				w.newline()
				w.raw(strings.Repeat("| --- ", len(cells)) + "|")
			}
			rows++
		}
	}
	walk(n)
}

// link makes href absolute; it returns "" for links that lead nowhere a
// reader could follow (fragments, javascript:, mailto: stays).
func (w *mdWriter) link(href string) string {
	href = strings.TrimSpace(href)
	if href == "" || strings.HasPrefix(href, "#") {
		return ""
	}
	u, err := url.Parse(href)
	if err != nil {
		return ""
	}
	if w.base != nil {
		u = w.base.ResolveReference(u)
	}
	switch u.Scheme {
	case "http", "https", "mailto":
		return u.String()
	}
	return ""
}

// inline renders n's content on one line.
func inline(n *html.Node, base *url.URL) string {
	w := &mdWriter{base: base}
	w.children(n)
	return strings.Join(strings.Fields(w.b.String()), " ")
}

// textOf is the text of n and its descendants, as written.
func textOf(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		if n.Type == html.ElementNode && n.DataAtom == atom.Br {
			b.WriteString("\n")
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return a.Val
		}
	}
	return ""
}

// hidden reports elements a browser would not show.
func hidden(n *html.Node) bool {
	for _, a := range n.Attr {
		switch a.Key {
		case "hidden":
			return true
		case "aria-hidden":
			if a.Val == "true" {
				return true
			}
		case "style":
			s := strings.ReplaceAll(strings.ToLower(a.Val), " ", "")
			if strings.Contains(s, "display:none") || strings.Contains(s, "visibility:hidden") {
				return true
			}
		}
	}
	return false
}

// tidy trims trailing spaces from lines and collapses runs of blank lines.
func tidy(s string) string {
	var out []string
	blank := false
	for l := range strings.SplitSeq(s, "\n") {
		l = strings.TrimRightFunc(l, unicode.IsSpace)
		if l == "" && blank {
			continue
		}
		blank = l == ""
		out = append(out, l)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// htmlText is the plain text of an HTML fragment (search snippets carry
// <strong> and entities).
func htmlText(s string) string {
	if !strings.ContainsAny(s, "<&") {
		return strings.Join(strings.Fields(s), " ")
	}
	z := html.NewTokenizer(strings.NewReader(s))
	var b strings.Builder
	for {
		switch z.Next() {
		case html.ErrorToken:
			return strings.Join(strings.Fields(b.String()), " ")
		case html.TextToken:
			b.Write(z.Text())
		case html.StartTagToken, html.EndTagToken, html.SelfClosingTagToken:
			if name, _ := z.TagName(); string(name) == "br" || string(name) == "p" {
				b.WriteString(" ")
			}
		}
	}
}
