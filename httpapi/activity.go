package httpapi

import (
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
)

// Activity bounds.
const (
	// keepTurns is how many turns Activity remembers (running ones are
	// never dropped).
	keepTurns = 50
	// keepEvents bounds the events kept per turn.
	keepEvents = 200
	// eventTextMax bounds the text kept per event.
	eventTextMax = 500
)

// Activity remembers the events of running and recent turns, for the live
// part of the dashboard. The stored transcript has the messages; this has
// what happened in between (tool timings, retries, compactions). It is fed
// by the router's OnEvent hook.
type Activity struct {
	mu    sync.Mutex
	turns []*TurnActivity // oldest first
	byID  map[int64]*TurnActivity
}

// TurnActivity is one turn as its events told it.
type TurnActivity struct {
	TurnID, ChatID int64
	Channel        string
	ChatKey        string
	User           string
	Input          string
	Started        time.Time
	Ended          time.Time // zero while running
	Running        bool
	Steps          int
	Usage          llm.Usage
	Model          string
	StopReason     agent.StopReason
	Err            string
	Reply          string
	Deltas         int // streamed text fragments, counted rather than kept
	Events         []EventView
	Dropped        int // events left out past keepEvents
}

// EventView is one event, trimmed for display.
type EventView struct {
	Time     time.Time
	Kind     agent.EventKind
	Step     int
	Tool     string
	Args     string
	Text     string
	IsError  bool
	Duration time.Duration
	Tokens   int
}

// NewActivity returns an empty Activity.
func NewActivity() *Activity {
	return &Activity{byID: map[int64]*TurnActivity{}}
}

// Observe records a turn event; it is part of the router's OnEvent hook.
func (a *Activity) Observe(in channels.Inbound, ev agent.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.byID[ev.TurnID]
	if t == nil {
		if ev.Kind == agent.EventTextDelta {
			return // a delta of a turn already forgotten
		}
		t = &TurnActivity{TurnID: ev.TurnID, ChatID: ev.ChatID, Channel: in.Channel, ChatKey: in.ChatID,
			User: userOf(in), Started: ev.Time, Running: true}
		if ev.TurnID != 0 {
			a.byID[ev.TurnID] = t
		}
		a.turns = append(a.turns, t)
		a.trim()
	}
	switch ev.Kind {
	case agent.EventTurnStart:
		t.Input = clip(ev.Text, eventTextMax)
		return
	case agent.EventTextDelta:
		t.Deltas++
		return
	case agent.EventUsage:
		t.Usage = t.Usage.Add(ev.Usage)
		t.Model = ev.Model
		t.Steps = max(t.Steps, ev.Step)
	case agent.EventToolEnd, agent.EventToolStart:
		t.Steps = max(t.Steps, ev.Step)
	case agent.EventDone:
		t.Running = false
		t.Ended = ev.Time
		t.StopReason, t.Err, t.Reply = ev.StopReason, ev.Err, clip(ev.Text, eventTextMax)
		if ev.Model != "" {
			t.Model = ev.Model
		}
		if ev.Usage.TotalTokens > 0 {
			t.Usage = ev.Usage
		}
	}
	if len(t.Events) >= keepEvents {
		t.Dropped++
		return
	}
	v := EventView{Time: ev.Time, Kind: ev.Kind, Step: ev.Step, Tool: ev.Tool, IsError: ev.IsError,
		Duration: ev.Duration, Tokens: ev.Usage.TotalTokens, Args: clip(ev.Args, eventTextMax)}
	switch ev.Kind {
	case agent.EventToolEnd:
		v.Text = clip(ev.Result, eventTextMax)
	case agent.EventDone:
		v.Text = clip(ev.Err, eventTextMax)
	case agent.EventToolStart: // Text is the tool's description, not news
	default:
		v.Text = clip(ev.Text, eventTextMax)
	}
	t.Events = append(t.Events, v)
}

// trim forgets the oldest finished turns past keepTurns.
func (a *Activity) trim() {
	for len(a.turns) > keepTurns {
		i := 0
		for i < len(a.turns) && a.turns[i].Running {
			i++
		}
		if i == len(a.turns) {
			return
		}
		delete(a.byID, a.turns[i].TurnID)
		a.turns = append(a.turns[:i], a.turns[i+1:]...)
	}
}

// clip cuts s to n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func userOf(in channels.Inbound) string {
	switch {
	case in.DisplayName != "":
		return in.DisplayName
	case in.UserName != "":
		return "@" + in.UserName
	}
	return in.UserID
}

// Snapshot returns copies of the remembered turns, newest first.
func (a *Activity) Snapshot() []TurnActivity {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]TurnActivity, 0, len(a.turns))
	for i := len(a.turns) - 1; i >= 0; i-- {
		t := *a.turns[i]
		t.Events = append([]EventView(nil), t.Events...)
		out = append(out, t)
	}
	return out
}

// Turn returns a copy of one remembered turn.
func (a *Activity) Turn(id int64) (TurnActivity, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.byID[id]
	if !ok {
		return TurnActivity{}, false
	}
	c := *t
	c.Events = append([]EventView(nil), t.Events...)
	return c, true
}
