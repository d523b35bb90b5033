package chatapi

import "strings"

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
//   - The model's plain text (agent.EventTextDelta) is not written as it
//     streams: until its model call ends, it may be interim text that tool
//     calls follow, which is never sent. It is written when the turn sends
//     it (the fallback), in one piece.
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

// take returns the pieces decided since the last take.
func (l *liveText) take() []string {
	p := l.pending
	l.pending = nil
	return p
}
