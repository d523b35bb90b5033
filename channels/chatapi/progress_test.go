package chatapi

import (
	"strings"
	"testing"
)

// progressOfStream returns the ProgressField objects of a stream's chunks
// and its content.
func progressOfStream(events []map[string]any) ([]map[string]any, string) {
	var got []map[string]any
	var content strings.Builder
	for _, ev := range events {
		if p, ok := ev[ProgressField].(map[string]any); ok {
			got = append(got, p)
		}
		if ch, _ := ev["choices"].([]any); len(ch) == 1 {
			delta, _ := ch[0].(map[string]any)["delta"].(map[string]any)
			text, _ := delta["content"].(string)
			content.WriteString(text)
		}
	}
	return got, content.String()
}

// A streamed answer that asks for progress gets a chunk as the tool call
// starts and one as it ends, before the answer; one that does not ask
// gets none, and the same content.
func TestStreamToolProgress(t *testing.T) {
	s := newStack(t, testToken)

	s.scriptToolTurn("It is tea time.")
	events, done := s.streamChatWith("ada", "What time is it?", map[string]any{ProgressField: true})
	progress, content := progressOfStream(events)
	if !done || content != "It is tea time." {
		t.Fatalf("stream with progress: done %v, content %q", done, content)
	}
	var states []string
	for _, p := range progress {
		if p["tool"] != "current_time" || p["call_id"] != "c1" || p["step"] != float64(1) {
			t.Errorf("progress %v: want current_time, call c1, step 1", p)
		}
		states = append(states, p["state"].(string))
	}
	if strings.Join(states, ",") != ToolRunning+","+ToolDone {
		t.Errorf("progress states = %v, want %s then %s", states, ToolRunning, ToolDone)
	}

	s.scriptToolTurn("Still tea time.")
	events, done = s.streamChat("ada", "And now?")
	progress, content = progressOfStream(events)
	if !done || content != "Still tea time." || len(progress) != 0 {
		t.Errorf("stream without progress: done %v, content %q, progress %v; want no progress", done, content, progress)
	}
}
