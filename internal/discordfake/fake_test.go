package discordfake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// client is a bare gateway client that speaks the protocol by hand.
type client struct {
	t  *testing.T
	ws *websocket.Conn
}

func dial(t *testing.T, f *Fake) *client {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(f.GatewayURL()+"?v=9&encoding=json", nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	c := &client{t: t, ws: ws}
	if hello := c.read(); hello.Op != 10 {
		t.Fatalf("first frame op = %d, want 10", hello.Op)
	}
	return c
}

func (c *client) read() frame {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	var fr frame
	if err := c.ws.ReadJSON(&fr); err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return fr
}

func (c *client) write(op int, d any) {
	c.t.Helper()
	if err := c.ws.WriteJSON(map[string]any{"op": op, "d": d}); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func TestGatewayIdentifyDispatchDropResume(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	c := dial(t, f)

	c.write(1, nil)
	if fr := c.read(); fr.Op != 11 {
		t.Fatalf("heartbeat answer op = %d, want 11", fr.Op)
	}
	c.write(2, map[string]any{"token": "Bot " + f.Token, "intents": 37377})
	ready := c.read()
	var rd struct {
		SessionID string `json:"session_id"`
		Resume    string `json:"resume_gateway_url"`
		User      User   `json:"user"`
	}
	if err := json.Unmarshal(ready.D, &rd); err != nil || ready.T != "READY" {
		t.Fatalf("ready = %+v (%v)", ready, err)
	}
	if rd.User.ID != f.Bot.ID || rd.SessionID == "" || rd.Resume != f.GatewayURL() {
		t.Fatalf("ready data = %+v", rd)
	}
	id, err := f.WaitIdentify(ctx, 1)
	if err != nil || id.Intents != 37377 {
		t.Fatalf("identify = %+v, %v", id, err)
	}

	m1 := f.MessageCreate("c1", "", "u1", "alice", "one")
	s1 := f.Dispatch("MESSAGE_CREATE", m1)
	if fr := c.read(); fr.T != "MESSAGE_CREATE" || fr.S != s1 {
		t.Fatalf("got %s seq %d, want MESSAGE_CREATE seq %d", fr.T, fr.S, s1)
	}

	f.DropConnection()
	if f.Connected() {
		t.Fatal("still connected after drop")
	}
	s2 := f.Dispatch("MESSAGE_CREATE", f.MessageCreate("c1", "", "u1", "alice", "two"))
	s3 := f.Dispatch("MESSAGE_CREATE", f.MessageCreate("c1", "", "u1", "alice", "three"))

	// A stale session is refused with op 9.
	c2 := dial(t, f)
	c2.write(6, map[string]any{"token": "Bot " + f.Token, "session_id": "nope", "seq": s1})
	if fr := c2.read(); fr.Op != 9 {
		t.Fatalf("resume of unknown session: op %d, want 9", fr.Op)
	}

	c3 := dial(t, f)
	c3.write(6, map[string]any{"token": "Bot " + f.Token, "session_id": rd.SessionID, "seq": s1})
	for _, want := range []int64{s2, s3} {
		if fr := c3.read(); fr.T != "MESSAGE_CREATE" || fr.S != want {
			t.Fatalf("replay: got %s seq %d, want MESSAGE_CREATE seq %d", fr.T, fr.S, want)
		}
	}
	if fr := c3.read(); fr.T != "RESUMED" || fr.S <= s3 {
		t.Fatalf("after replay: got %s seq %d, want RESUMED after %d", fr.T, fr.S, s3)
	}
	r, err := f.WaitResume(ctx, 2)
	if err != nil || r.Seq != s1 || r.SessionID != rd.SessionID {
		t.Fatalf("resume = %+v, %v", r, err)
	}

	// Live again: dispatches flow directly; op 7 asks the client to move.
	s4 := f.Dispatch("MESSAGE_CREATE", f.MessageCreate("c1", "", "u1", "alice", "four"))
	if fr := c3.read(); fr.S != s4 {
		t.Fatalf("after resume: seq %d, want %d", fr.S, s4)
	}
	f.Reconnect()
	if fr := c3.read(); fr.Op != 7 {
		t.Fatalf("reconnect: op %d, want 7", fr.Op)
	}
}

func TestGatewayRejectsBadToken(t *testing.T) {
	f := New(t)
	c := dial(t, f)
	c.write(2, map[string]any{"token": "Bot wrong", "intents": 1})
	_ = c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := c.ws.ReadMessage()
	if !websocket.IsCloseError(err, 4004) {
		t.Fatalf("err = %v, want close 4004", err)
	}
	if f.Identifies() != 0 {
		t.Fatalf("identifies = %d, want 0", f.Identifies())
	}
}

func post(t *testing.T, f *Fake, path, contentType string, body io.Reader) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.APIBase()+path, body)
	req.Header.Set("Authorization", "Bot "+f.Token)
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestCreateMessage(t *testing.T) {
	f := New(t)
	f.EchoSent = false

	resp, body := post(t, f, "/channels/c1/messages", "application/json", strings.NewReader(`{"content":"`+strings.Repeat("é", 2001)+`"}`))
	if resp.StatusCode != 400 || !strings.Contains(body, "50035") {
		t.Fatalf("2001 chars: %d %s, want 400 50035", resp.StatusCode, body)
	}
	resp, _ = post(t, f, "/channels/c1/messages", "application/json", strings.NewReader(`{"content":"`+strings.Repeat("é", 2000)+`"}`))
	if resp.StatusCode != 200 {
		t.Fatalf("2000 chars: %d, want 200", resp.StatusCode)
	}

	f.FailNext(RouteCreateMessage, 429, RateLimitBody(0.5, false))
	resp, body = post(t, f, "/channels/c1/messages", "application/json", strings.NewReader(`{"content":"hi"}`))
	if resp.StatusCode != 429 || !strings.Contains(body, `"retry_after":0.5`) {
		t.Fatalf("injected: %d %s", resp.StatusCode, body)
	}

	// enforce_nonce makes a retry after a lost response idempotent.
	f.FailNextAfterCommit(RouteCreateMessage, 500, ErrorBody(0, "500: Internal Server Error"))
	msg := `{"content":"once","nonce":"n-1","enforce_nonce":true,"message_reference":{"message_id":"42"}}`
	if resp, _ = post(t, f, "/channels/c1/messages", "application/json", strings.NewReader(msg)); resp.StatusCode != 500 {
		t.Fatalf("after commit: %d, want 500", resp.StatusCode)
	}
	if resp, _ = post(t, f, "/channels/c1/messages", "application/json", strings.NewReader(msg)); resp.StatusCode != 200 {
		t.Fatalf("retry: %d, want 200", resp.StatusCode)
	}
	sent := f.SentTo("c1")
	if len(sent) != 2 || sent[1].Content != "once" || sent[1].Reference == nil || sent[1].Reference.MessageID != "42" {
		t.Fatalf("sent = %+v, want the 2000-char message and one 'once' reply", sent)
	}
	if got := f.Requests(RouteCreateMessage); got != 5 {
		t.Fatalf("requests = %d, want 5", got)
	}

	// Multipart upload.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	pj, _ := mw.CreateFormField("payload_json")
	pj.Write([]byte(`{"content":"file"}`))
	fw, _ := mw.CreateFormFile("files[0]", "a.txt")
	fw.Write([]byte("hello"))
	mw.Close()
	if resp, body = post(t, f, "/channels/c2/messages", mw.FormDataContentType(), &buf); resp.StatusCode != 200 {
		t.Fatalf("multipart: %d %s", resp.StatusCode, body)
	}
	if s := f.SentTo("c2"); len(s) != 1 || len(s[0].Files) != 1 || string(s[0].Files[0].Data) != "hello" || s[0].Files[0].Name != "a.txt" {
		t.Fatalf("multipart sent = %+v", s)
	}

	// Wrong token.
	req, _ := http.NewRequest(http.MethodPost, f.APIBase()+"/channels/c1/typing", nil)
	req.Header.Set("Authorization", "Bot nope")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || len(f.Typing()) != 0 {
		t.Fatalf("bad token: %d, typing %v", resp.StatusCode, f.Typing())
	}
}

// enforce_nonce as Discord documents it: a nonce is checked for uniqueness
// in the past few minutes, and another message by the same author with
// that nonce is returned instead of a new one (in any channel: the author
// is the scope); without enforce_nonce a nonce changes nothing; a nonce
// has at most 25 characters.
func TestEnforceNonce(t *testing.T) {
	f := New(t)
	f.EchoSent = false
	send := func(channel, body string) (int, string) {
		t.Helper()
		resp, b := post(t, f, "/channels/"+channel+"/messages", "application/json", strings.NewReader(body))
		var m struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal([]byte(b), &m)
		return resp.StatusCode, m.ID
	}
	_, first := send("c1", `{"content":"one","nonce":"n-1","enforce_nonce":true}`)
	for _, c := range []struct {
		name, channel, body string
		same                bool
	}{
		{"resent", "c1", `{"content":"one","nonce":"n-1","enforce_nonce":true}`, true},
		{"resent with another text", "c1", `{"content":"changed","nonce":"n-1","enforce_nonce":true}`, true},
		{"the same author in another channel", "c2", `{"content":"one","nonce":"n-1","enforce_nonce":true}`, true},
		{"without enforce_nonce", "c1", `{"content":"one","nonce":"n-1"}`, false},
		{"another nonce", "c1", `{"content":"one","nonce":"n-2","enforce_nonce":true}`, false},
	} {
		code, id := send(c.channel, c.body)
		if code != 200 || (id == first) != c.same {
			t.Errorf("%s: %d, id %s (first %s); want 200 and the same message: %v", c.name, code, id, first, c.same)
		}
	}
	if got := len(f.Sent()); got != 3 {
		t.Errorf("%d messages created, want 3", got)
	}
	if code, _ := send("c1", `{"content":"long","nonce":"`+strings.Repeat("x", 26)+`","enforce_nonce":true}`); code != 400 {
		t.Errorf("a 26-character nonce: %d, want 400", code)
	}
	// Past the window the nonce is free again. (The window is a nanosecond:
	// an HTTP round trip is longer.)
	f.mu.Lock()
	f.NonceWindow = time.Nanosecond
	f.mu.Unlock()
	if _, id := send("c1", `{"content":"one","nonce":"n-1","enforce_nonce":true}`); id == first || id == "" {
		t.Errorf("a nonce past the window returned %q, want a new message", id)
	}
}

func TestEchoAndAttachments(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	c := dial(t, f)
	c.write(2, map[string]any{"token": "Bot " + f.Token, "intents": 1})
	c.read() // READY
	f.AddChannel("g-chan", ChannelTypeGuildText, "g1", "")

	if resp, body := post(t, f, "/channels/g-chan/messages", "application/json", strings.NewReader(`{"content":"hello"}`)); resp.StatusCode != 200 {
		t.Fatalf("send: %d %s", resp.StatusCode, body)
	}
	echo := c.read()
	var m Message
	if err := json.Unmarshal(echo.D, &m); err != nil || echo.T != "MESSAGE_CREATE" || m.Author.ID != f.Bot.ID || m.GuildID != "g1" || m.Content != "hello" {
		t.Fatalf("echo = %s %s (%v)", echo.T, echo.D, err)
	}

	a := f.AddFile("cat.png", "image/png", []byte("png-bytes"))
	if !strings.HasPrefix(a.URL, CDNBase+"/attachments/") || a.Size != 9 {
		t.Fatalf("attachment = %+v", a)
	}
	resp, err := http.Get(f.URL + strings.TrimPrefix(a.URL, CDNBase))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "png-bytes" {
		t.Fatalf("served %q", b)
	}

	f.AddUser(User{ID: "u2", Username: "bob"})
	mc := f.MessageCreate("g-chan", "g1", "u1", "alice", "<@"+f.Bot.ID+"> hi <@!u2> <@u9>", WithAttachments(a))
	if len(mc.Mentions) != 2 || mc.Mentions[0].ID != f.Bot.ID || mc.Mentions[1].Username != "bob" || mc.Member == nil {
		t.Fatalf("mentions = %+v", mc.Mentions)
	}
	if err := f.WaitFor(ctx, func() bool { return len(f.Sent()) == 1 }); err != nil {
		t.Fatal(err)
	}
}

func TestButtonsAndClick(t *testing.T) {
	f := New(t)
	c := dial(t, f)
	c.write(2, map[string]any{"token": "Bot " + f.Token, "intents": 1})
	c.read() // READY
	f.AddChannel("g-chan", ChannelTypeGuildText, "g1", "")

	row := func(buttons ...string) string {
		return `{"type":1,"components":[` + strings.Join(buttons, ",") + `]}`
	}
	button := func(style int, label, id string) string {
		b, _ := json.Marshal(Component{Type: ComponentButton, Style: style, Label: label, CustomID: id})
		return string(b)
	}
	bad := []struct{ name, components string }{
		{"custom_id over 100", `[` + row(button(1, "Go", strings.Repeat("x", 101))) + `]`},
		{"custom_id twice", `[` + row(button(1, "Yes", "go"), button(2, "Sure", "go")) + `]`},
		{"six in a row", `[` + row(button(1, "1", "a"), button(1, "2", "b"), button(1, "3", "c"), button(1, "4", "d"), button(1, "5", "e"), button(1, "6", "f")) + `]`},
		{"button outside a row", `[` + button(1, "Go", "go") + `]`},
		{"label over 80", `[` + row(button(1, strings.Repeat("l", 81), "go")) + `]`},
	}
	for _, tt := range bad {
		resp, body := post(t, f, "/channels/g-chan/messages", "application/json", strings.NewReader(`{"content":"q","components":`+tt.components+`}`))
		if resp.StatusCode != 400 || !strings.Contains(body, "50035") {
			t.Errorf("%s: %d %s, want 400 50035", tt.name, resp.StatusCode, body)
		}
	}
	if n := len(f.Sent()); n != 0 {
		t.Fatalf("recorded %d refused messages", n)
	}

	components := `[` + row(button(ButtonPrimary, "Approve", "approve:1"), button(ButtonDanger, "Deny", "deny:1")) + `]`
	resp, body := post(t, f, "/channels/g-chan/messages", "application/json", strings.NewReader(`{"content":"Deploy?","components":`+components+`}`))
	if resp.StatusCode != 200 {
		t.Fatalf("send: %d %s", resp.StatusCode, body)
	}
	sent := f.Sent()[0]
	want := [][]Component{{
		{Type: ComponentButton, Style: ButtonPrimary, Label: "Approve", CustomID: "approve:1"},
		{Type: ComponentButton, Style: ButtonDanger, Label: "Deny", CustomID: "deny:1"},
	}}
	if got := sent.Buttons(); !reflect.DeepEqual(got, want) {
		t.Errorf("Buttons() = %+v, want %+v", got, want)
	}
	var echo Message
	if fr := c.read(); fr.T != "MESSAGE_CREATE" || json.Unmarshal(fr.D, &echo) != nil || len(echo.Components) != 1 {
		t.Errorf("echo = %s %s, want the message with its components", fr.T, fr.D)
	}
	// Buttons alone make a message.
	if resp, body := post(t, f, "/channels/g-chan/messages", "application/json", strings.NewReader(`{"components":`+components+`}`)); resp.StatusCode != 200 {
		t.Errorf("components only: %d %s", resp.StatusCode, body)
	}
	c.read() // its echo

	ic := f.ClickButton("g-chan", "g1", "u1", "alice", sent.ID, "deny:1")
	fr := c.read()
	var got struct {
		ID   string `json:"id"`
		Type int    `json:"type"`
		Data struct {
			CustomID      string `json:"custom_id"`
			ComponentType int    `json:"component_type"`
		} `json:"data"`
		Member  struct{ User User } `json:"member"`
		Token   string              `json:"token"`
		Message Message             `json:"message"`
	}
	if fr.T != "INTERACTION_CREATE" || json.Unmarshal(fr.D, &got) != nil {
		t.Fatalf("dispatch = %s %s", fr.T, fr.D)
	}
	if got.ID != ic.ID || got.Type != 3 || got.Data.CustomID != "deny:1" || got.Data.ComponentType != 2 ||
		got.Member.User.ID != "u1" || got.Token != ic.Token || got.Message.ID != sent.ID || got.Message.Content != "Deploy?" ||
		got.Message.Author.ID != f.Bot.ID || len(got.Message.Components) != 1 {
		t.Errorf("interaction = %s", fr.D)
	}

	callback := func(id, token string, typ int) (*http.Response, string) {
		return post(t, f, "/interactions/"+id+"/"+token+"/callback", "application/json", strings.NewReader(`{"type":`+strconv.Itoa(typ)+`}`))
	}
	if resp, body := callback(ic.ID, ic.Token, 6); resp.StatusCode != 204 {
		t.Fatalf("deferred update: %d %s", resp.StatusCode, body)
	}
	if resp, body := callback(ic.ID, ic.Token, 6); resp.StatusCode != 400 || !strings.Contains(body, "40060") {
		t.Errorf("second answer: %d %s, want 400 40060", resp.StatusCode, body)
	}
	if resp, body := callback("123", "nope", 6); resp.StatusCode != 404 || !strings.Contains(body, "10062") {
		t.Errorf("unknown interaction: %d %s, want 404 10062", resp.StatusCode, body)
	}
	cmd := f.SlashCommand("g-chan", "g1", "u1", "alice", "new")
	if resp, _ := callback(cmd.ID, cmd.Token, 6); resp.StatusCode != 400 {
		t.Errorf("deferred update for a slash command: %d, want 400", resp.StatusCode)
	}
	if r := f.InteractionResponses(); len(r) != 1 || r[0] != (InteractionResponse{InteractionID: ic.ID, Token: ic.Token, Type: 6}) {
		t.Errorf("responses = %+v, want one deferred update for %s", r, ic.ID)
	}
}

func TestChannelHistory(t *testing.T) {
	f := New(t)
	f.AddChannel("c1", ChannelTypeGuildText, "g1", "")
	var ids []string
	for i := range 5 {
		m := f.MessageCreate("c1", "g1", "u1", "alice", "m"+strconv.Itoa(i))
		if i%2 == 0 {
			f.Dispatch("MESSAGE_CREATE", m) // no session: queued, then dropped
		} else {
			f.Post(m)
		}
		ids = append(ids, m.ID)
	}
	f.Dispatch("MESSAGE_CREATE", f.MessageCreate("c2", "g1", "u1", "alice", "other channel"))

	get := func(query string) (int, []Message) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, f.APIBase()+"/channels/c1/messages"+query, nil)
		req.Header.Set("Authorization", "Bot "+f.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ms []Message
		_ = json.NewDecoder(resp.Body).Decode(&ms)
		return resp.StatusCode, ms
	}
	idsOf := func(ms []Message) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ID)
			if m.GuildID != "" || m.Member != nil {
				t.Errorf("message %s has guild_id %q / member %v; Discord's REST messages have neither", m.ID, m.GuildID, m.Member)
			}
		}
		return out
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{ids[4], ids[3], ids[2], ids[1], ids[0]}},
		{"?after=" + ids[1] + "&limit=2", []string{ids[3], ids[2]}}, // the oldest after, newest first
		{"?after=" + ids[4], nil},
		{"?limit=2", []string{ids[4], ids[3]}},
		{"?before=" + ids[2], []string{ids[1], ids[0]}},
	} {
		status, ms := get(tc.query)
		if got := idsOf(ms); status != http.StatusOK || !slices.Equal(got, tc.want) {
			t.Errorf("GET messages%s = %d %v, want 200 %v", tc.query, status, got, tc.want)
		}
	}
	if status, _ := get("?limit=101"); status != http.StatusBadRequest {
		t.Errorf("limit=101: status %d, want 400", status)
	}
}

// guildOnShard returns a guild id (a snowflake) whose events go to shard
// of count: (id >> 22) % count == shard.
func guildOnShard(t *testing.T, n, shard, count int) string {
	t.Helper()
	id := strconv.FormatUint(uint64(1000*count+shard+n*count)<<22|4242, 10)
	if got := ShardOf(id, count); got != shard {
		t.Fatalf("ShardOf(%s, %d) = %d, want %d", id, count, got, shard)
	}
	return id
}

// identifyAs dials and identifies with shard (nil: none) and returns the
// client and its READY data.
func identifyAs(t *testing.T, f *Fake, shard []int) (*client, readyData) {
	t.Helper()
	c := dial(t, f)
	d := map[string]any{"token": "Bot " + f.Token, "intents": 1}
	if shard != nil {
		d["shard"] = shard
	}
	c.write(2, d)
	fr := c.read()
	var rd readyData
	if err := json.Unmarshal(fr.D, &rd); err != nil || fr.T != "READY" {
		t.Fatalf("identify %v: got %s %s (%v), want READY", shard, fr.T, fr.D, err)
	}
	return c, rd
}

type readyData struct {
	SessionID string  `json:"session_id"`
	Shard     *[2]int `json:"shard"`
}

// readUntil reads dispatches until one whose data has id until, and
// returns the data ids before it and that one's seq.
func (c *client) readUntil(until string) (ids []string, seq int64) {
	c.t.Helper()
	for {
		fr := c.read()
		var d struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(fr.D, &d); err != nil || fr.Op != 0 {
			c.t.Fatalf("frame op %d %s %s (%v), want a dispatch", fr.Op, fr.T, fr.D, err)
		}
		if d.ID == until {
			return ids, fr.S
		}
		ids = append(ids, d.ID)
	}
}

// Events are routed as Discord routes them: a guild's to the shard
// (guild_id >> 22) % num_shards, a DM's to shard 0, everything to an
// unsharded session; each shard is its own session with its own seq and
// backlog.
func TestGatewayShardRouting(t *testing.T) {
	f := New(t)
	ctx := testCtx(t)
	c0, r0 := identifyAs(t, f, []int{0, 2})
	c1, r1 := identifyAs(t, f, []int{1, 2})
	cu, ru := identifyAs(t, f, nil)

	if r0.Shard == nil || *r0.Shard != [2]int{0, 2} || r1.Shard == nil || *r1.Shard != [2]int{1, 2} || ru.Shard != nil {
		t.Errorf("READY shards = %v %v %v, want [0 2] [1 2] none", r0.Shard, r1.Shard, ru.Shard)
	}
	if r0.SessionID == r1.SessionID || r1.SessionID == ru.SessionID {
		t.Errorf("sessions %s %s %s, want one per shard", r0.SessionID, r1.SessionID, ru.SessionID)
	}
	log := f.IdentifyLog()
	var shards []string
	for _, id := range log {
		shards = append(shards, fmt.Sprint(id.Shard))
	}
	if want := []string{"&[0 2]", "&[1 2]", "<nil>"}; !slices.Equal(shards, want) {
		t.Errorf("recorded IDENTIFY shards = %v, want %v", shards, want)
	}
	if len(log) == 3 && (log[0].SessionID != r0.SessionID || log[2].SessionID != ru.SessionID) {
		t.Errorf("recorded sessions = %+v", log)
	}

	g0, g1 := guildOnShard(t, 0, 0, 2), guildOnShard(t, 1, 1, 2)
	g0b, g1b := guildOnShard(t, 2, 0, 2), guildOnShard(t, 3, 1, 2)
	type dispatch struct {
		name  string
		event string
		data  func() any
		id    func(any) string
		to    string // which sessions: "0", "1", "u"
	}
	msg := func(channel, guild string) func() any {
		return func() any { return f.MessageCreate(channel, guild, "u1", "alice", "hi") }
	}
	msgID := func(d any) string { return d.(Message).ID }
	rows := []dispatch{
		{"guild on shard 0", "MESSAGE_CREATE", msg("c-g0", g0), msgID, "0u"},
		{"guild on shard 1", "MESSAGE_CREATE", msg("c-g1", g1), msgID, "1u"},
		{"another guild on shard 0", "MESSAGE_CREATE", msg("c-g0b", g0b), msgID, "0u"},
		{"another guild on shard 1", "MESSAGE_CREATE", msg("c-g1b", g1b), msgID, "1u"},
		{"DM", "MESSAGE_CREATE", msg("dm-1", ""), msgID, "0u"},
		{"slash command in a guild on shard 1", "INTERACTION_CREATE",
			func() any { return f.SlashCommand("c-g1", g1, "u1", "alice", "new") },
			func(d any) string { return d.(Interaction).ID }, "1u"},
		{"slash command in a DM", "INTERACTION_CREATE",
			func() any { return f.SlashCommand("dm-1", "", "u1", "alice", "new") },
			func(d any) string { return d.(Interaction).ID }, "0u"},
		{"GUILD_CREATE of a guild on shard 1 (its id, not guild_id)", "GUILD_CREATE",
			func() any { return map[string]any{"id": g1b, "name": "g"} },
			func(d any) string { return d.(map[string]any)["id"].(string) }, "1u"},
	}
	want := map[string][]string{}
	for _, r := range rows {
		d := r.data()
		f.Dispatch(r.event, d)
		for _, k := range r.to {
			want[string(k)] = append(want[string(k)], r.id(d))
		}
	}
	// Barriers: the last event each session gets.
	b0 := f.MessageCreate("dm-1", "", "u1", "alice", "barrier 0")
	b1 := f.MessageCreate("c-g1", g1, "u1", "alice", "barrier 1")
	if s := f.Dispatch("MESSAGE_CREATE", b0); s != int64(len(want["u"])+2) {
		t.Errorf("Dispatch returned seq %d, want %d (the unsharded session's, identified last)", s, len(want["u"])+2)
	}
	f.Dispatch("MESSAGE_CREATE", b1)
	got := map[string][]string{}
	got["0"], _ = c0.readUntil(b0.ID)
	var seq1 int64
	got["1"], seq1 = c1.readUntil(b1.ID)
	u, _ := cu.readUntil(b1.ID)
	got["u"] = slices.DeleteFunc(u, func(id string) bool { return id == b0.ID })
	for _, k := range []string{"0", "1", "u"} {
		if !slices.Equal(got[k], want[k]) {
			t.Errorf("session %s got %v, want %v", k, got[k], want[k])
		}
	}

	// Each shard's session has its own seq and backlog: a resume replays
	// only the events of its shard.
	c1.ws.Close()
	late0 := f.MessageCreate("c-g0", g0, "u1", "alice", "while shard 1 is away")
	late1 := f.MessageCreate("c-g1", g1, "u1", "alice", "while shard 1 is away")
	f.Dispatch("MESSAGE_CREATE", late0)
	f.Dispatch("MESSAGE_CREATE", late1)
	c1r := dial(t, f)
	c1r.write(6, map[string]any{"token": "Bot " + f.Token, "session_id": r1.SessionID, "seq": seq1})
	if replay, _ := c1r.readUntil(""); !slices.Equal(replay, []string{late1.ID}) { // RESUMED has no id
		t.Errorf("shard 1 resumed with %v, want only %s (late0 is shard 0's)", replay, late1.ID)
	}
	if r, err := f.WaitResume(ctx, 1); err != nil || r.SessionID != r1.SessionID {
		t.Errorf("resume = %+v, %v", r, err)
	}

	// A new IDENTIFY of shard 0 starts that shard afresh; shard 1's
	// session lives on.
	_, r0b := identifyAs(t, f, []int{0, 2})
	stale := dial(t, f)
	stale.write(6, map[string]any{"token": "Bot " + f.Token, "session_id": r0.SessionID, "seq": 2})
	if fr := stale.read(); fr.Op != 9 || r0b.SessionID == r0.SessionID {
		t.Errorf("resume of the replaced shard-0 session: op %d (new session %s), want op 9", fr.Op, r0b.SessionID)
	}
	live := f.MessageCreate("c-g1", g1, "u1", "alice", "shard 1 still here")
	f.Dispatch("MESSAGE_CREATE", live)
	if ids, _ := c1r.readUntil(live.ID); len(ids) != 0 {
		t.Errorf("shard 1 got %v before %s", ids, live.ID)
	}
}

// An IDENTIFY whose shard is not [id, count] with 0 <= id < count is
// closed with 4010, as on Discord, and starts no session.
func TestGatewayRejectsInvalidShard(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shard any
	}{
		{"id equal to count", []int{2, 2}},
		{"id over count", []int{5, 2}},
		{"negative id", []int{-1, 2}},
		{"zero shards", []int{0, 0}},
		{"one element", []int{0}},
		{"three elements", []int{0, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New(t)
			c := dial(t, f)
			c.write(2, map[string]any{"token": "Bot " + f.Token, "intents": 1, "shard": tc.shard})
			_ = c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _, err := c.ws.ReadMessage()
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != 4010 || ce.Text != "Invalid shard." {
				t.Fatalf("err = %v, want close 4010 Invalid shard.", err)
			}
			if f.Identifies() != 0 || f.SessionID() != "" {
				t.Errorf("identifies = %d, session %q; want none", f.Identifies(), f.SessionID())
			}
		})
	}
	// The same IDENTIFY with a valid shard is answered.
	f := New(t)
	if _, rd := identifyAs(t, f, []int{1, 2}); rd.Shard == nil || *rd.Shard != [2]int{1, 2} {
		t.Errorf("READY shard = %v, want [1 2]", rd.Shard)
	}
}

// ShardOf is Discord's formula; DMs and ids that are not numbers go to 0.
func TestShardOf(t *testing.T) {
	for _, tc := range []struct {
		guild string
		count int
		want  int
	}{
		{"", 4, 0},
		{"g1", 4, 0},
		{"41771983423143937", 1, 0},  // a snowflake from Discord's docs: id >> 22 = 9959216934
		{"41771983423143937", 8, 6},  // 9959216934 % 8
		{"41771983423143937", 10, 4}, // 9959216934 % 10
		{strconv.FormatUint(3<<22|(1<<22-1), 10), 4, 3},
	} {
		if got := ShardOf(tc.guild, tc.count); got != tc.want {
			t.Errorf("ShardOf(%q, %d) = %d, want %d", tc.guild, tc.count, got, tc.want)
		}
	}
}

// A client that closes with 1000 or 1001 ends its session, as on Discord:
// a RESUME of it gets op 9. Another close code keeps it resumable.
func TestGatewayNormalCloseEndsSession(t *testing.T) {
	for _, tc := range []struct {
		code    int
		resumed bool
	}{
		{websocket.CloseNormalClosure, false},
		{websocket.CloseGoingAway, false},
		{websocket.CloseServiceRestart, true},
		{4000, true},
	} {
		t.Run(strconv.Itoa(tc.code), func(t *testing.T) {
			f := New(t)
			c, rd := identifyAs(t, f, []int{1, 2})
			msg := websocket.FormatCloseMessage(tc.code, "")
			if err := c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			if err := f.WaitFor(testCtx(t), func() bool { return !f.Connected() }); err != nil {
				t.Fatal(err)
			}
			c2 := dial(t, f)
			c2.write(6, map[string]any{"token": "Bot " + f.Token, "session_id": rd.SessionID, "seq": 1})
			fr := c2.read()
			if got := fr.T == "RESUMED"; got != tc.resumed || (!got && fr.Op != 9) {
				t.Errorf("resume after close %d: op %d %s, want resumed=%v (else op 9)", tc.code, fr.Op, fr.T, tc.resumed)
			}
		})
	}
}
