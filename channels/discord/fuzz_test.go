package discord

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/switchboard-gateway/switchboard/channels"
)

// FuzzSplitMessage cuts arbitrary replies at arbitrary limits. Every part
// fits the limit and holds something visible; every part closes the code
// blocks it opens (scanned with the splitter's own fence rules, as Discord
// renders each message on its own); and no visible character is lost or
// moved: the reply's characters appear in the parts in order, with nothing
// added but the fence lines that close and reopen a block at a cut.
func FuzzSplitMessage(f *testing.F) {
	f.Add("hello **world**", 20)
	f.Add(" \n\t ", 20)
	f.Add("aaaa\nbbbb\ncccc\ndddd", 10)
	f.Add("one two three four five six", 10)
	f.Add("abcdefghijklmnopqrstuvwxyz", 10)
	f.Add("ééééé ééééé 😀😀😀 日本語のテキスト", 5)
	f.Add("intro\n```py\nx = 1\ny = 2\nz = 3\n```\nend", 20)
	f.Add("~~~\naaaa\nbbbb\ncccc\n~~~", 14)
	f.Add("````md\n```go\ninner\n```\n````\nafter", 12)
	f.Add("```\n"+strings.Repeat("x", 50)+"\n```", 16)
	f.Add("   ```indented\ncode line\n   ```\n    ```four spaces is not a fence", 18)
	f.Add("say ```this``` now\nand then more words", 20)
	f.Add("```unclosed\nline one\nline two\nline three", 15)
	f.Add("text ```not a fence``` and a long tail of words here", 12)
	f.Add("```"+strings.Repeat("l", 70)+"\ncode\n```", 30)
	f.Add(longReply(), 1900)
	f.Add("a\r\nb\r\n```\r\nc\r\n```\r\n", 8)
	f.Add(strings.Repeat("intro line\n```go\nfunc f() {}\n```\n", 12), 20)
	f.Add(strings.Repeat("word ", 80)+"```"+strings.Repeat("x", 200)+"\n```", 50)
	f.Add("````"+strings.Repeat("~", 60)+"\n"+strings.Repeat("in the block\n", 30)+"````", 0)
	f.Fuzz(func(t *testing.T, text string, limit int) {
		if limit < 0 {
			limit = -(limit + 1)
		}
		// Small limits make short inputs split often; the real one is 1900.
		// Below 131 a reopened fence line (up to 65 characters) and its
		// closing marker (up to 65) can fill a part on their own, and the
		// splitter then loops forever: it is only ever called with 1900.
		limit = 131 + limit%1870
		parts := splitMessage(text, limit)
		if (strings.TrimSpace(text) == "") != (len(parts) == 0) {
			t.Fatalf("splitMessage(%q, %d) = %q: parts for blank text, or none for visible text", text, limit, parts)
		}
		if len(parts) == 0 {
			return
		}
		if len(parts) == 1 && parts[0] == strings.TrimSpace(text) {
			// A reply that fits is sent as written, balanced or not.
			if n := utf8.RuneCountInString(parts[0]); n > limit {
				t.Fatalf("limit %d: one part of %d characters", limit, n)
			}
			return
		}
		longestOpener, cutMarker := 0, false
		for l := range strings.Lines(text) {
			if fenceAfter(nil, l) != nil {
				longestOpener = max(longestOpener, utf8.RuneCountInString(strings.TrimSpace(l)))
			}
			// A line over the limit is cut; a piece of it may then start
			// like a fence ("a ```b" → "```b") that Discord shows as text.
			cutMarker = cutMarker || utf8.RuneCountInString(l) > limit && strings.ContainsAny(l, "`~")
		}
		var got []rune
		for i, p := range parts {
			if n := utf8.RuneCountInString(p); n > limit {
				t.Fatalf("limit %d: part %d has %d characters: %q", limit, i, n, p)
			}
			if strings.TrimSpace(p) == "" {
				t.Fatalf("limit %d: part %d is blank: %q", limit, i, p)
			}
			var open *fence
			for l := range strings.Lines(p) {
				open = fenceAfter(open, l)
			}
			if open != nil && !cutMarker {
				t.Fatalf("limit %d: part %d leaves the code block %q open:\n%s", limit, i, open.open, p)
			}
			got = append(got, visible(p)...)
		}
		want := visible(droppedOpener(text))
		extra, ok := subsequence(want, got)
		if !ok {
			t.Fatalf("limit %d: characters lost or reordered\ntext  %q\nparts %q", limit, text, parts)
		}
		// At most one reopening line and one closing marker per cut, and a
		// marker closing a block the reply left open.
		if budget := (2*(len(parts)-1) + 1) * max(longestOpener, 1); extra > budget {
			t.Fatalf("limit %d: %d characters added to %d parts (budget %d)\ntext  %q\nparts %q", limit, extra, len(parts), budget, text, parts)
		}
	})
}

// droppedOpener is text without a fence that its last line opens: an
// empty code block at the very end has nothing to show, and the splitter
// leaves it out.
func droppedOpener(text string) string {
	text = strings.TrimSpace(text)
	var open *fence
	start, last := 0, 0
	for l := range strings.Lines(text) {
		next := fenceAfter(open, l)
		if open == nil && next != nil {
			last = start
		}
		open = next
		start += len(l)
	}
	if open != nil && !strings.Contains(text[last:], "\n") {
		return text[:last]
	}
	return text
}

// visible is s without white space.
func visible(s string) []rune {
	var out []rune
	for _, r := range s {
		if !unicode.IsSpace(r) {
			out = append(out, r)
		}
	}
	return out
}

// subsequence reports whether want appears in got in order, and how many
// characters of got are left over.
func subsequence(want, got []rune) (extra int, ok bool) {
	i := 0
	for _, r := range got {
		if i < len(want) && want[i] == r {
			i++
		}
	}
	return len(got) - len(want), i == len(want)
}

// FuzzNormalizeMessage feeds arbitrary MESSAGE_CREATE payloads to the
// normaliser. What it does not ignore normalises without panicking, keeps
// the platform's ids (admission is by the author's id, never a name), is a
// DM exactly when there is no server, and is addressed to the bot (so it
// passes group gating) only when the bot was mentioned or replied to.
func FuzzNormalizeMessage(f *testing.F) {
	for _, p := range []string{
		`{"id":"1","channel_id":"dm","author":{"id":"u1","username":"alice","global_name":"Alice A"},"content":"hi","timestamp":"2026-03-01T12:00:00Z","type":0}`,
		`{"id":"2","channel_id":"c","guild_id":"g","author":{"id":"u1","username":"alice"},"member":{"nick":"Al"},"content":"just talking","type":0}`,
		`{"id":"3","channel_id":"c","guild_id":"g","author":{"id":"u1","username":"alice"},"content":"<@!900> ask <@u2>, not <@900>, ok?","type":0,
			"mentions":[{"id":"900","username":"switchboard","bot":true},{"id":"u2","username":"bob"}]}`,
		`{"id":"4","channel_id":"c","guild_id":"g","author":{"id":"u1","username":"alice"},"content":"and then?","type":19,
			"message_reference":{"message_id":"3"},"referenced_message":{"id":"3","author":{"id":"900","username":"switchboard","bot":true},"content":"once","type":0}}`,
		`{"id":"5","channel_id":"c","guild_id":"g","author":{"id":"u1","username":"alice"},"content":"agreed","type":19,
			"message_reference":{"message_id":"2"},"referenced_message":{"id":"2","author":{"id":"u2","username":"bob"},"content":"cats <@u3>","type":0,"mentions":[{"id":"u3","username":"carol"}]}}`,
		`{"id":"6","channel_id":"c","guild_id":"g","author":{"id":"u1","username":"alice"},"content":"what?","type":19,"message_reference":{"message_id":"77"},"referenced_message":null}`,
		`{"id":"7","channel_id":"c","guild_id":"g","author":{"id":"u1","username":"alice"},"content":"hi <@u2>","type":0,"mentions":[{"id":"u2","username":"<@900>"}]}`,
		`{"id":"8","channel_id":"c","guild_id":"g","author":{"id":"u1","username":"mallory"},"content":"<@<@900>900>","type":0}`,
		`{"id":"9","author":{"id":"900","username":"me","bot":true},"content":"echo","type":0}`,
		`{"id":"10","webhook_id":"55","author":{"id":"55","username":"hook"},"content":"hook","type":0}`,
		`{"id":"11","channel_id":"c","author":{"id":"u1","username":"alice"},"content":"","type":0,
			"attachments":[{"id":"a","filename":"x.txt","size":3,"url":"https://cdn/x.txt"}],"sticker_items":[{"id":"s","name":"wave"},null],"mentions":[null]}`,
		`{"id":"12","channel_id":"c","guild_id":"g","author":null,"content":"no author","type":0}`,
	} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		var m discordgo.Message
		if json.Unmarshal([]byte(payload), &m) != nil {
			return
		}
		if why := ignoreMessage(&m, botID); why != "" {
			return
		}
		if m.Author == nil || m.Author.ID == botID || m.Author.Bot || m.WebhookID != "" {
			t.Fatalf("a message without an author, or from the bot or another bot, was not ignored: %s", payload)
		}
		in := inbound(&m, botID)
		if in.Channel != "discord" || in.ChatID != m.ChannelID || in.MessageID != m.ID || in.Space != m.GuildID {
			t.Fatalf("ids not kept: %+v for %s", in, payload)
		}
		if in.UserID != m.Author.ID || in.UserName != m.Author.Username {
			t.Fatalf("author %q/%q normalised as %q/%q", m.Author.ID, m.Author.Username, in.UserID, in.UserName)
		}
		if (in.ChatType == channels.DM) != (m.GuildID == "") || in.ChatType == "" {
			t.Fatalf("chat type %q for guild %q", in.ChatType, m.GuildID)
		}
		if in.ChatType == channels.DM && !in.Mentioned {
			t.Fatalf("a DM not addressed to the bot: %s", payload)
		}
		if in.Text != strings.TrimSpace(in.Text) {
			t.Fatalf("text %q not trimmed", in.Text)
		}
		if in.ChatType == channels.Group {
			addressed := strings.Contains(m.Content, "<@"+botID+">") || strings.Contains(m.Content, "<@!"+botID+">")
			for _, u := range m.Mentions {
				addressed = addressed || u != nil && u.ID == botID
			}
			if r := m.ReferencedMessage; r != nil && r.Author != nil && r.Author.ID == botID {
				addressed = true
			}
			if in.Mentioned != addressed {
				t.Fatalf("group message Mentioned = %v, want %v: %s", in.Mentioned, addressed, payload)
			}
		}
		if r := m.ReferencedMessage; r != nil {
			if in.Quote == nil || in.Quote.MessageID != r.ID || in.Quote.FromBot != (r.Author != nil && r.Author.ID == botID) {
				t.Fatalf("quote %+v of %+v", in.Quote, r)
			}
		}
	})
}

// FuzzNormalizeInteraction feeds arbitrary INTERACTION_CREATE payloads to
// the normaliser: an accepted interaction has a chat, a user and a message
// id of its own (the router's de-duplication key), is addressed to the bot,
// and a button press carries its custom id.
func FuzzNormalizeInteraction(f *testing.F) {
	for _, p := range []string{
		`{"id":"1400000000000000000","application_id":"900","type":2,"guild_id":"g","channel_id":"c","token":"tok",
			"data":{"id":"cmd","name":"status","type":1},"member":{"nick":"Al","user":{"id":"u1","username":"alice"}},"version":1}`,
		`{"id":"1","application_id":"900","type":2,"channel_id":"d","token":"tok","data":{"id":"cmd","name":"new","type":1},"user":{"id":"u1","username":"alice","global_name":"Alice"}}`,
		`{"id":"2","type":3,"guild_id":"g","channel_id":"c","data":{"custom_id":"approve:12","component_type":2},
			"member":{"user":{"id":"u1","username":"alice"}},"message":{"id":"m1","author":{"id":"900","username":"switchboard","bot":true},"content":"Run?","type":0}}`,
		`{"id":"3","type":3,"channel_id":"d","data":{"custom_id":"pick","component_type":3,"values":["a"]},"user":{"id":"u1","username":"alice"}}`,
		`{"id":"4","type":3,"channel_id":"d","data":{"custom_id":"approve:1","component_type":2}}`,
		`{"id":"5","type":5,"channel_id":"d","data":{"custom_id":"form","components":[]},"user":{"id":"u1","username":"alice"}}`,
		`{"id":"","type":2,"channel_id":"d","data":{"name":"new"},"user":{"id":"u1"}}`,
		`{"id":"6","type":3,"channel_id":"d","data":{"custom_id":"x","component_type":2},"member":{"user":null},"user":{"id":"u2"}}`,
	} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		var i discordgo.Interaction
		if json.Unmarshal([]byte(payload), &i) != nil {
			return
		}
		in, ok := interactionInbound(&i, botID)
		if !ok {
			return
		}
		if in.ChatID == "" || in.UserID == "" || !in.Mentioned || in.Channel != "discord" {
			t.Fatalf("accepted without chat, user or address: %+v for %s", in, payload)
		}
		if in.MessageID == "" || in.MessageID == pressPrefix {
			t.Fatalf("accepted without a message id of its own: %+v for %s", in, payload)
		}
		if (in.ChatType == channels.DM) != (i.GuildID == "") {
			t.Fatalf("chat type %q for guild %q", in.ChatType, i.GuildID)
		}
		switch i.Type {
		case discordgo.InteractionMessageComponent:
			if in.Action == "" || !strings.HasPrefix(in.MessageID, pressPrefix) || in.Text != "" {
				t.Fatalf("press %+v for %s", in, payload)
			}
		case discordgo.InteractionApplicationCommand:
			if !strings.HasPrefix(in.Text, "/") || in.Action != "" {
				t.Fatalf("command %+v for %s", in, payload)
			}
		default:
			t.Fatalf("interaction type %d accepted: %s", i.Type, payload)
		}
	})
}
