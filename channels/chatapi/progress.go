package chatapi

// Tool progress on a streamed answer. A request that sets
// "switchboard_progress": true gets, besides the content, a chunk for each
// tool call as it starts and ends: an empty delta with a ProgressField
// object naming the tool, its call id and step, and its state. Other
// clients never see the field. The dashboard's web chat asks for it.

import (
	"github.com/switchboard-gateway/switchboard/agent"
)

// ProgressField is the chunk field (streamed answers that asked for it)
// that reports a tool call starting or ending.
const ProgressField = "switchboard_progress"

// Progress states.
const (
	ToolRunning = "running"
	ToolDone    = "done"
	ToolFailed  = "failed"
)

// Progress is one tool call starting or ending, as a chunk's ProgressField.
type Progress struct {
	Tool   string `json:"tool"`
	CallID string `json:"call_id"`
	Step   int    `json:"step"`
	State  string `json:"state"`        // ToolRunning, ToolDone or ToolFailed
	Millis int64  `json:"ms,omitempty"` // how long it ran (ended calls)
}

// progressOf turns a tool event into a Progress.
func progressOf(ev agent.Event) Progress {
	p := Progress{Tool: ev.Tool, CallID: ev.CallID, Step: ev.Step, State: ToolRunning}
	if ev.Kind == agent.EventToolEnd {
		p.State, p.Millis = ToolDone, ev.Duration.Milliseconds()
		if ev.IsError {
			p.State = ToolFailed
		}
	}
	return p
}

// progressed adds a tool event for a request that asked for progress.
func (w *waiter) progressed(ev agent.Event) {
	w.mu.Lock()
	if w.done || w.live == nil || !w.wantProgress {
		w.mu.Unlock()
		return
	}
	w.progress = append(w.progress, progressOf(ev))
	w.mu.Unlock()
	w.poke()
}

// takeProgress returns the tool events since the last take.
func (w *waiter) takeProgress() []Progress {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.progress
	w.progress = nil
	return p
}
