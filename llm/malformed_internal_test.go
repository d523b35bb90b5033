package llm

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// recordingBody sees a [DONE] however the reads split it, and keeps only
// the start of the body.
func TestRecordingBody(t *testing.T) {
	long := strings.Repeat("x", 300)
	tests := []struct {
		name, body string
		split      bool
		done       bool
	}{
		{"whole", "data: {}\n\ndata: [DONE]\n\n", false, true},
		{"byte by byte", "data: {}\n\ndata: [DONE]\n\n", true, true},
		{"after the excerpt", long + "data: [DONE]\n\n", true, true},
		{"absent", "data: {}\n\ndata: [DON", true, false},
	}
	for _, tt := range tests {
		hdr := &captured{}
		var r io.Reader = strings.NewReader(tt.body)
		if tt.split {
			r = iotest.OneByteReader(r)
		}
		rb := &recordingBody{ReadCloser: io.NopCloser(r), hdr: hdr}
		got, err := io.ReadAll(rb)
		if err != nil || string(got) != tt.body {
			t.Fatalf("%s: read %q, %v", tt.name, got, err)
		}
		if hdr.sawDone != tt.done {
			t.Errorf("%s: sawDone = %v, want %v", tt.name, hdr.sawDone, tt.done)
		}
		if want := tt.body[:min(len(tt.body), excerptMax)]; string(hdr.head) != want {
			t.Errorf("%s: head = %q, want %q", tt.name, hdr.head, want)
		}
	}
}
