package email

import (
	"regexp"
	"strings"
	"sync"

	"golang.org/x/net/html"
)

// htmlToText is the readable text of an HTML mail: paragraphs and line
// breaks kept, links as "text (url)", scripts, styles and the head left
// out, quoted blocks marked with "> " so trimReply can cut them.
func htmlToText(src string) string {
	doc, err := html.Parse(strings.NewReader(src))
	if err != nil {
		return src
	}
	var b strings.Builder
	var walk func(n *html.Node, quote int)
	walk = func(n *html.Node, quote int) {
		switch n.Type {
		case html.TextNode:
			t := strings.Join(strings.Fields(n.Data), " ")
			if t == "" {
				return
			}
			if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") && !strings.HasSuffix(b.String(), " ") &&
				(n.Data[0] == ' ' || n.Data[0] == '\n' || n.Data[0] == '\t') {
				b.WriteByte(' ')
			}
			if strings.HasSuffix(b.String(), "\n") || b.Len() == 0 {
				b.WriteString(strings.Repeat("> ", quote))
			}
			b.WriteString(t)
			if last := n.Data[len(n.Data)-1]; last == ' ' || last == '\n' || last == '\t' {
				b.WriteByte(' ')
			}
			return
		case html.ElementNode:
			switch n.Data {
			case "script", "style", "head", "title":
				return
			case "br":
				b.WriteString("\n")
				return
			case "blockquote":
				quote++
			}
		}
		block := n.Type == html.ElementNode && blockTags[n.Data]
		if block {
			newline(&b)
			if n.Data == "p" && b.Len() > 0 && !strings.HasSuffix(b.String(), "\n\n") {
				b.WriteString("\n") // a blank line between paragraphs
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, quote)
		}
		if n.Type == html.ElementNode && n.Data == "a" {
			if href := attr(n, "href"); strings.HasPrefix(href, "http") && !strings.Contains(b.String()[max(0, b.Len()-len(href)-2):], href) {
				b.WriteString(" (" + href + ")")
			}
		}
		if block {
			newline(&b)
		}
	}
	walk(doc, 0)
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.TrimSpace(blankRuns().ReplaceAllString(strings.Join(lines, "\n"), "\n\n"))
}

var blockTags = map[string]bool{"p": true, "div": true, "li": true, "tr": true, "table": true, "h1": true, "h2": true,
	"h3": true, "h4": true, "h5": true, "h6": true, "blockquote": true, "pre": true, "ul": true, "ol": true, "hr": true}

var blankRuns = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\n{3,}`) })

func newline(b *strings.Builder) {
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteString("\n")
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// trimReply cuts what a reply repeats: the quoted history (from an
// "On … wrote:" line, an Outlook header block or quoted lines at the end)
// and the signature (after "-- ", "Sent from my …").
func trimReply(text string) string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	lines := strings.Split(text, "\n")
	cut := len(lines)
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if l == "-- " || l == "--" || t == "-----Original Message-----" || t == "________________________________" ||
			wroteRE().MatchString(t) || (i+1 < len(lines) && wroteRE().MatchString(t+" "+strings.TrimSpace(lines[i+1])) && onRE().MatchString(t)) ||
			(strings.HasPrefix(t, "From: ") && i+1 < len(lines) && outlookRE().MatchString(strings.TrimSpace(lines[i+1]))) ||
			strings.HasPrefix(t, "Sent from my ") || strings.HasPrefix(t, "Get Outlook for ") {
			cut = i
			break
		}
	}
	lines = lines[:cut]
	// Quoted lines at the end (the history below an answer); quotes
	// between answers stay, they say what is answered.
	for len(lines) > 0 {
		t := strings.TrimSpace(lines[len(lines)-1])
		if t == "" || strings.HasPrefix(t, ">") {
			lines = lines[:len(lines)-1]
			continue
		}
		break
	}
	out := strings.TrimSpace(strings.Join(lines, "\n"))
	if out == "" {
		return strings.TrimSpace(text) // all quoted: keep it rather than nothing
	}
	return out
}

var (
	// "On Mon, 1 Dec 2026 at 10:00, Alice <a@example.org> wrote:"; also
	// the German and French forms.
	wroteRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(On|Am|Le)\s.{4,200}\s(wrote|schrieb|a écrit)(\s.{0,200})?\s?:$`)
	})
	onRE      = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(On|Am|Le)\s`) }) // such a line wrapped in two
	outlookRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(Sent|Date|To|Gesendet|Envoyé):\s`) })
)
