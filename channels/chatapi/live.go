package chatapi

import (
	"strings"

	"github.com/switchboard-gateway/switchboard/fallback"
)

// What a streamed answer writes, and when.
//
// The streamed content must add up to the answer a non-streamed request
// gets: the messages the turn sent, joined by a blank line. A stream cannot
// take back what it wrote, so the rule is:
//
//   - The text of a send_message call is written as the model streams it
//     (agent.EventReplyDelta): such a call is almost always sent as
//     written. Calls are taken in the order they began; the text of a later
//     call waits until the earlier ones ran.
//   - A message the turn sends is confirmed: what of it was not written yet
//     is written then. A send_message call that was written as it streamed
//     therefore adds nothing when it is sent.
//   - The model's plain text (agent.EventTextDelta) is written as it
//     streams too, as the fallback would send it: without its leading and
//     trailing blanks, nothing while it may still be the no-reply marker,
//     and nothing after a message was sent (the fallback then sends
//     nothing). When the fallback sends it, only what was not written yet
//     is written. If tool calls follow it (agent.EventInterimText, or a
//     send_message call begins), it was interim text, never sent: what
//     was written stays in the stream, and the next message follows it
//     after a blank line, the one other case where the stream holds more
//     than the non-streamed answer.
//   - Text is written only where it continues what was written before:
//     speculative text that does not continue the stream (because it
//     differs from what an earlier, refused call wrote) waits to be sent.
//   - When a call that was written is refused (invalid arguments, the
//     repeat guard) or fails, what it wrote stays in the stream. If the
//     next message sent starts with that text (the model sends the same
//     text again, the usual fix), only the rest is written, and the
//     stream still equals the answer. Otherwise the message sent is
//     written in full after a blank line: nothing sent is lost or doubled,
//     and the stream holds the refused text too, the one case where it
//     differs from the non-streamed answer.

// liveText tracks one streamed answer; the waiter's mutex guards it.
type liveText struct {
	out     string          // the content decided so far (written or in pending)
	mark    int             // out[:mark] ends with the last message sent
	calls   []liveCall      // send_message calls under way, in the order they began
	ran     map[string]bool // calls sent or settled: a late fragment adds nothing
	pending []string        // pieces of out not taken by the stream yet
	sent    bool            // a message was sent: plain text is no longer written
	plain   *plainRun       // the model's plain text of the current call, if any
}

// plainRun is the model's plain text of one model call.
type plainRun struct {
	step int
	text string // all of it so far, as streamed
	at   int    // where its written part begins in out; -1: nothing written yet
}

type liveCall struct{ id, text string }

// sep is what goes before the next message: a blank line after another.
func (l *liveText) sep() string {
	if l.mark > 0 {
		return "\n\n"
	}
	return ""
}

// write decides s as the next content.
func (l *liveText) write(s string) {
	if s == "" {
		return
	}
	l.out += s
	l.pending = append(l.pending, s)
}

// speculate adds a fragment of a send_message call's text.
func (l *liveText) speculate(id, frag string) {
	if l.ran[id] {
		return
	}
	l.interim() // plain text before a call is interim text
	i := 0
	for i < len(l.calls) && l.calls[i].id != id {
		i++
	}
	if i == len(l.calls) {
		l.calls = append(l.calls, liveCall{id: id})
	}
	l.calls[i].text += frag
	l.advance()
}

// advance writes what the first call under way adds beyond the stream.
func (l *liveText) advance() {
	if len(l.calls) == 0 {
		return
	}
	target := l.out[:l.mark] + l.sep() + l.calls[0].text
	if rest, ok := strings.CutPrefix(target, l.out); ok {
		l.write(rest)
	}
}

// confirm writes a message the turn sent (the first call under way, when
// one streamed, or a text the turn sent otherwise).
func (l *liveText) confirm(text string) {
	l.sent = true
	if p := l.plain; p != nil {
		l.plain = nil
		if p.at >= 0 {
			if rest, ok := strings.CutPrefix(text, l.out[p.at:]); ok && len(l.calls) == 0 {
				l.write(rest) // the fallback sends the text that streamed
				l.mark = len(l.out)
				return
			}
			l.mark = len(l.out) // something else is sent: the written text was interim
		}
	}
	target := l.out[:l.mark] + l.sep() + text
	if rest, ok := strings.CutPrefix(target, l.out); ok {
		l.write(rest)
	} else {
		l.write("\n\n" + text) // after text of a refused call: see above
	}
	l.mark = len(l.out)
	if len(l.calls) > 0 {
		l.forget(l.calls[0].id)
		l.calls = l.calls[1:]
	}
	l.advance()
}

// settled forgets a call that ran; if it was refused, the next one may
// continue the stream.
func (l *liveText) settled(id string) {
	l.forget(id)
	for i, c := range l.calls {
		if c.id == id {
			l.calls = append(l.calls[:i], l.calls[i+1:]...)
			l.advance()
			return
		}
	}
}

func (l *liveText) forget(id string) {
	if l.ran == nil {
		l.ran = map[string]bool{}
	}
	l.ran[id] = true
}

// plainDelta adds a fragment of the model's plain text of a step.
func (l *liveText) plainDelta(step int, frag string) {
	if l.sent {
		return
	}
	if l.plain != nil && l.plain.step != step {
		l.interim()
	}
	if l.plain == nil {
		l.plain = &plainRun{step: step, at: -1}
	}
	p := l.plain
	p.text += frag
	s := strings.TrimSpace(p.text) // as the fallback sends it; trailing blanks wait for more text
	if strings.HasPrefix(fallback.NoReply, s) {
		return // nothing yet, or perhaps the no-reply marker
	}
	if p.at < 0 {
		if len(l.calls) > 0 {
			return // a send_message call streams first; the text waits to be sent
		}
		l.write(l.sep())
		p.at = len(l.out)
	}
	l.write(s[len(l.out)-p.at:])
}

// interim ends the plain text of a model call that turned out to come with
// tool calls: what of it was written stays, and the next message follows
// it after a blank line.
func (l *liveText) interim() {
	if l.plain == nil {
		return
	}
	if l.plain.at >= 0 {
		l.mark = len(l.out)
	}
	l.plain = nil
}

// take returns the pieces decided since the last take.
func (l *liveText) take() []string {
	p := l.pending
	l.pending = nil
	return p
}
