package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// pairingForm opens the pairing page with the bearer token, as a browser
// signed in would, and returns the forms' CSRF token and its cookie.
func pairingForm(t *testing.T, s *stack) (csrf, cookie string) {
	t.Helper()
	code, csrf, c := pageForm(t, s.url, "/pairing", map[string]string{"Authorization": "Bearer " + s.token})
	if code != http.StatusOK {
		t.Fatalf("pairing page: %d", code)
	}
	return csrf, c.Name + "=" + c.Value
}

func pending(t *testing.T, st *store.Store) []string {
	t.Helper()
	list, err := st.PendingPairings(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, p := range list {
		codes = append(codes, p.Code)
	}
	return codes
}

func approved(t *testing.T, st *store.Store, userID string) bool {
	t.Helper()
	ok, err := st.IsApproved(t.Context(), "telegram", userID)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// Pairing requests are approved and denied from the dashboard by form
// POSTs that need the dashboard's authentication and the CSRF token of
// the browser's own copy of the page; approving admits the user as
// `switchboard pairing approve` does.
func TestPairingActions(t *testing.T) {
	s := newStack(t, func(o *Options) { o.Token = testToken })
	ctx := t.Context()
	for _, p := range []struct{ user, name, code string }{{"42", "ada", "ADA22222"}, {"43", "bob", "BOB33333"}} {
		if _, _, err := s.store.PairingCode(ctx, "telegram", p.user, p.name, p.code, time.Hour); err != nil {
			t.Fatal(err)
		}
	}

	// The requests show on the pairing page and the overview, with forms.
	for _, path := range []string{"/pairing", "/"} {
		code, page := s.do("GET", path, "", nil)
		for _, want := range []string{"@ada", "ADA22222", `action="/pairing/ADA22222/approve"`, `action="/pairing/BOB33333/deny"`, `name="csrf"`} {
			if code != http.StatusOK || !strings.Contains(page, want) {
				t.Errorf("GET %s: %d, lacks %q", path, code, want)
			}
		}
	}

	csrf, cookie := pairingForm(t, s)
	_, otherCookie := pairingForm(t, s)
	form := url.Values{"csrf": {csrf}}.Encode()
	bearer := "Bearer " + testToken
	post := func(path, body string, header map[string]string) (int, string) {
		t.Helper()
		h := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
		for k, v := range header {
			h[k] = v
		}
		return send(t, "POST", s.url+path, "", body, h)
	}
	for _, tt := range []struct {
		name   string
		body   string
		header map[string]string
		want   int
	}{
		{"no authentication", form, map[string]string{"Cookie": cookie}, http.StatusUnauthorized},
		{"a wrong bearer token", form, map[string]string{"Cookie": cookie, "Authorization": "Bearer nope"}, http.StatusUnauthorized},
		{"no csrf token", "", map[string]string{"Authorization": bearer, "Cookie": cookie}, http.StatusForbidden},
		{"no csrf cookie", form, map[string]string{"Authorization": bearer}, http.StatusForbidden},
		{"another browser's cookie", form, map[string]string{"Authorization": bearer, "Cookie": otherCookie}, http.StatusForbidden},
		{"from another site", form, map[string]string{"Authorization": bearer, "Cookie": cookie,
			"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
	} {
		for _, action := range []string{"approve", "deny"} {
			if code, _ := post("/pairing/ADA22222/"+action, tt.body, tt.header); code != tt.want {
				t.Errorf("%s with %s: %d, want %d", action, tt.name, code, tt.want)
			}
		}
	}
	if got := pending(t, s.store); len(got) != 2 || approved(t, s.store, "42") {
		t.Fatalf("after refused posts: pending %v, ada approved %v; want both pending", got, approved(t, s.store, "42"))
	}

	// Signed in with the login cookie, as a person in a browser.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	loginCSRF, loginCookie := loginForm(t, s.url)
	resp := postLogin(t, client, s.url, url.Values{"token": {testToken}, "csrf": {loginCSRF}}, loginCookie)
	var session string
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			session = c.Name + "=" + c.Value
		}
	}
	if session == "" {
		t.Fatalf("login: %d, no session cookie", resp.StatusCode)
	}
	signedIn := map[string]string{"Cookie": cookie + "; " + session, "Origin": s.url, "Sec-Fetch-Site": "same-origin"}
	code, _ := post("/pairing/ADA22222/approve", form, signedIn)
	if code != http.StatusSeeOther || !approved(t, s.store, "42") {
		t.Fatalf("approve: %d, ada approved %v; want 303 and approved", code, approved(t, s.store, "42"))
	}
	if got := pending(t, s.store); len(got) != 1 || got[0] != "BOB33333" {
		t.Fatalf("pending after approval = %v", got)
	}
	if code, page := s.do("GET", "/pairing?approved=ADA22222", "", nil); code != http.StatusOK || !strings.Contains(page, "Approved request ADA22222") || strings.Contains(page, "@ada") {
		t.Errorf("pairing page after approval: %d\n%s", code, page)
	}

	// Deny, with the bearer token.
	withBearer := map[string]string{"Cookie": cookie, "Authorization": bearer}
	if code, _ := post("/pairing/BOB33333/deny", form, withBearer); code != http.StatusSeeOther {
		t.Fatalf("deny: %d, want 303", code)
	}
	if got := pending(t, s.store); len(got) != 0 || approved(t, s.store, "43") {
		t.Fatalf("after deny: pending %v, bob approved %v", got, approved(t, s.store, "43"))
	}
	// Done already, or never asked: 404 with the page and why.
	for _, path := range []string{"/pairing/BOB33333/deny", "/pairing/ADA22222/deny", "/pairing/NOPE/approve"} {
		if code, page := post(path, form, withBearer); code != http.StatusNotFound || !strings.Contains(page, "No pending request") {
			t.Errorf("POST %s: %d, want 404 saying so", path, code)
		}
	}
	if code, page := post("/pairing/BOB33333/approve", form, withBearer); code != http.StatusConflict || !strings.Contains(page, "was denied") || approved(t, s.store, "43") {
		t.Errorf("approve a denied code: %d, want 409 saying so", code)
	}
	if !approved(t, s.store, "42") {
		t.Error("denying an approved code took the approval back")
	}
	// An expired request cannot be approved (this one expired an hour ago).
	if _, _, err := s.store.PairingCode(ctx, "telegram", "44", "cy", "CY444444", -time.Hour); err != nil {
		t.Fatal(err)
	}
	if code, page := post("/pairing/CY444444/approve", form, withBearer); code != http.StatusConflict || !strings.Contains(page, "expired") || approved(t, s.store, "44") {
		t.Errorf("approve an expired code: %d", code)
	}
}

// inboundTurn stores a message as a channel adapter and the router would
// (the inbox, the chat, a completed turn), without running the agent.
func inboundTurn(t *testing.T, st *store.Store, in channels.Inbound) store.Chat {
	t.Helper()
	ctx := t.Context()
	payload, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	inboxID, _, err := st.Intake(ctx, store.InboxItem{Channel: in.Channel, ChatKey: in.ChatID, MessageID: in.MessageID, UserID: in.UserID, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.EnsureChat(ctx, in.Channel, in.ChatID, string(in.ChatType), in.ChatTitle)
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := st.BeginTurn(ctx, store.TurnStart{ChatID: c.ID, InboxID: inboxID, UserID: in.UserID, Channel: in.Channel, Kind: "user"},
		[]llm.Message{{Role: llm.RoleUser, Content: in.Text}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.FinishTurn(ctx, id, store.TurnEnd{StopReason: "end_turn", Status: store.TurnCompleted}); err != nil {
		t.Fatal(err)
	}
	return c
}

// Chats are listed by their names: a group by its title, a private chat
// by its person's name and @username; the platform's id stays, small.
func TestChatNames(t *testing.T) {
	s := newStack(t, nil)
	dm := inboundTurn(t, s.store, channels.Inbound{Channel: "telegram", ChatID: "777001", ChatType: channels.DM, MessageID: "1",
		UserID: "777001", UserName: "grace", DisplayName: "Grace Hopper", Text: "hello"})
	group := inboundTurn(t, s.store, channels.Inbound{Channel: "telegram", ChatID: "-100555", ChatType: channels.Group, ChatTitle: "Book club",
		MessageID: "1", UserID: "777001", UserName: "grace", DisplayName: "Grace Hopper", Text: "hi all"})
	handleOnly := inboundTurn(t, s.store, channels.Inbound{Channel: "discord", ChatID: "888002", ChatType: channels.DM, MessageID: "1",
		UserID: "31337", UserName: "linus", Text: "hey"})

	code, page := s.do("GET", "/chats", "", nil)
	for _, want := range []string{
		fmt.Sprintf(`<a href="/chats/%d">Grace Hopper</a> <small>@grace</small>`, dm.ID), "id 777001",
		fmt.Sprintf(`<a href="/chats/%d">Book club</a>`, group.ID), "id -100555",
		fmt.Sprintf(`<a href="/chats/%d">@linus</a>`, handleOnly.ID), "id 888002",
	} {
		if code != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("chats page: %d, lacks %q", code, want)
		}
	}
	if code, page := s.do("GET", "/", "", nil); code != http.StatusOK || !strings.Contains(page, "telegram: Grace Hopper") || !strings.Contains(page, "telegram: Book club") {
		t.Errorf("overview's recent turns: %d, want the chats by name", code)
	}
}

// The chat page shows the chat's recent turns, linked to their pages, as
// the overview shows them, and its sessions.
func TestChatPageTurns(t *testing.T) {
	s := newStack(t, nil)
	s.scriptToolTurn("It is tea time.")
	if got, _ := s.chat("ada", "What time is it?"); got != "It is tea time." {
		t.Fatalf("reply = %q", got)
	}
	turns, err := s.store.RecentTurns(t.Context(), 1)
	if err != nil || len(turns) != 1 {
		t.Fatalf("turns = %v, %v", turns, err)
	}
	tr := turns[0]
	code, page := s.do("GET", fmt.Sprintf("/chats/%d", tr.ChatID), "", nil)
	for _, want := range []string{
		`id="chat-turns"`, fmt.Sprintf(`<a href="/turns/%d">#%d</a>`, tr.ID, tr.ID), "current_time", "completed", // the turn
		fmt.Sprintf(`href="/sessions/%d"`, tr.SessionID), // the session
		"<h1>ada", // the name
	} {
		if code != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("chat page: %d, lacks %q", code, want)
		}
	}
}

// The dashboard's metrics page shows the registry's series readably, with
// their help; /metrics stays Prometheus text, and the nav links the page.
func TestMetricsPage(t *testing.T) {
	s := newStack(t, nil)
	s.scriptToolTurn("It is tea time.")
	s.chat("ada", "What time is it?")

	code, page := s.do("GET", "/dashboard/metrics", "", nil)
	for _, want := range []string{
		`data-metric="switchboard_turns_total"`, "Agent turns finished, by channel and stop reason.", "counter",
		"channel=&#34;http&#34;, stop_reason=&#34;end_turn&#34;", // a series, its labels
		`data-metric="switchboard_tool_calls_total"`, "tool=&#34;current_time&#34;",
		`data-metric="switchboard_turn_duration_seconds"`, "histogram", "<th>mean</th>", // a histogram
		`data-metric="process_resident_memory_bytes"`, " MiB", // a process series, in MiB
		`href="/metrics"`,
	} {
		if code != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("metrics page: %d, lacks %q", code, want)
		}
	}
	if strings.Contains(page, "go_gc_duration_seconds") {
		t.Error("the metrics page lists every runtime series; want the key ones")
	}
	if _, overview := s.do("GET", "/", "", nil); !strings.Contains(overview, `<a href="/dashboard/metrics">Metrics</a>`) {
		t.Error("the nav's Metrics link does not open the readable page")
	}
	if code, raw := s.do("GET", "/metrics", "", nil); code != http.StatusOK || !strings.Contains(raw, "# HELP switchboard_turns_total") {
		t.Errorf("/metrics: %d, want Prometheus text", code)
	}

	bare := newStack(t, func(o *Options) { o.Gatherer = nil })
	if code, page := bare.do("GET", "/dashboard/metrics", "", nil); code != http.StatusOK || !strings.Contains(page, "No metrics in this process") {
		t.Errorf("metrics page without a registry: %d", code)
	}
}

func TestValueText(t *testing.T) {
	for _, tt := range []struct {
		v    float64
		unit string
		want string
	}{
		{3, "", "3"},
		{0.125, "s", "125 ms"},
		{0.00012, "s", "0.1 ms"},
		{90, "s", "90 s"},
		{2.5, "", "2.5"},
		{1.0 / 3, "", "0.333"},
		{52 << 20, "bytes", "52.0 MiB"},
		{512, "bytes", "512 B"},
	} {
		if got := valueText(tt.v, tt.unit); got != tt.want {
			t.Errorf("valueText(%v, %q) = %q, want %q", tt.v, tt.unit, got, tt.want)
		}
	}
}
