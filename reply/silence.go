package reply

import (
	"context"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
)

// StillWorking is what a chat is told, once per turn, when the model has
// been silent for Options.StillWorkingAfter: a hung or slow model server
// is not a silent bot.
const StillWorking = "Still working on it…"

// silence watches a turn's model calls: a call that brought nothing (no
// text, no end) for after gets the chat one StillWorking line, as a
// preview line where the chat has previews, else as a message of its own.
// Tools have their own progress lines: the watch rests while they run.
type silence struct {
	after  time.Duration
	notify func(ctx context.Context) // shows the line

	mu    sync.Mutex
	timer *time.Timer
	tools int  // running
	told  bool // once per turn
	ended bool
}

// event follows the turn: a model call begins (the turn's start, its
// step's last tool's end) or brings something (re-arms), ends (rests).
func (w *silence) event(ctx context.Context, ev agent.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.told || w.ended {
		return
	}
	switch ev.Kind {
	case agent.EventTurnStart, agent.EventTextDelta, agent.EventReplyDelta, agent.EventRetry, agent.EventCompactionEnd:
		w.arm(ctx)
	case agent.EventUsage, agent.EventInterimText:
		w.rest()
	case agent.EventToolStart:
		w.tools++
		w.rest()
	case agent.EventToolEnd:
		if w.tools--; w.tools <= 0 {
			w.tools = 0
			w.arm(ctx) // the step's next model call
		}
	case agent.EventDone:
		w.ended = true
		w.rest()
	}
}

// arm (re)starts the wait; under mu.
func (w *silence) arm(ctx context.Context) {
	if w.timer != nil {
		w.timer.Reset(w.after)
		return
	}
	w.timer = time.AfterFunc(w.after, func() {
		w.mu.Lock()
		if w.told || w.ended {
			w.mu.Unlock()
			return
		}
		w.told = true
		w.mu.Unlock()
		w.notify(context.WithoutCancel(ctx))
	})
}

// rest stops the wait; under mu.
func (w *silence) rest() {
	if w.timer != nil {
		w.timer.Stop()
	}
}
