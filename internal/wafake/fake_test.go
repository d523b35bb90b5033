package wafake

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// graph is a plain Graph API client aimed at f, as an adapter writes one.
type graph struct {
	t     *testing.T
	f     *Fake
	token string
}

func client(t *testing.T, f *Fake) *graph { return &graph{t: t, f: f, token: AccessToken} }

// call sends a request and returns the status and the decoded answer.
func (g *graph) call(method, path string, body any) (int, map[string]any) {
	g.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			g.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(g.t.Context(), method, g.f.APIBase()+path, rd)
	if err != nil {
		g.t.Fatal(err)
	}
	if g.token != "" {
		req.Header.Set("Authorization", "Bearer "+g.token)
	}
	req.Header.Set("Content-Type", "application/json")
	return g.do(req)
}

func (g *graph) do(req *http.Request) (int, map[string]any) {
	g.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

// send POSTs a message to user to.
func (g *graph) send(msg map[string]any) (int, map[string]any) {
	g.t.Helper()
	msg["messaging_product"] = "whatsapp"
	return g.call(http.MethodPost, "/v23.0/"+PhoneNumberID+"/messages", msg)
}

func text(to, body string) map[string]any {
	return map[string]any{"to": to, "type": "text", "text": map[string]any{"body": body}}
}

// errCode is the Graph error code of an answer (0: none).
func errCode(a map[string]any) int {
	e, _ := a["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return int(c)
}

// sendOK sends msg and returns its wamid; any error fails the test.
func (g *graph) sendOK(msg map[string]any) string {
	g.t.Helper()
	status, a := g.send(msg)
	ms, _ := a["messages"].([]any)
	if status != http.StatusOK || len(ms) != 1 {
		g.t.Fatalf("send answered %d %v, want 200 with a message id", status, a)
	}
	return ms[0].(map[string]any)["id"].(string)
}

// hook is a webhook that checks signatures and answers from a script.
type hook struct {
	*httptest.Server
	mu      sync.Mutex
	bodies  [][]byte // the rightly signed deliveries, in arrival order
	refuse  int      // answer 500 to this many more deliveries
	answers []int
}

func newHook(t *testing.T, f *Fake) *hook {
	h := &hook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		sig := r.Header.Get("X-Hub-Signature-256")
		h.mu.Lock()
		defer h.mu.Unlock()
		switch {
		case sig == "":
			w.WriteHeader(http.StatusUnauthorized)
		case !hmac.Equal([]byte(sig), []byte(Sign(AppSecret, b))):
			w.WriteHeader(http.StatusForbidden)
		case h.refuse > 0:
			h.refuse--
			w.WriteHeader(http.StatusInternalServerError)
		default:
			h.bodies = append(h.bodies, b)
		}
	}))
	t.Cleanup(h.Close)
	f.SetWebhook(h.URL + "/whatsapp/webhook")
	return h
}

func (h *hook) got() [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.bodies)
}

// value decodes a delivery body's single change value.
func value(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var env struct {
		Object string `json:"object"`
		Entry  []struct {
			ID      string `json:"id"`
			Changes []struct {
				Field string         `json:"field"`
				Value map[string]any `json:"value"`
			} `json:"changes"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	if env.Object != "whatsapp_business_account" || len(env.Entry) != 1 || env.Entry[0].ID != BusinessAccountID ||
		len(env.Entry[0].Changes) != 1 || env.Entry[0].Changes[0].Field != "messages" {
		t.Fatalf("delivery %s is not one messages change of the business account", body)
	}
	return env.Entry[0].Changes[0].Value
}

// message is a delivery's single user message.
func message(t *testing.T, body []byte) map[string]any {
	t.Helper()
	ms, _ := value(t, body)["messages"].([]any)
	if len(ms) != 1 {
		t.Fatalf("delivery %s has %d messages, want 1", body, len(ms))
	}
	return ms[0].(map[string]any)
}

func TestTextRoundTripAndWindow(t *testing.T) {
	f := New(t)
	h := newHook(t, f)
	g := client(t, f)
	const ann = "15551234567"

	if status, a := g.send(text(ann, "hello")); status != http.StatusBadRequest || errCode(a) != 131047 {
		t.Fatalf("a send to a user who never wrote: %d %v, want 400 code 131047", status, a)
	}
	wamid, err := f.Say(UserMessage{From: ann, Name: "Ann", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.WaitTaken(testCtx(t), wamid); err != nil {
		t.Fatal(err)
	}
	m := message(t, h.got()[0])
	if m["id"] != wamid || m["from"] != ann || m["type"] != "text" || m["text"].(map[string]any)["body"] != "hi" {
		t.Errorf("delivered %v", m)
	}
	v := value(t, h.got()[0])
	if c := v["contacts"].([]any)[0].(map[string]any); c["wa_id"] != ann || c["profile"].(map[string]any)["name"] != "Ann" {
		t.Errorf("contacts %v", c)
	}
	if md := v["metadata"].(map[string]any); md["phone_number_id"] != PhoneNumberID {
		t.Errorf("metadata %v", md)
	}

	reply := text("+"+ann, "hello *Ann*")
	reply["context"] = map[string]string{"message_id": wamid}
	id := g.sendOK(reply)
	got := f.Sent(ann)
	if len(got) != 1 || got[0].ID != id || got[0].Text != "hello *Ann*" || got[0].ReplyTo != wamid || got[0].Type != "text" {
		t.Fatalf("Sent = %+v", got)
	}

	// 25 hours later only a template goes through.
	f.SetNow(func() time.Time { return time.Now().Add(25 * time.Hour) })
	if status, a := g.send(text(ann, "late")); status != http.StatusBadRequest || errCode(a) != 131047 {
		t.Errorf("a text 25 h later: %d %v, want 400 code 131047", status, a)
	}
	tpl := func(name string, params ...string) map[string]any {
		ps := []map[string]string{}
		for _, p := range params {
			ps = append(ps, map[string]string{"type": "text", "text": p})
		}
		return map[string]any{"to": ann, "type": "template", "template": map[string]any{"name": name, "language": map[string]string{"code": "en"},
			"components": []map[string]any{{"type": "body", "parameters": ps}}}}
	}
	if status, a := g.send(tpl("nope", "x")); status != http.StatusBadRequest || errCode(a) != 132001 {
		t.Errorf("an unknown template: %d %v, want 400 code 132001", status, a)
	}
	if status, a := g.send(tpl("reminder")); status != http.StatusBadRequest || errCode(a) != 132000 {
		t.Errorf("a template without its parameter: %d %v, want 400 code 132000", status, a)
	}
	if status, a := g.send(tpl("reminder", "two\nlines")); status != http.StatusBadRequest || errCode(a) != 100 {
		t.Errorf("a template parameter with a new line: %d %v, want 400 code 100", status, a)
	}
	g.sendOK(tpl("reminder", "water the plants"))
	if got := f.Sent(ann); len(got) != 2 || got[1].Template != "reminder" || got[1].Text != "water the plants" || got[1].Language != "en" {
		t.Errorf("Sent = %+v, want the template last", got)
	}
	// A message of the user's opens the window again.
	if _, err := f.Say(UserMessage{From: ann, Text: "back"}); err != nil {
		t.Fatal(err)
	}
	g.sendOK(text(ann, "welcome back"))
	f.SetLastUserMessage(ann, time.Now())
	if status, a := g.send(text(ann, "and now?")); status != http.StatusBadRequest || errCode(a) != 131047 {
		t.Errorf("after SetLastUserMessage 25 h before the clock: %d %v, want 131047", status, a)
	}
}

func TestTokenPhoneAndLimits(t *testing.T) {
	f := New(t)
	g := client(t, f)
	const to = "15550009999"
	f.SetLastUserMessage(to, time.Now())
	for _, tc := range []struct {
		name   string
		token  string
		path   string
		msg    map[string]any
		status int
		code   int
	}{
		{"no token", "", "", text(to, "x"), 401, 190},
		{"wrong token", "EAAwrong", "", text(to, "x"), 401, 190},
		{"another phone number id", AccessToken, "/v23.0/999/messages", text(to, "x"), 400, 100},
		{"4,096 characters", AccessToken, "", text(to, strings.Repeat("é", MaxText)), 200, 0},
		{"4,097 characters", AccessToken, "", text(to, strings.Repeat("é", MaxText+1)), 400, 100},
		{"empty text", AccessToken, "", text(to, ""), 400, 100},
		{"three buttons", AccessToken, "", buttons(to, "Approve?", "yes", "no", "later"), 200, 0},
		{"four buttons", AccessToken, "", buttons(to, "Approve?", "a", "b", "c", "d"), 400, 100},
		{"a title of 21 characters", AccessToken, "", buttons(to, "Approve?", strings.Repeat("x", 21)), 400, 100},
		{"the same id twice", AccessToken, "", buttons(to, "Approve?", "same", "same"), 400, 100},
		{"a body of 1,025 characters", AccessToken, "", buttons(to, strings.Repeat("x", 1025), "ok"), 400, 100},
		{"unknown type", AccessToken, "", map[string]any{"to": to, "type": "hologram"}, 400, 131051},
		{"not a number", AccessToken, "", text("ann", "x"), 400, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g.token = tc.token
			path := tc.path
			if path == "" {
				path = "/v23.0/" + PhoneNumberID + "/messages"
			}
			tc.msg["messaging_product"] = "whatsapp"
			status, a := g.call(http.MethodPost, path, tc.msg)
			if status != tc.status || errCode(a) != tc.code {
				t.Errorf("answered %d %v, want %d code %d", status, a, tc.status, tc.code)
			}
		})
	}
	if got := f.Sent(to); len(got) != 2 || len(got[1].Buttons) != 3 || got[1].Buttons[2] != (Button{"b2", "later"}) {
		t.Errorf("Sent = %+v, want the 4,096 characters and the three buttons only", got)
	}
	if n := f.Calls("messages"); n != 13 {
		t.Errorf("Calls(messages) = %d, want 13", n)
	}
	g.token = AccessToken
	status, a := g.call(http.MethodGet, "/v23.0/"+PhoneNumberID+"?fields=display_phone_number,verified_name,quality_rating", nil)
	if status != 200 || a["verified_name"] != VerifiedName || a["quality_rating"] != "GREEN" {
		t.Errorf("phone number: %d %v", status, a)
	}
}

// buttons is an interactive message with reply buttons b0, b1… titled
// titles.
func buttons(to, body string, titles ...string) map[string]any {
	var bs []map[string]any
	for i, title := range titles {
		id := fmt.Sprintf("b%d", i)
		if title == "same" {
			id = "same"
		}
		bs = append(bs, map[string]any{"type": "reply", "reply": map[string]string{"id": id, "title": title}})
	}
	return map[string]any{"to": to, "type": "interactive", "interactive": map[string]any{"type": "button",
		"body": map[string]string{"text": body}, "action": map[string]any{"buttons": bs}}}
}

func TestRedeliveryUntilTakenInOrder(t *testing.T) {
	f := New(t)
	f.SetRedeliverAfter(10 * time.Millisecond)
	h := newHook(t, f)
	h.mu.Lock()
	h.refuse = 2 // the first two attempts answered 500
	h.mu.Unlock()
	var ids []string
	for i := range 3 {
		id, err := f.Say(UserMessage{From: "15551230000", Text: fmt.Sprint("message ", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := f.WaitTaken(testCtx(t), ids...); err != nil {
		t.Fatal(err)
	}
	if n := f.Pending(); n != 0 {
		t.Errorf("Pending = %d", n)
	}
	d, _ := f.DeliveryOf(ids[0])
	if d.Attempts != 3 || !slices.Equal(d.Answers, []int{500, 500, 200}) || !d.Taken {
		t.Errorf("first delivery %+v, want answered 500, 500, 200", d)
	}
	var order []string
	for _, b := range h.got() {
		order = append(order, message(t, b)["id"].(string))
	}
	if !slices.Equal(order, ids) {
		t.Errorf("taken in the order %q, want %q", order, ids)
	}
	// A replay is the same body, answered again.
	if status, err := f.Redeliver(testCtx(t), ids[1]); err != nil || status != 200 {
		t.Fatalf("Redeliver: %d %v", status, err)
	}
	if got := h.got(); !bytes.Equal(got[3], got[1]) {
		t.Errorf("the replay differs from the delivery")
	}
	if d, _ := f.DeliveryOf(ids[1]); d.Attempts != 2 {
		t.Errorf("Attempts after a replay = %d, want 2", d.Attempts)
	}
}

func TestUnsignedAndWronglySigned(t *testing.T) {
	f := New(t)
	h := newHook(t, f)
	ctx := testCtx(t)
	_, body, err := f.Compose(UserMessage{From: "15551234567", Text: "forged"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sig  string
		want int
	}{{"", 401}, {Sign("another secret", body), 403}, {Sign(AppSecret, body), 200}} {
		if status, err := f.Deliver(ctx, body, tc.sig); err != nil || status != tc.want {
			t.Errorf("Deliver with signature %q: %d %v, want %d", tc.sig, status, err, tc.want)
		}
	}
	if n := len(h.got()); n != 1 {
		t.Errorf("the hook took %d deliveries, want 1 (the signed one)", n)
	}
	if len(f.Deliveries()) != 0 {
		t.Errorf("Deliver recorded deliveries")
	}
	// Compose leaves the window closed.
	if status, a := client(t, f).send(text("15551234567", "x")); errCode(a) != 131047 {
		t.Errorf("after Compose a send answered %d %v, want 131047", status, a)
	}
}

func TestReadsTypingAndReactions(t *testing.T) {
	f := New(t)
	newHook(t, f)
	g := client(t, f)
	wamid, err := f.Say(UserMessage{From: "15551234567", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	status, a := g.call(http.MethodPost, "/v23.0/"+PhoneNumberID+"/messages", map[string]any{"messaging_product": "whatsapp",
		"status": "read", "message_id": wamid, "typing_indicator": map[string]string{"type": "text"}})
	if status != 200 || a["success"] != true {
		t.Fatalf("read+typing: %d %v", status, a)
	}
	if status, a := g.call(http.MethodPost, "/v23.0/"+PhoneNumberID+"/messages", map[string]any{"messaging_product": "whatsapp",
		"status": "read", "message_id": "wamid.unknown"}); status != 400 || errCode(a) != 100 {
		t.Errorf("read of an unknown message: %d %v", status, a)
	}
	g.sendOK(map[string]any{"to": "15551234567", "type": "reaction", "reaction": map[string]string{"message_id": wamid, "emoji": "👍"}})
	if f.Calls("read") != 2 || f.Calls("messages") != 1 {
		t.Errorf("Calls(read) = %d, Calls(messages) = %d; want 2 and 1", f.Calls("read"), f.Calls("messages"))
	}
	if !slices.Equal(f.Reads(), []string{wamid}) || !slices.Equal(f.Typing(), []string{wamid}) || !slices.Equal(f.Reactions(wamid), []string{"👍"}) {
		t.Errorf("Reads %q, Typing %q, Reactions %q", f.Reads(), f.Typing(), f.Reactions(wamid))
	}
	if len(f.Sent("15551234567")) != 0 {
		t.Errorf("a reaction counted as a sent message")
	}
}

func TestMediaBothWays(t *testing.T) {
	f := New(t)
	h := newHook(t, f)
	g := client(t, f)
	ctx := testCtx(t)
	voice := []byte("OggS\x00fake opus voice note")
	wamid, err := f.Say(UserMessage{From: "15551234567", Voice: voice})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.WaitTaken(ctx, wamid); err != nil {
		t.Fatal(err)
	}
	audio := message(t, h.got()[0])["audio"].(map[string]any)
	if audio["voice"] != true || !strings.HasPrefix(audio["mime_type"].(string), "audio/ogg") {
		t.Fatalf("audio %v", audio)
	}
	status, a := g.call(http.MethodGet, "/v23.0/"+audio["id"].(string), nil)
	if status != 200 || a["sha256"] != audio["sha256"] || a["file_size"] != float64(len(voice)) {
		t.Fatalf("media: %d %v", status, a)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a["url"].(string), nil)
	if status, _ := g.do(req); status != 401 {
		t.Errorf("download without a token: %d, want 401", status)
	}
	req.Header.Set("Authorization", "Bearer "+AccessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(b, voice) {
		t.Errorf("downloaded %q, want the voice note", b)
	}

	// The bot uploads a PNG and sends it by id.
	png := []byte("\x89PNG\r\n\x1a\nfake image")
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("messaging_product", "whatsapp")
	_ = mw.WriteField("type", "image/png")
	fw, _ := mw.CreateFormFile("file", "chart.png")
	_, _ = fw.Write(png)
	_ = mw.Close()
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, f.APIBase()+"/v23.0/"+PhoneNumberID+"/media", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+AccessToken)
	status, a = g.do(req)
	if status != 200 || a["id"] == nil {
		t.Fatalf("upload: %d %v", status, a)
	}
	g.sendOK(map[string]any{"to": "15551234567", "type": "image", "image": map[string]string{"id": a["id"].(string), "caption": "the chart"}})
	got := f.Sent("15551234567")
	if len(got) != 1 || !bytes.Equal(got[0].Media, png) || got[0].Text != "the chart" || got[0].MIMEType != "image/png" {
		t.Errorf("Sent = %+v", got)
	}
}

func TestFailuresAndOutage(t *testing.T) {
	f := New(t)
	g := client(t, f)
	const to = "15551234567"
	f.SetLastUserMessage(to, time.Now())
	f.Fail("messages", 429, 130429, 1)
	if status, a := g.send(text(to, "x")); status != 429 || errCode(a) != 130429 {
		t.Errorf("after Fail: %d %v", status, a)
	}
	g.sendOK(text(to, "x"))
	end := f.Outage(503)
	if status, _ := g.send(text(to, "y")); status != 503 {
		t.Errorf("during the outage: %d, want 503", status)
	}
	if status, _ := g.call(http.MethodGet, "/v23.0/"+PhoneNumberID, nil); status != 503 {
		t.Errorf("the phone number during the outage: %d, want 503", status)
	}
	end()
	g.sendOK(text(to, "y"))
	if got := f.Sent(to); len(got) != 2 {
		t.Errorf("Sent = %+v, want the two sends outside failures", got)
	}
	if n, tried := f.Calls("messages"), f.Tried("+"+to); n != 4 || tried != 4 {
		t.Errorf("Calls(messages) = %d, Tried = %d; want 4", n, tried)
	}
}

func TestButtonTapStatusAndVerify(t *testing.T) {
	f := New(t)
	h := newHook(t, f)
	g := client(t, f)
	ctx := testCtx(t)
	const ann = "15551234567"
	if _, err := f.Say(UserMessage{From: ann, Text: "clean up"}); err != nil {
		t.Fatal(err)
	}
	q := g.sendOK(buttons(ann, "Run cleanup?", "Approve", "Deny"))
	if _, err := f.Say(UserMessage{From: ann, ButtonID: "nope"}); err == nil {
		t.Errorf("a tap on a button nobody sent was made up")
	}
	if _, err := f.Say(UserMessage{From: "15559990000", ButtonID: "b0"}); err == nil {
		t.Errorf("a tap on a button of another user's message was made up without ButtonOn")
	}
	forged, err := f.Say(UserMessage{From: "15559990000", ButtonID: "b1", ButtonOn: q})
	if err != nil {
		t.Fatal(err)
	}
	tap, err := f.Say(UserMessage{From: ann, ButtonID: "b0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Status(q, "failed", 131026); err != nil {
		t.Fatal(err)
	}
	if err := f.WaitFor(ctx, func() bool { return f.Pending() == 0 && len(h.got()) == 4 }); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	for _, b := range h.got()[1:] {
		if v := value(t, b); v["messages"] != nil {
			switch mm := message(t, b); mm["id"] {
			case forged:
				if mm["context"].(map[string]any)["id"] != q || mm["from"] != "15559990000" {
					t.Errorf("forged tap %v", mm)
				}
			case tap:
				m = mm
			}
		} else {
			st := v["statuses"].([]any)[0].(map[string]any)
			if st["id"] != q || st["status"] != "failed" || st["recipient_id"] != ann || st["errors"].([]any)[0].(map[string]any)["code"] != float64(131026) {
				t.Errorf("status %v", st)
			}
		}
	}
	in := m["interactive"].(map[string]any)
	if m["id"] != tap || in["type"] != "button_reply" || in["button_reply"].(map[string]any)["title"] != "Approve" ||
		m["context"].(map[string]any)["id"] != q {
		t.Errorf("tap %v", m)
	}

	// The handshake, against a webhook that checks the token.
	verify := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("hub.mode") != "subscribe" || r.URL.Query().Get("hub.verify_token") != VerifyToken {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		_, _ = io.WriteString(w, r.URL.Query().Get("hub.challenge"))
	}))
	defer verify.Close()
	f.SetWebhook(verify.URL)
	if status, echoed, err := f.Verify(ctx, VerifyToken); err != nil || status != 200 || !echoed {
		t.Errorf("Verify(right token) = %d %v %v", status, echoed, err)
	}
	if status, echoed, err := f.Verify(ctx, "wrong"); err != nil || status != 403 || echoed {
		t.Errorf("Verify(wrong token) = %d %v %v", status, echoed, err)
	}
}
