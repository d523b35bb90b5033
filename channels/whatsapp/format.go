package whatsapp

import (
	"regexp"
	"strings"
	"sync"

	"github.com/switchboard-gateway/switchboard/channels/textsplit"
)

// WhatsApp's formatting: *bold*, _italic_, ~strike~, ```monospace```,
// `inline code`, "- " and "1. " lists, "> " quotes. Render turns the
// Markdown models write into it; textsplit.Split cuts a text to WhatsApp's
// length limit.

// maxText is WhatsApp's limit on a text message's body, in characters
// (counted here in UTF-16 units, which is never fewer).
const maxText = 4096

var (
	fenceRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("^\\s*(```|~~~)") })
	headingRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`) })
	bulletRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)[*+-]\s+(.*)$`) })
	ruleRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*([-*_]\s*){3,}$`) })
	imageRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`!\[([^\]]*)\]\(([^)\s]+)\)`) })
	linkRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\[([^\]]+)\]\(([^)\s]+)\)`) })
	boldItRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*\*\*(\S(?:.*?\S)?)\*\*\*`) })
	boldRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(\*\*|__)(\S(?:.*?\S)?)(\*\*|__)`) })
	italicRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(^|[^\w*])\*(\S(?:[^*]*?\S)?)\*($|[^\w*])`) })
	strikeRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`~~(\S(?:.*?\S)?)~~`) })
)

// boldMark stands for a bold asterisk while italics are rewritten.
const boldMark = "\x00"

// Render turns Markdown into WhatsApp's formatting. Code blocks and code
// spans are kept as they are.
func Render(md string) string {
	lines := strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n")
	inCode := false
	for i, l := range lines {
		if fenceRE().MatchString(l) {
			lines[i], inCode = "```", !inCode
			continue
		}
		if inCode {
			continue
		}
		switch {
		case ruleRE().MatchString(l) && strings.TrimSpace(l) != "":
			lines[i] = "———"
		case headingRE().MatchString(l):
			h := headingRE().FindStringSubmatch(l)[1]
			h = strings.NewReplacer("**", "", "__", "").Replace(h)
			lines[i] = "*" + inline(h) + "*"
		case bulletRE().MatchString(l):
			m := bulletRE().FindStringSubmatch(l)
			lines[i] = m[1] + "- " + inline(m[2])
		default:
			lines[i] = inline(l)
		}
	}
	out := strings.Join(lines, "\n")
	if inCode {
		out += "\n```"
	}
	return strings.TrimSpace(out)
}

// inline renders one line's emphasis and links, outside code spans.
func inline(l string) string {
	parts := strings.Split(l, "`")
	for i := 0; i < len(parts); i += 2 {
		if i == len(parts)-1 && len(parts)%2 == 0 {
			break // an unmatched backtick: the rest is as written
		}
		s := parts[i]
		s = imageRE().ReplaceAllString(s, "$1 ($2)")
		s = linkRE().ReplaceAllStringFunc(s, func(m string) string {
			sub := linkRE().FindStringSubmatch(m)
			if sub[1] == sub[2] {
				return sub[2]
			}
			return sub[1] + " (" + sub[2] + ")"
		})
		s = boldItRE().ReplaceAllString(s, boldMark+"_${1}_"+boldMark)
		s = boldRE().ReplaceAllString(s, boldMark+"${2}"+boldMark)
		s = italicRE().ReplaceAllString(s, "${1}_${2}_${3}")
		s = strikeRE().ReplaceAllString(s, "~${1}~")
		parts[i] = strings.ReplaceAll(s, boldMark, "*")
	}
	return strings.Join(parts, "`")
}

// parts renders Markdown and splits it to WhatsApp's limit; an empty
// text has none.
func parts(md string, max int) []string { return textsplit.Split(Render(md), max) }
