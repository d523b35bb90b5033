package whatsapp

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
)

func TestWebhookHandshake(t *testing.T) {
	a, _ := newTestAdapter(t, newGraph(t), nil)
	path, h := a.Handler()
	if path != DefaultWebhookPath {
		t.Fatalf("path %q, want %q", path, DefaultWebhookPath)
	}
	for _, tc := range []struct {
		name, mode, token string
		want              int
		body              string
	}{
		{"right token", "subscribe", testVerify, http.StatusOK, "1158201444"},
		{"wrong token", "subscribe", "guess", http.StatusForbidden, ""},
		{"no token", "subscribe", "", http.StatusForbidden, ""},
		{"wrong mode", "unsubscribe", testVerify, http.StatusForbidden, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := url.Values{"hub.mode": {tc.mode}, "hub.verify_token": {tc.token}, "hub.challenge": {"1158201444"}}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path+"?"+q.Encode(), nil))
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d", w.Code, tc.want)
			}
			if tc.body != "" && w.Body.String() != tc.body {
				t.Errorf("body %q, want the challenge %q", w.Body.String(), tc.body)
			}
			if tc.want != http.StatusOK && strings.Contains(w.Body.String(), "1158201444") {
				t.Error("a refused handshake echoed the challenge")
			}
		})
	}
}

func TestWebhookSignature(t *testing.T) {
	g := newGraph(t)
	a, log := newTestAdapter(t, g, nil)
	s := &sink{}
	run(t, a, s)
	body := textDelivery("wamid.A1", testUser, "hi")
	path, h := a.Handler()
	for _, tc := range []struct {
		name, header string
		want         int
	}{
		{"unsigned", "", http.StatusUnauthorized},
		{"another secret", "sha256=" + hexSign("another-secret", body), http.StatusForbidden},
		{"signature of another body", "sha256=" + hexSign(testSecret, []byte(`{"object":"x"}`)), http.StatusForbidden},
		{"no sha256= prefix", hexSign(testSecret, body), http.StatusForbidden},
		{"not hex", "sha256=zz", http.StatusForbidden},
		{"sha1 scheme", "sha1=" + hexSign(testSecret, body), http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(string(body)))
			if tc.header != "" {
				r.Header.Set("X-Hub-Signature-256", tc.header)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Errorf("status %d, want %d", w.Code, tc.want)
			}
		})
	}
	if got := s.messages(); len(got) != 0 {
		t.Fatalf("refused deliveries reached the sink: %+v", got)
	}
	if code := post(t, a, body, testSecret); code != http.StatusOK {
		t.Fatalf("a rightly signed delivery: status %d, want 200", code)
	}
	got := s.messages()
	if len(got) != 1 || got[0].Text != "hi" || got[0].MessageID != "wamid.A1" || got[0].ChatID != testUser {
		t.Fatalf("delivered %+v; want the one message", got)
	}
	for _, secret := range []string{testSecret, testToken, testVerify} {
		if strings.Contains(log.String(), secret) {
			t.Errorf("the log shows a secret: %s", log.String())
		}
	}
}

func hexSign(secret string, body []byte) string { return hex.EncodeToString(sign(secret, body)) }

// TestWebhookAnswers200OnlyOnceStored: a delivery whose message the sink
// did not store is answered 503, so that Meta delivers it again; the
// redelivery carries the same wamid, so the store takes it once.
func TestWebhookAnswers200OnlyOnceStored(t *testing.T) {
	a, _ := newTestAdapter(t, newGraph(t), nil)
	body := textDelivery("wamid.B1", testUser, "hello")
	if code := post(t, a, body, testSecret); code != http.StatusServiceUnavailable {
		t.Fatalf("before Run: status %d, want 503", code)
	}
	s := &sink{}
	s.failFirst.Store(1)
	run(t, a, s)
	if code := post(t, a, body, testSecret); code != http.StatusServiceUnavailable {
		t.Fatalf("the sink failed: status %d, want 503", code)
	}
	if code := post(t, a, body, testSecret); code != http.StatusOK {
		t.Fatalf("redelivered: status %d, want 200", code)
	}
	got := s.messages()
	if len(got) != 1 || got[0].MessageID != "wamid.B1" {
		t.Fatalf("delivered %+v; want wamid.B1 once", got)
	}
}

func TestWebhookRefusesOtherMethodsAndBigBodies(t *testing.T) {
	a, _ := newTestAdapter(t, newGraph(t), nil)
	path, h := a.Handler()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPut, path, nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("PUT: status %d, want 405", w.Code)
	}
	big := strings.Repeat("x", maxBody+1)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(big)))
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over 1 MiB: status %d, want 413", w.Code)
	}
	_, _ = io.Copy(io.Discard, w.Body)
}

// TestStatusCallbacks: statuses are counted by kind and recorded with
// their message id, time and reason; a failed one is logged at WARN with
// Meta's reason.
func TestStatusCallbacks(t *testing.T) {
	var counted, recorded []string
	a, log := newTestAdapter(t, newGraph(t), func(o *Options) {
		o.OnStatus = func(s string) { counted = append(counted, s) }
		o.RecordStatus = func(_ context.Context, id, status, errText string, at time.Time) bool {
			recorded = append(recorded, fmt.Sprintf("%s %s %d %s", id, status, at.Unix(), errText))
			return true
		}
	})
	run(t, a, &sink{})
	body := []byte(`{"object":"whatsapp_business_account","entry":[{"id":"W","changes":[{"field":"messages","value":{
	"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550001111","phone_number_id":"` + testPhoneID + `"},
	"statuses":[{"id":"wamid.o1","status":"sent","timestamp":"1","recipient_id":"` + testUser + `"},
	{"id":"wamid.o1","status":"delivered","timestamp":"2","recipient_id":"` + testUser + `"},
	{"id":"wamid.o2","status":"failed","timestamp":"3","recipient_id":"` + testUser + `",
	 "errors":[{"code":131047,"title":"Re-engagement message","message":"Re-engagement message","error_data":{"details":"Message failed to send because more than 24 hours have passed"}}]}]}}]}]}`)
	if code := post(t, a, body, testSecret); code != http.StatusOK {
		t.Fatalf("status %d, want 200", code)
	}
	if strings.Join(counted, ",") != "sent,delivered,failed" {
		t.Errorf("counted %v, want sent, delivered, failed", counted)
	}
	if want := []string{"wamid.o1 sent 1 ", "wamid.o1 delivered 2 ",
		"wamid.o2 failed 3 131047: Message failed to send because more than 24 hours have passed"}; !slices.Equal(recorded, want) {
		t.Errorf("recorded %q, want %q", recorded, want)
	}
	if a.FailedStatuses() != 1 {
		t.Errorf("FailedStatuses = %d, want 1", a.FailedStatuses())
	}
	l := log.String()
	if !strings.Contains(l, "level=WARN") || !strings.Contains(l, "more than 24 hours have passed") || !strings.Contains(l, "code=131047") {
		t.Errorf("the failed status is not logged at WARN with its reason:\n%s", l)
	}
}

// TestStatusBeforeItsDeliveryIsKept: Meta can report a message "sent"
// before the reply's record of that send is committed. A status of a
// message the adapter has just sent is tried again until the store takes
// it, before the webhook is answered; a status of a message it did not
// send (or sent long ago) is tried once.
func TestStatusBeforeItsDeliveryIsKept(t *testing.T) {
	var mu sync.Mutex
	tries := map[string]int{}
	a, _ := newTestAdapter(t, newGraph(t), func(o *Options) {
		o.LatestInboundAt = func(context.Context, string) (time.Time, error) { return time.Now(), nil }
		o.RecordStatus = func(_ context.Context, id, status, _ string, _ time.Time) bool {
			mu.Lock()
			defer mu.Unlock()
			tries[id+" "+status]++
			return tries[id+" "+status] == 3 // the send's record is committed by the third try
		}
	})
	run(t, a, &sink{})
	id, err := a.Send(t.Context(), channels.Outbound{ChatID: testUser, Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"object":"whatsapp_business_account","entry":[{"id":"W","changes":[{"field":"messages","value":{
	"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550001111","phone_number_id":"` + testPhoneID + `"},
	"statuses":[{"id":"` + id + `","status":"sent","timestamp":"1","recipient_id":"` + testUser + `"},
	{"id":"wamid.elsewhere","status":"sent","timestamp":"1","recipient_id":"` + testUser + `"}]}}]}]}`)
	if code := post(t, a, body, testSecret); code != http.StatusOK {
		t.Fatalf("status %d, want 200", code)
	}
	// A reply in two parts: only the id Send returns (the one the reply's
	// delivery record holds) is waited for, not the first part's.
	long, err := a.Send(t.Context(), channels.Outbound{ChatID: testUser, Text: strings.Repeat("word ", 1000)})
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	_, noted := a.sentAt[long]
	waited := len(a.sentAt)
	a.mu.Unlock()
	if !noted || waited != 2 {
		t.Errorf("after a one-part and a two-part reply, %d sends are waited for (the last part's: %v), want 2, each reply's last part", waited, noted)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := tries[id+" sent"]; n != 3 {
		t.Errorf("the status of the message just sent was tried %d times, want 3 (until the store took it)", n)
	}
	if n := tries["wamid.elsewhere sent"]; n != 1 {
		t.Errorf("the status of a message the adapter did not send was tried %d times, want 1", n)
	}
}

// TestStatusDuringItsSendIsKept: Meta can report a message "sent" before
// its answer to the send has reached the adapter. A status that comes
// while a send is waiting for that answer is tried again until the send
// is answered and its delivery is recorded, before the webhook is
// answered.
func TestStatusDuringItsSendIsKept(t *testing.T) {
	g := newGraph(t)
	g.holdSends, g.sendHeld = make(chan struct{}), make(chan string, 1)
	var mu sync.Mutex
	committed, kept := false, false
	tried, once := make(chan struct{}), sync.Once{}
	a, _ := newTestAdapter(t, g, func(o *Options) {
		o.LatestInboundAt = func(context.Context, string) (time.Time, error) { return time.Now(), nil }
		o.RecordStatus = func(_ context.Context, id, status, _ string, _ time.Time) bool {
			mu.Lock()
			defer mu.Unlock()
			once.Do(func() { close(tried) })
			kept = committed
			return committed
		}
	})
	run(t, a, &sink{})
	type sent struct {
		id  string
		err error
	}
	sends := make(chan sent, 1)
	go func() {
		id, err := a.Send(t.Context(), channels.Outbound{ChatID: testUser, Text: "hello"})
		sends <- sent{id, err}
	}()
	id := <-g.sendHeld // Meta has the message; the adapter has not had its answer
	answered := make(chan int, 1)
	go func() {
		answered <- post(t, a, []byte(`{"object":"whatsapp_business_account","entry":[{"id":"W","changes":[{"field":"messages","value":{
	"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550001111","phone_number_id":"`+testPhoneID+`"},
	"statuses":[{"id":"`+id+`","status":"sent","timestamp":"1","recipient_id":"`+testUser+`"}]}}]}]}`), testSecret)
	}()
	<-tried // the status was tried while the send waited for Meta's answer
	close(g.holdSends)
	s := <-sends
	if s.err != nil || s.id != id {
		t.Fatalf("Send: %q, %v; want %q", s.id, s.err, id)
	}
	mu.Lock()
	committed = true // the reply's record of the send, after Send returns
	mu.Unlock()
	if code := <-answered; code != http.StatusOK {
		t.Fatalf("the status delivery: %d, want 200", code)
	}
	mu.Lock()
	defer mu.Unlock()
	if !kept {
		t.Error("the status that came while its send waited for Meta's answer was not kept")
	}
}
