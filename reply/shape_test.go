package reply

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCapReply(t *testing.T) {
	note := "\n\n… [reply cut at 100 characters]"
	tests := []struct {
		name, in string
		limit    int
		want     string
	}{
		{"within the cap", strings.Repeat("a", 100), 100, strings.Repeat("a", 100)},
		{"cut with the note", strings.Repeat("a", 101), 100, strings.Repeat("a", 100-utf8.RuneCountInString(note)) + note},
		{"runes, not bytes", strings.Repeat("é", 100), 100, strings.Repeat("é", 100)},
		{"cut at a rune boundary", strings.Repeat("é", 150), 100, strings.Repeat("é", 100-utf8.RuneCountInString(note)) + note},
		{"no cap", strings.Repeat("a", 500), -1, strings.Repeat("a", 500)},
	}
	for _, tt := range tests {
		got := capReply(tt.in, tt.limit)
		if got != tt.want {
			t.Errorf("%s: got %d runes %q…, want %d runes", tt.name, utf8.RuneCountInString(got), got[:min(20, len(got))], utf8.RuneCountInString(tt.want))
		}
		if again := capReply(got, tt.limit); again != got {
			t.Errorf("%s: not idempotent", tt.name)
		}
	}
}
