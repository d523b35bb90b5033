package reply

import (
	"strings"
	"unicode"
)

// progressLabels are the progress lines of the built-in tools. A tool
// labelled "" shows none: the ones that deliver to the chat, whose result
// the user sees anyway.
var progressLabels = map[string]string{
	"web_search":      "searching the web…",
	"web_fetch":       "reading a web page…",
	"file_read":       "reading a file…",
	"file_write":      "writing a file…",
	"file_edit":       "editing a file…",
	"file_list":       "looking through the files…",
	"recall":          "searching my memory…",
	"remember":        "making a note…",
	"forget":          "forgetting…",
	"schedule_create": "setting up the schedule…",
	"schedule_list":   "looking at the schedule…",
	"schedule_cancel": "changing the schedule…",
	"delegate":        "handing the work to a helper…",
	"current_time":    "checking the time…",
	"send_message":    "",
	"send_file":       "",
	"send_photo":      "",
	"react":           "",
}

// thinkingLabel is the progress line while the model reasons (its
// reasoning is never shown); thinkingKey stands for it among the running
// calls.
const (
	thinkingLabel = "thinking…"
	thinkingKey   = "\x00thinking"
)

// progressMaxChars bounds a progress line made from a tool's description.
const progressMaxChars = 60

// toolLabel is the progress line of tool: its built-in label, else the
// first sentence of its description (a skill's, an MCP server's), else its
// name.
func toolLabel(tool, description string) string {
	if l, ok := progressLabels[tool]; ok {
		return l
	}
	d := strings.TrimSpace(description)
	if i := strings.IndexAny(d, "\n"); i >= 0 {
		d = d[:i]
	}
	if i := strings.Index(d, ". "); i >= 0 {
		d = d[:i]
	}
	d = strings.TrimRightFunc(d, func(r rune) bool { return r == '.' || r == '…' || unicode.IsSpace(r) })
	if d == "" {
		return "running " + tool + "…"
	}
	r := []rune(d)
	if len(r) > progressMaxChars {
		r = r[:progressMaxChars]
	}
	return strings.TrimRightFunc(string(r), unicode.IsSpace) + "…"
}
