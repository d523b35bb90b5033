package tools

import (
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

func TestMarkdown(t *testing.T) {
	base, _ := url.Parse("https://example.com/docs/page")
	tests := []struct{ name, in, want string }{
		{"paragraphs collapse whitespace", "<p>one\n   two</p><p>three</p>", "one two\n\nthree"},
		{"links are absolute; dead ones are text", `<p>See <a href="../api">the API</a>, <a href="#top">top</a>, <a href="javascript:alert(1)">this</a> and <a href="https://x.org">https://x.org</a>.</p>`,
			"See [the API](https://example.com/api), top, this and https://x.org."},
		{"nested lists", "<ul><li>a<ul><li>a1</li><li>a2</li></ul></li><li>b</li></ul><ol start=\"3\"><li>c</li><li>d</li></ol>",
			"- a\n  - a1\n  - a2\n- b\n\n3. c\n4. d"},
		{"code", "<p>Run <code>go   test</code>:</p><pre>go test ./...\n  -run X</pre>", "Run `go test`:\n\n```\ngo test ./...\n  -run X\n```"},
		{"quote", "<blockquote><p>Said once.</p><p>Said twice.</p></blockquote>", "> Said once.\n\n> Said twice."},
		{"headings and breaks", "<h3>Title <small>sub</small></h3>line<br>next", "### Title sub\n\nline\nnext"},
		{"hidden and scripts", `<div hidden>x</div><p aria-hidden="true">y</p><script>z()</script><p>shown<span style="display: none">no</span></p>`, "shown"},
		{"images keep their alt", `<p><img src="a.png" alt="a  cat"> <img src="b.png"></p>`, "[image: a cat]"},
		{"table cells escape pipes", "<table><tr><td>a|b</td><td>c</td></tr></table>", "| a\\|b | c |\n| --- | --- |"},
	}
	for _, tt := range tests {
		doc, err := html.Parse(strings.NewReader(tt.in))
		if err != nil {
			t.Fatal(err)
		}
		if got := markdown(doc, base); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

func TestHTMLText(t *testing.T) {
	for in, want := range map[string]string{
		"plain  text":                    "plain text",
		"<strong>Go</strong> &amp; Rust": "Go & Rust",
		"a < b and c>d":                  "a < b and c>d",
		"line<br>break":                  "line break",
	} {
		if got := htmlText(in); got != want {
			t.Errorf("htmlText(%q) = %q, want %q", in, got, want)
		}
	}
}
