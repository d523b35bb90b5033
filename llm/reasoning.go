package llm

import (
	"strings"
	"unicode"
)

// Reasoning models send their chain of thought in one of three ways: a
// reasoning_content field (DeepSeek, vLLM and llama.cpp with a reasoning
// parser), a reasoning field (OpenRouter, Ollama), or inline in the content
// between <think> and </think> (servers without a parser). Templates that
// open the <think> block in the prompt (DeepSeek-R1, QwQ) make the model
// emit only the closing </think>. The client takes all of them out of the
// content: reasoning never reaches a reply, a preview or the store.
//
// The rule for handing reasoning back: a server that sent reasoning_content
// with an assistant message that called tools gets it back on that message
// in the following requests of the same turn (DeepSeek's thinking mode with
// tools requires it), and never otherwise: not on a final answer, not in a
// later turn (deepseek-reasoner answers 400 to reasoning_content in earlier
// turns' messages), and never the reasoning read from <think> or reasoning
// fields. The agent enforces "the same turn": Message.Reasoning lives only
// in memory, the store never sees it.

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

type thinkMode int

const (
	thinkStart   thinkMode = iota // only whitespace so far: a <think> may open
	thinkInside                   // inside <think>…</think>
	thinkVisible                  // answer text
	thinkHold                     // the model is known to open <think> in its prompt: held until </think>
)

// thinkFilter splits a streamed content into the answer and the reasoning
// inside <think> blocks, as fragments arrive. Text that may be the start
// of a tag is held until the next fragment decides.
type thinkFilter struct {
	mode      thinkMode
	pending   string // undecided text: a possible partial tag, or held text
	visible   strings.Builder
	reasoning strings.Builder
	// orphan: a </think> without an opener was seen in this stream.
	orphan bool
}

// newThinkFilter returns a filter; hold: the model was seen to emit
// </think> without an opener (its template opens the block), so the
// stream's text is held until </think> or its end.
func newThinkFilter(hold bool) *thinkFilter {
	f := &thinkFilter{}
	if hold {
		f.mode = thinkHold
	}
	return f
}

// separated tells the filter that the server sends the reasoning in a
// field of its own: a hold with nothing held yet is released, so the
// answer streams (a server with a reasoning parser never sends </think>).
func (f *thinkFilter) separated() {
	if f.mode == thinkHold && f.pending == "" {
		f.mode = thinkStart
	}
}

// holding reports whether text is held as likely reasoning (thinkHold).
func (f *thinkFilter) holding() bool { return f.mode == thinkHold && f.pending != "" }

// feed takes the next content fragment and returns the answer text that
// may be handed out now. retract reports that the answer text handed out
// so far was reasoning after all (a </think> without an opener came): the
// caller takes it back.
func (f *thinkFilter) feed(s string) (out string, retract bool) {
	if f.mode == thinkVisible && f.pending == "" && !strings.Contains(s, "<") {
		f.visible.WriteString(s) // no tag can begin in s
		return s, false
	}
	f.pending += s
	var b strings.Builder
	for f.pending != "" {
		switch f.mode {
		case thinkStart:
			f.pending = strings.TrimLeftFunc(f.pending, unicode.IsSpace)
			switch {
			case f.pending == "":
			case strings.HasPrefix(f.pending, thinkOpen):
				f.pending, f.mode = f.pending[len(thinkOpen):], thinkInside
				continue
			case strings.HasPrefix(thinkOpen, f.pending):
				return b.String(), retract // maybe "<think>": wait
			default:
				f.mode = thinkVisible
				continue
			}
			return b.String(), retract
		case thinkInside, thinkHold:
			if t := strings.TrimLeftFunc(f.pending, unicode.IsSpace); f.mode == thinkHold && strings.HasPrefix(t, thinkOpen) {
				f.pending, f.mode = t[len(thinkOpen):], thinkInside // it opened the block after all
				continue
			}
			if i := strings.Index(f.pending, thinkClose); i >= 0 {
				f.reasoning.WriteString(f.pending[:i])
				f.pending, f.mode = f.pending[i+len(thinkClose):], thinkStart
				continue
			}
			if f.mode == thinkHold {
				return b.String(), retract // held whole: it is reasoning or, without </think>, the answer
			}
			keep := partialSuffix(f.pending, thinkClose)
			f.reasoning.WriteString(f.pending[:len(f.pending)-keep])
			f.pending = f.pending[len(f.pending)-keep:]
			return b.String(), retract
		case thinkVisible:
			if i := strings.Index(f.pending, thinkClose); i >= 0 && !strings.Contains(f.pending[:i], thinkOpen) {
				// A closer without an opener: everything so far was reasoning.
				f.reasoning.WriteString(f.visible.String())
				f.reasoning.WriteString(b.String())
				f.reasoning.WriteString(f.pending[:i])
				f.visible.Reset()
				b.Reset()
				f.pending, f.mode, f.orphan = f.pending[i+len(thinkClose):], thinkStart, true
				retract = true
				continue
			}
			if i := strings.Index(f.pending, thinkOpen); i >= 0 {
				b.WriteString(f.pending[:i])
				f.visible.WriteString(f.pending[:i])
				f.pending, f.mode = f.pending[i+len(thinkOpen):], thinkInside
				continue
			}
			keep := max(partialSuffix(f.pending, thinkClose), partialSuffix(f.pending, thinkOpen))
			out := f.pending[:len(f.pending)-keep]
			b.WriteString(out)
			f.visible.WriteString(out)
			f.pending = f.pending[len(f.pending)-keep:]
			return b.String(), retract
		}
	}
	return b.String(), retract
}

// end flushes the filter at the end of the stream and returns the answer
// text not handed out yet.
func (f *thinkFilter) end() string {
	rest := f.pending
	f.pending = ""
	switch f.mode {
	case thinkInside:
		f.reasoning.WriteString(rest) // never closed: all reasoning
		return ""
	case thinkHold:
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace) // no </think> came: it was the answer
	}
	f.visible.WriteString(rest)
	return rest
}

// opensThinkInPrompt reports whether model is known to have a template
// that opens the <think> block in the prompt (DeepSeek-R1 and its
// distills, QwQ), so its answers are held until </think> from the first.
// Other models are learnt when they do it (Client.thinkHold).
func opensThinkInPrompt(model string) bool {
	m := strings.ToLower(model)
	for _, s := range []string{"deepseek-r1", "r1-distill", "qwq"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// partialSuffix is the length of the longest proper start of tag that s
// ends with.
func partialSuffix(s, tag string) int {
	for n := min(len(tag)-1, len(s)); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}
