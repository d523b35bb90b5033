package reply

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/fallback"
)

// Live messages: while the model writes a reply (its text, or the text of
// a send_message call), the chat shows it growing, as a draft where the
// channel has drafts (channels.Drafter: Telegram private chats) or as one
// message edited as it grows; while tools run longer than progressAfter, a
// short line says what is happening. The send of each reply then claims its
// preview: an edited message becomes the reply (never a second message), a
// draft gives way to the reply sent normally. Preview calls are made by one
// goroutine per turn, never by the model's stream, and at
// channels.PriorityPreview: a failed or dropped one is simply shown later.
const (
	previewEvery      = time.Second            // between two preview calls: Telegram and Discord rate-limit edits
	previewFirstAfter = 200 * time.Millisecond // a reply written faster than this just arrives
	previewMaxChars   = 3500                   // shown of a longer reply; a reply that does not fit one message is sent normally
	previewCursor     = " …"
	previewMaxFails   = 3 // failed calls in a row (not counting ErrPaced) that end the turn's previews
	// progressAfter is how long a step's tools run before the chat shows
	// what is happening.
	progressAfter = 2 * time.Second
	// claimWait bounds how long a reply waits for a preview call in flight
	// (cancelled at once); past it the reply goes out as a new message and
	// the preview is removed when its call returns.
	claimWait = 2 * time.Second
	// takenBack is what an edited preview shows once its text turned out
	// not to be a reply (text that came with tool calls).
	takenBack = "…"
)

// draftIDs numbers drafts: one id per message being written.
var draftIDs atomic.Int64

// slot is one message being written (or a progress line) as the chat shows
// it.
type slot struct {
	key      string // "text": the model's text; "call:<id>": a send_message call's; "": a line (label)
	buf      strings.Builder
	label    string    // shown while buf is empty: a progress line, takenBack
	started  time.Time // the first fragment of text
	complete bool      // the text's stream ended
	msgID    string    // the edited preview message, once sent
	draftID  int64     // the draft, once shown
	shown    string    // what the chat shows
	busy     chan struct{}
	cancel   context.CancelFunc // cancels the call in flight
	orphan   bool               // claimed while a call was in flight: removed when it returns
	// behind: a message went out after this preview, so its reply must
	// too: the preview is removed, not edited into it.
	behind bool
}

// text is what the slot should show: not the no-reply marker, nor what
// may become it.
func (s *slot) text() string {
	t := strings.TrimSpace(s.buf.String())
	if strings.HasPrefix(fallback.NoReply, t) {
		return s.label
	}
	t = clip(t, previewMaxChars)
	if s.complete {
		return t
	}
	return t + previewCursor
}

// previewer shows one turn's replies as they are written, and its tools'
// progress.
type previewer struct {
	in  channels.Inbound
	ed  channels.Editor  // nil: no edited previews
	dr  channels.Drafter // nil: no drafts
	del channels.Deleter // nil: leftovers are edited to takenBack
	// fits says whether a reply is one message on the channel, which an
	// edit of its preview can carry (channels.Fitter).
	fits     func(text string) bool
	send     func(ctx context.Context, in channels.Inbound, text string) (string, error)
	stream   bool // show replies as they are written
	progress bool // show what running tools do

	mu      sync.Mutex
	slots   []*slot // unclaimed, oldest first
	running bool    // the worker runs
	stop    chan struct{}
	exited  chan struct{}
	wake    chan struct{}
	last    time.Time // the last preview call
	quoted  bool      // a preview message was sent: the next ones quote nothing
	fails   int
	off     bool // too many failures: no more previews this turn
	ended   bool // done: the turn ended
	// Tools: the calls running (call id → label), when the step's first
	// began, the line to show, and the send_message call being sent.
	tools     map[string]string
	toolsFrom time.Time
	line      string
	sending   string
	// delivered: a send_message call succeeded, so the model's plain text
	// will never be sent (fallback.Decide) and is not previewed either.
	delivered bool
	// clean replaces secrets in what a preview shows (Options.Redact); nil:
	// shown as written.
	clean func(string) string
}

// newPreviewer returns the previewer of the turn answering in on ch: stream
// turns on reply previews, progress the tool progress line. It returns nil
// when both are off or ch can neither draft nor edit. send sends a preview
// message.
func newPreviewer(stream, progress bool, ch channels.Channel, in channels.Inbound,
	send func(ctx context.Context, in channels.Inbound, text string) (string, error)) *previewer {
	if !stream && !progress {
		return nil
	}
	p := &previewer{in: in, stream: stream, progress: progress, tools: map[string]string{}}
	p.ed, _ = ch.(channels.Editor)
	p.fits = func(text string) bool { return len(text) <= previewMaxChars }
	if f, ok := ch.(channels.Fitter); ok {
		p.fits = f.Fits
	}
	p.del, _ = ch.(channels.Deleter)
	if in.ChatType == channels.DM { // drafts are for private chats
		p.dr, _ = ch.(channels.Drafter)
	}
	if p.ed == nil && p.dr == nil {
		return nil
	}
	p.send = send
	return p
}

// event feeds the previewer from the turn's events. It never waits for
// the chat: the worker makes the calls.
func (p *previewer) event(ctx context.Context, ev agent.Event) {
	if ev.Kind == agent.EventDone {
		p.done(ctx, ev.StopReason)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	switch ev.Kind {
	case agent.EventTextDelta, agent.EventReplyDelta:
		if !p.stream || ev.Text == "" {
			return
		}
		key := "text"
		if ev.Kind == agent.EventReplyDelta {
			key = "call:" + ev.CallID
		} else if p.delivered {
			return // text after a delivered reply is never sent: never shown
		}
		s := p.writing(key, now)
		s.buf.WriteString(ev.Text)
	case agent.EventUsage: // the model call ended: its texts are whole, its step's tools begin
		for _, s := range p.slots {
			s.complete = s.complete || s.key != ""
		}
		p.toolsFrom = time.Time{}
	case agent.EventInterimText, agent.EventRetry:
		// The text came with tool calls, or is asked again: not a reply.
		p.takeBack(func(s *slot) bool { return s.key == "text" })
	case agent.EventToolStart:
		if ev.Tool == "send_message" {
			p.sending = ev.CallID
		}
		label := toolLabel(ev.Tool, ev.Text)
		if !p.progress || label == "" {
			return
		}
		if p.toolsFrom.IsZero() {
			p.toolsFrom = now // the step's first tool
		}
		p.tools[ev.CallID], p.line = label, label
	case agent.EventToolEnd:
		if ev.Tool == "send_message" {
			p.sending = ""
			p.delivered = p.delivered || !ev.IsError
			// A call that sent nothing leaves its preview to the next reply.
			p.takeBack(func(s *slot) bool { return s.key == "call:"+ev.CallID })
		}
		if _, ok := p.tools[ev.CallID]; !ok {
			return
		}
		delete(p.tools, ev.CallID)
		for _, l := range p.tools {
			p.line = l // another one still running
		}
	default:
		return
	}
	p.kick(ctx)
}

// writing returns the slot of the text named key, begun if new: a line on
// screen (a progress line, a taken-back preview) becomes its preview. A new
// text completes the others: only the newest is previewed (a server may
// interleave the fragments of two calls; the older one's reply then simply
// arrives whole).
func (p *previewer) writing(key string, now time.Time) *slot {
	for _, s := range p.slots {
		if s.key == key && (!s.complete || key != "text") { // a call's id is its own
			return s
		}
	}
	for _, s := range p.slots {
		s.complete = s.complete || s.key != ""
	}
	if n := len(p.slots); n > 0 && p.slots[n-1].key == "" {
		s := p.slots[n-1]
		s.key, s.started = key, now
		return s
	}
	s := &slot{key: key, started: now}
	p.slots = append(p.slots, s)
	return s
}

// takeBack turns the slots that match into lines showing takenBack (or
// forgets them if the chat does not show them yet).
func (p *previewer) takeBack(match func(*slot) bool) {
	kept := p.slots[:0]
	for _, s := range p.slots {
		if match(s) {
			if s.msgID == "" && s.draftID == 0 && s.busy == nil {
				continue
			}
			s.key, s.label, s.complete = "", takenBack, false
			s.buf.Reset()
		}
		kept = append(kept, s)
	}
	clear(p.slots[len(kept):])
	p.slots = kept
}

// kick wakes the worker, starting it if needed. Under mu.
func (p *previewer) kick(ctx context.Context) {
	if p.off {
		return
	}
	if !p.running {
		p.running = true
		p.stop, p.exited, p.wake = make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
		go p.work(ctx, p.stop, p.exited, p.wake)
		return
	}
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// work makes the preview calls until stop closes or the turn ends.
func (p *previewer) work(ctx context.Context, stop, exited chan struct{}, wake <-chan struct{}) {
	defer close(exited)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.mu.Lock()
		s, text, at := p.due(time.Now())
		var cctx context.Context
		if s != nil {
			cctx, s.cancel = context.WithCancel(channels.WithPriority(ctx, channels.PriorityPreview))
			s.busy = make(chan struct{})
			if s.msgID == "" && s.draftID == 0 && p.dr != nil {
				s.draftID = draftIDs.Add(1)
			}
		}
		p.mu.Unlock()
		if s != nil {
			p.show(cctx, s, text)
			continue
		}
		wait := time.Hour
		if !at.IsZero() {
			wait = max(time.Until(at), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-wake:
		case <-timer.C:
		}
	}
}

// due returns the slot to show now and its text, or the time something
// may be due (zero: nothing until an event). Under mu.
func (p *previewer) due(now time.Time) (*slot, string, time.Time) {
	if p.off {
		return nil, "", time.Time{}
	}
	var at time.Time
	later := func(t time.Time) {
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	if len(p.tools) > 0 {
		if from := p.toolsFrom.Add(progressAfter); now.Before(from) {
			later(from)
		} else if n := len(p.slots); n > 0 && p.slots[n-1].key == "" {
			p.slots[n-1].label = p.line
		} else if n == 0 || p.slots[n-1].complete {
			p.slots = append(p.slots, &slot{label: p.line})
		}
	}
	next := p.last.Add(previewEvery)
	for _, s := range p.slots {
		text := s.text()
		if p.clean != nil {
			text = p.clean(text)
		}
		text = p.fitted(text)
		switch {
		case s.busy != nil || text == s.shown || text == "":
			continue
		case s.complete: // the reply goes out in a moment, claiming it
			continue
		case s.key != "" && now.Before(s.started.Add(previewFirstAfter)): // a few words first
			later(s.started.Add(previewFirstAfter))
			continue
		case now.Before(next):
			later(next)
			continue
		}
		return s, text, time.Time{}
	}
	return nil, "", at
}

// fitted is text cut to what the channel shows as one message (see fits),
// ending in the cursor: a preview sent split would leave its other parts
// behind when the reply claims or removes it.
func (p *previewer) fitted(text string) string {
	if p.fits(text) {
		return text
	}
	r := []rune(text)
	lo, hi := 0, len(r) // the longest prefix that fits with the cursor
	for lo < hi {
		if mid := (lo + hi + 1) / 2; p.fits(string(r[:mid]) + previewCursor) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return strings.TrimRight(string(r[:lo]), " \n") + previewCursor
}

// show makes one preview call for s: a draft, a new preview message or an
// edit of it.
func (p *previewer) show(ctx context.Context, s *slot, text string) {
	var err error
	var id string
	switch {
	case s.draftID != 0:
		err = p.dr.Draft(ctx, p.in.ChatID, s.draftID, text)
	case s.msgID == "":
		in := p.in
		if p.quoted {
			in.ChatType = channels.DM // in a group, only the first message quotes the one it answers
		}
		id, err = p.send(ctx, in, text)
	default:
		err = p.ed.Edit(ctx, p.in.ChatID, s.msgID, text)
	}
	p.mu.Lock()
	s.cancel()
	close(s.busy)
	s.busy, s.cancel = nil, nil
	p.last = time.Now()
	switch {
	case err == nil:
		s.shown, p.fails = text, 0
		if id != "" {
			s.msgID, p.quoted = id, true
		}
	case errors.Is(err, channels.ErrNoDrafts):
		p.dr, s.draftID = nil, 0 // edited previews from now on
		p.last = time.Time{}
		if p.ed == nil {
			p.off = true
		}
	case errors.Is(err, channels.ErrPaced):
	default:
		if p.fails++; p.fails >= previewMaxFails {
			p.off = true
		}
	}
	orphan := s.orphan && s.msgID != ""
	p.mu.Unlock()
	if orphan {
		p.remove(context.WithoutCancel(ctx), s.msgID)
	}
}

// claim hands the preview of the reply being sent to its send: it returns
// the preview message, if any, and whether to edit it into the reply (when
// the reply fits, see fits); otherwise the reply goes out as a new message
// and then the preview is removed. No preview message: a draft, none shown,
// or a preview call that would not end.
func (p *previewer) claim(ctx context.Context) (msgID string, edit bool) {
	if p == nil {
		return "", false
	}
	p.mu.Lock()
	s := p.claimable()
	if s == nil {
		p.mu.Unlock()
		return "", false
	}
	p.slots = removeSlot(p.slots, s)
	busy := s.busy
	if busy != nil && (s.msgID != "" || s.draftID != 0) {
		s.cancel() // an edit or a draft, not a send that may have happened
	}
	p.mu.Unlock()
	if busy != nil {
		select {
		case <-busy:
		case <-time.After(claimWait):
		case <-ctx.Done():
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.busy != nil {
		s.orphan = true
		return "", false
	}
	return s.msgID, s.msgID != "" && !s.behind
}

// bury records that a message went out as a new one below the previews
// on screen: their replies must follow it, so they will not take over
// their previews.
func (p *previewer) bury() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.slots {
		s.behind = true
	}
}

// claimable is the slot a reply being sent now claims: the running
// send_message call's, else the model's text, else a line. Under mu.
func (p *previewer) claimable() *slot {
	keys := []string{"text", ""}
	if p.sending != "" {
		keys = []string{"call:" + p.sending, ""}
	}
	for _, k := range keys {
		for _, s := range p.slots {
			if s.key == k {
				return s
			}
		}
	}
	return nil
}

func removeSlot(slots []*slot, s *slot) []*slot {
	for i, x := range slots {
		if x == s {
			return append(slots[:i], slots[i+1:]...)
		}
	}
	return slots
}

// remove takes a preview message away: deleted where the channel deletes,
// otherwise edited to takenBack.
func (p *previewer) remove(ctx context.Context, msgID string) {
	ctx = channels.WithPriority(ctx, channels.PriorityReply) // never dropped: it would stay
	switch {
	case p.del != nil:
		_ = p.del.Delete(ctx, p.in.ChatID, msgID)
	case p.ed != nil:
		_ = p.ed.Edit(ctx, p.in.ChatID, msgID, takenBack)
	}
}

// notice shows text as a line of its own (the next reply's preview takes
// its place), unless previews are off for this turn.
func (p *previewer) notice(ctx context.Context, text string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return true // the turn's answer is out: nothing to say
	}
	if p.off {
		return false
	}
	if n := len(p.slots); n > 0 && p.slots[n-1].key == "" {
		p.slots[n-1].label = text
	} else {
		p.slots = append(p.slots, &slot{label: text})
	}
	p.kick(ctx)
	return true
}

// done ends the turn's previews: the worker stops, and the previews no
// reply claimed go (a draft goes by itself); a turn cut off by the model's
// outage says so in its preview instead, as the answer comes later.
func (p *previewer) done(ctx context.Context, reason agent.StopReason) {
	p.mu.Lock()
	stop, exited := p.stop, p.exited
	for _, s := range p.slots {
		if s.cancel != nil && (s.msgID != "" || s.draftID != 0) {
			s.cancel()
		}
	}
	p.mu.Unlock()
	if stop != nil {
		close(stop)
		select {
		case <-exited:
		case <-time.After(claimWait):
		}
	}
	p.mu.Lock()
	slots := p.slots
	p.slots, p.running, p.stop, p.exited = nil, false, nil, nil
	p.ended = true
	clear(p.tools)
	for _, s := range slots {
		s.orphan = s.busy != nil // removed when its call returns
	}
	p.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	for _, s := range slots {
		switch {
		case s.msgID == "" || s.orphan:
		case reason == agent.StopModelUnavailable && p.ed != nil:
			_ = p.ed.Edit(ctx, p.in.ChatID, s.msgID, "(interrupted: the language model stopped answering)")
		default:
			p.remove(ctx, s.msgID)
		}
	}
}
