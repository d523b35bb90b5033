package slack

import "strings"

// Placeholder until the render helper's mrkdwn.go is merged: Render
// escapes what Slack reads as markup, Split cuts at max bytes on line
// boundaries where it can.

// Render turns Markdown into Slack mrkdwn.
func Render(md string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(md)
}

// Split cuts text into parts of at most max bytes.
func Split(text string, max int) []string {
	var out []string
	for len(text) > max {
		cut := strings.LastIndex(text[:max], "\n")
		if cut <= 0 {
			cut = max
		}
		out = append(out, text[:cut])
		text = strings.TrimPrefix(text[cut:], "\n")
	}
	if text != "" {
		out = append(out, text)
	}
	return out
}
