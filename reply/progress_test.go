package reply

import (
	"strings"
	"testing"
)

func TestToolLabel(t *testing.T) {
	for _, tc := range []struct{ tool, desc, want string }{
		{"web_search", "whatever", "searching the web…"},
		{"send_message", "Send a message", ""},
		{"weather", "Look up the weather for a city. Uses the met office.", "Look up the weather for a city…"},
		{"notes", "Search the notes\nin the wiki.", "Search the notes…"},
		{"bare", "  ", "running bare…"},
		{"long", strings.Repeat("very ", 20), strings.TrimSpace(strings.Repeat("very ", 12)) + "…"},
	} {
		if got := toolLabel(tc.tool, tc.desc); got != tc.want {
			t.Errorf("toolLabel(%q, %q) = %q, want %q", tc.tool, tc.desc, got, tc.want)
		}
	}
}
