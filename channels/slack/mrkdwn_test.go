package slack

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestRender(t *testing.T) {
	tests := []struct{ name, md, want string }{
		{"empty", "", ""},
		{"plain", "Hello, world.", "Hello, world."},
		{"emphasis", "Some **bold**, *italic*, _also italic_, ***both*** and ~~gone~~.",
			"Some *bold*, _italic_, _also italic_, _*both*_ and ~gone~."},
		{"same marker not nested", "**bold with __inner bold__ in it**", "*bold with inner bold in it*"},
		{"heading", "## Step 1: **install** it", "*Step 1: install it*"},
		{"escaping", "if a < b && c > d then AT&T; &amp; stays one &",
			"if a &lt; b &amp;&amp; c &gt; d then AT&amp;T; &amp; stays one &amp;"},
		{"inline code", "Run `ls -l | grep x > out` now", "Run `ls -l | grep x &gt; out` now"},
		{"inline code with a backtick", "the `` a`b `` case", "the a`b case"},
		{"fenced code", "Here:\n\n```go\nif a < b && c > d {\n\treturn \"<x>\"\n}\n```\n\nDone.",
			"Here:\n\n```\nif a &lt; b &amp;&amp; c &gt; d {\n\treturn \"&lt;x&gt;\"\n}\n```\n\nDone."},
		{"fence inside code", "````\na ``` b\n````", "```\na ``\u200b` b\n```"},
		{"indented code", "text\n\n    x := <-ch\n", "text\n\n```\nx := &lt;-ch\n```"},
		{"link", "See [the docs](https://example.com/a?x=1&y=2).", "See <https://example.com/a?x=1&amp;y=2|the docs>."},
		{"link label with markup and brackets", "[**a** <b> | c](https://e.com/p)", "<https://e.com/p|a &lt;b&gt; | c>"},
		{"link with pipe and space in url", "[x](<https://e.com/a b|c>)", "<https://e.com/a%20b%7Cc|x>"},
		{"link label is url", "[https://e.com](https://e.com)", "<https://e.com>"},
		{"unsafe link", "[click](javascript:alert(1)) and [rel](/docs)", "click and rel"},
		{"bare urls", "Go to https://example.org/a_b_c or www.foo.com, or mail me@example.com.",
			"Go to <https://example.org/a_b_c> or <http://www.foo.com>, or mail <mailto:me@example.com>."},
		{"autolink", "<https://example.com/x?a=1&b=2>", "<https://example.com/x?a=1&amp;b=2>"},
		{"image", "![a chart](https://e.com/c.png)", "<https://e.com/c.png|a chart>"},
		{"slack tokens kept", "Hi <@U012ABCDEF>, see <#C0123456|general>, <https://x.com/a?b=1&c=2|the *link*> and <!date^1392734382^{date}|Feb 18>.",
			"Hi <@U012ABCDEF>, see <#C0123456|general>, <https://x.com/a?b=1&amp;c=2|the *link*> and <!date^1392734382^{date}|Feb 18>."},
		{"slack token in bold", "**<@U012ABCDEF>** said", "*<@U012ABCDEF>* said"},
		{"broadcasts escaped", "<!here> <!channel> <!everyone> <!subteam^S123|@team>",
			"&lt;!here&gt; &lt;!channel&gt; &lt;!everyone&gt; &lt;!subteam^S123|@team&gt;"},
		{"token in code is text", "`<@U012ABCDEF>` and\n\n```\n<#C0123456>\n```", "`&lt;@U012ABCDEF&gt;` and\n\n```\n&lt;#C0123456&gt;\n```"},
		{"private use placeholders in input", "a \uE0000\uE001 b", "a \uFFFD0\uFFFD b"},
		{"html", "<div>x & y</div>\n\nline<br>next <span>z</span>",
			"&lt;div&gt;x &amp; y&lt;/div&gt;\n\nline\nnext &lt;span&gt;z&lt;/span&gt;"},
		{"bullets nested", "- one\n- two\n  - nested **x**\n  - nested 2\n    1. deep\n- three",
			"• one\n• two\n   ◦ nested *x*\n   ◦ nested 2\n      1. deep\n• three"},
		{"numbered from 3", "3. c\n4. d", "3. c\n4. d"},
		{"loose list", "- item one\n\n  second paragraph\n\n- item two",
			"• item one\n\n   second paragraph\n\n• item two"},
		{"task list", "- [ ] todo\n- [x] done", "• ☐ todo\n• ☑ done"},
		{"quote", "> quoted **line**\n> second\n>\n> > nested", "> quoted *line*\n> second\n>\n> nested"},
		{"table", "| Name | Value |\n|---|---:|\n| a < b | 1 & 2 |\n| long name | **3** |",
			"```\nName      | Value\n----------|------\na &lt; b     | 1 &amp; 2\nlong name | 3\n```"},
		{"rule", "a\n\n---\n\nb", "a\n\n───\n\nb"},
		{"hard and soft breaks", "one\ntwo  \nthree", "one\ntwo\nthree"},
		{"backslash escapes", `\*not bold\* and 1\. x`, "*not bold* and 1. x"},
		{"invalid utf8", "a\xffb", "a\uFFFDb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Render(tt.md); got != tt.want {
				t.Errorf("Render(%q)\n got %q\nwant %q", tt.md, got, tt.want)
			}
		})
	}
}

// A reply as models write it: heading, nested lists, code with < and &, a
// table and links, rendered whole.
func TestRenderModelReply(t *testing.T) {
	md := "## Fixing the build\n\n" +
		"The error comes from `a < b && c`. Two options:\n\n" +
		"1. **Pin** the version:\n   - edit `go.mod`\n   - run `go mod tidy`\n" +
		"2. Or *upgrade*, see [the notes](https://go.dev/doc/devel/release?x=1&y=2).\n\n" +
		"```bash\ngo get example.com/m@v1.2 && go build ./... 2>&1 | tee <log>\n```\n\n" +
		"| Option | Risk |\n|---|---|\n| pin | low |\n| upgrade | medium |\n\n" +
		"> **Note:** ask <@U0123ABCD> first.\n"
	want := "*Fixing the build*\n\n" +
		"The error comes from `a &lt; b &amp;&amp; c`. Two options:\n\n" +
		"1. *Pin* the version:\n    ◦ edit `go.mod`\n    ◦ run `go mod tidy`\n" +
		"2. Or _upgrade_, see <https://go.dev/doc/devel/release?x=1&amp;y=2|the notes>.\n\n" +
		"```\ngo get example.com/m@v1.2 &amp;&amp; go build ./... 2&gt;&amp;1 | tee &lt;log&gt;\n```\n\n" +
		"```\nOption  | Risk\n--------|-------\npin     | low\nupgrade | medium\n```\n\n" +
		"> *Note:* ask <@U0123ABCD> first."
	if got := Render(md); got != want {
		t.Errorf("Render:\n got %q\nwant %q", got, want)
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name string
		text string
		max  int
		want []string
	}{
		{"blank", " \n ", 10, nil},
		{"fits", "  short  ", 10, []string{"short"}},
		{"paragraphs", "aaaa bbbb\n\ncccc dddd", 12, []string{"aaaa bbbb", "cccc dddd"}},
		{"paragraph in the second half before a later line", "aaaa bbbb\n\ncccc\ndddd eeee", 16, []string{"aaaa bbbb", "cccc\ndddd eeee"}},
		{"line in the second half before an earlier paragraph", "aaaa\n\nbbbb\ncccc dddd", 16, []string{"aaaa\n\nbbbb", "cccc dddd"}},
		{"line before word", "aaaa bbbb cc\ndddd", 16, []string{"aaaa bbbb cc", "dddd"}},
		{"words", "one two three four five six", 10, []string{"one two", "three four", "five six"}},
		{"hard inside a word", "abcdefghijklmnopqrstuvwxyz", 10, []string{"abcdefghij", "klmnopqrst", "uvwxyz"}},
		{"runes, not bytes", "ééééé ééééé", 5, []string{"ééééé", "ééééé"}},
		{"link whole", "see <https://example.com/x|the link> now", 20,
			[]string{"see", "<https://example.com", "/x|the link> now"}},
		{"link kept over a space", "aa <https://e.com|a b c> bb", 22, []string{"aa", "<https://e.com|a b c>", "bb"}},
		{"entity whole", "aaaaaaa&amp;bbbbbbb", 9, []string{"aaaaaaa", "&amp;bbbb", "bbb"}},
		{"code block reopened", "intro\n```\nline one\nline two\nline three\n```\nafter", 24,
			[]string{"intro\n```\nline one\n```", "```\nline two\n```", "```\nline three\n```\nafter"}},
		{"code keeps indentation", "```\nfunc f() {\n    return 1\n}\n```", 24,
			[]string{"```\nfunc f() {\n```", "```\n    return 1\n}\n```"}},
		{"small max: no fences", "```\nabcdef\n```", 6, []string{"```", "abcdef", "```"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Split(tt.text, tt.max)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("Split(%q, %d)\n got %q\nwant %q", tt.text, tt.max, got, tt.want)
			}
			checkSplit(t, tt.text, tt.max, got)
		})
	}
}

func TestSplitDefaultMax(t *testing.T) {
	text := strings.Repeat("word ", 1000)
	for _, p := range Split(text, 0) {
		if n := utf8.RuneCountInString(p); n > MaxMessageChars {
			t.Fatalf("part of %d characters, want at most %d", n, MaxMessageChars)
		}
	}
}

// TestSplitLongReply splits a 4,000-word reply rendered from Markdown:
// every part fits, the parts come in order and hold the whole text, and
// every part closes the code blocks it opens.
func TestSplitLongReply(t *testing.T) {
	md := longReply(4000)
	if n := len(strings.Fields(md)); n < 4000 {
		t.Fatalf("the reply has %d words, want 4,000 or more", n)
	}
	text := Render(md)
	parts := Split(text, MaxMessageChars)
	if len(parts) < 6 {
		t.Fatalf("%d parts for %d characters", len(parts), utf8.RuneCountInString(text))
	}
	checkSplit(t, text, MaxMessageChars, parts)
	for i, p := range parts {
		if strings.HasPrefix(p, "```\n```") || strings.HasSuffix(p, "```\n```") {
			t.Errorf("part %d has an empty code block: %q", i, p)
		}
	}
	// In order: each section's heading appears after the previous one's.
	joined := strings.Join(parts, "\n")
	at := 0
	for s := range 40 {
		h := fmt.Sprintf("*Section %d*", s+1)
		i := strings.Index(joined[at:], h)
		if i < 0 {
			t.Fatalf("%q missing or out of order", h)
		}
		at += i
	}
}

// longReply is a reply of at least words words in 40 sections, each with
// paragraphs, a nested list, a code block with < and & and a link.
func longReply(words int) string {
	var b strings.Builder
	sentence := "The gateway keeps every message in its store before it answers, so a restart loses nothing. "
	per := words/40 + 1
	for s := range 40 {
		fmt.Fprintf(&b, "## Section %d\n\n", s+1)
		n := 0
		for n < per {
			for range 3 {
				b.WriteString(sentence)
				n += len(strings.Fields(sentence))
			}
			b.WriteString("\n\n")
		}
		b.WriteString("- first point with **bold**\n  - nested point, see [docs](https://example.com/a?b=1&c=2)\n- second point\n\n")
		fmt.Fprintf(&b, "```go\nfor i := 0; i < %d && ok; i++ {\n\tfmt.Println(\"<%d>\")\n}\n```\n\n", s, s)
	}
	return b.String()
}

// checkSplit checks the promises of Split: parts fit, are trimmed and not
// blank, close every code block they open, and hold the text's visible
// characters in order with only fence markers added.
func checkSplit(t *testing.T, text string, max int, parts []string) {
	t.Helper()
	if max < 1 {
		max = MaxMessageChars
	}
	if (strings.TrimSpace(text) == "") != (len(parts) == 0) {
		t.Fatalf("Split(%q, %d) = %q: parts for blank text, or none for visible text", text, max, parts)
	}
	for i, p := range parts {
		if n := utf8.RuneCountInString(p); n > max {
			t.Errorf("part %d has %d characters, max %d: %q", i, n, max, p)
		}
		if p != strings.TrimSpace(p) || p == "" {
			t.Errorf("part %d is blank or untrimmed: %q", i, p)
		}
		if len(parts) > 1 && max >= minFenced && fences(p)%2 != 0 {
			t.Errorf("part %d leaves a code block open: %q", i, p)
		}
	}
	var joined strings.Builder
	for _, p := range parts {
		joined.WriteString(visible(p))
	}
	if got, want := joined.String(), visible(text); got != want {
		t.Errorf("characters lost or moved:\n got %q\nwant %q", got, want)
	}
}

// fences counts ``` markers as Split sees them.
func fences(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], fence) {
			n++
		}
		i += atomLen(s[i:])
	}
	return n
}

// visible is s without whitespace and backticks (Split adds fences), an
// invalid byte as U+FFFD.
func visible(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r == '`' {
			return -1
		}
		return r
	}, s)
}

func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"", "**a** _b_ ~~c~~ `d` [e](https://f) <@U012ABCDEF> a<b&c",
		"- a\n  - b\n    1. c\n> q\n\n```go\nx < y\n```\n| a | b |\n|---|---|\n| 1 | 2 |",
		"<https://e.com|x> <!here> \uE0000\uE001 \x00 \xff",
		longReply(200),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		out := Render(md)
		if !utf8.ValidString(out) {
			t.Fatalf("Render(%q) = %q: invalid UTF-8", md, out)
		}
		if strings.ContainsAny(out, "\uE000\uE001") {
			t.Fatalf("Render(%q) = %q: a placeholder leaked", md, out)
		}
		if out != Render(md) {
			t.Fatalf("Render(%q) differs between two runs", md)
		}
		if err := checkMarkup(out); err != "" {
			t.Fatalf("Render(%q) = %q: %s", md, out, err)
		}
	})
}

// checkMarkup checks that every raw < in s opens a Slack link, mention or
// date that > closes on the same line, and that every other > is a quote
// marker: after nothing but indentation and list markers on its line, and
// followed by a space or the line's end.
func checkMarkup(s string) string {
	line := 0 // where the current line starts
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '<':
			end := strings.IndexAny(s[i+1:], "<>\n")
			if end < 0 || s[i+1+end] != '>' {
				return "an unclosed <"
			}
			i += end + 1
		case '>':
			if !quoteLead.MatchString(s[line:i]) || i+1 < len(s) && s[i+1] != ' ' && s[i+1] != '\n' {
				return "a stray >"
			}
		case '\n':
			line = i + 1
		}
	}
	return ""
}

var quoteLead = regexp.MustCompile(`^ *(?:(?:[•◦▪]|[0-9]+\.) +)*$`)

func FuzzSplit(f *testing.F) {
	f.Add("hello *world*", 20)
	f.Add(" \n\t ", 20)
	f.Add("aaaa\n\nbbbb\ncccc dddd", 10)
	f.Add("abcdefghijklmnopqrstuvwxyz", 3)
	f.Add("ééé 😀😀😀 日本語のテキスト", 5)
	f.Add("intro\n```\nx &lt; 1\ny = 2\n```\nend <https://e.com/a|b c> &amp;", 20)
	f.Add("```\n"+strings.Repeat("x", 50)+"\n```", 16)
	f.Add("``````` ``` `` ```\n```\n\n```", 17)
	f.Add(Render(longReply(600)), 500)
	f.Fuzz(func(t *testing.T, text string, max int) {
		if max < 0 {
			max = -(max + 1)
		}
		max %= 5000
		parts := Split(text, max)
		checkSplit(t, text, max, parts)
		if fmt.Sprint(parts) != fmt.Sprint(Split(text, max)) {
			t.Fatalf("Split(%q, %d) differs between two runs", text, max)
		}
	})
}
