package fallback

import "testing"

func TestDecide(t *testing.T) {
	tests := []struct {
		name      string
		delivered bool
		final     string
		want      string
		wantSend  bool
	}{
		{"text without send tool is sent", false, "Hello!", "Hello!", true},
		{"text is trimmed", false, "  Hi there \n", "Hi there", true},
		{"send tool succeeded: never both", true, "Hello again", "", false},
		{"no-reply marker sends nothing", false, "NO_REPLY", "", false},
		{"no-reply marker with spaces", false, "\n NO_REPLY \t", "", false},
		{"marker inside text is ordinary text", false, "I will say NO_REPLY later", "I will say NO_REPLY later", true},
		{"empty text sends nothing", false, "   ", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, send := Decide(tt.delivered, tt.final)
			if got != tt.want || send != tt.wantSend {
				t.Fatalf("Decide(%v, %q) = %q, %v; want %q, %v", tt.delivered, tt.final, got, send, tt.want, tt.wantSend)
			}
		})
	}
}
