package tools

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzHTMLToText renders arbitrary web pages as web_fetch does. A page is
// outside text the model will read, so whatever it holds the rendering
// never panics, always names the page's URL on its own line before the
// text, and never passes on what a reader would not see: the content of
// scripts, styles, templates and hidden elements placed at the top of the
// page stays out, wherever the fuzzed markup after them leads.
func FuzzHTMLToText(f *testing.F) {
	for _, s := range []string{
		"",
		"<p>one\n   two</p><p>three</p>",
		`<p>See <a href="../api">the API</a>, <a href="#top">top</a>, <a href="javascript:alert(1)">this</a>.</p>`,
		"<ul><li>a<ul><li>a1</li></ul></li></ul><ol start=\"-3\"><li>c</li></ol><ol start=\"99999999999999999999\"><li>d</li></ol>",
		"<p>Run <code>go   test</code>:</p><pre>go test ./...\n  -run X</pre>",
		"<blockquote><blockquote><p>deep</p></blockquote></blockquote>",
		"<table><tr><td>a|b</td><td colspan=9>c</td></tr><tr><th>x</th></tr></table>",
		`<html><head><title>T</title><meta name="author" content="A"></head><body><article><h1>Title</h1>` + strings.Repeat("<p>A paragraph of the article, long enough to count as content for readability.</p>", 8) + `</article></body></html>`,
		"<plaintext><p>not markup",
		"<textarea>typed</textarea><select><option>o</option></select>",
		"<!-- unclosed comment",
		"<svg><script>x()</script><foreignObject><p>in svg</p></foreignObject></svg><math><mi>x</mi></math>",
		"<table><script>foster()</script><p>fostered</p></table>",
		"<template><p>inert</p></template><noscript>enable js</noscript>",
		`<div style="DISPLAY : NONE">no</div><div aria-hidden=true>no</div><p hidden=false>no</p>`,
		"<p>\x00\xff\xfe invalid &#0; &#xD800; &amp;&lt;</p>",
		`<a href="http://[::1]:namedport">x</a><a href="%zz">y</a><img alt="cat" src=x>`,
		"<h7>h</h7><h1><h2>nested</h2></h1><br><br/><hr>",
	} {
		f.Add(s)
	}
	base, _ := url.Parse("https://example.com/docs/page?q=1")
	const (
		scriptMark = "SCRIPTMARK"
		styleMark  = "STYLEMARK"
		tmplMark   = "TEMPLATEMARK"
		hiddenMark = "HIDDENMARK"
	)
	top := "<!doctype html><html><head><title>Fuzz</title><script>var s = '" + scriptMark + "';</script><style>p::after{content:'" + styleMark + "'}</style></head>" +
		"<body><script>var b = '" + scriptMark + "';</script><style>b{}/*" + styleMark + "*/</style><template>" + tmplMark + "</template><div hidden>" + hiddenMark + "</div><div style=\"display:none\">" + hiddenMark + "</div>"
	f.Fuzz(func(t *testing.T, page string) {
		out, err := htmlToText([]byte(top+page), "text/html; charset=utf-8", base)
		if err != nil {
			return // not HTML at all: web_fetch reports it
		}
		if !strings.Contains(out, "URL: "+base.String()+"\n\n") {
			t.Fatalf("the rendering does not name the page's URL:\n%s", out)
		}
		for _, mark := range []string{scriptMark, styleMark, tmplMark, hiddenMark} {
			if strings.Contains(out, mark) && !strings.Contains(page, mark) {
				t.Fatalf("invisible content %s reached the text of %q:\n%s", mark, page, out)
			}
		}
	})
}
