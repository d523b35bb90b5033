package learning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
	"github.com/switchboard-gateway/switchboard/tools"
)

// Line is one message of a transcript shown to an analysis call.
type Line struct {
	N      int // its number in the rendered transcript, from 1
	Role   llm.Role
	Text   string
	TurnID int64
	Tools  []string // assistant: the tools it called (names only)
}

// FromUser reports whether the line is something the user said: the only
// lines a fact may be learned from.
func (l Line) FromUser() bool { return l.Role == llm.RoleUser }

// maxLineChars clips one message in a transcript; facts fit in far less.
const maxLineChars = 1500

// outsideTools bring outside text into a turn: web pages, search results,
// workspace files (the loop labels their results untrusted).
var outsideTools = []string{tools.WebFetchTool, tools.WebSearchTool, tools.FileReadTool}

// Transcript turns stored messages into lines for an analysis call. User
// lines carry only what the user wrote or said: the quoted message they
// replied to and the content of attached files are cut out. Assistant lines
// carry the reply text (including what it sent with send_message) as
// context and the names of the tools it called. Tool results never appear,
// and neither does what the assistant wrote after one of outsideTools in
// the same turn: a reply that repeats a page would carry the page's
// instructions into what is learned.
func Transcript(msgs []store.Message) []Line {
	var out []Line
	outside := map[int64]string{} // turn → the first outside tool it called
	for _, m := range msgs {
		l := Line{Role: m.Role, TurnID: m.TurnID}
		switch m.Role {
		case llm.RoleUser:
			l.Text = UserText(m.Content)
		case llm.RoleAssistant:
			var parts []string
			if len(m.ToolCalls) == 0 {
				parts = append(parts, m.Content)
			}
			for _, c := range m.ToolCalls {
				l.Tools = append(l.Tools, c.Name)
				if c.Name == "send_message" {
					var a struct {
						Text string `json:"text"`
					}
					if json.Unmarshal([]byte(c.Arguments), &a) == nil {
						parts = append(parts, a.Text)
					}
				}
			}
			l.Text = strings.TrimSpace(strings.Join(parts, "\n"))
			if tool := outside[m.TurnID]; tool != "" && l.Text != "" {
				l.Text = "(not shown: written after reading outside content with " + tool + ")"
			}
			for _, c := range m.ToolCalls {
				if outside[m.TurnID] == "" && slices.Contains(outsideTools, c.Name) {
					outside[m.TurnID] = c.Name
				}
			}
		default:
			continue
		}
		if l.Text == "" && len(l.Tools) == 0 {
			continue
		}
		l.Text = clip(l.Text, maxLineChars)
		l.N = len(out) + 1
		out = append(out, l)
	}
	return out
}

// Render writes lines as the numbered transcript the analysis prompts
// describe. Texts are JSON strings, so a message cannot fake a line.
func Render(lines []Line) string {
	var b strings.Builder
	for _, l := range lines {
		who := "USER"
		if !l.FromUser() {
			who = "ASSISTANT (context only)"
		}
		text, _ := json.Marshal(l.Text)
		fmt.Fprintf(&b, "[%d] %s: %s", l.N, who, text)
		if len(l.Tools) > 0 {
			fmt.Fprintf(&b, " (called tools: %s)", strings.Join(l.Tools, ", "))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// HasUserText reports whether any line is the user's own text.
func HasUserText(lines []Line) bool {
	for _, l := range lines {
		if l.FromUser() && l.Text != "" {
			return true
		}
	}
	return false
}

// UserLine returns the user line numbered n, if there is one.
func UserLine(lines []Line, n int) (Line, bool) {
	if n < 1 || n > len(lines) || !lines[n-1].FromUser() {
		return Line{}, false
	}
	return lines[n-1], true
}

var (
	// The router starts a group message with its author, then a reply
	// with the quoted message, each on one line.
	authorLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\A\[from [^\n]*\]\n?`) })
	quoteLine  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\A\[replying to [^\n]*\]\n?`) })
	// An attached text file: a header line, the untrusted label, then its
	// content fenced.
	fileBlock = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile("(?s)\\[file [^\\n]*\\]\\n(\\[untrusted content from [^\\n]*\\]\\n)?```\\n.*?\\n```")
	})
	// Other attachment notes (with the adapter's note after them).
	attachLine = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?m)^\[(image|video|sticker|location|file|audio|voice message)[ :][^\n]*$`)
	})
	voiceLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^\[voice message, transcribed\]: `) })
)

// UserText is what the user themselves wrote in a stored user message: the
// router's quote of another message and attached file contents are removed
// (they are someone else's words), a voice transcription is kept.
func UserText(content string) string {
	s := quoteLine().ReplaceAllString(authorLine().ReplaceAllString(content, ""), "")
	s = fileBlock().ReplaceAllString(s, "")
	s = voiceLine().ReplaceAllString(s, "")
	s = attachLine().ReplaceAllString(s, "")
	return strings.TrimSpace(s)
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// Model is the chat model the jobs call (llm.Client implements it).
type Model interface {
	Complete(ctx context.Context, req llm.Request, onDelta func(llm.Delta)) (llm.Response, error)
}

// ErrNoCall is matched (errors.Is) when the model answered a forced call
// without calling the function.
var ErrNoCall = errors.New("learning: the model did not call the function")

// Unsupported reports whether err shows that the model cannot make forced
// function calls, so that no learning call can work with it: it answered a
// forced call with text (ErrNoCall), or the server refused the request's
// tool_choice or tools (a 400, 422 or 501 that names them).
func Unsupported(err error) bool {
	if errors.Is(err, ErrNoCall) {
		return true
	}
	var le *llm.Error
	if !errors.As(err, &le) {
		return false
	}
	switch le.Status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusNotImplemented:
		msg := strings.ToLower(le.Message + " " + le.Code)
		return strings.Contains(msg, "tool") || strings.Contains(msg, "function")
	}
	return false
}

// Call makes one structured call: the model must answer by calling tool
// (forced with tool_choice), and its arguments are decoded into out.
func Call(ctx context.Context, m Model, system, prompt string, tool llm.ToolSpec, out any) error {
	resp, err := m.Complete(ctx, llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: system},
			{Role: llm.RoleUser, Content: prompt},
		},
		Tools:     []llm.ToolSpec{tool},
		ForceTool: tool.Name,
	}, nil)
	if err != nil {
		return fmt.Errorf("learning: %s: %w", tool.Name, err)
	}
	for _, c := range resp.Message.ToolCalls {
		if c.Name != tool.Name {
			continue
		}
		if err := json.Unmarshal([]byte(c.Arguments), out); err != nil {
			return fmt.Errorf("learning: %s: arguments are not valid: %w", tool.Name, err)
		}
		return nil
	}
	return fmt.Errorf("learning: %s: %w", tool.Name, ErrNoCall)
}
