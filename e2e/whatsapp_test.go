package e2e

// End-to-end tests of the WhatsApp channel through the real wiring: a config
// file → `serve` → the adapter's webhook on http.listen and its Graph API
// client against the fake WhatsApp Cloud API (internal/wafake) → the router
// → the agent loop → the go-openai client against the fake model, with
// SQLite in a temporary directory. Issue 37's acceptance: a text answered
// once; an unsigned or wrongly signed delivery refused (401/403) and
// reaching nothing; a redelivered webhook is one turn; a voice note
// transcribed; an approval by button, only the asker's; a reminder due after
// the 24-hour window sent as the template, or dropped with an ERROR and a
// metric; a Graph API outage of 45 s, then one late reply per message. The
// chaos test has its WhatsApp part in chaos_test.go.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/whatsapp"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/wafake"
	"github.com/switchboard-gateway/switchboard/store"
)

// waUsers is how many numbers the tests admit: waUser(0) … waUser(waUsers-1).
const waUsers = 40

// waUser is the nth admitted WhatsApp number (a wa_id).
func waUser(n int) string { return fmt.Sprintf("1555200%04d", n) }

// waNext hands out the admitted numbers across the package, so that each
// test talks in chats of its own.
var waNext atomic.Int64

// newWAUser is a new admitted number.
func newWAUser(t *testing.T) string {
	n := int(waNext.Add(1))
	if n >= waUsers {
		t.Fatalf("more than %d WhatsApp users: raise waUsers", waUsers)
	}
	return waUser(n)
}

// waSection enables channels.whatsapp against the fake f (api_base), with
// the reminder template, and admits the waUsers numbers ("+" before every
// other one: both forms are accepted).
func waSection(f *wafake.Fake) func(*config.Channels) {
	return func(c *config.Channels) {
		s := channels.SectionOf[*whatsapp.Config](c.Sections)
		s.Enabled, s.PhoneNumberID, s.APIBase = true, wafake.PhoneNumberID, f.APIBase()
		s.AccessToken, s.AppSecret, s.VerifyToken = wafake.AccessToken, wafake.AppSecret, wafake.VerifyToken
		s.Templates = map[string]whatsapp.Template{whatsapp.ReminderTemplate: {Name: "reminder", Language: "en"}}
		s.AllowUsers = nil
		for i := range waUsers {
			n := waUser(i)
			if i%2 == 1 {
				n = "+" + n
			}
			s.AllowUsers = append(s.AllowUsers, n)
		}
	}
}

// waServe is a running `switchboard serve` with WhatsApp enabled.
type waServe struct {
	*serveRun
	*modelScript
	wa    *wafake.Fake
	model *testkit.FakeLLM
	c     *config.Config // the configuration, for restarts with changes
	cfg   string         // its file
	db    string         // the database file
	url   string         // http.listen's base URL
	final finalCounts    // user → messages the bot must have sent them in the end
}

// startWAServe runs serve against a new fake WhatsApp and a scripted model
// on http.listen 127.0.0.1:0; more sets more of the configuration. It
// returns once the adapter takes deliveries, with the fake's webhook aimed
// at it.
func startWAServe(t *testing.T, more ...func(*config.Config)) *waServe {
	t.Helper()
	wa := wafake.New(t)
	model := testkit.NewFakeLLM(t)
	s := &waServe{wa: wa, model: model, modelScript: newModelScript(model)}
	dir := t.TempDir()
	c := modelConfig(model.URL)
	s.db = filepath.Join(dir, "switchboard.db")
	c.Store.Path, c.Skills.Dir = s.db, filepath.Join(dir, "skills")
	c.Learning.Enabled = false // it would call the model after replies
	c.HTTP.Listen = "127.0.0.1:0"
	c.Log.Level = "debug"
	waSection(wa)(&c.Channels)
	for _, m := range more {
		m(c)
	}
	s.c, s.cfg = c, cfgfile.Write(t, c)
	s.start(t)
	return s
}

// start runs serve on s.cfg and aims the fake's webhook at it.
func (s *waServe) start(t *testing.T) {
	t.Helper()
	calls := s.wa.Calls("phone_number")
	s.serveRun = startServe(t, s.cfg, func(ctx context.Context) error { return s.wa.WaitCalls(ctx, "phone_number", calls+1) })
	for _, line := range []string{"whatsapp: taking webhook deliveries", "http listening"} {
		if err := waitLog(s.ctx(t), s.stderr, line); err != nil {
			t.Fatalf("%v\nstderr:\n%s", err, s.stderr.String())
		}
	}
	s.url = "http://" + listenLine.FindStringSubmatch(logLine(s.stderr, "http listening"))[1]
	s.wa.SetWebhook(s.url + whatsapp.DefaultWebhookPath)
}

// say makes user write text and returns its wamid.
func (s *waServe) say(t *testing.T, m wafake.UserMessage) string {
	t.Helper()
	id, err := s.wa.Say(m)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// waitSent waits until the bot has sent user at least n messages.
func (s *waServe) waitSent(t *testing.T, user string, n int) []wafake.Message {
	t.Helper()
	got, err := s.wa.WaitSent(s.ctx(t), user, n)
	if err != nil {
		t.Fatalf("want %d message(s) to %s, have %q: %v\nstderr:\n%s", n, user, waTexts(s.wa.Sent(user)), err, s.stderr.String())
	}
	return got
}

// expect records how many messages user must have got when serve has
// stopped: a late or doubled send shows up then.
func (s *waServe) expect(user string, n int) { s.final.expect(user, n) }

// finish stops serve and checks what must hold once it has drained: exit
// code 0, every user with what was expected, every delivery taken, every
// scripted answer used, no secret in the log.
func (s *waServe) finish(t *testing.T) {
	t.Helper()
	s.stopOK(t)
	s.final.check(t, func(user string) []string { return waTexts(s.wa.Sent(user)) })
	if n := s.wa.Pending(); n != 0 {
		t.Errorf("%d webhook deliveries never answered 2xx", n)
	}
	s.checkAllAsked(t)
	checkNoWASecrets(t, "serve's log", s.stderr.String())
}

// checkNoWASecrets fails if the access token, the app secret, the verify
// token or the model API key appears in text.
func checkNoWASecrets(t *testing.T, what, text string) {
	t.Helper()
	for name, secret := range map[string]string{"access token": wafake.AccessToken, "app secret": wafake.AppSecret,
		"verify token": wafake.VerifyToken, "API key": e2eAPIKey} {
		if strings.Contains(text, secret) {
			t.Errorf("the %s appears in %s", name, what)
		}
	}
}

func waTexts(ms []wafake.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Text
	}
	return out
}

// TestWhatsAppServe covers the WhatsApp acceptance criteria that one serve
// can: each subtest talks with users of its own.
func TestWhatsAppServe(t *testing.T) {
	s := startWAServe(t, func(c *config.Config) { c.LLM.TranscriptionModel = "whisper-1" })

	t.Run("a text is answered once, marked read and typed", func(t *testing.T) {
		ann := newWAUser(t)
		// The model takes a second: the typing indicator shows from half
		// a second into a turn.
		s.answer("Hi, I'm Ann", testkit.Reply{Text: "Hello Ann, nice to meet you.", Delay: time.Second})
		first := s.say(t, wafake.UserMessage{From: ann, Name: "Ann", Text: "Hi, I'm Ann"})
		got := s.waitSent(t, ann, 1)
		if got[0].Type != "text" || got[0].Text != "Hello Ann, nice to meet you." {
			t.Fatalf("sent %+v, want the model's text", got[0])
		}
		// Ann's next message runs after the first turn has ended, so a
		// second copy of the first reply would be there by now.
		s.answer("Thanks!", testkit.Reply{Text: "You're welcome."})
		s.say(t, wafake.UserMessage{From: ann, Name: "Ann", Text: "Thanks!"})
		got = s.waitSent(t, ann, 2)
		if texts, want := waTexts(got), []string{"Hello Ann, nice to meet you.", "You're welcome."}; !slices.Equal(texts, want) {
			t.Fatalf("Ann got %q, want %q", texts, want)
		}
		s.assertHistory(t, "Thanks!", []string{"Hi, I'm Ann", "Thanks!"}, "Hello Ann, nice to meet you.")
		if !slices.Contains(s.wa.Reads(), first) {
			t.Errorf("the message was not marked read: reads %q", s.wa.Reads())
		}
		if !slices.Contains(s.wa.Typing(), first) {
			t.Errorf("no typing indicator while the turn ran: %q", s.wa.Typing())
		}
		s.expect(ann, 2)
	})

	t.Run("unsigned or wrongly signed deliveries are refused and reach nothing", func(t *testing.T) {
		eve := newWAUser(t)
		calls := s.model.Calls()
		ctx := s.ctx(t)
		wamid, body, err := s.wa.Compose(wafake.UserMessage{From: eve, Text: "forged order"})
		if err != nil {
			t.Fatal(err)
		}
		refusals := strings.Count(s.stderr.String(), "whatsapp: webhook delivery refused")
		for _, tc := range []struct {
			what, sig string
			want      int
		}{
			{"unsigned", "", http.StatusUnauthorized},
			{"signed with another secret", wafake.Sign("not-the-app-secret", body), http.StatusForbidden},
			{"a signature that is not hex", "sha256=zz" + strings.Repeat("0", 62), http.StatusForbidden},
			{"no sha256= prefix", strings.TrimPrefix(wafake.Sign(wafake.AppSecret, body), "sha256="), http.StatusForbidden},
		} {
			if code, err := s.wa.Deliver(ctx, body, tc.sig); err != nil || code != tc.want {
				t.Errorf("a delivery %s: status %d, %v; want %d", tc.what, code, err, tc.want)
			}
		}
		// Meta's handshake: the verify token decides.
		if code, echoed, err := s.wa.Verify(ctx, wafake.VerifyToken); err != nil || code != http.StatusOK || !echoed {
			t.Errorf("handshake with the verify token: %d, echoed %v, %v; want 200 and the challenge", code, echoed, err)
		}
		if code, echoed, err := s.wa.Verify(ctx, "guessed-token"); err != nil || code != http.StatusForbidden || echoed {
			t.Errorf("handshake with a wrong token: %d, echoed %v, %v; want 403", code, echoed, err)
		}
		// A rightly signed message of eve's comes after: when it is
		// answered, a forged one that got through would have been too.
		s.answer("a real question", testkit.Reply{Text: "A real answer."})
		s.say(t, wafake.UserMessage{From: eve, Text: "a real question"})
		if got := s.waitSent(t, eve, 1); got[0].Text != "A real answer." {
			t.Fatalf("eve got %q", waTexts(got))
		}
		if n := s.model.Calls() - calls; n != 1 {
			t.Errorf("model calls = %d, want 1 (only the signed message)", n)
		}
		if n := s.requestsMentioning("forged order"); n != 0 {
			t.Errorf("the forged message reached the model in %d request(s)", n)
		}
		if n := countIn(t, s.db, fmt.Sprintf(`SELECT count(*) FROM inbox WHERE message_id = '%s'`, wamid)); n != 0 {
			t.Errorf("the forged message is in the inbox (%d rows)", n)
		}
		if n := strings.Count(s.stderr.String(), "whatsapp: webhook delivery refused") - refusals; n != 4 {
			t.Errorf("the log holds %d refusals, want 4", n)
		}
		s.expect(eve, 1)
	})

	t.Run("a redelivered webhook is one turn", func(t *testing.T) {
		bob := newWAUser(t)
		calls := s.model.Calls()
		ctx := s.ctx(t)
		s.answer("are you there?", testkit.Reply{Text: "Here, once."})
		id := s.say(t, wafake.UserMessage{From: bob, Text: "are you there?"})
		if err := s.wa.WaitTaken(ctx, id); err != nil {
			t.Fatal(err)
		}
		// Meta sends it again, twice: each is answered 200, as stored.
		for range 2 {
			if code, err := s.wa.Redeliver(ctx, id); err != nil || code != http.StatusOK {
				t.Fatalf("a redelivery: status %d, %v; want 200", code, err)
			}
		}
		s.waitSent(t, bob, 1)
		s.answer("still?", testkit.Reply{Text: "Still here."})
		s.say(t, wafake.UserMessage{From: bob, Text: "still?"})
		got := s.waitSent(t, bob, 2)
		if texts, want := waTexts(got), []string{"Here, once.", "Still here."}; !slices.Equal(texts, want) {
			t.Fatalf("bob got %q, want %q", texts, want)
		}
		if n := s.model.Calls() - calls; n != 2 {
			t.Errorf("model calls = %d, want 2 (one per message)", n)
		}
		if u := userTexts(s.requestFor(t, "still?")); !slices.Equal(u, []string{"are you there?", "still?"}) {
			t.Errorf("user messages the model saw = %q, want each once", u)
		}
		if d, _ := s.wa.DeliveryOf(id); d.Attempts != 3 {
			t.Errorf("the delivery was answered %d times, want 3", d.Attempts)
		}
		s.expect(bob, 2)
	})

	t.Run("a voice note is transcribed", func(t *testing.T) {
		cy := newWAUser(t)
		voice := []byte("OggS\x00\x02 a voice note of the e2e test")
		s.model.SetTranscript("Remind me to call mum.")
		s.answer("[voice message, transcribed]: Remind me to call mum.", testkit.Reply{Text: "When should I remind you?"})
		s.say(t, wafake.UserMessage{From: cy, Voice: voice})
		if got := s.waitSent(t, cy, 1); got[0].Text != "When should I remind you?" {
			t.Fatalf("cy got %q", waTexts(got))
		}
		audio := s.model.AudioRequests()
		if len(audio) != 1 || string(audio[0].Data) != string(voice) || audio[0].Model != "whisper-1" {
			t.Errorf("transcription requests %+v, want the voice note once with whisper-1", audio)
		}
		s.expect(cy, 1)
	})

	t.Run("a long reply arrives whole in parts of at most 4,096 characters", func(t *testing.T) {
		dee := newWAUser(t)
		reply := longSlackReply()[:10_000]
		reply = reply[:strings.LastIndex(reply, " ")] + "."
		s.answer("Tell me a long story", testkit.Reply{Text: reply})
		s.say(t, wafake.UserMessage{From: dee, Text: "Tell me a long story"})
		// The parts come one after another; the turn ends after the last.
		s.answer("The end?", testkit.Reply{Text: "The end."})
		s.say(t, wafake.UserMessage{From: dee, Text: "The end?"})
		var got []wafake.Message
		if err := s.wa.WaitFor(s.ctx(t), func() bool {
			got = s.wa.Sent(dee)
			return len(got) > 0 && got[len(got)-1].Text == "The end."
		}); err != nil {
			t.Fatalf("the reply did not arrive: %d messages: %v\nstderr:\n%s", len(s.wa.Sent(dee)), err, s.stderr.String())
		}
		parts := waTexts(got[:len(got)-1])
		if len(parts) < 3 {
			t.Errorf("a reply of %d characters came in %d message(s), want at least 3", len(reply), len(parts))
		}
		if !sameModuloSplitWhitespace(reply, parts) {
			t.Errorf("the %d parts are not the reply split at whitespace", len(parts))
		}
		s.expect(dee, len(got))
	})

	t.Run("status callbacks are taken and stored, a failed one logged with its reason", func(t *testing.T) {
		eli := newWAUser(t)
		s.answer("ping", testkit.Reply{Text: "pong"})
		s.say(t, wafake.UserMessage{From: eli, Text: "ping"})
		pong := s.waitSent(t, eli, 1)[0]
		for _, st := range []string{"sent", "delivered", "read"} {
			if err := s.wa.Status(pong.ID, st, 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.wa.WaitFor(s.ctx(t), func() bool { return s.wa.Pending() == 0 }); err != nil {
			t.Fatalf("status deliveries not answered 200: %v", err)
		}
		// A delivery is answered 200 after its statuses are stored.
		if n := countIn(t, s.db, "SELECT COUNT(*) FROM deliveries WHERE platform_msg_id = '"+pong.ID+"' AND status = 'read' AND status_at > 0"); n != 1 {
			t.Errorf("%d deliveries of %s are read, want 1", n, pong.ID)
		}
		if err := s.wa.Status(pong.ID, "failed", 131026); err != nil {
			t.Fatal(err)
		}
		if err := s.wa.WaitFor(s.ctx(t), func() bool { return s.wa.Pending() == 0 }); err != nil {
			t.Fatalf("status deliveries not answered 200: %v", err)
		}
		if err := waitLogLine(s.ctx(t), s.stderr, "level=WARN", pong.ID, "131026"); err != nil {
			t.Errorf("no WARN names the failed message and Meta's code: %v", err)
		}
		if n := countIn(t, s.db, "SELECT COUNT(*) FROM deliveries WHERE platform_msg_id = '"+pong.ID+"' AND status = 'failed' AND status_error LIKE '131026: %'"); n != 1 {
			t.Errorf("%d deliveries of %s failed with Meta's code, want 1", n, pong.ID)
		}
		s.expect(eli, 1)
	})

	s.finish(t)
}

// TestWhatsAppApprovalButton: the model calls a tool that needs approval;
// the question comes with reply buttons; a tap by another user (a forged
// button_reply: WhatsApp shows the buttons only to the asker) decides
// nothing; the asker's Approve runs the tool and the turn completes, once.
func TestWhatsAppApprovalButton(t *testing.T) {
	s := startWAServe(t, func(c *config.Config) {
		if err := os.MkdirAll(c.Skills.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(c.Skills.Dir, "housekeeping.yaml"), []byte(approvalSkill), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	ann, mallory := newWAUser(t), newWAUser(t)
	scriptCleanup(s.modelScript, "clean up tmp please")
	asked := s.say(t, wafake.UserMessage{From: ann, Text: "clean up tmp please"})
	q := s.waitSent(t, ann, 1)[0]
	if q.Type != "interactive" || !strings.Contains(q.Text, "cleanup") || len(q.Buttons) != 2 || q.Buttons[0].Title != "Approve" || q.Buttons[1].Title != "Deny" {
		t.Fatalf("question %+v; want an interactive message about cleanup with Approve and Deny", q)
	}
	if q.ReplyTo != "" && q.ReplyTo != asked {
		t.Errorf("the question replies to %s, want ann's message %s", q.ReplyTo, asked)
	}
	if n := s.requestsMentioning("Report cleaning"); n != 0 {
		t.Fatalf("the tool ran before approval (%d sub-calls)", n)
	}
	calls := s.model.Calls()

	forged := s.say(t, wafake.UserMessage{From: mallory, ButtonID: q.Buttons[0].ID, ButtonOn: q.ID})
	if err := s.wa.WaitTaken(s.ctx(t), forged); err != nil {
		t.Fatal(err)
	}
	tap := s.say(t, wafake.UserMessage{From: ann, ButtonID: q.Buttons[0].ID})
	var got []wafake.Message
	if err := s.wa.WaitFor(s.ctx(t), func() bool {
		got = s.wa.Sent(ann)
		return len(got) > 0 && got[len(got)-1].Text == "All clean now."
	}); err != nil {
		t.Fatalf("no answer after approval: %q: %v\n%s", waTexts(s.wa.Sent(ann)), err, s.stderr.String())
	}
	if err := s.wa.WaitTaken(s.ctx(t), tap); err != nil {
		t.Fatal(err)
	}
	if n := s.requestsMentioning("Report cleaning"); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
	if n := s.model.Calls() - calls; n != 2 {
		t.Errorf("model calls after the question = %d, want 2 (the tool's sub-call, the final answer)", n)
	}
	s.expect(ann, 2)
	s.finish(t)
	// mallory's tap approved nothing; whatever mallory was told, it was
	// not the answer.
	for _, m := range s.wa.Sent(mallory) {
		if m.Text == "All clean now." || m.Type == "interactive" {
			t.Errorf("mallory got %+v", m)
		}
	}
	t.Logf("mallory's tap got %q", waTexts(s.wa.Sent(mallory)))
}

// backdateInbox moves every stored message of user's chat back by d, as
// if it had come then: the adapter learns the 24-hour window of a chat it
// has not heard from since it started from the store.
func backdateInbox(t *testing.T, db, user string, d time.Duration) {
	t.Helper()
	st, err := store.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.DB().ExecContext(t.Context(), `UPDATE inbox SET received_at = received_at - ? WHERE channel = 'whatsapp' AND chat_key = ?`,
		d.Milliseconds(), user); err != nil {
		t.Fatal(err)
	}
}

// createDueReminder stores a one-shot reminder to user due now.
func createDueReminder(t *testing.T, db, user, text string) {
	t.Helper()
	st, err := store.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := time.Now().UTC().Truncate(time.Second)
	if _, err := st.CreateSchedule(t.Context(), store.Schedule{Name: "plants", Origin: store.OriginChat,
		Spec: "at " + at.Format("2006-01-02 15:04:05"), Timezone: "UTC", Kind: "reminder", Body: text,
		Channel: "whatsapp", ChatKey: user, ChatType: string(channels.DM), OwnerID: user, NextRunAt: &at}); err != nil {
		t.Fatal(err)
	}
}

// TestWhatsAppReminderOutsideWindow: a reminder falls due 25 hours after
// the user's last message. With templates.reminder it goes out as that
// template with the reminder's text; with outside_window: drop it is not
// sent, and an ERROR and a metric say so.
func TestWhatsAppReminderOutsideWindow(t *testing.T) {
	s := startWAServe(t)
	ann := newWAUser(t)
	s.answer("remind me about the plants", testkit.Reply{Text: "I will."})
	s.say(t, wafake.UserMessage{From: ann, Text: "remind me about the plants"})
	s.waitSent(t, ann, 1)
	s.stopOK(t)
	// A day and an hour pass, for the store and for Meta.
	backdateInbox(t, s.db, ann, 25*time.Hour)
	s.wa.SetLastUserMessage(ann, time.Now().Add(-25*time.Hour))
	createDueReminder(t, s.db, ann, "Water the plants.")
	s.start(t)
	got := s.waitSent(t, ann, 2)
	if r := got[1]; r.Type != "template" || r.Template != "reminder" || r.Language != "en" || !slices.Equal(r.Params, []string{"Water the plants."}) {
		t.Fatalf("the reminder went out as %+v; want the template reminder (en) with the text as its parameter", r)
	}
	// The adapter knew from the store that the window had closed: it did
	// not try free text first (Meta would refuse it, 131047).
	if n := s.wa.Tried(ann); n != 2 {
		t.Errorf("%d sends to ann were tried, want 2 (the answer, the template): a free-form send was tried outside the window", n)
	}
	s.expect(ann, 2)

	// Now with outside_window: drop.
	s.stopOK(t)
	config.Section[*whatsapp.Config](s.c).OutsideWindow = whatsapp.OutsideDrop
	if err := cfgfile.WriteFile(s.cfg, s.c); err != nil {
		t.Fatal(err)
	}
	createDueReminder(t, s.db, ann, "Feed the cat.")
	s.start(t)
	ctx := s.ctx(t)
	if err := waitLogLine(ctx, s.stderr, "level=ERROR", ann); err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, s.stderr.String())
	}
	line := ""
	for l := range strings.Lines(s.stderr.String()) {
		if strings.Contains(l, "level=ERROR") && strings.Contains(l, ann) {
			line = l
			break
		}
	}
	if !strings.Contains(line, "24-hour") {
		t.Errorf("the ERROR line does not give the reason (the 24-hour window): %s", line)
	}
	// A job's reminder is a direct send: its failure counts there.
	waitMetric(t, s.url, `switchboard_send_failures_total{channel="whatsapp"}`, 1)
	if got, tried := s.wa.Sent(ann), s.wa.Tried(ann); len(got) != 2 || tried != 2 {
		t.Errorf("ann got %q (%d sends tried), want nothing more, and nothing tried", waTexts(got), tried)
	}
	t.Logf("dropped with: %s", strings.TrimSpace(line))
	s.finish(t)
}

// waitMetric polls serve's /metrics at base until series (0 while absent)
// is at least want (metrics have no event to wait on).
func waitMetric(t *testing.T, base, series string, want float64) {
	t.Helper()
	ctx := waitCtx(t)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		_, body := (&faultServe{url: base}).get(t, "/metrics")
		got := 0.0
		if m := re.FindStringSubmatch(body); m != nil {
			got, _ = strconv.ParseFloat(m[1], 64)
		}
		if got >= want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s = %v, want %v", series, got, want)
		case <-tick.C:
		}
	}
}

// TestWhatsAppGraphOutageInRealTime: every Graph API call answers 503 for
// 45 s while three messages arrive from two users; during it nothing
// reaches them and every reply waits in the outbox; after it each message
// gets exactly one late reply, in order, and nothing is left pending (see
// runSendOutage).
func TestWhatsAppGraphOutageInRealTime(t *testing.T) {
	t.Parallel() // with the other long real-time tests
	s := startWAServe(t)
	ann, bob := newWAUser(t), newWAUser(t)
	runSendOutage(t, sendOutage{
		channel: "whatsapp", db: s.db, chats: [2]string{ann, bob}, users: [2]string{ann, bob},
		refuse:  func() func() { return s.wa.Outage(http.StatusServiceUnavailable) },
		refused: "sends",
		calls:   func() int { return s.wa.Calls("messages") },
		tried:   func() bool { return s.wa.Tried(ann) > 0 && s.wa.Tried(bob) > 0 },
		answer:  s.answer,
		say:     func(_, user, text string) { s.say(t, wafake.UserMessage{From: user, Text: text}) },
		sent:    func(user string) []string { return waTexts(s.wa.Sent(user)) },
		waitFor: s.wa.WaitFor,
		expect:  s.expect,
		finish:  s.finish,
		stderr:  s.stderr.String,
	}, 45*time.Second)
}
