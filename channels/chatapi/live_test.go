package chatapi

import (
	"strings"
	"testing"
)

// liveText against scripted turns: what the stream writes, joined, and
// whether it equals the answer a non-streamed request gets.
func TestLiveText(t *testing.T) {
	type step struct {
		kind     string // "delta" (call id, fragment), "sent" (text), "ran" (call id)
		id, text string
	}
	d := func(id, text string) step { return step{"delta", id, text} }
	sent := func(text string) step { return step{kind: "sent", text: text} }
	ran := func(id string) step { return step{kind: "ran", id: id} }
	tests := []struct {
		name    string
		steps   []step
		want    string
		firstAt int  // the step after which the first piece is written
		differs bool // the stream differs from the non-streamed answer
	}{
		{"one call streamed then sent", []step{d("a", "Hel"), d("a", "lo"), sent("Hello"), ran("a")}, "Hello", 0, false},
		{"two calls in two steps",
			[]step{d("a", "One."), sent("One."), ran("a"), d("b", "Tw"), d("b", "o."), sent("Two."), ran("b")},
			"One.\n\nTwo.", 0, false},
		{"plain text sent by the fallback", []step{sent("Just text.")}, "Just text.", 0, false},
		{"interleaved calls: the second waits for the first",
			[]step{d("a", "Fir"), d("b", "Sec"), d("a", "st"), d("b", "ond"), sent("First"), ran("a"), sent("Second"), ran("b")},
			"First\n\nSecond", 0, false},
		{"refused call, then the same text again",
			[]step{d("a", "Same"), ran("a"), d("b", "Sa"), d("b", "me text"), sent("Same text"), ran("b")},
			"Same text", 0, false},
		{"refused call, then another text: written in full after it",
			[]step{d("a", "Oops"), ran("a"), d("b", "Fixed"), sent("Fixed"), ran("b")},
			"Oops\n\nFixed", 0, true},
		{"refused call, then the fallback",
			[]step{d("a", "Draft"), ran("a"), sent("Draft, final.")},
			"Draft, final.", 0, false},
		{"sent text differs from the streamed (a duplicate key)",
			[]step{d("a", "Hello world"), sent("Hello"), ran("a"), d("b", "Next"), sent("Next"), ran("b")},
			"Hello world\n\nHello\n\nNext", 0, true},
		{"a late fragment of a sent call adds nothing",
			[]step{d("a", "A"), sent("A"), d("a", "!"), ran("a"), d("b", "B"), sent("B"), ran("b")},
			"A\n\nB", 0, false},
		{"nothing streams before the first fragment with text",
			[]step{d("a", ""), d("a", "x"), sent("x"), ran("a")}, "x", 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &liveText{}
			var got strings.Builder
			var texts []string
			first := -1
			for i, s := range tt.steps {
				switch s.kind {
				case "delta":
					l.speculate(s.id, s.text)
				case "sent":
					texts = append(texts, s.text)
					l.confirm(s.text)
				case "ran":
					l.settled(s.id)
				}
				for _, p := range l.take() {
					if first < 0 {
						first = i
					}
					got.WriteString(p)
				}
			}
			if got.String() != tt.want {
				t.Errorf("streamed %q, want %q", got.String(), tt.want)
			}
			if first != tt.firstAt {
				t.Errorf("first piece after step %d, want %d", first, tt.firstAt)
			}
			if differs := got.String() != strings.Join(texts, "\n\n"); differs != tt.differs {
				t.Errorf("differs from the non-streamed answer %q: %v, want %v", strings.Join(texts, "\n\n"), differs, tt.differs)
			}
		})
	}
}
