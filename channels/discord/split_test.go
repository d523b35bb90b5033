package discord

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestSplitMessage(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		limit int
		want  []string
	}{
		{"short text is one part", "hello **world**", 20, []string{"hello **world**"}},
		{"blank text is nothing", " \n\t ", 20, nil},
		{"surrounding space trimmed", "\n\nhi\n\n", 20, []string{"hi"}},
		{"packs whole lines", "aaaa\nbbbb\ncccc\ndddd", 10, []string{"aaaa\nbbbb", "cccc\ndddd"}},
		{"cuts a long line at a space", "one two three four five six", 10, []string{"one two", "three four", "five six"}},
		{"cuts a long word hard", "abcdefghijklmnopqrstuvwxyz", 10, []string{"abcdefghij", "klmnopqrst", "uvwxyz"}},
		{"counts characters, not bytes", "ééééé ééééé", 5, []string{"ééééé", "ééééé"}},
		{
			"fence reopened with its language",
			"intro\n```py\nx = 1\ny = 2\nz = 3\n```\nend",
			20,
			// "intro" + an empty block would fit, but the opening line moves
			// to the part where its content is.
			[]string{"intro", "```py\nx = 1\n```", "```py\ny = 2\n```", "```py\nz = 3\n```\nend"},
		},
		{
			"tilde fence",
			"~~~\naaaa\nbbbb\ncccc\n~~~",
			14,
			[]string{"~~~\naaaa\n~~~", "~~~\nbbbb\n~~~", "~~~\ncccc\n~~~"},
		},
		{
			"long line inside a fence stays in the fence",
			"```\n" + strings.Repeat("x", 20) + "\n```",
			16,
			[]string{"```\nxxxxxxxx\n```", "```\nxxxxxxxx\n```", "```\nxxxx\n```"},
		},
		{
			"inline triple backticks are not a fence",
			"say ```this``` now\nand then more words",
			20,
			[]string{"say ```this``` now", "and then more words"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := splitMessage(tt.text, tt.limit)
			if !slices.Equal(got, tt.want) {
				t.Errorf("splitMessage(%q, %d)\ngot  %q\nwant %q", tt.text, tt.limit, got, tt.want)
			}
		})
	}
}

// TestSplitMessageInvariants splits one long reply at many limits: no part
// is over the limit, none is blank, each closes its code blocks, and no line
// is lost or moved in or out of a code block.
func TestSplitMessageInvariants(t *testing.T) {
	text := longReply()
	for limit := 60; limit <= 2000; limit += 37 {
		parts := splitMessage(text, limit)
		for i, p := range parts {
			if n := utf8.RuneCountInString(p); n > limit || strings.TrimSpace(p) == "" {
				t.Fatalf("limit %d: part %d has %d chars: %q", limit, i, n, p)
			}
		}
		checkSplit(t, text, parts)
	}
}

// Limits too small for the fence lines a part repeats still end, with every
// character of the text kept in order (before, a 70-character fence line
// and a limit under 131 looped forever).
func TestSplitMessageTinyLimits(t *testing.T) {
	text := "```" + strings.Repeat("x", 60) + "\n" + strings.Repeat("code ", 40) + "\n```\nafter"
	for _, limit := range []int{1, 5, 20, 64, 100, 130} {
		done := make(chan []string, 1)
		go func() { done <- splitMessage(text, limit) }()
		var parts []string
		select {
		case parts = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("splitMessage at limit %d did not end", limit)
		}
		// The text, once the fence lines each part repeats are dropped.
		var b strings.Builder
		for _, p := range parts {
			if p == "" {
				t.Fatalf("limit %d: an empty part", limit)
			}
			for _, line := range strings.Split(p, "\n") {
				if !strings.HasPrefix(line, "```") {
					b.WriteString(strings.ReplaceAll(line, " ", ""))
				}
			}
		}
		if got := b.String(); !strings.Contains(got, strings.Repeat("code", 40)) || !strings.Contains(got, "after") {
			t.Errorf("limit %d: text lost or reordered across %d parts", limit, len(parts))
		}
	}
}
