package agent

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// decodeSplit feeds args to a textDecoder cut at the given byte offsets and
// returns what it yielded, joined, failing on a fragment that is not valid
// UTF-8 (a rune cut in two would show as garbage).
func decodeSplit(t testing.TB, args string, cuts []int) string {
	t.Helper()
	var d textDecoder
	var b strings.Builder
	prev := 0
	for _, c := range append(cuts, len(args)) {
		c = min(max(c, prev), len(args))
		frag := d.Feed(args[prev:c])
		if !utf8.ValidString(frag) {
			t.Fatalf("fragment %q of %q (cuts %v) is not valid UTF-8", frag, args, cuts)
		}
		b.WriteString(frag)
		prev = c
	}
	return b.String()
}

// jsonText is what encoding/json makes of the text key; ok is false when
// args is not an object, its text is not a string, or it has the key twice
// (encoding/json keeps the last; the decoder streams the first: a refused
// call then, as the schema-checked send_message sees one "text" only).
func jsonText(args string) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &m) != nil {
		return "", false
	}
	var s string
	if json.Unmarshal(m["text"], &s) != nil {
		return "", false
	}
	dec := json.NewDecoder(strings.NewReader(args))
	texts, depth := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		case "text":
			if depth == 1 {
				texts++ // a key, or a value "text" (which only makes this stricter)
			}
		}
	}
	return s, texts == 1
}

// everySplit checks every way to cut args in two and in three pieces.
func everySplit(t *testing.T, args, want string) {
	t.Helper()
	for i := 0; i <= len(args); i++ {
		for j := i; j <= len(args); j++ {
			if got := decodeSplit(t, args, []int{i, j}); got != want {
				t.Fatalf("%s cut at %d and %d: got %q, want %q", args, i, j, got, want)
			}
		}
	}
}

func TestTextDecoderCases(t *testing.T) {
	tests := []struct{ name, args string }{
		{"plain", `{"text":"Hello, world."}`},
		{"escapes", `{"text":"line\nbreak \"quoted\" back\\slash tab\t \/ \b\f\r"}`},
		{"unicode escapes", `{"text":"caf\u00e9 \u2603 \u003cb\u003e"}`},
		{"surrogate pair", `{"text":"smile \ud83d\ude00!"}`},
		{"upper-case hex", `{"text":"\uD83D\uDE00"}`},
		{"lone high surrogate", `{"text":"a\ud83d b"}`},
		{"high then escape", `{"text":"a\ud83d\n"}`},
		{"two highs then low", `{"text":"\ud83d\ud83d\ude00"}`},
		{"lone low surrogate", `{"text":"\ude00x"}`},
		{"high at the end", `{"text":"x\ud83d"}`},
		{"raw multibyte", `{"text":"naïve ☂ 😀 日本"}`},
		{"text after other keys", `{"mode":"md","n":12.5e3,"ok":true,"z":null,"o":{"text":"no","a":[1,"]}",{"b":"\"}"}]},"text":"yes"}`},
		{"text before other keys", `{"text":"first","after":{"text":"nested"}}`},
		{"spaces", " {\n \"text\" :\t \"spaced\" ,\n \"x\" : [ ] } "},
		{"empty", `{"text":""}`},
		{"escaped key", `{"te\u0078t":"by an escaped key"}`},
		{"key with a quote", `{"a\"text":"no","text":"yes"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, ok := jsonText(tt.args)
			if !ok {
				t.Fatalf("bad case: %s", tt.args)
			}
			everySplit(t, tt.args, want)
		})
	}
}

// Invalid UTF-8 inside the text (a server that does not check) and values
// that are not strings: what encoding/json would make of it, or nothing.
func TestTextDecoderOddInput(t *testing.T) {
	everySplit(t, "{\"text\":\"a\xffb\xe2\x82\"}", "a\uFFFDb\uFFFD\uFFFD")
	for _, args := range []string{`{"text":42}`, `{"text":null}`, `{"text":["a"]}`, `[1,2]`, `"text"`, `{"other":"x"}`} {
		everySplit(t, args, "")
	}
	// Broken input never panics, and yields no more than it has.
	for _, args := range []string{`{"text":"\u12`, `{"text":"abc`, `{"text`, `{{{`, `{"text":"\`, `}`} {
		decodeSplit(t, args, []int{1, 3})
	}
}

// Random objects with random text, encoded by encoding/json (which escapes
// <, >, & and invalid UTF-8 as \u sequences) or with the escapes written out
// by hand, fed in random fragments: the joined output equals what
// encoding/json decodes.
func TestTextDecoderRandomSplits(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 2026))
	alphabet := []string{"a", "Z", " ", "\n", "\t", `"`, `\`, "/", "<", ">", "&", "é", "☂", "😀", "日", "\u2028", "\x01", "\x7f"}
	for n := range 3000 {
		var text strings.Builder
		for range rng.IntN(40) {
			text.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		obj := map[string]any{"text": text.String()}
		for k := range rng.IntN(4) {
			switch k {
			case 0:
				obj["format"] = "markdown \"x\" }{"
			case 1:
				obj["n"] = rng.Float64() * 1e6
			case 2:
				obj["nested"] = map[string]any{"text": "inner", "list": []any{1, "]", map[string]any{"}": true}}}
			case 3:
				obj["null"] = nil
			}
		}
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		args := string(b)
		if n%3 == 0 {
			args = handEscaped(rng, text.String())
		}
		want, ok := jsonText(args)
		if !ok {
			t.Fatalf("bad input %s", args)
		}
		cuts := make([]int, rng.IntN(8))
		for i := range cuts {
			cuts[i] = rng.IntN(len(args) + 1)
		}
		slices.Sort(cuts)
		if got := decodeSplit(t, args, cuts); got != want {
			t.Fatalf("%s cut at %v: got %q, want %q", args, cuts, got, want)
		}
	}
}

// handEscaped writes the text value with every non-ASCII rune as \u escapes
// (surrogate pairs beyond the BMP), with a lone surrogate now and then, and
// puts it last in the object.
func handEscaped(rng *rand.Rand, text string) string {
	var b strings.Builder
	b.WriteString(`{"first":1,"text":"`)
	for _, r := range text {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < 0x20 || r > 0x7e:
			if r > 0xFFFF {
				r -= 0x10000
				b.WriteString(hex4(0xD800+(r>>10)) + hex4(0xDC00+(r&0x3FF)))
			} else {
				b.WriteString(hex4(r))
			}
		default:
			b.WriteRune(r)
		}
		if rng.IntN(20) == 0 {
			b.WriteString(hex4(0xD800 + rune(rng.IntN(0x800))))
		}
	}
	b.WriteString(`"}`)
	return b.String()
}

func hex4(r rune) string {
	const digits = "0123456789abcdef"
	return `\u` + string([]byte{digits[r>>12&0xF], digits[r>>8&0xF], digits[r>>4&0xF], digits[r&0xF]})
}

// FuzzTextDecoder: for any input that encoding/json reads as an object with
// a string text, any two cuts give the same text.
func FuzzTextDecoder(f *testing.F) {
	f.Add(`{"text":"smile \ud83d\ude00!"}`, uint(3), uint(9))
	f.Add(`{"a":{"text":"x"},"text":"a\ud83d\n\u00e9"}`, uint(12), uint(20))
	f.Add("{\"text\":\"na\xc3\xafve\"}", uint(11), uint(12))
	f.Fuzz(func(t *testing.T, args string, i, j uint) {
		want, ok := jsonText(args)
		if !ok {
			decodeSplit(t, args, []int{int(i % uint(len(args)+1))}) // must not panic
			return
		}
		a, b := int(i%uint(len(args)+1)), int(j%uint(len(args)+1))
		if got := decodeSplit(t, args, []int{min(a, b), max(a, b)}); got != want {
			t.Fatalf("%q cut at %d and %d: got %q, want %q", args, a, b, got, want)
		}
	})
}
