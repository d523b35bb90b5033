package whatsapp

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
)

// TestNormalise turns the message shapes Meta posts into Inbounds.
func TestNormalise(t *testing.T) {
	for _, tc := range []struct {
		name    string
		msg     string
		want    channels.Inbound // the fields compared: Text, Action, Quote, attachment kinds/notes
		media   *mediaRef
		atts    []channels.Attachment
		skipped bool
	}{
		{name: "text", msg: `{"type":"text","text":{"body":"hi there"}}`, want: channels.Inbound{Text: "hi there"}},
		{name: "reply to the bot", msg: `{"type":"text","text":{"body":"and this?"},"context":{"from":"15550001111","id":"wamid.bot1"}}`,
			want: channels.Inbound{Text: "and this?", Quote: &channels.Quote{MessageID: "wamid.bot1", FromBot: true}}},
		{name: "reply to someone", msg: `{"type":"text","text":{"body":"see"},"context":{"from":"15557654321","id":"wamid.x"}}`,
			want: channels.Inbound{Text: "see", Quote: &channels.Quote{MessageID: "wamid.x", Author: "15557654321"}}},
		{name: "image with caption", msg: `{"type":"image","image":{"id":"m1","mime_type":"image/jpeg","sha256":"s","caption":"what is this?"}}`,
			want: channels.Inbound{Text: "what is this?"}, media: &mediaRef{id: "m1", name: "image.jpg", mime: "image/jpeg", kind: channels.Image}},
		{name: "voice note", msg: `{"type":"audio","audio":{"id":"m2","mime_type":"audio/ogg; codecs=opus","voice":true}}`,
			media: &mediaRef{id: "m2", name: "voice.ogg", mime: "audio/ogg; codecs=opus", kind: channels.Audio}},
		{name: "document", msg: `{"type":"document","document":{"id":"m3","filename":"notes.txt","mime_type":"text/plain","caption":"read it"}}`,
			want: channels.Inbound{Text: "read it"}, media: &mediaRef{id: "m3", name: "notes.txt", mime: "text/plain", kind: channels.File}},
		{name: "location", msg: `{"type":"location","location":{"latitude":52.52,"longitude":13.405,"name":"Alexanderplatz","address":"Berlin"}}`,
			atts: []channels.Attachment{{Kind: channels.Location, Note: "location 52.520000, 13.405000 (Alexanderplatz, Berlin)"}}},
		{name: "reply button", msg: `{"type":"interactive","interactive":{"type":"button_reply","button_reply":{"id":"approve:12","title":"Approve"}}}`,
			want: channels.Inbound{Text: "Approve", Action: "approve:12"}},
		{name: "template quick reply", msg: `{"type":"button","button":{"payload":"STOP","text":"Stop reminders"}}`,
			want: channels.Inbound{Text: "Stop reminders"}},
		{name: "video", msg: `{"type":"video","video":{"id":"m4","mime_type":"video/mp4","caption":"look"}}`,
			want: channels.Inbound{Text: "look"}, atts: []channels.Attachment{{Kind: channels.Video, MIME: "video/mp4", Note: "video, not downloaded"}}},
		{name: "reaction", msg: `{"type":"reaction","reaction":{"message_id":"wamid.bot1","emoji":"👍"}}`, skipped: true},
		{name: "unsupported", msg: `{"type":"unsupported","errors":[{"code":131051}]}`, skipped: true},
		{name: "empty text", msg: `{"type":"text","text":{"body":""}}`, skipped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m message
			if err := json.Unmarshal([]byte(tc.msg), &m); err != nil {
				t.Fatal(err)
			}
			m.From, m.ID, m.Timestamp = testUser, "wamid.in1", "1733480000"
			in, md, skip := normalise(m, "Ann", "15550001111")
			if (skip != "") != tc.skipped {
				t.Fatalf("skip %q, want skipped=%v", skip, tc.skipped)
			}
			if tc.skipped {
				return
			}
			if in.Channel != Name || in.ChatID != testUser || in.UserID != testUser || in.MessageID != "wamid.in1" ||
				in.ChatType != channels.DM || !in.Mentioned || in.DisplayName != "Ann" || !in.Time.Equal(time.Unix(1733480000, 0)) {
				t.Errorf("envelope %+v", in)
			}
			if in.Text != tc.want.Text || in.Action != tc.want.Action {
				t.Errorf("text %q action %q, want %q %q", in.Text, in.Action, tc.want.Text, tc.want.Action)
			}
			if (in.Quote == nil) != (tc.want.Quote == nil) || (in.Quote != nil && *in.Quote != *tc.want.Quote) {
				t.Errorf("quote %+v, want %+v", in.Quote, tc.want.Quote)
			}
			if (md == nil) != (tc.media == nil) || (md != nil && *md != *tc.media) {
				t.Errorf("media %+v, want %+v", md, tc.media)
			}
			if len(in.Attachments) != len(tc.atts) {
				t.Fatalf("attachments %+v, want %+v", in.Attachments, tc.atts)
			}
			for i, at := range tc.atts {
				if g := in.Attachments[i]; g.Kind != at.Kind || g.Note != at.Note || g.MIME != at.MIME {
					t.Errorf("attachment %d = %+v, want %+v", i, g, at)
				}
			}
		})
	}
}

// TestMediaIsFetched: a voice note reaches the sink with its bytes (the
// router transcribes them), an image with its bytes (vision), a small
// text document as text; the download carries the token only to the
// API's host.
func TestMediaIsFetched(t *testing.T) {
	g := newGraph(t)
	g.media["voice1"] = []byte("OggS-voice-bytes")
	g.media["img1"] = []byte("\xff\xd8\xff-jpeg")
	g.media["doc1"] = []byte("line one\nline two")
	a, _ := newTestAdapter(t, g, nil)
	s := &sink{}
	run(t, a, s)
	body := deliveryOf(
		map[string]any{"from": testUser, "id": "wamid.v1", "timestamp": "1733480000", "type": "audio", "audio": map[string]any{"id": "voice1", "mime_type": "audio/ogg", "voice": true}},
		map[string]any{"from": testUser, "id": "wamid.i1", "timestamp": "1733480001", "type": "image", "image": map[string]any{"id": "img1", "mime_type": "image/jpeg", "caption": "what?"}},
		map[string]any{"from": testUser, "id": "wamid.d1", "timestamp": "1733480002", "type": "document", "document": map[string]any{"id": "doc1", "filename": "a.txt", "mime_type": "text/plain"}},
		map[string]any{"from": testUser, "id": "wamid.d2", "timestamp": "1733480003", "type": "document", "document": map[string]any{"id": "gone", "filename": "b.txt", "mime_type": "text/plain"}},
	)
	if code := post(t, a, body, testSecret); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	got := s.messages()
	if len(got) != 4 {
		t.Fatalf("delivered %d messages, want 4", len(got))
	}
	want := []struct {
		kind channels.AttachmentKind
		name string
		data string
		text string
		note string
	}{
		{channels.Audio, "voice.ogg", "OggS-voice-bytes", "", ""},
		{channels.Image, "image.jpg", "\xff\xd8\xff-jpeg", "", ""},
		{channels.File, "a.txt", "", "line one\nline two", ""},
		{channels.File, "b.txt", "", "", "could not be downloaded"},
	}
	for i, w := range want {
		if len(got[i].Attachments) != 1 {
			t.Fatalf("message %d: attachments %+v", i, got[i].Attachments)
		}
		at := got[i].Attachments[0]
		if at.Kind != w.kind || at.Name != w.name || string(at.Data) != w.data || at.Text != w.text || !strings.HasPrefix(at.Note, w.note) {
			t.Errorf("message %d: attachment %+v, want %+v", i, at, w)
		}
	}
}

func TestMediaURLStaysOnMetaOrTheAPIHost(t *testing.T) {
	g := newGraph(t)
	a, _ := newTestAdapter(t, g, nil)
	meta, _ := newTestAdapter(t, g, func(o *Options) { o.APIBase = DefaultAPIBase })
	for _, tc := range []struct {
		a    *Adapter
		url  string
		okay bool
	}{
		{meta, "https://lookaside.fbsbx.com/whatsapp_business/attachments/?mid=1", true},
		{meta, "http://lookaside.fbsbx.com/x", false},
		{meta, "https://evil.example/x", false},
		{meta, g.srv.URL + "/files/x", false},
		{a, g.srv.URL + "/files/x", true},
		{a, "https://evil.example/x", false},
	} {
		u, _ := url.Parse(tc.url)
		if err := tc.a.mediaURL(u); (err == nil) != tc.okay {
			t.Errorf("mediaURL(%s) = %v, want ok=%v", tc.url, err, tc.okay)
		}
	}
}

// TestMediaDuringAnOutageIsRedelivered: a voice note whose bytes cannot be
// fetched for now is not stored without them: the delivery is answered
// 503, and Meta's redelivery brings it in whole.
func TestMediaDuringAnOutageIsRedelivered(t *testing.T) {
	g := newGraph(t)
	g.media["voice2"] = []byte("OggS-later")
	a, _ := newTestAdapter(t, g, nil)
	s := &sink{}
	run(t, a, s)
	body := deliveryOf(map[string]any{"from": testUser, "id": "wamid.v2", "timestamp": "1733480000", "type": "audio",
		"audio": map[string]any{"id": "voice2", "mime_type": "audio/ogg", "voice": true}})
	g.failNext("voice2", answer{status: http.StatusServiceUnavailable, code: codeServiceDown})
	if code := post(t, a, body, testSecret); code != http.StatusServiceUnavailable {
		t.Fatalf("media unavailable: status %d, want 503", code)
	}
	if got := s.messages(); len(got) != 0 {
		t.Fatalf("stored without its media: %+v", got)
	}
	if code := post(t, a, body, testSecret); code != http.StatusOK {
		t.Fatalf("redelivered: status %d, want 200", code)
	}
	if got := s.messages(); len(got) != 1 || string(got[0].Attachments[0].Data) != "OggS-later" {
		t.Fatalf("delivered %+v", got)
	}
}
