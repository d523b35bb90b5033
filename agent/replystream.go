package agent

import (
	"unicode/utf8"

	"github.com/switchboard-gateway/switchboard/llm"
)

// Reply streaming: while the model streams a send_message call, the text
// argument is decoded from the partial JSON as it arrives and emitted as
// EventReplyDelta, so channels can show the reply growing before the call
// runs.

// sendMessage is the name of the send tool (ChannelContext), the one the
// model replies with; its text argument is what reply deltas carry.
const sendMessage = "send_message"

// replyDecoders decode the text of each send_message call of one model call,
// by the call's index.
type replyDecoders map[int]*textDecoder

// feed decodes a call fragment and returns the text it adds ("" for none).
func (r replyDecoders) feed(d llm.Delta) string {
	dec := r[d.ToolIndex]
	if dec == nil {
		dec = &textDecoder{}
		r[d.ToolIndex] = dec
	}
	return dec.Feed(d.ToolArgs)
}

// offers reports whether the tool specs include name.
func offers(specs []llm.ToolSpec, name string) bool {
	for _, s := range specs {
		if s.Name == name {
			return true
		}
	}
	return false
}

// textDecoder decodes the string value of the top-level "text" key of a JSON
// object that arrives in fragments, handing back each fragment's share as
// soon as it is known: escapes (\n, \", \uXXXX, surrogate pairs) split across
// fragments are completed by later ones, and a UTF-8 sequence cut at a
// fragment's end waits for its rest. Other keys, before or after, are
// skipped whatever their values; a "text" that is not a string yields
// nothing; only the first "text" key counts. What it yields, joined, is what
// encoding/json decodes (invalid UTF-8 and lone surrogates become U+FFFD);
// input that is not valid JSON yields whatever it makes of it, never a panic.
type textDecoder struct {
	state   decState
	key     []byte // the key being read (decoded)
	isText  bool   // the value being read belongs to the "text" key
	textSet bool   // the text value was read already
	depth   int    // nesting of the value being skipped
	inStr   bool   // inside a string of a skipped value
	esc     bool   // after a backslash
	hex     []byte // the digits of a \u escape so far
	hi      rune   // a high surrogate waiting for its low half
	out     []byte // decoded bytes not handed back yet
}

type decState int

const (
	stStart    decState = iota // before the object's '{'
	stKey                      // before a key (or the closing '}')
	stKeyStr                   // inside a key
	stColon                    // after a key
	stValue                    // before a value
	stText                     // inside the text value
	stSkip                     // inside another value
	stAfterVal                 // after a value: ',' or '}'
	stEnd                      // the object ended (or the input is not an object)
)

// Feed takes the next fragment and returns the text it completes.
func (d *textDecoder) Feed(frag string) string {
	for i := 0; i < len(frag); i++ {
		d.step(frag[i])
	}
	return d.flush(d.state != stText)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (d *textDecoder) step(c byte) {
	switch d.state {
	case stStart:
		switch {
		case c == '{':
			d.state = stKey
		case !isSpace(c):
			d.state = stEnd
		}
	case stKey:
		switch {
		case c == '"':
			d.state, d.key = stKeyStr, d.key[:0]
		case c == '}':
			d.state = stEnd
		}
	case stKeyStr:
		if !d.esc && c == '"' {
			d.flushSurrogate()
			d.state = stColon
			return
		}
		d.str(c, &d.key)
	case stColon:
		if c == ':' {
			d.state = stValue
			d.isText = string(d.key) == "text" && !d.textSet
		}
	case stValue:
		switch {
		case isSpace(c):
		case c == '"' && d.isText:
			d.state, d.textSet = stText, true
		default:
			d.state, d.depth, d.inStr = stSkip, 0, false
			d.skip(c)
		}
	case stText:
		if !d.esc && c == '"' {
			d.flushSurrogate()
			d.state = stAfterVal
			return
		}
		d.str(c, &d.out)
	case stSkip:
		d.skip(c)
	case stAfterVal:
		switch c {
		case ',':
			d.state = stKey
		case '}':
			d.state = stEnd
		}
	}
}

// skip follows a value that is not the text, until it ends; a scalar ends at
// the ',' or '}' after it, which is handled as after a value.
func (d *textDecoder) skip(c byte) {
	if d.inStr {
		switch {
		case d.esc:
			d.esc = false
		case c == '\\':
			d.esc = true
		case c == '"':
			d.inStr = false
			if d.depth == 0 {
				d.state = stAfterVal
			}
		}
		return
	}
	switch c {
	case '"':
		d.inStr = true
	case '{', '[':
		d.depth++
	case '}', ']':
		if d.depth == 0 { // the end of the object after a scalar
			d.state = stEnd
			return
		}
		d.depth--
		if d.depth == 0 {
			d.state = stAfterVal
		}
	case ',':
		if d.depth == 0 {
			d.state = stKey
		}
	}
}

// str decodes one byte of a JSON string's body into buf.
func (d *textDecoder) str(c byte, buf *[]byte) {
	switch {
	case d.hex != nil:
		d.hex = append(d.hex, c)
		if len(d.hex) < 4 {
			return
		}
		r := rune(0)
		for _, h := range d.hex {
			r = r<<4 | rune(unhex(h))
		}
		d.hex = nil
		d.rune(r, buf)
	case d.esc:
		d.esc = false
		if c == 'u' {
			d.hex = make([]byte, 0, 4)
			return
		}
		d.flushSurrogateTo(buf)
		switch c {
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		}
		*buf = append(*buf, c)
	case c == '\\':
		d.esc = true
	default:
		d.flushSurrogateTo(buf)
		*buf = append(*buf, c)
	}
}

// rune adds a \u escape's code: a high surrogate waits for a low one, as
// encoding/json pairs them; any other surrogate is U+FFFD.
func (d *textDecoder) rune(r rune, buf *[]byte) {
	if d.hi != 0 {
		hi := d.hi
		d.hi = 0
		if r >= 0xDC00 && r <= 0xDFFF {
			*buf = utf8.AppendRune(*buf, 0x10000+(hi-0xD800)<<10+(r-0xDC00))
			return
		}
		*buf = utf8.AppendRune(*buf, utf8.RuneError)
	}
	switch {
	case r >= 0xD800 && r <= 0xDBFF:
		d.hi = r
	case r >= 0xDC00 && r <= 0xDFFF:
		*buf = utf8.AppendRune(*buf, utf8.RuneError)
	default:
		*buf = utf8.AppendRune(*buf, r)
	}
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 0
}

// flushSurrogate ends a high surrogate that no low one followed.
func (d *textDecoder) flushSurrogate() {
	if d.state == stText {
		d.flushSurrogateTo(&d.out)
	} else {
		d.flushSurrogateTo(&d.key)
	}
}

func (d *textDecoder) flushSurrogateTo(buf *[]byte) {
	if d.hi != 0 {
		d.hi = 0
		*buf = utf8.AppendRune(*buf, utf8.RuneError)
	}
}

// flush hands back the decoded bytes as valid UTF-8: an invalid byte becomes
// U+FFFD (as encoding/json does), and a sequence cut at the end waits for
// the next fragment unless final.
func (d *textDecoder) flush(final bool) string {
	if len(d.out) == 0 {
		return ""
	}
	var b []byte
	i := 0
	for i < len(d.out) {
		if !final && !utf8.FullRune(d.out[i:]) {
			break
		}
		r, n := utf8.DecodeRune(d.out[i:])
		if r == utf8.RuneError && n == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, d.out[i:i+n]...)
		}
		i += n
	}
	d.out = append(d.out[:0], d.out[i:]...)
	return string(b)
}
