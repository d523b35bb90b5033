package router

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
)

// Streaming preview: while the model writes a text answer, one message shows
// it growing, edited at most once per previewEvery; the final reply then
// replaces that message instead of arriving as a second one.
const (
	previewEvery    = time.Second // Telegram and Discord rate-limit edits
	previewMinChars = 24          // short answers just arrive
	previewMaxChars = 3500        // a longer final reply is sent normally
	previewCursor   = " …"
)

// previewer shows one turn's streamed text in one message.
type previewer struct {
	in   channels.Inbound
	ed   channels.Editor
	send func(ctx context.Context, text string) (string, error)
	now  func() time.Time

	mu    sync.Mutex
	buf   strings.Builder
	msgID string
	last  time.Time
}

// newPreviewer returns a previewer for the turn of in on ch when ch edits
// messages and on (the operator turned previews on for the channel); nil
// otherwise. now is the clock for throttling (nil: time.Now); send sends
// the preview message.
func newPreviewer(on bool, ch channels.Channel, in channels.Inbound, now func() time.Time,
	send func(ctx context.Context, in channels.Inbound, text string) (string, error)) *previewer {
	if !on {
		return nil
	}
	ed, ok := ch.(channels.Editor)
	if !ok {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	p := &previewer{in: in, ed: ed, now: now}
	p.send = func(ctx context.Context, text string) (string, error) { return send(ctx, in, text) }
	return p
}

// event feeds the previewer from the turn's events.
func (p *previewer) event(ctx context.Context, ev agent.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev.Kind {
	case agent.EventTextDelta:
		p.buf.WriteString(ev.Text)
		text := strings.TrimSpace(p.buf.String())
		switch {
		case p.msgID == "" && len(text) >= previewMinChars:
			if id, err := p.send(ctx, text+previewCursor); err == nil {
				p.msgID, p.last = id, p.now()
			}
		case p.msgID != "" && p.now().Sub(p.last) >= previewEvery:
			p.last = p.now()
			_ = p.ed.Edit(ctx, p.in.ChatID, p.msgID, clip(text, previewMaxChars)+previewCursor)
		}
	case agent.EventInterimText:
		// The text came with tool calls: it is not a reply; take it back.
		if p.msgID != "" {
			_ = p.ed.Edit(ctx, p.in.ChatID, p.msgID, "…")
		}
		p.buf.Reset()
	case agent.EventUsage:
		p.buf.Reset() // the next model call streams afresh
	}
}

// abandon replaces the preview, if one was sent, with text: the turn
// stopped without a reply (the model became unavailable mid-answer), and
// the reply comes later as a message of its own.
func (p *previewer) abandon(ctx context.Context, text string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.msgID != "" {
		_ = p.ed.Edit(ctx, p.in.ChatID, p.msgID, text)
		p.msgID = ""
	}
}

// claim hands the preview message to the turn's first real send: it returns
// the message id to edit, or "" when there is none (or text is too long).
func (p *previewer) claim(ctx context.Context, text string) string {
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.msgID
	p.msgID = ""
	if id == "" {
		return ""
	}
	if len(text) > previewMaxChars {
		_ = p.ed.Edit(ctx, p.in.ChatID, id, "(the reply follows)")
		return ""
	}
	return id
}
