package chatapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-gateway/switchboard/channels"
)

// errStopHere ends a fuzzed request at the router: the sink refuses it, so
// the handler answers at once instead of waiting for a turn.
var errStopHere = errors.New("fuzz: stop at the router")

// FuzzChatCompletionsRequest sends arbitrary bodies and user headers to the
// chat API's handler. It never panics; a request it refuses gets a 400 in
// the OpenAI error shape with a message; a request it accepts reaches the
// router as one message from a DM with the bot, whose chat is its user (at
// most 128 bytes, never blank), with something to say and images whose
// size matches their data.
func FuzzChatCompletionsRequest(f *testing.F) {
	for _, seed := range []struct{ body, user string }{
		{`{"model":"switchboard","messages":[{"role":"user","content":"hi"}]}`, ""},
		{`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}],"user":"ada"}`, ""},
		{`{"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}],"stream":true,"stream_options":{"include_usage":true}}`, "bob"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}},{"type":"image_url","image_url":{"url":"data:image/png,raw"}},{"type":"image_url","image_url":{"url":"data:;base64,%%%"}},{"type":"image_url"}]}]}`, ""},
		{`{"messages":[{"role":"user","content":42}]}`, ""},
		{`{"messages":[{"role":"user","content":"   "}]}`, ""},
		{`{"messages":[{"role":"assistant","content":"no user"}]}`, ""},
		{`{"messages":[]}`, ""},
		{`{"messages":[{"role":"user","content":"x"}],"user":"` + strings.Repeat("u", 129) + `"}`, ""},
		{`{"messages":[{"role":"user","content":"x"}],"user":"  "}`, "   "},
		{`{"messages":[{"role":"user","content":"x"}]}`, strings.Repeat("h", 200)},
		{`{"messages":[{"ROLE":"user","Content":"case"}],"USER":"Eve"}`, ""},
		{`{"messages":[{"role":"user","content":"x"}]} {"trailing":true}`, ""},
		{`{"messages":[{"role":"user","content":[{"type":"text","text":"empty image"},{"type":"image_url","image_url":{"url":"data:image/png;base64,"}}]}]}`, ""},
		{`not json`, ""},
		{``, ""},
		{`{"messages":[{"role":"user","content":"\u0000\ud800 é 😀"}]}`, "é"},
	} {
		f.Add(seed.body, seed.user)
	}
	f.Fuzz(func(t *testing.T, body, userHeader string) {
		api := New("Switchboard", nil, nil)
		var got []channels.Inbound
		api.sink = channels.SinkFunc(func(_ context.Context, in channels.Inbound) error {
			got = append(got, in)
			return errStopHere
		})
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		req.Header[UserHeader] = []string{userHeader}
		rec := httptest.NewRecorder()
		api.chatCompletions(rec, req)

		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
				Code    string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Message == "" || e.Error.Code == "" {
			t.Fatalf("status %d with a body not in the OpenAI error shape (%v): %s", rec.Code, err, rec.Body)
		}
		switch {
		case len(got) == 0:
			if rec.Code != http.StatusBadRequest || e.Error.Type != "invalid_request_error" {
				t.Fatalf("refused with %d %+v, want 400 invalid_request_error", rec.Code, e.Error)
			}
			return
		case len(got) > 1:
			t.Fatalf("one request delivered %d messages", len(got))
		case rec.Code != http.StatusInternalServerError || e.Error.Code != "intake_failed":
			t.Fatalf("the router's failure answered %d %+v, want 500 intake_failed", rec.Code, e.Error)
		}
		in := got[0]
		if in.Channel != ChannelName || in.ChatType != channels.DM || !in.Mentioned {
			t.Fatalf("delivered %+v, want a DM on %q addressed to the bot", in, ChannelName)
		}
		if in.ChatID != in.UserID || in.UserID == "" || strings.TrimSpace(in.UserID) != in.UserID || len(in.UserID) > maxUserLen {
			t.Fatalf("chat %q / user %q: want the same non-blank trimmed key of at most %d bytes", in.ChatID, in.UserID, maxUserLen)
		}
		if len(in.MessageID) != 24 {
			t.Fatalf("message id %q, want 24 hex digits", in.MessageID)
		}
		if strings.TrimSpace(in.Text) == "" && len(in.Attachments) == 0 {
			t.Fatalf("delivered an empty message for %s", body)
		}
		if utf8.ValidString(body) && !utf8.ValidString(in.Text) {
			t.Fatalf("valid UTF-8 in, invalid text out: %q", in.Text)
		}
		for _, a := range in.Attachments {
			if a.Kind != channels.Image || a.Size != int64(len(a.Data)) || (len(a.Data) == 0) == (a.Note == "") {
				t.Fatalf("attachment %+v: want an image with its data, or a note saying why not", a)
			}
		}
	})
}
