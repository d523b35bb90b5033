package telegram

import (
	"strings"
	"testing"
	"unicode"

	"github.com/switchboard-gateway/switchboard/internal/tghtml"
)

func TestRenderMarkdown(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "hello world", "hello world"},
		{"escapes", "a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"},
		{"bold italic strike", "**b** *i* ~~s~~ __u__", "<b>b</b> <i>i</i> <s>s</s> <b>u</b>"},
		{"inline code", "run `go test ./...` now", "run <code>go test ./...</code> now"},
		{"code escapes", "`a<b>&c`", "<code>a&lt;b&gt;&amp;c</code>"},
		{"fenced go", "```go\nfunc main() {\n\tfmt.Println(\"<hi>\")\n}\n```",
			"<pre><code class=\"language-go\">func main() {\n\tfmt.Println(\"&lt;hi&gt;\")\n}</code></pre>"},
		{"fenced no lang", "```\nx := 1\n```", "<pre>x := 1</pre>"},
		{"fenced odd lang", "```go\"><b>\nx\n```", "<pre>x</pre>"},
		{"indented code", "    indented", "<pre>indented</pre>"},
		{"link", "[docs](https://go.dev/doc?a=1&b=2)", `<a href="https://go.dev/doc?a=1&amp;b=2">docs</a>`},
		{"link with bold", "[**go**](https://go.dev)", `<a href="https://go.dev"><b>go</b></a>`},
		{"link with code", "[`go`](https://go.dev)", `<a href="https://go.dev">go</a>`},
		{"unsafe link", "[click](javascript:alert(1))", "click"},
		{"relative link", "[rel](/path)", "rel"},
		{"empty label", "[](https://go.dev)", `<a href="https://go.dev">https://go.dev</a>`},
		{"autolink", "<https://go.dev>", `<a href="https://go.dev">https://go.dev</a>`},
		{"bare url", "see https://go.dev now", `see <a href="https://go.dev">https://go.dev</a> now`},
		{"email", "<me@example.com>", `<a href="mailto:me@example.com">me@example.com</a>`},
		{"image", "![a cat](https://x.org/cat.png)", `<a href="https://x.org/cat.png">a cat</a>`},
		{"heading", "# Title\n\ntext", "<b>Title</b>\n\ntext"},
		{"heading with code", "## Use `go vet`", "<b>Use go vet</b>"},
		{"blockquote", "> quoted **bold**", "<blockquote>quoted <b>bold</b></blockquote>"},
		{"nested blockquote", "> a\n>> b", "<blockquote>a\n\nb</blockquote>"},
		{"bullets", "- one\n- two\n  - nested", "• one\n• two\n  • nested"},
		{"ordered", "3. three\n4. four", "3. three\n4. four"},
		{"tasks", "- [x] done\n- [ ] todo", "• ☑ done\n• ☐ todo"},
		{"table", "| a | bb |\n|---|---|\n| 1 | 2 |", "<pre>a | bb\n--|---\n1 | 2</pre>"},
		{"raw html escaped", "<div>x</div>", "&lt;div&gt;x&lt;/div&gt;"},
		{"inline html", "a <span>b</span> c", "a &lt;span&gt;b&lt;/span&gt; c"},
		{"br", "a<br>b", "a\nb"},
		{"entities", "&copy; &#x1F600; &amp;", "© 😀 &amp;"},
		{"backslash", `\*not italic\*`, "*not italic*"},
		{"soft break", "line one\nline two", "line one\nline two"},
		{"thematic", "a\n\n---\n\nb", "a\n\n———\n\nb"},
		{"empty code block", "```\n```", ""},
		{"nul", "a\x00b", "a\uFFFDb"},
		{"invalid utf8", "a\xffb", "a\uFFFDb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := renderMarkdown(tt.in)
			if got != tt.want {
				t.Errorf("renderMarkdown(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if _, err := tghtml.Validate(got); err != nil {
				t.Errorf("renderMarkdown(%q) = %q is not valid Telegram HTML: %v", tt.in, got, err)
			}
		})
	}
}

func TestSplitHTML(t *testing.T) {
	t.Run("short stays whole", func(t *testing.T) {
		in := "<b>hello</b> world"
		if got := splitHTML(in, 100); len(got) != 1 || got[0] != in {
			t.Errorf("splitHTML = %q, want [%q]", got, in)
		}
	})
	t.Run("prefers paragraph breaks", func(t *testing.T) {
		para := strings.Repeat("word ", 30) // 150 units
		in := strings.TrimSpace(para) + "\n\n" + strings.TrimSpace(para)
		got := splitHTML(in, 200)
		if len(got) != 2 {
			t.Fatalf("got %d parts, want 2: %q", len(got), got)
		}
		if strings.TrimSpace(got[0]) != strings.TrimSpace(para) {
			t.Errorf("first part = %q, want the first paragraph", got[0])
		}
	})
	t.Run("reopens code block", func(t *testing.T) {
		var lines []string
		for i := range 40 {
			lines = append(lines, strings.Repeat("x", 20)+strings.Repeat("y", i%3))
		}
		in := `<pre><code class="language-go">` + strings.Join(lines, "\n") + `</code></pre>`
		got := splitHTML(in, 300)
		if len(got) < 3 {
			t.Fatalf("got %d parts, want several", len(got))
		}
		for i, p := range got {
			if !strings.HasPrefix(p, `<pre><code class="language-go">`) || !strings.HasSuffix(p, "</code></pre>") {
				t.Errorf("part %d does not reopen and close the code block: %q", i, p)
			}
			if _, err := tghtml.Validate(p); err != nil {
				t.Errorf("part %d invalid: %v", i, err)
			}
			// splits fall on line breaks, so no line is cut in two
			body := strings.TrimSuffix(strings.TrimPrefix(p, `<pre><code class="language-go">`), "</code></pre>")
			for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
				if !strings.HasPrefix(l, strings.Repeat("x", 20)) {
					t.Errorf("part %d has a broken line %q", i, l)
				}
			}
		}
	})
	t.Run("never cuts an entity", func(t *testing.T) {
		in := strings.Repeat("&amp;", 50)
		for _, p := range splitHTML(in, 23) {
			if _, err := tghtml.Validate(p); err != nil {
				t.Errorf("part %q invalid: %v", p, err)
			}
			if tghtml.UTF16Len(p) > 23 {
				t.Errorf("part %q longer than 23 units", p)
			}
		}
	})
	t.Run("drops whitespace-only parts", func(t *testing.T) {
		for _, p := range splitHTML("a"+strings.Repeat(" ", 100)+"\n\n\n", 10) {
			if strings.TrimSpace(tghtml.PlainText(p)) == "" {
				t.Errorf("whitespace-only part %q", p)
			}
		}
	})
	t.Run("surrogate pairs", func(t *testing.T) {
		in := strings.Repeat("😀", 100)
		parts := splitHTML(in, 51)
		if strings.Join(parts, "") != in {
			t.Errorf("parts lost emoji")
		}
		for _, p := range parts {
			if n := tghtml.UTF16Len(p); n > 51 {
				t.Errorf("part has %d units, want ≤ 51", n)
			}
		}
	})
	t.Run("tags too long for the limit", func(t *testing.T) {
		in := `<a href="https://example.com/` + strings.Repeat("p", 100) + `">link text here</a>`
		parts := splitHTML(in, 40)
		if got := tghtml.PlainText(strings.Join(parts, "")); got != "link text here" {
			t.Errorf("text = %q, want %q", got, "link text here")
		}
		for _, p := range parts {
			if tghtml.UTF16Len(p) > 40 {
				t.Errorf("part %q longer than 40", p)
			}
		}
	})
}

func TestRenderAndSplitLongReply(t *testing.T) {
	md := strings.Repeat("Lorem ipsum dolor sit amet, **consectetur** adipiscing elit. ", 100) // ~6000 chars
	parts := splitHTML(renderMarkdown(md), partLimit)
	if len(parts) != 2 {
		t.Fatalf("got %d parts, want 2", len(parts))
	}
	checkParts(t, renderMarkdown(md), parts, partLimit)
}

// checkParts asserts the splitter's contract for parts of html.
func checkParts(t *testing.T, html string, parts []string, limit int) {
	t.Helper()
	var joined strings.Builder
	for i, p := range parts {
		if n := tghtml.UTF16Len(p); n > limit {
			t.Fatalf("part %d has %d UTF-16 units, limit %d", i, n, limit)
		}
		text, err := tghtml.Validate(p)
		if err != nil {
			t.Fatalf("part %d is not valid Telegram HTML: %v\n%q", i, err, p)
		}
		if strings.TrimSpace(text) == "" {
			t.Fatalf("part %d shows nothing: %q", i, p)
		}
		joined.WriteString(text)
	}
	want, err := tghtml.Validate(html)
	if err != nil {
		t.Fatalf("input is not valid: %v", err)
	}
	if got := dropSpace(joined.String()); got != dropSpace(want) {
		t.Fatalf("text content changed:\n got %q\nwant %q", got, dropSpace(want))
	}
}

func dropSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"", "hello", "**bold** _it_ ~~s~~ `code`", "```go\nfunc(){}\n```", "> quote\n>> nested",
		"[l](https://x.y) <https://a.b> ![i](https://c.d)", "- a\n  - b\n1. c", "| a | b |\n|--|--|\n| 1 | 2 |",
		"# h `c` [l](https://e.f)", "&amp; &#0; &#xD800; \\* <b>x</b>", "[**`x`**](https://g.h)",
		"> ```\n> code\n> ```", "* [ ] t\n* [x] u", "a<br>b\x00\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		out := renderMarkdown(md)
		if _, err := tghtml.Validate(out); err != nil {
			t.Fatalf("renderMarkdown(%q) = %q: %v", md, out, err)
		}
	})
}

func FuzzSplit(f *testing.F) {
	f.Add("hello world", 4000)
	f.Add(strings.Repeat("word ", 60), 50)
	f.Add("```go\n"+strings.Repeat("line of code\n", 12)+"```", 60)
	f.Add("> "+strings.Repeat("**quoted** and [a link](https://example.com) ", 5), 40)
	f.Add(strings.Repeat("😀&<>", 30), 17)
	f.Add("# Title\n\n- a `b`\n- c\n\n| x | y |\n|---|---|\n| 1 | 2 |", 20)
	f.Fuzz(func(t *testing.T, md string, limit int) {
		// Small limits make short inputs split often; TestRenderAndSplitLongReply
		// covers the real limit.
		if limit < 0 {
			limit = -(limit + 1)
		}
		limit = 16 + limit%4096
		html := renderMarkdown(md)
		parts := splitHTML(html, limit)
		if strings.TrimSpace(tghtml.PlainText(html)) != "" && len(parts) == 0 {
			t.Fatalf("no parts for visible text %q", html)
		}
		checkParts(t, html, parts, limit)
	})
}
