package textsplit

import (
	"fmt"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	para := strings.Repeat("a", 60)
	text := strings.Repeat(para+"\n\n", 10)
	ps := Split(text, 200)
	for i, p := range ps {
		if Units(p) > 200 || strings.HasPrefix(p, "\n") || strings.HasSuffix(p, "\n") {
			t.Errorf("part %d (%d units) %q", i, Units(p), p)
		}
	}
	if got := strings.Join(ps, "\n\n"); got != strings.TrimSpace(text) {
		t.Errorf("the parts do not make the text: %q", got)
	}

	// Emoji count two UTF-16 units each; no part goes past the limit.
	for _, p := range Split(strings.Repeat("😀", 300), 101) {
		if Units(p) > 101 {
			t.Errorf("a part of %d units", Units(p))
		}
	}

	// A code block cut in two is closed and opened again.
	code := "```\n" + strings.Repeat("x := 1\n", 60) + "```"
	ps = Split(code, 200)
	if len(ps) < 2 {
		t.Fatalf("%d parts", len(ps))
	}
	for i, p := range ps {
		if strings.Count(p, "```")%2 != 0 || Units(p) > 200 {
			t.Errorf("part %d is not a closed block within 200: %q", i, p)
		}
	}

	// Deterministic: the same text, the same parts (Parts relies on it).
	if a, b := fmt.Sprint(Split(text, 150)), fmt.Sprint(Split(text, 150)); a != b {
		t.Error("two splits of one text differ")
	}
	if got := Split("", 100); len(got) != 0 {
		t.Errorf("Split of nothing = %q", got)
	}
}
