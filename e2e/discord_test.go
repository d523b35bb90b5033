package e2e

// End-to-end tests of the Discord channel through the real wiring: a config
// file → `serve` → the adapter on discordgo against the fake Discord → the
// router → the agent loop → the go-openai client against the fake model, with
// SQLite in a temporary directory.
//
// One serve process is shared by the subtests, because discordgo's Close
// costs a second. Each subtest talks in chats of its own, so its sessions and
// its counts of sent messages are its own.

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchboard-gateway/switchboard/channels/discord"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/discordfake"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/llm"
)

// Discord users in the tests. Only the first four are on the allowlist.
const (
	aliceID   = "310000000000000001"
	bobID     = "310000000000000002"
	carolID   = "310000000000000003"
	daveID    = "310000000000000004"
	malloryID = "310000000000000666"
	eveID     = "310000000000000777"

	e2eAPIKey = "sk-e2e-secret-key-0123456789"
	// e2eWait bounds every wait; generous because the machine is shared and
	// the suite also runs under -race.
	e2eWait = 60 * time.Second
)

// discordServe is a running `switchboard serve` with Discord enabled.
type discordServe struct {
	*serveRun
	*modelScript
	dc    *discordfake.Fake
	model *testkit.FakeLLM
	guild string
	cfg   string // the configuration file, for restart

	mu    sync.Mutex
	final map[string]int // channel id → messages the bot must have sent there in the end
}

// startDiscordServe runs serve against a new fake Discord and a scripted
// model; more sets more of the configuration.
func startDiscordServe(t *testing.T, more ...func(*config.Config)) *discordServe {
	t.Helper()
	s := &discordServe{dc: discordfake.New(t), model: testkit.NewFakeLLM(t), final: map[string]int{}}
	// Answers are looked up by the message they answer, not taken from one
	// queue, so a subtest that fails leaves the others' answers alone.
	s.modelScript = newModelScript(s.model)
	s.guild = s.dc.NewID()
	db := filepath.Join(t.TempDir(), "switchboard.db")
	c := modelConfig(s.model.URL)
	c.Store.Path = db
	// Learning calls the model in the background after replies; these tests
	// count the model calls of turns.
	c.Learning.Enabled = false
	c.HTTP.Listen = ""
	c.Log.Level = "debug"
	dc := config.Section[*discord.Config](c)
	dc.Enabled, dc.Token, dc.APIBase, dc.GatewayURL = true, s.dc.Token, s.dc.APIBase(), s.dc.GatewayURL()
	dc.AllowUsers = []string{aliceID, bobID, carolID, daveID}
	for _, m := range more {
		m(c)
	}
	cfg := cfgfile.Write(t, c)

	s.cfg = cfg
	// Up once the gateway session is identified.
	s.serveRun = startServe(t, cfg, func(ctx context.Context) error {
		return s.dc.WaitFor(ctx, func() bool { return s.dc.Identifies() >= 1 })
	})
	return s
}

// restart stops serve and starts it again on the same configuration and
// database; it is up once its new gateway session is identified.
func (s *discordServe) restart(t *testing.T) {
	t.Helper()
	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d; stderr:\n%s", code, s.stderr.String())
	}
	n := s.dc.Identifies()
	s.serveRun = startServe(t, s.cfg, func(ctx context.Context) error {
		return s.dc.WaitFor(ctx, func() bool { return s.dc.Identifies() > n })
	})
}

// dmChannel is a new direct-message channel with the bot.
func (s *discordServe) dmChannel() string {
	id := s.dc.NewID()
	s.dc.AddChannel(id, discordfake.ChannelTypeDM, "", "")
	return id
}

// textChannel is a new text channel in the test server.
func (s *discordServe) textChannel() string {
	id := s.dc.NewID()
	s.dc.AddChannel(id, discordfake.ChannelTypeGuildText, s.guild, "")
	return id
}

// mention addresses text to the bot, as a Discord client writes it.
func (s *discordServe) mention(text string) string { return "<@" + s.dc.Bot.ID + "> " + text }

// post dispatches a message from a user; guild "" makes it a DM.
func (s *discordServe) post(channelID, guild, userID, userName, content string) discordfake.Message {
	m := s.dc.MessageCreate(channelID, guild, userID, userName, content)
	s.dc.Dispatch("MESSAGE_CREATE", m)
	return m
}

// waitSent waits until the bot has sent at least n messages to channelID.
func (s *discordServe) waitSent(t *testing.T, channelID string, n int) []discordfake.Sent {
	t.Helper()
	if err := s.dc.WaitFor(s.ctx(t), func() bool {
		held := s.holds(channelID)
		// A live preview (a reply being written, ending in the cursor)
		// is not a message yet: it becomes the reply or is deleted.
		return len(held) >= n && !slices.ContainsFunc(held, func(m discordfake.Sent) bool { return strings.HasSuffix(m.Content, " …") })
	}); err != nil {
		t.Fatalf("want %d message(s) in %s, have %q: %v\nstderr:\n%s", n, channelID, contents(s.holds(channelID)), err, s.stderr.String())
	}
	return s.holds(channelID)
}

// holds returns the messages the bot posted to channelID and did not
// delete, as the channel shows them: a preview that a reply split in parts
// could not take over is posted, then deleted (when the model writes for
// longer than the preview's first 200 ms, as under -race).
func (s *discordServe) holds(channelID string) []discordfake.Sent {
	deleted := s.dc.Deleted()
	return slices.DeleteFunc(s.dc.SentTo(channelID), func(m discordfake.Sent) bool {
		return slices.ContainsFunc(deleted, func(e discordfake.Edit) bool { return e.ChannelID == m.ChannelID && e.MessageID == m.ID })
	})
}

// expect records how many messages channelID must hold when serve has
// stopped: a late or doubled send shows up then.
func (s *discordServe) expect(channelID string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.final[channelID] = n
}

// userTexts are the user messages of a request, without the author line
// the router starts a group message with ("[from Ada (@ada)]").
func userTexts(r testkit.Recorded) []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == llm.RoleUser {
			out = append(out, groupAuthor.ReplaceAllString(m.Content, ""))
		}
	}
	return out
}

var groupAuthor = regexp.MustCompile(`\A\[from [^\n]*\]\n`)

func assistantTexts(r testkit.Recorded) []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == llm.RoleAssistant && m.Content != "" {
			out = append(out, m.Content)
		}
	}
	return out
}

func contents(sent []discordfake.Sent) []string {
	out := make([]string, len(sent))
	for i, m := range sent {
		out[i] = m.Content
	}
	return out
}

// repliesTo counts the sent messages that reference message id.
func repliesTo(sent []discordfake.Sent, id string) int {
	n := 0
	for _, m := range sent {
		if m.Reference != nil && m.Reference.MessageID == id {
			n++
		}
	}
	return n
}

// sameModuloSplitWhitespace reports whether parts, in order, are text with
// only whitespace left out between and around them.
func sameModuloSplitWhitespace(text string, parts []string) bool {
	blank := func(s string) bool { return strings.TrimFunc(s, unicode.IsSpace) == "" }
	pos := 0
	for _, p := range parts {
		if p == "" {
			return false
		}
		i := strings.Index(text[pos:], p)
		if i < 0 || !blank(text[pos:pos+i]) {
			return false
		}
		pos += i + len(p)
	}
	return blank(text[pos:])
}

// longReply is exactly 4,500 characters of prose in paragraphs.
func longReply() string {
	var b strings.Builder
	for i := 1; b.Len() < 4500; i++ {
		fmt.Fprintf(&b, "Paragraph %d. The switchboard relays every word to Discord in order, splitting long answers at line ends so that no part exceeds the limit and nothing is lost or repeated along the way.\n\n", i)
	}
	return strings.TrimSpace(b.String()[:4499]) + "."
}

// TestDiscordServe covers the Discord acceptance criteria end to end.
func TestDiscordServe(t *testing.T) {
	s := startDiscordServe(t)

	t.Run("DM gets the model's reply exactly once", func(t *testing.T) {
		dm := s.dmChannel()
		s.answer("Hi, I'm Alice", testkit.Reply{Text: "Hello Alice, nice to meet you."})
		s.post(dm, "", aliceID, "alice", "Hi, I'm Alice")
		sent := s.waitSent(t, dm, 1)
		if sent[0].Content != "Hello Alice, nice to meet you." || sent[0].Reference != nil {
			t.Fatalf("sent %+v, want the model's text without a reference", sent[0])
		}
		// The chat's next message runs after the first turn has ended, so a
		// second copy of the first reply would be there by now.
		s.answer("Thanks!", testkit.Reply{Text: "You're welcome."})
		s.post(dm, "", aliceID, "alice", "Thanks!")
		sent = s.waitSent(t, dm, 2)
		if got, want := contents(sent), []string{"Hello Alice, nice to meet you.", "You're welcome."}; !slices.Equal(got, want) {
			t.Fatalf("DM holds %q, want %q", got, want)
		}
		// The conversation is remembered (SQLite) from one turn to the next.
		s.assertHistory(t, "Thanks!", []string{"Hi, I'm Alice", "Thanks!"}, "Hello Alice, nice to meet you.")
		s.expect(dm, 2)
	})

	t.Run("server message needs a mention and the reply references it", func(t *testing.T) {
		ch := s.textChannel()
		calls := s.model.Calls()
		s.post(ch, s.guild, aliceID, "alice", "good morning, everyone")
		s.answer("good morning, bot", testkit.Reply{Text: "Good morning, Alice!"})
		m := s.post(ch, s.guild, aliceID, "alice", s.mention("good morning, bot"))
		sent := s.waitSent(t, ch, 1)
		// A channel's messages are handled in order: the first one is done.
		if got := s.model.Calls() - calls; got != 1 {
			t.Errorf("model calls = %d, want 1 (only the mention)", got)
		}
		if n := s.requestsMentioning("good morning, everyone"); n != 0 {
			t.Errorf("the unaddressed message reached the model in %d request(s)", n)
		}
		if got := userTexts(s.requestFor(t, "good morning, bot")); !slices.Equal(got, []string{"good morning, bot"}) {
			t.Errorf("user messages the model saw = %q, want only the mention without the bot's tag", got)
		}
		if sent[0].Content != "Good morning, Alice!" || sent[0].Reference == nil ||
			sent[0].Reference.MessageID != m.ID || sent[0].Reference.ChannelID != ch {
			t.Fatalf("sent %+v (reference %+v), want the reply referencing message %s", sent[0], sent[0].Reference, m.ID)
		}
		// A later mention runs after this turn has ended: still one reply.
		s.answer("thanks", testkit.Reply{Text: "Anything else?"})
		m2 := s.post(ch, s.guild, aliceID, "alice", s.mention("thanks"))
		sent = s.waitSent(t, ch, 2)
		if len(sent) != 2 || repliesTo(sent, m.ID) != 1 || repliesTo(sent, m2.ID) != 1 {
			t.Fatalf("channel holds %q, want one reply to each mention", contents(sent))
		}
		s.expect(ch, 2)
	})

	t.Run("thread has its own session", func(t *testing.T) {
		parent := s.textChannel()
		thread := s.dc.NewID()
		s.dc.AddChannel(thread, discordfake.ChannelTypePublicThread, s.guild, parent)

		s.answer("the parent's word is apple", testkit.Reply{Text: "Noted: apple."})
		p1 := s.post(parent, s.guild, aliceID, "alice", s.mention("the parent's word is apple"))
		s.waitSent(t, parent, 1)
		s.answer("what is the word?", testkit.Reply{Text: "I don't know any word here."})
		t1 := s.post(thread, s.guild, aliceID, "alice", s.mention("what is the word?"))
		s.waitSent(t, thread, 1)
		s.answer("and in here?", testkit.Reply{Text: "Still apple."})
		p2 := s.post(parent, s.guild, aliceID, "alice", s.mention("and in here?"))
		s.waitSent(t, parent, 2)
		s.answer("and now?", testkit.Reply{Text: "Still nothing."})
		t2 := s.post(thread, s.guild, aliceID, "alice", s.mention("and now?"))
		s.waitSent(t, thread, 2)

		tests := []struct {
			last       string
			wantUser   []string
			wantAssist []string
			notSeen    []string
		}{
			{"what is the word?", []string{"what is the word?"}, nil, []string{"apple"}},
			{"and in here?", []string{"the parent's word is apple", "and in here?"}, []string{"Noted: apple."}, []string{"what is the word?", "any word here"}},
			{"and now?", []string{"what is the word?", "and now?"}, []string{"I don't know any word here."}, []string{"apple", "and in here?"}},
		}
		for _, tt := range tests {
			r := s.requestFor(t, tt.last)
			if got := userTexts(r); !slices.Equal(got, tt.wantUser) {
				t.Errorf("request for %q: user messages %q, want %q", tt.last, got, tt.wantUser)
			}
			if got := assistantTexts(r); !slices.Equal(got, tt.wantAssist) {
				t.Errorf("request for %q: assistant messages %q, want %q", tt.last, got, tt.wantAssist)
			}
			for _, m := range r.Messages {
				for _, bad := range tt.notSeen {
					if m.Role != llm.RoleSystem && strings.Contains(m.Content, bad) {
						t.Errorf("request for %q: %s message %q holds %q from the other chat", tt.last, m.Role, m.Content, bad)
					}
				}
			}
		}
		ps, ts := s.dc.SentTo(parent), s.dc.SentTo(thread)
		if len(ps) != 2 || repliesTo(ps, p1.ID) != 1 || repliesTo(ps, p2.ID) != 1 {
			t.Errorf("parent holds %q, want one reply to each of its messages", contents(ps))
		}
		if len(ts) != 2 || repliesTo(ts, t1.ID) != 1 || repliesTo(ts, t2.ID) != 1 {
			t.Errorf("thread holds %q, want one reply to each of its messages", contents(ts))
		}
		s.expect(parent, 2)
		s.expect(thread, 2)
	})

	t.Run("unlisted user gets one short notice and no model call", func(t *testing.T) {
		ch := s.textChannel()
		calls := s.model.Calls()
		m1 := s.post(ch, s.guild, malloryID, "mallory", s.mention("let me in"))
		notice := s.waitSent(t, ch, 1)[0]
		if !strings.Contains(notice.Content, malloryID) || utf8.RuneCountInString(notice.Content) > 200 {
			t.Errorf("notice = %q, want a short text with the user's id %s", notice.Content, malloryID)
		}
		if notice.Reference == nil || notice.Reference.MessageID != m1.ID {
			t.Errorf("notice reference = %+v, want message %s", notice.Reference, m1.ID)
		}
		s.post(ch, s.guild, malloryID, "mallory", s.mention("please?"))
		// An allowed user's message in the same channel is handled after
		// mallory's second one.
		s.answer("hello", testkit.Reply{Text: "Hi Alice."})
		m3 := s.post(ch, s.guild, aliceID, "alice", s.mention("hello"))
		sent := s.waitSent(t, ch, 2)
		if len(sent) != 2 || sent[1].Content != "Hi Alice." || repliesTo(sent, m3.ID) != 1 {
			t.Fatalf("channel holds %q, want the notice and then the reply to alice only", contents(sent))
		}
		if got := s.model.Calls() - calls; got != 1 {
			t.Errorf("model calls = %d, want 1 (alice's)", got)
		}
		for _, text := range []string{"let me in", "please?"} {
			if n := s.requestsMentioning(text); n != 0 {
				t.Errorf("the refused message %q reached the model in %d request(s)", text, n)
			}
		}
		// A DM from another unlisted user: the notice carries their id.
		dm := s.dmChannel()
		s.post(dm, "", eveID, "eve", "hello?")
		if got := s.waitSent(t, dm, 1)[0]; !strings.Contains(got.Content, eveID) || got.Reference != nil {
			t.Errorf("DM notice = %+v, want eve's id and no reference", got)
		}
		if got := s.model.Calls() - calls; got != 1 {
			t.Errorf("model calls = %d after eve's DM, want still 1", got)
		}
		s.expect(ch, 2)
		s.expect(dm, 1)
	})

	t.Run("4500-character reply arrives as three messages", func(t *testing.T) {
		reply := longReply()
		if n := utf8.RuneCountInString(reply); n != 4500 {
			t.Fatalf("test reply has %d characters, want 4500", n)
		}
		dm := s.dmChannel()
		s.answer("Tell me a long story", testkit.Reply{Text: reply})
		s.post(dm, "", bobID, "bob", "Tell me a long story")
		sent := s.waitSent(t, dm, 3)
		if len(sent) != 3 {
			t.Fatalf("got %d messages, want 3", len(sent))
		}
		parts := contents(sent)
		for i, p := range parts {
			if n := utf8.RuneCountInString(p); n >= discordfake.MaxContent {
				t.Errorf("part %d has %d characters, want under %d", i+1, n, discordfake.MaxContent)
			}
		}
		if !sameModuloSplitWhitespace(reply, parts) {
			t.Errorf("the parts are not the reply split at whitespace:\n%q", parts)
		}
		s.expect(dm, 3)
	})

	t.Run("429 on the first post is waited out and the reply arrives once", func(t *testing.T) {
		dm := s.dmChannel()
		posts := s.dc.Requests(discordfake.RouteCreateMessage)
		s.dc.FailNext(discordfake.RouteCreateMessage, 429, discordfake.RateLimitBody(0.05, false))
		s.answer("Are you there?", testkit.Reply{Text: "Sorry for the wait."})
		s.post(dm, "", carolID, "carol", "Are you there?")
		sent := s.waitSent(t, dm, 1)
		if sent[0].Content != "Sorry for the wait." {
			t.Fatalf("sent %q, want the model's reply", sent[0].Content)
		}
		// The next turn of the chat starts after this one has ended.
		s.answer("Good.", testkit.Reply{Text: "Still here."})
		s.post(dm, "", carolID, "carol", "Good.")
		sent = s.waitSent(t, dm, 2)
		if got, want := contents(sent), []string{"Sorry for the wait.", "Still here."}; !slices.Equal(got, want) {
			t.Fatalf("DM holds %q, want %q", got, want)
		}
		if got := s.dc.Requests(discordfake.RouteCreateMessage) - posts; got != 3 {
			t.Errorf("message posts = %d, want 3 (the 429, its retry, the second reply)", got)
		}
		if l := s.stderr.String(); !strings.Contains(l, "discord: retrying") || !strings.Contains(l, "wait=50ms") {
			t.Errorf("the log does not show a 50 ms wait before the retry:\n%s", l)
		}
		s.expect(dm, 2)
	})

	t.Run("send_message then final text sends one message", func(t *testing.T) {
		dm := s.dmChannel()
		calls := s.model.Calls()
		s.answer("Say something",
			testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c1", "send_message", `{"text":"Sent by the tool."}`)}},
			testkit.Reply{Text: "This final text must not be sent."},
		)
		s.post(dm, "", daveID, "dave", "Say something")
		sent := s.waitSent(t, dm, 1)
		if sent[0].Content != "Sent by the tool." {
			t.Fatalf("sent %q, want the send_message text", sent[0].Content)
		}
		// The next turn of the chat starts after this one has ended, so a
		// fallback send of the final text would be there by now.
		s.answer("Again", testkit.Reply{Text: "Second turn."})
		s.post(dm, "", daveID, "dave", "Again")
		sent = s.waitSent(t, dm, 2)
		if got, want := contents(sent), []string{"Sent by the tool.", "Second turn."}; !slices.Equal(got, want) {
			t.Fatalf("DM holds %q, want %q", got, want)
		}
		if got := s.model.Calls() - calls; got != 3 {
			t.Errorf("model calls = %d, want 3 (tool step, final text, second turn)", got)
		}
		s.expect(dm, 2)
	})

	// Last: the dropped connection costs discordgo's 1 s close.
	t.Run("dropped gateway resumes and every message is answered once", func(t *testing.T) {
		ctx := s.ctx(t)
		ch := s.textChannel()
		resumes, identifies, calls := s.dc.Resumes(), s.dc.Identifies(), s.model.Calls()
		release := make(chan struct{})
		s.answer("first", testkit.Reply{Text: "First answer.", Block: release})
		s.answer("second", testkit.Reply{Text: "Second answer."})
		s.answer("third", testkit.Reply{Text: "Third answer."})
		s.answer("after the resume", testkit.Reply{Text: "Fourth answer."})
		m1 := s.post(ch, s.guild, aliceID, "alice", s.mention("first"))
		if err := s.model.WaitCalls(ctx, calls+1); err != nil {
			t.Fatal(err)
		}
		// The first turn is waiting for the model: drop the gateway now.
		s.dc.DropConnection()
		m2 := s.dc.MessageCreate(ch, s.guild, aliceID, "alice", s.mention("second"))
		seq2 := s.dc.Dispatch("MESSAGE_CREATE", m2)
		m3 := s.post(ch, s.guild, aliceID, "alice", s.mention("third"))
		close(release)

		r, err := s.dc.WaitResume(ctx, resumes+1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Seq >= seq2 {
			t.Errorf("resumed after seq %d: the messages sent during the drop (from seq %d) were not replayed", r.Seq, seq2)
		}
		if got := s.dc.Identifies(); got != identifies {
			t.Errorf("identifies = %d, want %d (resumed, not a new session)", got, identifies)
		}
		s.waitSent(t, ch, 3)
		m4 := s.post(ch, s.guild, aliceID, "alice", s.mention("after the resume"))
		sent := s.waitSent(t, ch, 4)
		if len(sent) != 4 {
			t.Errorf("channel holds %q, want 4 replies", contents(sent))
		}
		for _, m := range []discordfake.Message{m1, m2, m3, m4} {
			if n := repliesTo(sent, m.ID); n != 1 {
				t.Errorf("message %q got %d replies, want 1", m.Content, n)
			}
		}
		want := []string{"first", "second", "third", "after the resume"}
		if got := userTexts(s.requestFor(t, "after the resume")); !slices.Equal(got, want) {
			t.Errorf("user messages the model saw = %q, want each once: %q", got, want)
		}
		if got := s.model.Calls() - calls; got != 4 {
			t.Errorf("model calls = %d, want 4", got)
		}
		s.expect(ch, 4)
	})

	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d, want 0; stderr:\n%s", code, s.stderr.String())
	}
	// serve has drained every turn: nothing arrived late or twice.
	s.mu.Lock()
	for ch, n := range s.final {
		if got := s.holds(ch); len(got) != n {
			t.Errorf("after shutdown, channel %s holds %d messages, want %d: %q", ch, len(got), n, contents(got))
		}
	}
	s.mu.Unlock()
	if got, want := len(s.dc.Sent())-len(s.dc.Deleted()), func() int {
		n := 0
		for _, v := range s.final {
			n += v
		}
		return n
	}(); got != want {
		t.Errorf("the bot sent %d messages in all (not counting deleted previews), want %d", got, want)
	}
	s.checkAllAsked(t)
	logs := s.stderr.String()
	if !strings.Contains(logs, "discord: connected") {
		t.Errorf("stderr does not hold serve's log:\n%s", logs)
	}
	for name, secret := range map[string]string{"bot token": s.dc.Token, "API key": e2eAPIKey} {
		if strings.Contains(logs, secret) {
			t.Errorf("the %s appears in serve's log", name)
		}
	}
}

// Messages posted while serve was down are answered after the restart, in
// order and once, through the same rules as live ones: a stranger is
// refused and a server message without a mention is not for the bot.
func TestDiscordServeCatchUp(t *testing.T) {
	s := startDiscordServe(t)
	dm, ch := s.dmChannel(), s.textChannel()
	s.answer("before the restart", testkit.Reply{Text: "Before."})
	s.answer("hi channel", testkit.Reply{Text: "Hi channel."})
	s.post(dm, "", aliceID, "alice", "before the restart")
	s.post(ch, s.guild, aliceID, "alice", s.mention("hi channel"))
	s.waitSent(t, dm, 1)
	s.waitSent(t, ch, 1)
	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d", code)
	}

	down := func(channelID, guild, userID, userName, content string) discordfake.Message {
		m := s.dc.MessageCreate(channelID, guild, userID, userName, content)
		s.dc.Post(m)
		return m
	}
	s.answer("missed one", testkit.Reply{Text: "Answer one."})
	s.answer("missed two", testkit.Reply{Text: "Answer two."})
	s.answer("missed in the channel", testkit.Reply{Text: "Answer three."})
	d1 := down(dm, "", aliceID, "alice", "missed one")
	d2 := down(dm, "", aliceID, "alice", "missed two")
	down(ch, s.guild, aliceID, "alice", "chatter while it sleeps")
	down(ch, s.guild, malloryID, "mallory", s.mention("let me in while you sleep"))
	c1 := down(ch, s.guild, aliceID, "alice", s.mention("missed in the channel"))
	calls := s.model.Calls()
	s.restart(t)

	sent := s.waitSent(t, dm, 3)
	if got := contents(sent); !slices.Equal(got, []string{"Before.", "Answer one.", "Answer two."}) {
		t.Errorf("DM holds %q, want the earlier reply and the two missed answers in order", got)
	}
	if repliesTo(sent, d1.ID)+repliesTo(sent, d2.ID) > 2 {
		t.Errorf("DM holds %q: a missed message was answered twice", contents(sent))
	}
	if err := s.dc.WaitFor(s.ctx(t), func() bool { return repliesTo(s.dc.SentTo(ch), c1.ID) == 1 }); err != nil {
		t.Fatalf("the missed mention was not answered: %q\nstderr:\n%s", contents(s.dc.SentTo(ch)), s.stderr.String())
	}
	if got := s.model.Calls() - calls; got != 3 {
		t.Errorf("model calls after the restart = %d, want 3 (the missed messages of alice addressed to the bot)", got)
	}
	for _, text := range []string{"chatter while it sleeps", "let me in while you sleep"} {
		if n := s.requestsMentioning(text); n != 0 {
			t.Errorf("%q reached the model in %d request(s)", text, n)
		}
	}
	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d", code)
	}
	if got := contents(s.dc.SentTo(dm)); len(got) != 3 {
		t.Errorf("after the stop the DM holds %q, want 3 messages (nothing sent twice)", got)
	}
	if !strings.Contains(s.stderr.String(), "caught up on messages") {
		t.Errorf("the log does not say what the catch-up did:\n%s", s.stderr.String())
	}
	s.checkAllAsked(t)
}
