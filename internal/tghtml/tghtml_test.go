package tghtml

import (
	"strings"
	"testing"
)

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		in, text string
	}{
		{"plain", "plain"},
		{"", ""},
		{"a &lt; b &gt; c &amp; d &quot;", `a < b > c & d "`},
		{"&#128512; &#x1F600;", "😀 😀"},
		{"<b>bold</b> <strong>s</strong> <i>i</i> <em>e</em> <u>u</u> <ins>n</ins>", "bold s i e u n"},
		{"<s>s</s><strike>t</strike><del>d</del>", "std"},
		{`<a href="https://example.com/?a=1&amp;b=2">link <b>bold</b></a>`, "link bold"},
		{"<code>x := 1</code>", "x := 1"},
		{"<pre>block</pre>", "block"},
		{`<pre><code class="language-go">func main() {}</code></pre>`, "func main() {}"},
		{`<span class="tg-spoiler">hidden</span><tg-spoiler>too</tg-spoiler>`, "hiddentoo"},
		{"<blockquote>quote <i>it</i></blockquote>", "quote it"},
		{"<blockquote expandable>long</blockquote>", "long"},
		{"<blockquote><pre>code in quote</pre></blockquote>", "code in quote"},
		{"<B>upper</B>", "upper"},
		{"<b><i><u>deep</u></i></b>", "deep"},
		{"<i><a href='x'>single</a></i>", "single"},
	}
	for _, tt := range tests {
		got, err := Validate(tt.in)
		if err != nil {
			t.Errorf("Validate(%q) error: %v", tt.in, err)
			continue
		}
		if got != tt.text {
			t.Errorf("Validate(%q) text = %q, want %q", tt.in, got, tt.text)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		in, wantErr string
	}{
		{"a < b", "unexpected '<'"},
		{"a > b", "unexpected '>'"},
		{"fish & chips", "unsupported HTML entity"},
		{"&nbsp;", "unsupported HTML entity"},
		{"&#0;", "unsupported HTML entity"},
		{"&#xD800;", "unsupported HTML entity"},
		{"<div>x</div>", `unsupported start tag "div"`},
		{"<b>x", `can't find end tag corresponding to start tag "b"`},
		{"x</b>", "unmatched end tag"},
		{"<b><i>x</b></i>", `expected "</i>", found "</b>"`},
		{"<b", "unclosed start tag"},
		{"</b", "unclosed end tag"},
		{`<a>x</a>`, "without href"},
		{`<a href="">x</a>`, "without href"},
		{`<a href="x" target="_blank">x</a>`, "unsupported attribute"},
		{`<b class="x">x</b>`, "unsupported attribute"},
		{`<code class="language-go">x</code>`, "unsupported attribute"},
		{`<span>x</span>`, "tg-spoiler"},
		{`<pre><b>x</b></pre>`, "inside <pre>"},
		{`<pre>x<code>y</code></pre>`, "inside <pre>"},
		{`<pre><code>y</code>x</pre>`, "text after </code>"},
		{`<code><b>x</b></code>`, "inside <code>"},
		{`<b><code>x</code></b>`, "inside <b>"},
		{`<a href="u"><code>x</code></a>`, "inside <a>"},
		{`<a href="u"><a href="v">x</a></a>`, "link inside a link"},
		{`<blockquote><blockquote>x</blockquote></blockquote>`, "can't be nested"},
		{`<a href="u">x<br></a>`, `unsupported start tag "br"`},
		{`<a href="u<">x</a>`, "unexpected '<' in attribute"},
		{"\xff", "UTF-8"},
	}
	for _, tt := range tests {
		_, err := Validate(tt.in)
		if err == nil {
			t.Errorf("Validate(%q) = nil error, want %q", tt.in, tt.wantErr)
			continue
		}
		if !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Validate(%q) error = %q, want it to contain %q", tt.in, err, tt.wantErr)
		}
	}
}

func TestEscapeRoundTrip(t *testing.T) {
	in := `if a < b && c > d { "q" }`
	esc := Escape(in)
	got, err := Validate(esc)
	if err != nil {
		t.Fatalf("Validate(Escape(%q)): %v", in, err)
	}
	if got != in {
		t.Errorf("round trip = %q, want %q", got, in)
	}
	attr := `<a href="` + EscapeAttr(`https://x/?q="a"&b=<c>`) + `">l</a>`
	toks, err := Tokenize(attr)
	if err != nil {
		t.Fatalf("Tokenize(%q): %v", attr, err)
	}
	if got, want := toks[0].Attrs[0].Value, `https://x/?q="a"&b=<c>`; got != want {
		t.Errorf("href = %q, want %q", got, want)
	}
}

func TestPlainText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"<b>a</b> &amp; <i>b</i>", "a & b"},
		{"broken <b>tag & text", "broken tag & text"},
		{"<unknown attr>x</unknown>", "x"},
	}
	for _, tt := range tests {
		if got := PlainText(tt.in); got != tt.want {
			t.Errorf("PlainText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestUTF16Len(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"é", 1},
		{"😀", 2},
		{strings.Repeat("a", 4095) + "😀", 4097},
	}
	for _, tt := range tests {
		if got := UTF16Len(tt.in); got != tt.want {
			t.Errorf("UTF16Len(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
