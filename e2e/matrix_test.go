package e2e

// End-to-end tests of the Matrix channel against a real homeserver: a
// dendrite on 127.0.0.1 (internal/dendrite) → the adapter's /sync and
// sends through a recording proxy (mxNet) → `serve` → the router → the
// agent loop → the fake model. The users' side is mautrix as a real
// client, with its own Olm/Megolm for encrypted rooms (matrix_crypto_test.go,
// built with the goolm tag). Issue 35's acceptance: an encrypted DM
// answered once and readable by the user's client; a group room answered
// only on a mention; a thread answered in its thread; an invite from a
// stranger declined and nothing sent to the model; an approval by
// reaction; SIGKILL between the parts of a three-part reply (the room holds
// three parts: transaction ids); encryption across a restart. The chaos
// test has its Matrix part in chaos_test.go.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/matrix"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/dendrite"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// mxUser is a person on the homeserver: a mautrix client whose own /sync
// loop records the events of its rooms (decrypted, with crypto on) and the
// key requests sent to its devices.
type mxUser struct {
	dendrite.Account
	cli *mautrix.Client

	mu          sync.Mutex
	rooms       map[id.RoomID][]*event.Event // timeline events, in order of arrival
	keyRequests int                          // m.room_key_request to-device events received
	changed     waitfor.Changed
}

// newMXUser registers name on hs; with encrypted, its client runs Olm and
// Megolm (needs the goolm tag, else the test is skipped as Missing). Its
// sync loop runs until the test ends.
func newMXUser(t *testing.T, hs *dendrite.Server, name string, encrypted bool) *mxUser {
	t.Helper()
	u := &mxUser{Account: hs.Register(t, name), rooms: map[id.RoomID][]*event.Event{}}
	u.cli = hs.Client(t, u.Account)
	syncer := mautrix.NewDefaultSyncer()
	u.cli.Syncer = syncer
	u.cli.Store = mautrix.NewMemorySyncStore()
	if encrypted {
		startUserCrypto(t, u)
	} else {
		u.cli.StateStore = mautrix.NewMemoryStateStore()
		syncer.OnEvent(u.cli.StateStoreSyncHandler)
	}
	syncer.OnEvent(u.record)
	u.run(t)
	return u
}

// run starts u's sync loop, until the test ends.
func (u *mxUser) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = u.cli.SyncWithContext(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func (u *mxUser) record(_ context.Context, evt *event.Event) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case evt.Type == event.ToDeviceRoomKeyRequest:
		u.keyRequests++
	case evt.RoomID != "" && evt.Type != event.EventEncrypted:
		u.rooms[evt.RoomID] = append(u.rooms[evt.RoomID], evt)
	}
	u.changed.Notify()
}

// wait waits until cond holds over the user's events.
func (u *mxUser) wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := u.changed.Wait(waitCtx(t), func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		return cond()
	}); err != nil {
		t.Fatalf("%s waited for %s: %v", u.UserID, what, err)
	}
}

// messages are the room's m.room.message events from sender (edits
// included), with u.mu held or not.
func (u *mxUser) messagesLocked(room id.RoomID, sender id.UserID) []*event.Event {
	var out []*event.Event
	for _, e := range u.rooms[room] {
		if e.Type == event.EventMessage && e.Sender == sender {
			out = append(out, e)
		}
	}
	return out
}

func (u *mxUser) messages(room id.RoomID, sender id.UserID) []*event.Event {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.messagesLocked(room, sender)
}

// replies are the bodies of sender's messages in room that are not edits.
func (u *mxUser) replies(room id.RoomID, sender id.UserID) []string {
	var out []string
	for _, e := range u.messages(room, sender) {
		if c := e.Content.AsMessage(); c.RelatesTo == nil || c.RelatesTo.Type != event.RelReplace {
			out = append(out, c.Body)
		}
	}
	return out
}

// waitReplies waits until sender has sent n messages (not edits) in room.
func (u *mxUser) waitReplies(t *testing.T, room id.RoomID, sender id.UserID, n int) []string {
	t.Helper()
	u.wait(t, fmt.Sprintf("%d message(s) from %s", n, sender), func() bool {
		k := 0
		for _, e := range u.messagesLocked(room, sender) {
			if c := e.Content.AsMessage(); c.RelatesTo == nil || c.RelatesTo.Type != event.RelReplace {
				k++
			}
		}
		return k >= n
	})
	return u.replies(room, sender)
}

// membership is who's membership in room as u has seen it last.
func (u *mxUser) membershipLocked(room id.RoomID, who id.UserID) event.Membership {
	m := event.Membership("")
	for _, e := range u.rooms[room] {
		if e.Type == event.StateMember && e.StateKey != nil && *e.StateKey == who.String() {
			m = e.Content.AsMember().Membership
		}
	}
	return m
}

// waitMember waits until who's membership in room is m: seen in u's sync,
// or, when a second passes without it there, in the room's state on the
// server (dendrite under load has once left a join out of a member's sync
// stream for a minute, though the join had happened).
func (u *mxUser) waitMember(t *testing.T, room id.RoomID, who id.UserID, m event.Membership) {
	t.Helper()
	ctx := waitCtx(t)
	seen := func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		return u.membershipLocked(room, who) == m
	}
	for {
		sub, cancel := context.WithTimeout(ctx, time.Second)
		err := u.changed.Wait(sub, seen)
		cancel()
		if err == nil {
			return
		}
		var c event.MemberEventContent
		if u.cli.StateEvent(ctx, room, event.StateMember, who.String(), &c) == nil && c.Membership == m {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s waited for %s to be %s in %s: %v", u.UserID, who, m, room, context.Cause(ctx))
		}
	}
}

// say sends text to room (encrypted when the room is and u has crypto),
// with more set on the content; it returns the event id.
func (u *mxUser) say(t *testing.T, room id.RoomID, text string, more ...func(*event.MessageEventContent)) id.EventID {
	t.Helper()
	c := &event.MessageEventContent{MsgType: event.MsgText, Body: text}
	for _, m := range more {
		m(c)
	}
	resp, err := u.cli.SendMessageEvent(waitCtx(t), room, event.EventMessage, c)
	if err != nil {
		t.Fatalf("%s says %q: %v", u.UserID, text, err)
	}
	return resp.EventID
}

// newRoom creates a room of u's with invite invited: a DM (is_direct, two
// members) when dm, and encrypted when encrypted.
func (u *mxUser) newRoom(t *testing.T, dm, encrypted bool, invite ...id.UserID) id.RoomID {
	t.Helper()
	req := &mautrix.ReqCreateRoom{Preset: "private_chat", IsDirect: dm, Invite: invite}
	if encrypted {
		req.InitialState = append(req.InitialState, &event.Event{
			Type:    event.StateEncryption,
			Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}},
		})
	}
	resp, err := u.cli.CreateRoom(waitCtx(t), req)
	if err != nil {
		t.Fatalf("%s creates a room: %v", u.UserID, err)
	}
	return resp.RoomID
}

// react sends a reaction (m.annotation) with key to target.
func (u *mxUser) react(t *testing.T, room id.RoomID, target id.EventID, key string) {
	t.Helper()
	if _, err := u.cli.SendReaction(waitCtx(t), room, target, key); err != nil {
		t.Fatalf("%s reacts %s: %v", u.UserID, key, err)
	}
}

// mxNet is the bot's way to the homeserver: a proxy that records each
// request (method and path) and can hold the answer of one: that request
// reaches the homeserver, its answer never comes back (the moment a
// process dies after the homeserver took a send).
type mxNet struct {
	URL      string
	upstream string

	mu      sync.Mutex
	reqs    []string // "METHOD /path"
	hold    func(r *http.Request) bool
	held    chan struct{}
	changed waitfor.Changed
}

func newMXNet(t *testing.T, upstream string) *mxNet {
	t.Helper()
	n := &mxNet{upstream: upstream, held: make(chan struct{})}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := readAll(r)
		n.mu.Lock()
		n.reqs = append(n.reqs, r.Method+" "+r.URL.Path)
		cond := n.hold
		n.mu.Unlock()
		n.changed.Notify()
		hold := cond != nil && cond(r) && n.takeHold()
		resp, answer := forwardTo(r, body, n.upstream, r.Method == http.MethodPut || r.Method == http.MethodPost)
		if hold {
			close(n.held)
			select {
			case <-r.Context().Done():
			case <-release:
			}
			panic(http.ErrAbortHandler)
		}
		answerWith(w, resp, answer)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	n.URL = srv.URL
	return n
}

// takeHold clears the hold, and reports whether this caller took it.
func (n *mxNet) takeHold() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.hold == nil {
		return false
	}
	n.hold = nil
	return true
}

// holdAnswer holds the answer of the next request cond matches.
func (n *mxNet) holdAnswer(cond func(r *http.Request) bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.hold = cond
}

// requests are the requests so far whose "METHOD /path" contains part.
func (n *mxNet) requests(part string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, r := range n.reqs {
		if strings.Contains(r, part) {
			out = append(out, r)
		}
	}
	return out
}

// waitRequests waits until n requests contain part.
func (n *mxNet) waitRequests(ctx context.Context, part string, k int) error {
	return n.changed.Wait(ctx, func() bool { return len(n.requests(part)) >= k })
}

func readAll(r *http.Request) []byte {
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		k, err := r.Body.Read(buf)
		b.Write(buf[:k])
		if err != nil {
			return []byte(b.String())
		}
	}
}

// mxRig is a homeserver, the bot's account on it, a proxy between them,
// and the model.
type mxRig struct {
	hs    *dendrite.Server
	bot   dendrite.Account
	net   *mxNet
	model *testkit.FakeLLM
	*modelScript
	dir string
}

func newMXRig(t *testing.T) *mxRig {
	t.Helper()
	hs := dendrite.Start(t)
	r := &mxRig{hs: hs, bot: hs.Register(t, "bot"), model: testkit.NewFakeLLM(t), dir: t.TempDir()}
	r.modelScript = newModelScript(r.model)
	r.net = newMXNet(t, hs.URL)
	return r
}

// section enables channels.matrix for the bot through the proxy, admitting
// allow, with encryption as asked.
func (r *mxRig) section(encrypted bool, allow ...id.UserID) func(*config.Channels) {
	return func(c *config.Channels) {
		s := channels.SectionOf[*matrix.Config](c.Sections)
		s.Enabled, s.Homeserver, s.UserID = true, r.net.URL, r.bot.UserID.String()
		s.AccessToken, s.DeviceID = r.bot.AccessToken, r.bot.DeviceID.String()
		s.Encryption = encrypted
		s.PickleKey = "e2e-pickle-key-0123456789"
		s.AllowUsers = nil
		for _, u := range allow {
			s.AllowUsers = append(s.AllowUsers, u.String())
		}
	}
}

// config writes serve's configuration file; more changes it.
func (r *mxRig) config(t *testing.T, channel func(*config.Channels), more ...func(*config.Config)) string {
	t.Helper()
	c := modelConfig(r.model.URL)
	c.Store.Path, c.Skills.Dir = filepath.Join(r.dir, "switchboard.db"), filepath.Join(r.dir, "skills")
	c.Learning.Enabled = false
	c.HTTP.Listen = ""
	c.Log.Level = "debug"
	channel(&c.Channels)
	for _, m := range more {
		m(c)
	}
	return cfgfile.Write(t, c)
}

// syncs waits until the bot has polled /sync k times in all.
func (r *mxRig) syncs(ctx context.Context, k int) error {
	return r.net.waitRequests(ctx, "/sync", k)
}

// serve runs serve in this process on cfg, ready once the bot syncs.
func (r *mxRig) serve(t *testing.T, cfg string) *serveRun {
	t.Helper()
	k := len(r.net.requests("/sync"))
	return startServe(t, cfg, func(ctx context.Context) error { return r.syncs(ctx, k+1) })
}

// secrets the bot's log must not show.
func (r *mxRig) checkNoSecrets(t *testing.T, what, log string) {
	t.Helper()
	for name, s := range map[string]string{"access token": r.bot.AccessToken, "password": r.bot.Password, "pickle key": "e2e-pickle-key-0123456789", "API key": e2eAPIKey} {
		if strings.Contains(log, s) {
			t.Errorf("the bot's %s appears in %s", name, what)
		}
	}
}

// writeSkill writes a skill file into dir's skills folder.
func writeSkill(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "skills"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "skills", name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// mxInThread marks a message as in the thread of root.
func mxInThread(root id.EventID) func(*event.MessageEventContent) {
	return func(c *event.MessageEventContent) {
		c.RelatesTo = (&event.RelatesTo{}).SetThread(root, root)
	}
}

// mentioning marks a message as mentioning who (m.mentions).
func mentioning(who id.UserID) func(*event.MessageEventContent) {
	return func(c *event.MessageEventContent) {
		c.Mentions = &event.Mentions{UserIDs: []id.UserID{who}}
	}
}

// TestMatrix is issue 35's acceptance through serve against dendrite: one
// serve, users of their own per subtest.
func TestMatrix(t *testing.T) {
	r := newMXRig(t)
	alice := newMXUser(t, r.hs, "alice", false)
	bob := newMXUser(t, r.hs, "bob", false)
	mallory := newMXUser(t, r.hs, "mallory", false)
	var carol *mxUser // with Olm/Megolm
	if mxCryptoBuilt {
		carol = newMXUser(t, r.hs, "carol", true)
	}
	allow := []id.UserID{alice.UserID, bob.UserID, "@carol:" + dendrite.ServerName}
	writeSkill(t, r.dir, "housekeeping.yaml", approvalSkill)
	serve := r.serve(t, r.config(t, r.section(mxCryptoBuilt, allow...)))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serve's log:\n%s", serve.stderr.String())
		}
	})
	bot := r.bot.UserID

	t.Run("an encrypted DM is answered once, readable by the user's client", func(t *testing.T) {
		if carol == nil {
			startUserCrypto(t, nil) // Missing: built without goolm
		}
		room := carol.newRoom(t, true, true, bot)
		carol.waitMember(t, room, bot, event.MembershipJoin)
		r.answer("Hello in secret.", testkit.Reply{Text: "Hello carol, **encrypted** too."})
		calls := r.model.Calls()
		carol.say(t, room, "Hello in secret.")
		got := carol.waitReplies(t, room, bot, 1)
		if got[0] != "Hello carol, **encrypted** too." {
			t.Errorf("carol read %q, want the model's answer", got)
		}
		for _, e := range carol.messages(room, bot) {
			if !e.Mautrix.WasEncrypted {
				t.Errorf("the bot's event %s in an encrypted room was not encrypted", e.ID)
			}
		}
		if html := carol.messages(room, bot)[0].Content.AsMessage().FormattedBody; !strings.Contains(html, "<strong>encrypted</strong>") {
			t.Errorf("formatted body %q, want the Markdown as HTML", html)
		}
		if n := r.model.Calls() - calls; n != 1 {
			t.Errorf("model calls = %d, want 1", n)
		}
		t.Cleanup(func() { // after serve stopped: still one answer
			if got := carol.replies(room, bot); len(got) != 1 {
				t.Errorf("after shutdown, the encrypted DM holds %d answers, want 1: %q", len(got), got)
			}
		})
	})

	t.Run("a group room is answered only on a mention", func(t *testing.T) {
		room := alice.newRoom(t, false, false, bot, bob.UserID)
		if _, err := bob.cli.JoinRoomByID(waitCtx(t), room); err != nil {
			t.Fatal(err)
		}
		alice.waitMember(t, room, bob.UserID, event.MembershipJoin)
		alice.waitMember(t, room, bot, event.MembershipJoin)
		calls := r.model.Calls()
		alice.say(t, room, "Just chatting among us humans.")
		// The mention is m.mentions and the bot's name, which the adapter
		// takes off the text.
		r.answer("what is on today?", testkit.Reply{Text: "Nothing much today."})
		alice.say(t, room, "bot, what is on today?", mentioning(bot))
		if got := alice.waitReplies(t, room, bot, 1); got[0] != "Nothing much today." {
			t.Errorf("the room holds %q from the bot, want the answer to the mention", got)
		}
		if n := r.model.Calls() - calls; n != 1 {
			t.Errorf("model calls = %d, want 1 (only the mention)", n)
		}
		for _, req := range r.model.Requests() {
			if u := userTexts(req); len(u) > 0 && u[len(u)-1] == "Just chatting among us humans." {
				t.Errorf("the model was asked to answer a message that mentions no one")
			}
		}
	})

	t.Run("a thread is answered in its thread", func(t *testing.T) {
		room := alice.newRoom(t, true, false, bot)
		alice.waitMember(t, room, bot, event.MembershipJoin)
		r.answer("Let us plan the trip.", testkit.Reply{Text: "Sure, where to?"})
		root := alice.say(t, room, "Let us plan the trip.")
		alice.waitReplies(t, room, bot, 1)
		r.answer("To the sea, in the thread.", testkit.Reply{Text: "The sea it is."})
		alice.say(t, room, "To the sea, in the thread.", mxInThread(root))
		got := alice.waitReplies(t, room, bot, 2)
		if got[1] != "The sea it is." {
			t.Fatalf("the room holds %q from the bot, want the thread's answer second", got)
		}
		last := alice.messages(room, bot)
		rel := last[len(last)-1].Content.AsMessage().RelatesTo
		if rel == nil || rel.Type != event.RelThread || rel.EventID != root {
			t.Errorf("the answer relates to %+v, want the thread of %s", rel, root)
		}
	})

	t.Run("an invite from a stranger is declined and nothing reaches the model", func(t *testing.T) {
		calls := r.model.Calls()
		room := mallory.newRoom(t, true, false, bot)
		mallory.waitMember(t, room, bot, event.MembershipLeave)
		if n := r.model.Calls() - calls; n != 0 {
			t.Errorf("model calls = %d after a stranger's invite, want 0", n)
		}
		if !strings.Contains(serve.stderr.String(), "declined an invite") {
			t.Errorf("serve did not log the declined invite:\n%s", serve.stderr.String())
		}
	})

	t.Run("an approval by reaction, only the asker's", func(t *testing.T) {
		room := alice.newRoom(t, false, false, bot, bob.UserID)
		if _, err := bob.cli.JoinRoomByID(waitCtx(t), room); err != nil {
			t.Fatal(err)
		}
		alice.waitMember(t, room, bob.UserID, event.MembershipJoin)
		alice.waitMember(t, room, bot, event.MembershipJoin)
		scriptCleanup(r.modelScript, "clean up tmp please")
		alice.say(t, room, "bot, clean up tmp please", mentioning(bot))
		alice.waitReplies(t, room, bot, 1)
		q := alice.messages(room, bot)[0]
		if body := q.Content.AsMessage().Body; !strings.Contains(body, "cleanup") {
			t.Fatalf("the bot's first message %q is not the approval question", body)
		}
		if n := r.requestsMentioning("Report cleaning the tmp folder."); n != 0 {
			t.Fatalf("the tool ran before the approval (%d sub-calls)", n)
		}
		bob.react(t, room, q.ID, "❌") // not the asker: no say
		got := alice.waitReplies(t, room, bot, 2)
		if !strings.Contains(got[1], "Only "+alice.UserID.String()+" can approve") {
			t.Errorf("the bot answered bob's reaction with %q, want that only the asker decides", got[1])
		}
		alice.react(t, room, q.ID, "✅")
		got = alice.waitReplies(t, room, bot, 3)
		if got[2] != "All clean now." {
			t.Errorf("the room holds %q from the bot, want the answer after the approval last", got)
		}
		if n := r.requestsMentioning("Report cleaning the tmp folder."); n != 1 {
			t.Errorf("the tool ran %d times, want once", n)
		}
	})

	serve.stopOK(t)
	r.checkNoSecrets(t, "serve's log", serve.stderr.String())
	r.checkAllAsked(t)
}

// TestMatrixCrashBetweenParts: serve is killed (SIGKILL) after the
// homeserver took the third part of a three-part reply and before its
// answer reached serve; restarted on the same database, it sends the third
// part again with the same transaction id, and the room holds exactly
// three parts, once each.
func TestMatrixCrashBetweenParts(t *testing.T) {
	r := newMXRig(t)
	alice := newMXUser(t, r.hs, "alice", false)
	rig := newChildRig(t, r.model, r.config(t, r.section(false, alice.UserID), func(c *config.Config) {
		// Previews off: a preview would be one more event and move the
		// kill off the third part; this test is about parts.
		channels.SectionOf[*matrix.Config](c.Channels.Sections).StreamPreview = false
		c.Channels.ReplyMaxChars = 40_000 // three Matrix parts (12,000 each) need more than the 16,000 default
	}))
	const send = "/send/m.room.message/"
	r.net.holdAnswer(func(req *http.Request) bool {
		return req.Method == http.MethodPut && strings.Contains(req.URL.Path, send) && len(r.net.requests(send)) == 3
	})
	reply := paragraphs(30000) // three parts of at most 12,000
	r.model.Push(testkit.Reply{Text: reply})

	c1 := rig.start(t)
	room := alice.newRoom(t, true, false, r.bot.UserID)
	alice.waitMember(t, room, r.bot.UserID, event.MembershipJoin)
	alice.say(t, room, "Tell me everything.")
	select {
	case <-r.net.held:
	case <-waitCtx(t).Done():
		var lens []int
		for _, b := range alice.replies(room, r.bot.UserID) {
			lens = append(lens, len(b))
		}
		t.Fatalf("the third part never went out; sends: %q; alice has parts of %v bytes\nstderr:\n%s", r.net.requests(send), lens, c1.stderr.String())
	}
	// The homeserver has the third part; alice sees it before the kill.
	alice.waitReplies(t, room, r.bot.UserID, 3)
	c1.crash(t)

	c2 := rig.start(t)
	if err := r.net.waitRequests(waitCtx(t), send, 4); err != nil {
		t.Fatalf("the restarted serve did not send the third part again: %v\nstderr:\n%s", err, c2.stderr.String())
	}
	c2.stop(t)
	r.checkNoSecrets(t, "the child's log", c2.stderr.String())
	sends := r.net.requests(send)
	if len(sends) != 4 || sends[3] != sends[2] {
		t.Errorf("sends %q: want 4, the last again with the third's transaction id", sends)
	}
	got := alice.replies(room, r.bot.UserID)
	if len(got) != 3 || got[0] == got[1] || got[1] == got[2] || strings.Join(got, "\n\n") != reply {
		t.Errorf("the room holds %d messages from the bot, want the 3 parts once: %.60q", len(got), got)
	}
	if n := r.model.Calls(); n != 1 {
		t.Errorf("model calls = %d, want 1 (the resumed turn delivers the stored answer)", n)
	}
}

// TestMatrixEncryptionAcrossRestart: the bot reads an encrypted room,
// serve is killed (SIGKILL) and started again, and it goes on reading the
// room with the Megolm session it kept: no key request from the bot, for
// that session or any, and one device.
func TestMatrixEncryptionAcrossRestart(t *testing.T) {
	if !mxCryptoBuilt {
		startUserCrypto(t, nil) // Missing: built without goolm
	}
	r := newMXRig(t)
	carol := newMXUser(t, r.hs, "carol", true)
	rig := newChildRig(t, r.model, r.config(t, r.section(true, carol.UserID)))
	bot := r.bot.UserID

	c1 := rig.start(t)
	room := carol.newRoom(t, true, true, bot)
	carol.waitMember(t, room, bot, event.MembershipJoin)
	r.answer("First, in secret.", testkit.Reply{Text: "First answer."})
	carol.say(t, room, "First, in secret.")
	carol.waitReplies(t, room, bot, 1)
	c1.crash(t)

	keyRequests := len(r.net.requests("/sendToDevice/m.room_key_request/"))
	syncs := len(r.net.requests("/sync"))
	c2 := rig.start(t)
	if err := r.syncs(waitCtx(t), syncs+1); err != nil {
		t.Fatal(err)
	}
	r.answer("Second, after the restart.", testkit.Reply{Text: "Second answer."})
	carol.say(t, room, "Second, after the restart.")
	got := carol.waitReplies(t, room, bot, 2)
	c2.stop(t)
	r.checkNoSecrets(t, "the child's log", c2.stderr.String())
	if got[1] != "Second answer." {
		t.Errorf("carol read %q, want the second answer after the restart", got)
	}
	if n := len(r.net.requests("/sendToDevice/m.room_key_request/")); n != keyRequests || n != 0 {
		t.Errorf("the bot sent %d key requests (%d before the restart), want none: it kept its sessions", n, keyRequests)
	}
	carol.mu.Lock()
	if carol.keyRequests != 0 {
		t.Errorf("carol's device got %d key requests, want none", carol.keyRequests)
	}
	carol.mu.Unlock()
	devs, err := carol.cli.QueryKeys(waitCtx(t), &mautrix.ReqQueryKeys{DeviceKeys: mautrix.DeviceKeysRequest{bot: mautrix.DeviceIDList{}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(devs.DeviceKeys[bot]); n != 1 {
		t.Errorf("the bot has %d devices with keys, want 1 (the same across the restart)", n)
	}
	if strings.Contains(c2.stderr.String(), "could not be decrypted") {
		t.Errorf("the restarted serve could not decrypt:\n%s", c2.stderr.String())
	}
}

// TestMatrixGapWhileDown: while serve is down, a user writes more messages
// than a /sync timeline holds; started again, the bot's first sync is
// limited, and the messages it left out are read by /messages: every one
// reaches the model.
func TestMatrixGapWhileDown(t *testing.T) {
	r := newMXRig(t)
	alice := newMXUser(t, r.hs, "alice", false)
	rig := newChildRig(t, r.model, r.config(t, r.section(false, alice.UserID)))
	r.model.SetDefault(&testkit.Reply{Text: "Noted."})

	c1 := rig.start(t)
	room := alice.newRoom(t, true, false, r.bot.UserID)
	alice.waitMember(t, room, r.bot.UserID, event.MembershipJoin)
	alice.say(t, room, "Before the gap.")
	alice.waitReplies(t, room, r.bot.UserID, 1)
	c1.crash(t)

	const n = 45 // more than a sync's timeline (dendrite's default limit: 20)
	for i := range n {
		alice.say(t, room, fmt.Sprintf("Gap message %d.", i))
	}
	c2 := rig.start(t)
	defer c2.stop(t)
	missing := func() []int {
		var out []int
		for i := range n {
			if r.requestsMentioning(fmt.Sprintf("Gap message %d.", i)) == 0 {
				out = append(out, i)
			}
		}
		return out
	}
	if err := waitfor.Poll(waitCtx(t), 50*time.Millisecond, func() bool { return len(missing()) == 0 }); err != nil {
		t.Fatalf("messages %v never reached the model\nstderr:\n%s", missing(), c2.stderr.String())
	}
	if len(r.net.requests("/messages")) == 0 {
		t.Errorf("the restarted bot read no /messages: the gap was not filled from the history")
	}
}
