package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// deleteTool needs approval and counts its runs.
func deleteTool(ran *atomic.Int32) *agent.Tool {
	return &agent.Tool{Name: "delete_file", Description: "Delete a file.", RequiresApproval: true,
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
		Fn:         func(context.Context, json.RawMessage) (string, error) { ran.Add(1); return "deleted", nil }}
}

// browser is a signed-in browser: its cookies (the sign-in and the CSRF
// token's) and the token.
type browser struct {
	t      *testing.T
	url    string
	cookie string // "switchboard_csrf=…; switchboard_session=…"
	csrf   string
}

// signIn signs in with the login form, as a person does.
func signIn(t *testing.T, s *stack) *browser {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	csrf, c := loginForm(t, s.url)
	resp := postLogin(t, client, s.url, url.Values{"token": {testToken}, "csrf": {csrf}}, c)
	for _, sc := range resp.Cookies() {
		if sc.Name == sessionCookie {
			return &browser{t: t, url: s.url, cookie: c.Name + "=" + c.Value + "; " + sc.Name + "=" + sc.Value, csrf: csrf}
		}
	}
	t.Fatalf("login: %d, no session cookie", resp.StatusCode)
	return nil
}

// sameOrigin are the headers a browser sends with the page's own requests.
func (b *browser) sameOrigin() map[string]string {
	return map[string]string{"Cookie": b.cookie, "Origin": b.url, "Sec-Fetch-Site": "same-origin"}
}

func (b *browser) get(path string) (int, string) {
	b.t.Helper()
	return send(b.t, "GET", b.url+path, "", "", map[string]string{"Cookie": b.cookie})
}

// say posts a web chat message as the page's script does (edit changes
// the headers first) and returns the status and the stream's data events,
// or the error body.
func (b *browser) say(text string, edit func(h http.Header)) (int, []map[string]any, string) {
	b.t.Helper()
	body, _ := json.Marshal(map[string]string{"text": text})
	req, err := http.NewRequestWithContext(b.t.Context(), "POST", b.url+"/webchat/messages", strings.NewReader(string(body)))
	if err != nil {
		b.t.Fatal(err)
	}
	for k, v := range b.sameOrigin() {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(csrfHeader, b.csrf)
	if edit != nil {
		edit(req.Header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, nil, string(raw)
	}
	var events []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			b.t.Fatalf("stream event %q: %v", line, err)
		}
		events = append(events, ev)
	}
	return resp.StatusCode, events, ""
}

// streamed is what a web chat stream carried: its content, the tools'
// progress ("tool:state") and the approval question, if any.
func streamed(events []map[string]any) (content string, progress []string, approval map[string]any) {
	for _, ev := range events {
		if p, ok := ev["switchboard_progress"].(map[string]any); ok {
			progress = append(progress, fmt.Sprint(p["tool"], ":", p["state"]))
		}
		if q, ok := ev["switchboard_approval"].(map[string]any); ok {
			approval = q
		}
		if ch, _ := ev["choices"].([]any); len(ch) == 1 {
			delta, _ := ch[0].(map[string]any)["delta"].(map[string]any)
			text, _ := delta["content"].(string)
			content += text
		}
	}
	return content, progress, approval
}

// chatKeys returns the chat keys of the turns recorded so far, newest first.
func chatKeys(t *testing.T, st *store.Store) []string {
	t.Helper()
	turns, err := st.RecentTurns(t.Context(), 20)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, tr := range turns {
		c, err := st.ChatByID(t.Context(), tr.ChatID)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, c.Channel+":"+c.Key)
	}
	return keys
}

// The web chat goes through the chat API into the router and the agent:
// a streamed answer with the tool's progress, in a session of the signed-in
// operator's own (two sign-ins, two chats; nothing the browser sends picks
// another), an approval answered by the button's "yes"; only with the
// sign-in, the page's CSRF token, JSON and from the page's own origin.
func TestWebChat(t *testing.T) {
	var ran atomic.Int32
	s := newStack(t, func(o *Options) { o.Token = testToken }, stackExtras{tools: []*agent.Tool{deleteTool(&ran)}, approvals: true})
	ada, bob := signIn(t, s), signIn(t, s)

	// The page: the form with its token, the script.
	code, page := ada.get("/webchat")
	for _, want := range []string{`id="webchat-form"`, `name="csrf" value="` + ada.csrf + `"`, `src="/static/webchat.js"`, "as <code>dashboard-"} {
		if code != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("web chat page: %d, lacks %q", code, want)
		}
	}

	// Refused: nothing reaches the model.
	for _, tt := range []struct {
		name string
		edit func(h http.Header)
		want int
	}{
		{"no csrf header", func(h http.Header) { h.Del(csrfHeader) }, http.StatusForbidden},
		{"another browser's csrf token", func(h http.Header) { h.Set(csrfHeader, strings.Repeat("ab", csrfBytes)) }, http.StatusForbidden},
		{"not signed in", func(h http.Header) { h.Set("Cookie", "switchboard_csrf="+ada.csrf) }, http.StatusUnauthorized},
		{"from another site", func(h http.Header) { h.Set("Origin", "http://evil.example"); h.Set("Sec-Fetch-Site", "cross-site") }, http.StatusForbidden},
		{"a text/plain body", func(h http.Header) { h.Set("Content-Type", "text/plain") }, http.StatusUnsupportedMediaType},
	} {
		if code, _, _ := ada.say("hello", tt.edit); code != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, code, tt.want)
		}
	}
	if n := s.fake.Calls(); n != 0 {
		t.Fatalf("the model got %d calls from refused requests", n)
	}

	// A tool turn, streamed with its progress; the user header is ignored.
	s.scriptToolTurn("It is tea time.")
	code, events, body := ada.say("What time is it?", func(h http.Header) { h.Set("X-Switchboard-User", "mallory") })
	content, progress, _ := streamed(events)
	if code != http.StatusOK || content != "It is tea time." || strings.Join(progress, ",") != "current_time:running,current_time:done" {
		t.Fatalf("ada's stream: %d %s, content %q, progress %v", code, body, content, progress)
	}
	s.fake.Push(testkit.Reply{Text: "Hello, bob."})
	if code, events, body := bob.say("hello", nil); code != http.StatusOK {
		t.Fatalf("bob's stream: %d %s", code, body)
	} else if content, _, _ := streamed(events); content != "Hello, bob." {
		t.Fatalf("bob's stream: content %q", content)
	}
	keys := chatKeys(t, s.store)
	if len(keys) != 2 || keys[0] == keys[1] || !strings.HasPrefix(keys[0], "http:dashboard-") || !strings.HasPrefix(keys[1], "http:dashboard-") {
		t.Fatalf("chats of the two operators' turns = %v, want two dashboard-… chats of the chat API", keys)
	}

	// An approval, answered with the button's "yes".
	s.fake.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c9", "delete_file", `{"path":"old.txt"}`)}})
	_, events, _ = ada.say("delete old.txt", nil)
	content, _, q := streamed(events)
	if q == nil || !strings.Contains(content, "delete_file") || ran.Load() != 0 {
		t.Fatalf("the paused turn's stream: content %q, approval %v, ran %d", content, q, ran.Load())
	}
	s.fake.Push(testkit.Reply{Text: "Deleted old.txt."})
	_, events, _ = ada.say("yes", nil)
	if content, progress, q := streamed(events); content != "Deleted old.txt." || q != nil || ran.Load() != 1 ||
		strings.Join(progress, ",") != "delete_file:running,delete_file:done" {
		t.Errorf("after yes: content %q, progress %v, approval %v, ran %d; want the resumed turn's answer and one run", content, progress, q, ran.Load())
	}
	// Opened again, the page shows the operator's own conversation and
	// links their chat.
	_, page = ada.get("/webchat")
	for _, want := range []string{">history</a>", `<li class="msg user earlier"><p class="text">What time is it?</p>`,
		`<li class="msg assistant earlier"><p class="text">It is tea time.</p>`, "Deleted old.txt."} {
		if !strings.Contains(page, want) {
			t.Errorf("the web chat page opened again lacks %q", want)
		}
	}
	if _, page := bob.get("/webchat"); !strings.Contains(page, "Hello, bob.") || strings.Contains(page, "tea time") {
		t.Error("bob's web chat page does not show his conversation only")
	}
}

// Without a token (loopback only) the web chat needs no sign-in; the
// session is "dashboard", and the page's CSRF token is still required.
func TestWebChatWithoutToken(t *testing.T) {
	s := newStack(t, nil)
	code, csrf, c := pageForm(t, s.url, "/webchat", nil)
	if code != http.StatusOK {
		t.Fatalf("web chat page: %d", code)
	}
	b := &browser{t: t, url: s.url, cookie: c.Name + "=" + c.Value, csrf: csrf}
	if code, _, _ := b.say("hello", func(h http.Header) { h.Del(csrfHeader) }); code != http.StatusForbidden {
		t.Errorf("without the csrf header: %d, want 403", code)
	}
	s.fake.Push(testkit.Reply{Text: "Hello, operator."})
	code, events, body := b.say("hello", nil)
	if content, _, _ := streamed(events); code != http.StatusOK || content != "Hello, operator." {
		t.Fatalf("web chat without a token: %d %s, content %q", code, body, content)
	}
	if keys := chatKeys(t, s.store); len(keys) != 1 || keys[0] != "http:dashboard" {
		t.Errorf("chat of the turn = %v, want http:dashboard", keys)
	}
}

// Logging out ends that sign-in (its cookie no longer opens a page or
// talks in the web chat) and no other; a sign-in ends by itself after
// sessionMaxAge.
func TestLogout(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := newStack(t, func(o *Options) { o.Token = testToken; o.Now = clock })
	ada, bob := signIn(t, s), signIn(t, s)
	code, page := ada.get("/")
	if code != http.StatusOK || !strings.Contains(page, `action="/logout"`) || !strings.Contains(page, "Sign out") {
		t.Fatalf("overview: %d, want a Sign out button", code)
	}

	// Without the form's token nothing happens.
	if code, _ := send(t, "POST", s.url+"/logout", "", "csrf=nope", merge(ada.sameOrigin(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})); code != http.StatusForbidden {
		t.Errorf("logout without the csrf token: %d, want 403", code)
	}
	if code, _ := ada.get("/"); code != http.StatusOK {
		t.Fatalf("after a refused logout: %d, want still signed in", code)
	}

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequestWithContext(t.Context(), "POST", s.url+"/logout", strings.NewReader(url.Values{"csrf": {ada.csrf}}.Encode()))
	for k, v := range merge(ada.sameOrigin(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}) {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cleared := false
	for _, c := range resp.Cookies() {
		cleared = cleared || (c.Name == sessionCookie && c.MaxAge < 0)
	}
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/?signed_out=1" || !cleared {
		t.Fatalf("logout: %d, location %q, cookies %v; want 303 to the sign-in, the cookie cleared", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	if code, page := send(t, "GET", s.url+"/?signed_out=1", "", "", nil); code != http.StatusUnauthorized || !strings.Contains(page, "You are signed out.") {
		t.Errorf("after logout: %d, want the sign-in form saying so", code)
	}
	// The old cookie (copied before the logout) opens nothing.
	if code, _ := ada.get("/chats"); code != http.StatusUnauthorized {
		t.Errorf("the signed-out cookie opens /chats: %d, want 401", code)
	}
	if code, _, _ := ada.say("hello", nil); code != http.StatusUnauthorized {
		t.Errorf("the signed-out cookie talks in the web chat: %d, want 401", code)
	}
	if code, _ := bob.get("/chats"); code != http.StatusOK {
		t.Errorf("another sign-in after ada's logout: %d, want 200", code)
	}

	mu.Lock()
	now = now.Add(sessionMaxAge + time.Minute)
	mu.Unlock()
	if code, _ := bob.get("/chats"); code != http.StatusUnauthorized {
		t.Errorf("a sign-in older than %s: %d, want 401", sessionMaxAge, code)
	}
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// Search finds a turn by a word of its message and a chat by its key,
// from the box on every page.
func TestSearchPage(t *testing.T) {
	s := newStack(t, nil)
	s.scriptToolTurn("It is tea time.")
	if got, _ := s.chat("ada", "Is it time for the gardening club?"); got != "It is tea time." {
		t.Fatalf("reply = %q", got)
	}
	s.fake.Push(testkit.Reply{Text: "Hello."})
	s.chat("bob", "hello")
	turns, err := s.store.RecentTurns(t.Context(), 2)
	if err != nil || len(turns) != 2 {
		t.Fatalf("turns = %v, %v", turns, err)
	}
	ada := turns[1]

	if _, page := s.do("GET", "/", "", nil); !strings.Contains(page, `action="/search"`) {
		t.Error("the overview has no search box")
	}
	code, page := s.do("GET", "/search?q=GARDENING", "", nil)
	if code != http.StatusOK || !strings.Contains(page, fmt.Sprintf(`data-turn="%d"`, ada.ID)) || strings.Contains(page, fmt.Sprintf(`data-turn="%d"`, turns[0].ID)) ||
		!strings.Contains(page, "current_time") || !strings.Contains(page, `value="GARDENING"`) {
		t.Errorf("search for a word of ada's message: %d, want her turn (with its tool) only\n%s", code, page)
	}
	if code, page := s.do("GET", "/search?q=bob", "", nil); code != http.StatusOK || !strings.Contains(page, fmt.Sprintf(`data-chat="%d"`, turns[0].ChatID)) {
		t.Errorf("search for bob's chat: %d, want it found", code)
	}
	for q, want := range map[string]string{"": "Type a word", "nothing+like+it": "No message contains it.", strings.Repeat("x", 201): "too long"} {
		if code, page := s.do("GET", "/search?q="+q, "", nil); code != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("search for %.12q: %d, lacks %q", q, code, want)
		}
	}
}

// A sign-out is kept in the store: a restart (a new server on the same
// store and token), or another replica, still refuses the signed-out
// cookie, and still admits another sign-in.
func TestSignOutOutlivesARestart(t *testing.T) {
	s := newStack(t, func(o *Options) { o.Token = testToken })
	ada, bob := signIn(t, s), signIn(t, s)
	code, _ := send(t, "POST", s.url+"/logout", "", url.Values{"csrf": {ada.csrf}}.Encode(),
		merge(ada.sameOrigin(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}))
	if code != http.StatusSeeOther {
		t.Fatalf("logout: %d, want 303 to the sign-in form", code)
	}
	if code, _ := ada.get("/chats"); code != http.StatusUnauthorized {
		t.Fatalf("the signed-out cookie opens /chats: %d, want 401", code)
	}

	again, err := New(Options{Listen: "127.0.0.1:8080", Token: testToken, Version: "test", Store: s.store})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(again.Handler())
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		who  *browser
		want int
	}{{ada, http.StatusUnauthorized}, {bob, http.StatusOK}} {
		code, _ := send(t, "GET", srv.URL+"/chats", "", "", map[string]string{"Cookie": tc.who.cookie})
		if code != tc.want {
			t.Errorf("after a restart, a cookie (signed out: %v) opens /chats: %d, want %d", tc.who == ada, code, tc.want)
		}
	}
}
