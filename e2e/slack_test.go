package e2e

// End-to-end tests of the Slack channel through the real wiring: a config
// file → `serve` → the adapter on slack-go (Socket Mode, or the Events API
// behind http.listen) against the fake Slack → the router → the agent loop →
// the go-openai client against the fake model, with SQLite in a temporary
// directory. Issue 34's acceptance: a DM answered once; a channel message
// answered only when the bot is mentioned, in its thread; a stranger gets
// one pairing reply and nothing reaches the model; a redelivered envelope
// and an Events API retry are one turn; an approval by button across a
// restart; a 4,000-word reply whole and in order, its preview replaced;
// a preview edited into the reply; chat.postMessage down for 45 s, then one late reply per
// message. The chaos test has its Slack part in chaos_test.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/slack"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/gateway"
	"github.com/switchboard-gateway/switchboard/internal/slackfake"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
)

// Slack users in the tests: alice and bob are on the allowlist.
const (
	slAlice   = "U0ALICE"
	slBob     = "U0BOB"
	slMallory = "U0MALLORY"

	slSigningSecret = "e2e-slack-signing-secret-0123456789"
)

// slackIDs numbers the conversations the tests open, across the package.
var slackIDs atomic.Int64

// slackDM is a new direct-message conversation id.
func slackDM() string { return fmt.Sprintf("D%08d", slackIDs.Add(1)) }

// slackChannel is a new public channel id.
func slackChannel() string { return fmt.Sprintf("C%08d", slackIDs.Add(1)) }

// slackMention addresses text to the bot, as a Slack client writes it.
func slackMention(text string) string { return "<@" + slackfake.BotUserID + "> " + text }

// slackSection sets channels.slack for the fake f (Socket Mode) and admits
// alice and bob.
func slackSection(f *slackfake.Fake) func(*config.Channels) {
	return func(c *config.Channels) {
		s := channels.SectionOf[*slack.Config](c.Sections)
		s.Enabled, s.BotToken, s.AppToken, s.APIURL = true, slackfake.BotToken, slackfake.AppToken, f.APIURL()
		s.AllowUsers = []string{slAlice, slBob}
	}
}

// slackServe is a running `switchboard serve` with Slack enabled.
type slackServe struct {
	*serveRun
	*modelScript
	sl    *slackfake.Fake
	model *testkit.FakeLLM
	cfg   string // the configuration file, for restart
	db    string // the database file
	final finalCounts
}

// startSlackServe runs serve against a new fake Slack (Socket Mode) and a
// scripted model; more sets more of the configuration. It returns once the
// adapter has opened its Socket Mode connection (with events_path set: once
// it takes events over HTTP).
func startSlackServe(t *testing.T, more ...func(*config.Config)) *slackServe {
	t.Helper()
	return startSlackServeOn(t, slackfake.New(t), more...)
}

// startSlackServeOn is startSlackServe on the fake sl.
func startSlackServeOn(t *testing.T, sl *slackfake.Fake, more ...func(*config.Config)) *slackServe {
	t.Helper()
	model := testkit.NewFakeLLM(t)
	s := &slackServe{sl: sl, model: model, modelScript: newModelScript(model)}
	dir := t.TempDir()
	c := modelConfig(model.URL)
	s.db = filepath.Join(dir, "switchboard.db")
	c.Store.Path, c.Skills.Dir = s.db, filepath.Join(dir, "skills")
	// Learning calls the model in the background after replies; these tests
	// count the model calls of turns.
	c.Learning.Enabled = false
	c.HTTP.Listen = ""
	c.Log.Level = "debug"
	slackSection(s.sl)(&c.Channels)
	for _, m := range more {
		m(c)
	}
	s.cfg = cfgfile.Write(t, c)
	if config.Section[*slack.Config](c).EventsPath == "" {
		s.serveRun = startServe(t, s.cfg, s.connected(0))
		return s
	}
	// Events API mode: no socket; up once the adapter takes events (the
	// handler answers 503 until then, and Slack would retry).
	s.serveRun = startServe(t, s.cfg, func(ctx context.Context) error { return sl.WaitCalls(ctx, "auth.test", 1) })
	for _, line := range []string{"slack: taking events over HTTP", "http listening"} {
		if err := waitLog(s.ctx(t), s.stderr, line); err != nil {
			t.Fatalf("%v\nstderr:\n%s", err, s.stderr.String())
		}
	}
	return s
}

// connected is ready once serve has opened Socket Mode connection n+1.
func (s *slackServe) connected(n int) func(context.Context) error {
	return func(ctx context.Context) error { return s.sl.WaitConnected(ctx, n+1) }
}

// restart stops serve and starts it again on the same configuration and
// database; it is up once its new Socket Mode connection is open.
func (s *slackServe) restart(t *testing.T) {
	t.Helper()
	if code := s.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d; stderr:\n%s", code, s.stderr.String())
	}
	s.serveRun = startServe(t, s.cfg, s.connected(s.sl.Connects()))
}

// say posts text as user in conv (a thread of it when thread is set) and
// returns the message's ts.
func (s *slackServe) say(conv, user, text, thread string) string {
	return s.sl.Say(slackfake.UserMessage{Channel: conv, User: user, Text: text, ThreadTS: thread})
}

// waitPosted waits until the bot has posted at least n messages in conv.
func (s *slackServe) waitPosted(t *testing.T, conv string, n int) []slackfake.Message {
	t.Helper()
	got, err := s.sl.WaitBotMessages(s.ctx(t), conv, n)
	if err != nil {
		t.Fatalf("want %d message(s) in %s, have %q: %v\nstderr:\n%s", n, conv, slackTexts(s.sl.BotMessages(conv)), err, s.stderr.String())
	}
	return got
}

// expect records how many messages conv must hold when serve has stopped:
// a late or doubled post shows up then.
func (s *slackServe) expect(conv string, n int) { s.final.expect(conv, n) }

// finish stops serve and checks what must hold once it has drained: exit
// code 0, every conversation holding what was expected, every scripted
// answer used, no secret in the log.
func (s *slackServe) finish(t *testing.T) {
	t.Helper()
	s.stopOK(t)
	s.final.check(t, func(conv string) []string { return slackTexts(s.sl.BotMessages(conv)) })
	s.checkAllAsked(t)
	checkNoSlackSecrets(t, "serve's log", s.stderr.String())
}

// checkNoSlackSecrets fails if a Slack token, the signing secret or the
// model API key appears in text.
func checkNoSlackSecrets(t *testing.T, what, text string) {
	t.Helper()
	for name, secret := range map[string]string{"bot token": slackfake.BotToken, "app token": slackfake.AppToken,
		"signing secret": slSigningSecret, "API key": e2eAPIKey} {
		if strings.Contains(text, secret) {
			t.Errorf("the %s appears in %s", name, what)
		}
	}
}

func slackTexts(ms []slackfake.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Text
	}
	return out
}

// inThread keeps the messages of thread ts.
func inThread(ms []slackfake.Message, ts string) []slackfake.Message {
	var out []slackfake.Message
	for _, m := range ms {
		if m.ThreadTS == ts {
			out = append(out, m)
		}
	}
	return out
}

// longSlackReply is exactly 4,000 words of prose in paragraphs, numbered
// so that a part out of order or missing shows.
func longSlackReply() string {
	var paras []string
	words := 0
	for p := 1; words < 4000; p++ {
		var sentences []string
		for s := 1; s <= 5 && words < 4000; s++ {
			fields := strings.Fields(fmt.Sprintf("Paragraph %d sentence %d keeps every word of a long answer in its place in the thread", p, s))
			fields = fields[:min(len(fields), 4000-words)]
			words += len(fields)
			sentences = append(sentences, strings.Join(fields, " ")+".")
		}
		paras = append(paras, strings.Join(sentences, " "))
	}
	return strings.Join(paras, "\n\n")
}

// TestSlackServe covers the Slack acceptance criteria in Socket Mode on one
// serve. Each subtest talks in conversations of its own.
func TestSlackServe(t *testing.T) {
	s := startSlackServe(t, func(c *config.Config) {
		config.Section[*slack.Config](c).Pairing = true
		// A 4,000-word reply is about 20,000 characters, past the shipped
		// cap on a reply (16,000, issue 29's runaway-reply cut).
		c.Channels.ReplyMaxChars = 40_000
	})

	t.Run("DM gets the model's reply exactly once", func(t *testing.T) {
		dm := slackDM()
		s.answer("Hi, I'm Alice", testkit.Reply{Text: "Hello Alice, nice to meet you."})
		s.say(dm, slAlice, "Hi, I'm Alice", "")
		got := s.waitPosted(t, dm, 1)
		if got[0].Text != "Hello Alice, nice to meet you." || got[0].ThreadTS != "" {
			t.Fatalf("posted %+v, want the model's text in the DM's timeline", got[0])
		}
		// The DM's next message runs after the first turn has ended, so a
		// second copy of the first reply would be there by now.
		s.answer("Thanks!", testkit.Reply{Text: "You're welcome."})
		s.say(dm, slAlice, "Thanks!", "")
		got = s.waitPosted(t, dm, 2)
		if texts, want := slackTexts(got), []string{"Hello Alice, nice to meet you.", "You're welcome."}; !slices.Equal(texts, want) {
			t.Fatalf("DM holds %q, want %q", texts, want)
		}
		s.assertHistory(t, "Thanks!", []string{"Hi, I'm Alice", "Thanks!"}, "Hello Alice, nice to meet you.")
		s.expect(dm, 2)
	})

	t.Run("channel message needs a mention and is answered in its thread", func(t *testing.T) {
		ch := slackChannel()
		calls := s.model.Calls()
		chatter := s.say(ch, slAlice, "good morning, everyone", "")
		s.answer("good morning, bot", testkit.Reply{Text: "Good morning, Alice!"})
		ts := s.say(ch, slAlice, slackMention("good morning, bot"), "")
		got := s.waitPosted(t, ch, 1)
		s.waitAcked(t, chatter, ts)
		if got[0].Text != "Good morning, Alice!" || got[0].ThreadTS != ts {
			t.Fatalf("posted %+v, want the reply in the thread of message %s", got[0], ts)
		}
		if n := s.model.Calls() - calls; n != 1 {
			t.Errorf("model calls = %d, want 1 (only the mention)", n)
		}
		if n := s.requestsMentioning("good morning, everyone"); n != 0 {
			t.Errorf("the unaddressed message reached the model in %d request(s)", n)
		}
		if u := userTexts(s.requestFor(t, "good morning, bot")); !slices.Equal(u, []string{"good morning, bot"}) {
			t.Errorf("user messages the model saw = %q, want only the mention without the bot's tag", u)
		}
		// A reply in that thread goes on in the thread's session.
		s.answer("and a follow-up", testkit.Reply{Text: "Following up."})
		s.say(ch, slAlice, slackMention("and a follow-up"), ts)
		got = s.waitPosted(t, ch, 2)
		if th := inThread(got, ts); len(th) != 2 || th[1].Text != "Following up." {
			t.Fatalf("thread %s holds %q, want both replies", ts, slackTexts(th))
		}
		s.assertHistory(t, "and a follow-up", []string{"good morning, bot", "and a follow-up"}, "Good morning, Alice!")
		s.expect(ch, 2)
	})

	t.Run("stranger gets one pairing reply, nothing reaches the model until the code is approved", func(t *testing.T) {
		dm := slackDM()
		calls := s.model.Calls()
		var said []string
		for _, text := range []string{"let me in", "please?", "pretty please?"} {
			said = append(said, s.say(dm, slMallory, text, ""))
		}
		notice := s.waitPosted(t, dm, 1)[0]
		code := regexp.MustCompile(`pairing code is ([A-Z2-9]{8})\b`).FindStringSubmatch(notice.Text)
		if code == nil {
			t.Fatalf("the reply %q holds no pairing code", notice.Text)
		}
		// Every envelope acknowledged: all three messages were taken in.
		s.waitAcked(t, said...)
		if n := s.model.Calls() - calls; n != 0 {
			t.Errorf("model calls = %d, want 0", n)
		}
		for _, text := range []string{"let me in", "please?", "pretty please?"} {
			if n := s.requestsMentioning(text); n != 0 {
				t.Errorf("the stranger's %q reached the model in %d request(s)", text, n)
			}
		}
		// The operator approves the code while serve runs: mallory is in.
		var out, errb strings.Builder
		rc := run(s.ctx(t), []string{"pairing", "approve", code[1], "--config", s.cfg}, strings.NewReader(""), &out, &errb)
		if want := "approved slack user " + slMallory; rc != exitOK || !strings.Contains(out.String(), want) {
			t.Fatalf("pairing approve: code %d, stdout %q, stderr %q; want 0 and %q", rc, out.String(), errb.String(), want)
		}
		if got := s.waitPosted(t, dm, 2); got[1].Text != gateway.PairingGreeting {
			t.Fatalf("DM holds %q, want the greeting after the approval", slackTexts(got))
		}
		s.answer("thanks for letting me in", testkit.Reply{Text: "Welcome, Mallory."})
		s.say(dm, slMallory, "thanks for letting me in", "")
		if got := s.waitPosted(t, dm, 3); got[2].Text != "Welcome, Mallory." {
			t.Fatalf("DM holds %q, want the model's reply after the approval", slackTexts(got))
		}
		if n := s.model.Calls() - calls; n != 1 {
			t.Errorf("model calls = %d, want 1 (only after the approval)", n)
		}
		s.expect(dm, 3) // checked once serve has drained: nothing more
	})

	t.Run("a redelivered envelope is one turn", func(t *testing.T) {
		dm := slackDM()
		calls := s.model.Calls()
		// The adapter's first acknowledgement is lost on the way, so the
		// fake sends the envelope again after the redelivery delay: the
		// adapter gets the stored message a second time.
		s.answer("are you there?", testkit.Reply{Text: "Here, once."})
		s.sl.SetRedelivery(50*time.Millisecond, 0)
		ts := s.sl.Say(slackfake.UserMessage{Channel: dm, User: slBob, Text: "are you there?", LoseFirstAck: true})
		if err := s.sl.WaitFor(s.ctx(t), func() bool { return sentTimes(s.sl, ts) >= 2 }); err != nil {
			t.Fatalf("the envelope was not sent again (%d times): %v", sentTimes(s.sl, ts), err)
		}
		s.waitAcked(t, ts)
		s.sl.SetRedelivery(time.Second, 0)
		s.waitPosted(t, dm, 1)
		s.answer("still?", testkit.Reply{Text: "Still here."})
		s.say(dm, slBob, "still?", "")
		got := s.waitPosted(t, dm, 2)
		if texts, want := slackTexts(got), []string{"Here, once.", "Still here."}; !slices.Equal(texts, want) {
			t.Fatalf("DM holds %q, want %q", texts, want)
		}
		if n := s.model.Calls() - calls; n != 2 {
			t.Errorf("model calls = %d, want 2 (one per message)", n)
		}
		if u := userTexts(s.requestFor(t, "still?")); !slices.Equal(u, []string{"are you there?", "still?"}) {
			t.Errorf("user messages the model saw = %q, want each once", u)
		}
		t.Logf("the envelope of %q was sent %d times", "are you there?", sentTimes(s.sl, ts))
		s.expect(dm, 2)
	})

	t.Run("a 4,000-word reply streamed under a preview arrives whole and in order", func(t *testing.T) {
		reply := longSlackReply()
		if n := len(strings.Fields(reply)); n != 4000 {
			t.Fatalf("test reply has %d words, want 4000", n)
		}
		dm := slackDM()
		// Streamed a paragraph every 25 ms: a preview shows while it comes.
		s.answer("Tell me a long story", testkit.Reply{TextChunks: strings.SplitAfter(reply, "\n\n"), ChunkDelay: 25 * time.Millisecond})
		s.say(dm, slAlice, "Tell me a long story", "")
		// The parts come one after another; the turn ends after the last.
		s.answer("The end?", testkit.Reply{Text: "The end."})
		s.say(dm, slAlice, "The end?", "")
		var got []slackfake.Message
		if err := s.sl.WaitFor(s.ctx(t), func() bool {
			got = s.sl.BotMessages(dm)
			return len(got) > 0 && got[len(got)-1].Text == "The end."
		}); err != nil {
			t.Fatalf("the reply did not arrive: %q: %v\nstderr:\n%s", slackTexts(s.sl.BotMessages(dm)), err, s.stderr.String())
		}
		// The preview shown while the reply streamed in is gone: edited into
		// the first part, or deleted.
		var parts []string
		previewed := false
		for _, m := range got[:len(got)-1] {
			previewed = previewed || m.Deleted || m.Edits > 0
			if !m.Deleted {
				parts = append(parts, m.Text)
			}
		}
		if !previewed {
			t.Errorf("no message was edited or deleted: the reply was not previewed")
		}
		for i, p := range parts {
			if n := len(p); n > slackfake.MaxMessageText {
				t.Errorf("part %d has %d characters, over Slack's %d", i+1, n, slackfake.MaxMessageText)
			}
		}
		if !sameModuloSplitWhitespace(reply, parts) {
			for i, p := range parts {
				t.Logf("part %d: %d characters, %q … %q", i+1, len(p), p[:min(len(p), 60)], p[max(0, len(p)-60):])
			}
			t.Errorf("the %d parts are not the reply split at whitespace", len(parts))
		}
		t.Logf("a reply of %d words and %d characters arrived in %d message(s) (%d preview(s) deleted)", 4000, len(reply), len(parts), len(got)-1-len(parts))
		s.expect(dm, len(got))
	})

	s.finish(t)
}

// sentTimes counts how many times the envelopes of message ts were sent.
func sentTimes(sl *slackfake.Fake, ts string) int {
	n := 0
	for _, e := range sl.Envelopes() {
		if e.TS == ts {
			n += e.Sent
		}
	}
	return n
}

// waitAcked waits until every envelope of the messages tss was
// acknowledged: the adapter has stored them (or refused them).
func (s *slackServe) waitAcked(t *testing.T, tss ...string) {
	t.Helper()
	for _, ts := range tss {
		ids := s.sl.EnvelopesOf(ts)
		if len(ids) == 0 {
			t.Fatalf("message %s has no envelope", ts)
		}
		for _, id := range ids {
			if err := s.sl.WaitAcked(s.ctx(t), id); err != nil {
				t.Fatalf("envelope %s of message %s was not acknowledged: %v\nstderr:\n%s", id, ts, err, s.stderr.String())
			}
		}
	}
}

// TestSlackEventsAPIRetry: in Events API mode (events_path under
// http.listen), an event that Slack sends again (X-Slack-Retry-Num, the same
// event_id) is one turn, a mention's two events (app_mention and message)
// are one, and a request with a bad signature or a stale timestamp is
// refused.
func TestSlackEventsAPIRetry(t *testing.T) {
	sl := slackfake.New(t)
	s := startSlackServeOn(t, sl, func(c *config.Config) {
		c.HTTP.Listen = "127.0.0.1:0"
		sc := config.Section[*slack.Config](c)
		sc.AppToken, sc.EventsPath, sc.SigningSecret = "", "/slack/events", slSigningSecret
	})
	events := "http://" + listenLine.FindStringSubmatch(logLine(s.stderr, "http listening"))[1] + "/slack/events"
	ctx := s.ctx(t)

	// post sends each body of a message, then each again as Slack's
	// retries (X-Slack-Retry-Num 1 and 2), and wants 200 for all.
	post := func(bodies []json.RawMessage) {
		t.Helper()
		for retry := range 3 {
			for _, b := range bodies {
				code, err := sl.PostEvent(ctx, events, slSigningSecret, b, retry)
				if err != nil || code != http.StatusOK {
					t.Fatalf("event (retry %d): status %d, %v; want 200\nstderr:\n%s", retry, code, err, s.stderr.String())
				}
			}
		}
	}
	dm, ch := slackDM(), slackChannel()
	s.answer("over HTTP", testkit.Reply{Text: "Answered once."})
	_, bodies := sl.SayEvents(slackfake.UserMessage{Channel: dm, User: slAlice, Text: "over HTTP"})
	post(bodies)
	s.waitPosted(t, dm, 1)
	// In a channel a mention comes twice (app_mention, and message):
	// still one turn.
	s.answer("in a channel", testkit.Reply{Text: "In the thread."})
	ts := ""
	_, bodies = sl.SayEvents(slackfake.UserMessage{Channel: ch, User: slBob, Text: slackMention("in a channel")})
	if len(bodies) != 2 {
		t.Fatalf("a mention in a channel is %d event(s), want 2 (app_mention and message)", len(bodies))
	}
	post(bodies)
	if got := s.waitPosted(t, ch, 1); got[0].Text != "In the thread." {
		t.Fatalf("posted %q, want the reply", got[0].Text)
	} else {
		ts = got[0].ThreadTS
	}
	// A body signed with another secret is refused and goes nowhere.
	_, forged := sl.SayEvents(slackfake.UserMessage{Channel: dm, User: slAlice, Text: "forged"})
	for _, b := range forged {
		if code, err := sl.PostEvent(ctx, events, "not-the-signing-secret", b, 0); err != nil || code < 400 || code >= 500 {
			t.Errorf("a body with a bad signature: status %d, %v; want a 4xx refusal", code, err)
		}
	}
	// A body rightly signed ten minutes ago is a replay: refused too.
	for _, b := range forged {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, events, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = slackfake.Sign(slSigningSecret, time.Now().Add(-10*time.Minute), b)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Errorf("a body signed ten minutes ago: status %d, want a 4xx refusal", resp.StatusCode)
		}
	}
	if n := strings.Count(s.stderr.String(), "events request refused"); n != 2*len(forged) {
		t.Errorf("the log holds %d refusals, want %d", n, 2*len(forged))
	}
	// The DM's next message runs after the first turn: a second turn of
	// the first would be there by now.
	s.answer("and again", testkit.Reply{Text: "Again, once."})
	_, bodies = sl.SayEvents(slackfake.UserMessage{Channel: dm, User: slAlice, Text: "and again"})
	post(bodies)
	got := s.waitPosted(t, dm, 2)
	if texts, want := slackTexts(got), []string{"Answered once.", "Again, once."}; !slices.Equal(texts, want) {
		t.Fatalf("DM holds %q, want %q", texts, want)
	}
	if u := userTexts(s.requestFor(t, "and again")); !slices.Equal(u, []string{"over HTTP", "and again"}) {
		t.Errorf("user messages the model saw = %q, want each once", u)
	}
	if n := s.model.Calls(); n != 3 {
		t.Errorf("model calls = %d, want 3 (one per message, none for the retries or the forged one)", n)
	}
	if n := s.requestsMentioning("forged"); n != 0 {
		t.Errorf("the forged message reached the model in %d request(s)", n)
	}
	if ts == "" || len(inThread(s.sl.BotMessages(ch), ts)) != 1 {
		t.Errorf("the channel holds %+v, want one reply in the mention's thread", s.sl.BotMessages(ch))
	}
	s.expect(dm, 2)
	s.expect(ch, 1)
	s.finish(t)
}

// slackButton is a button of a message's Block Kit blocks.
type slackButton struct{ Label, ActionID, Value string }

// slackButtons lists the buttons of blocks' actions blocks, in order.
func slackButtons(t *testing.T, blocks json.RawMessage) []slackButton {
	t.Helper()
	var bs []struct {
		Type     string `json:"type"`
		Elements []struct {
			Type     string `json:"type"`
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			Text     struct {
				Text string `json:"text"`
			} `json:"text"`
		} `json:"elements"`
	}
	if len(blocks) > 0 {
		if err := json.Unmarshal(blocks, &bs); err != nil {
			t.Fatalf("blocks %s: %v", blocks, err)
		}
	}
	var out []slackButton
	for _, b := range bs {
		if b.Type != "actions" {
			continue
		}
		for _, e := range b.Elements {
			if e.Type == "button" {
				out = append(out, slackButton{e.Text.Text, e.ActionID, e.Value})
			}
		}
	}
	return out
}

// TestSlackApprovalAcrossRestart: the model calls a tool that needs
// approval; the question comes with Block Kit buttons; serve restarts; on
// the new serve a click by someone else than the asker decides nothing,
// and the asker's click approves: the tool runs and the turn completes,
// once.
func TestSlackApprovalAcrossRestart(t *testing.T) {
	sl := slackfake.New(t)
	model := testkit.NewFakeLLM(t)
	script := newModelScript(model)
	cfg := approvalConfig(t, model, slackSection(sl))
	connected := func(n int) func(context.Context) error {
		return func(ctx context.Context) error { return sl.WaitConnected(ctx, n) }
	}
	serve := startServe(t, cfg, connected(1))
	scriptCleanup(script, "clean up tmp please")
	ch := slackChannel()
	ts := sl.Say(slackfake.UserMessage{Channel: ch, User: slAlice, Text: slackMention("clean up tmp please")})
	posted, err := sl.WaitBotMessages(waitCtx(t), ch, 1)
	if err != nil {
		t.Fatalf("no question: %v\n%s", err, serve.stderr.String())
	}
	q := posted[0]
	buttons := slackButtons(t, q.Blocks)
	if !strings.Contains(q.Text, "cleanup") || q.ThreadTS != ts || len(buttons) != 2 || buttons[0].Label != "Approve" {
		t.Fatalf("question %+v with buttons %+v; want it in the thread of %s with Approve and Deny", q, buttons, ts)
	}
	if n := script.requestsMentioning("Report cleaning"); n != 0 {
		t.Fatalf("the tool ran before approval (%d sub-calls)", n)
	}
	if code := serve.stop(t); code != exitOK {
		t.Fatalf("serve exited with %d; stderr:\n%s", code, serve.stderr.String())
	}
	calls := model.Calls()
	serve = startServe(t, cfg, connected(2))

	// bob may talk to the bot, but the question is alice's.
	env := sl.Click(slackfake.Click{Channel: ch, TS: q.TS, User: slBob, ActionID: buttons[0].ActionID, Value: buttons[0].Value})
	if err := sl.WaitAcked(waitCtx(t), env); err != nil {
		t.Fatalf("bob's click was not acknowledged: %v\n%s", err, serve.stderr.String())
	}
	env = sl.Click(slackfake.Click{Channel: ch, TS: q.TS, User: slAlice, ActionID: buttons[0].ActionID, Value: buttons[0].Value})
	var answer []slackfake.Message
	if err := sl.WaitFor(waitCtx(t), func() bool {
		answer = inThread(sl.BotMessages(ch), ts)
		return len(answer) >= 2 && answer[len(answer)-1].Text == "All clean now."
	}); err != nil {
		t.Fatalf("no answer after approval: %q: %v\n%s", slackTexts(sl.BotMessages(ch)), err, serve.stderr.String())
	}
	if err := sl.WaitAcked(waitCtx(t), env); err != nil {
		t.Fatalf("alice's click was not acknowledged: %v", err)
	}
	if n := script.requestsMentioning("Report cleaning"); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
	if n := model.Calls() - calls; n != 2 {
		t.Errorf("model calls after the restart = %d, want 2 (the tool's sub-call, the final answer)", n)
	}
	if code := serve.stop(t); code != exitOK {
		t.Fatalf("serve exited %d", code)
	}
	// The thread: the question, the notice that only alice decides (to
	// bob's click), the answer.
	got := slackTexts(inThread(sl.BotMessages(ch), ts))
	if len(got) != 3 || !strings.Contains(got[1], "Only") || !strings.Contains(got[1], strings.ToLower(slAlice)) || got[2] != "All clean now." {
		t.Errorf("the thread holds %q; want the question, a notice that only alice decides, and the answer", got)
	}
	script.checkAllAsked(t)
	checkNoSlackSecrets(t, "serve's log", serve.stderr.String())
}

// slackPosts records what the bot asked Slack to show, on its way to the
// fake: each chat.postMessage and chat.update, in order.
type slackPosts struct {
	URL string // the Web API base for api_url

	mu    sync.Mutex
	calls []slackPost
}

type slackPost struct{ Method, Channel, TS, Text string }

func newSlackPosts(t *testing.T, sl *slackfake.Fake) *slackPosts {
	t.Helper()
	p := &slackPosts{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		resp, answer := forwardTo(r, body, strings.TrimSuffix(sl.APIURL(), "/api/"), false)
		if m := path.Base(r.URL.Path); resp.StatusCode == http.StatusOK && (m == "chat.postMessage" || m == "chat.update") {
			form := slackParams(r, body)
			var a struct {
				OK bool   `json:"ok"`
				TS string `json:"ts"`
			}
			if json.Unmarshal(answer, &a) == nil && a.OK {
				p.mu.Lock()
				p.calls = append(p.calls, slackPost{m, form["channel"], a.TS, form["text"]})
				p.mu.Unlock()
			}
		}
		answerWith(w, resp, answer)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL + "/api/"
	return p
}

// slackParams reads a Web API call's parameters, form or JSON.
func slackParams(r *http.Request, body []byte) map[string]string {
	out := map[string]string{}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var m map[string]any
		_ = json.Unmarshal(body, &m)
		for k, v := range m {
			if s, ok := v.(string); ok {
				out[k] = s
			}
		}
		return out
	}
	form, _ := url.ParseQuery(string(body))
	for k := range form {
		out[k] = form.Get(k)
	}
	return out
}

// shown is what message ts of channel showed, in order: as posted, then
// each edit.
func (p *slackPosts) shown(channel, ts string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, c := range p.calls {
		if c.Channel == channel && c.TS == ts {
			out = append(out, c.Text)
		}
	}
	return out
}

// TestSlackLiveReply: a slow tool shows one progress line, and a reply the
// model writes slowly grows in that message through throttled chat.update
// calls, then becomes the reply: the thread ends with one message, and no
// call was answered 429.
func TestSlackLiveReply(t *testing.T) {
	parallelBusy(t)
	sl := slackfake.New(t)
	posts := newSlackPosts(t, sl)
	s := startSlackServeOn(t, sl, allowLocalFetch, func(c *config.Config) { config.Section[*slack.Config](c).APIURL = posts.URL })
	ch := slackChannel()
	const question = "when is the library open?"
	script, _ := liveScript(slowPage(t), false)
	s.answer(question, script...)
	ts := s.say(ch, slAlice, slackMention(question), "")

	final := func() bool {
		got := s.sl.BotMessages(ch)
		return len(got) > 0 && got[len(got)-1].Text == liveAnswer
	}
	if err := s.sl.WaitFor(s.ctx(t), final); err != nil {
		t.Fatalf("the answer never replaced the preview: %v; posted %q\nstderr:\n%s", err, slackTexts(s.sl.BotMessages(ch)), s.stderr.String())
	}
	s.expect(ch, 1)
	s.finish(t)

	got := s.sl.BotMessages(ch)
	if len(got) != 1 || got[0].Deleted || got[0].ThreadTS != ts {
		t.Fatalf("the channel got %+v; want one message, in the thread of %s", got, ts)
	}
	if n := s.sl.Calls("chat.postMessage"); n != 1 {
		t.Errorf("%d messages posted, want 1 (the progress line, edited into the answer)", n)
	}
	if th := s.sl.Throttled(); len(th) != 0 {
		t.Errorf("Slack answered 429 %d times: %+v", len(th), th)
	}
	checkLive(t, posts.shown(ch, got[0].TS))
}

// TestSlackPostOutageInRealTime: chat.postMessage answers 503 for 45 s while
// three messages arrive in two DMs; during it nothing reaches the DMs and
// every message stays undelivered in the store; after it each message gets
// exactly one late reply, in order (the outbox), and nothing is left
// pending (see runSendOutage).
func TestSlackPostOutageInRealTime(t *testing.T) {
	t.Parallel() // with the other long real-time tests
	s := startSlackServe(t)
	dm1, dm2 := slackDM(), slackDM()
	runSendOutage(t, sendOutage{
		channel: "slack", db: s.db, chats: [2]string{dm1, dm2}, users: [2]string{slAlice, slBob},
		refuse:  func() func() { return s.sl.Outage("chat.postMessage", 503) },
		refused: "posts",
		calls:   func() int { return s.sl.Calls("chat.postMessage") },
		// Both DMs' first replies were tried and refused.
		tried:   func() bool { return s.sl.Calls("chat.postMessage") >= 2 },
		answer:  s.answer,
		say:     func(chat, user, text string) { s.say(chat, user, text, "") },
		sent:    func(chat string) []string { return slackTexts(s.sl.BotMessages(chat)) },
		waitFor: s.sl.WaitFor,
		expect:  s.expect,
		finish:  s.finish,
		stderr:  s.stderr.String,
	}, 45*time.Second)
}
