package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// The program runs with `go run ./bench/burst`; this test covers the
// recorder, which decides what counts as visible text and as a 429.
func TestRecorder(t *testing.T) {
	var bodies []string
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		if strings.HasSuffix(r.URL.Path, "/editMessageText") {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	rec := &recorder{next: next}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	post := func(method, ct, body string) {
		resp, err := http.Post(srv.URL+"/botTOKEN/"+method, ct, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	post("sendMessage", "application/x-www-form-urlencoded", url.Values{"chat_id": {"7"}, "text": {"hello"}}.Encode())
	post("sendMessageDraft", "application/json", `{"chat_id":8,"draft_id":1,"text":"draft"}`)
	post("editMessageText", "application/x-www-form-urlencoded", "chat_id=9&message_id=1&text=late")
	post("sendChatAction", "application/x-www-form-urlencoded", "chat_id=7&action=typing")
	calls, _ := rec.since(0)
	if len(calls) != 4 {
		t.Fatalf("%d calls recorded, want 4", len(calls))
	}
	want := []struct {
		method  string
		chat    int64
		text    string
		visible bool
	}{
		{"sendmessage", 7, "hello", true},
		{"sendmessagedraft", 8, "draft", true},
		{"editmessagetext", 9, "late", false}, // refused with 429
		{"sendchataction", 7, "", false},
	}
	for i, w := range want {
		c := calls[i]
		if c.method != w.method || c.chat != w.chat || c.text != w.text || c.visible() != w.visible {
			t.Errorf("call %d = %+v (visible %v), want %+v", i, c, c.visible(), w)
		}
	}
	if calls[2].status != http.StatusTooManyRequests {
		t.Errorf("status of the refused edit = %d, want 429", calls[2].status)
	}
	if !strings.Contains(bodies[0], "text=hello") || !strings.Contains(bodies[1], `"draft"`) {
		t.Errorf("the fake got bodies %q, want them unchanged", bodies)
	}
}
