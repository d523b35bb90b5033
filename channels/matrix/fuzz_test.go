package matrix

import (
	"encoding/json"
	"strings"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// FuzzMessage feeds message contents of any shape to the normalisation:
// it must not panic, and what it delivers keeps the event's identity and
// room.
func FuzzMessage(f *testing.F) {
	for _, seed := range []string{
		`{"msgtype":"m.text","body":"hello"}`,
		`{"msgtype":"m.text","body":"Switchbot: hi","m.mentions":{"user_ids":["@bot:hs.test"]}}`,
		`{"msgtype":"m.text","body":"in","m.relates_to":{"rel_type":"m.thread","event_id":"$root","is_falling_back":true,"m.in_reply_to":{"event_id":"$root"}}}`,
		`{"msgtype":"m.text","body":"* x","m.new_content":{"msgtype":"m.text","body":"x"},"m.relates_to":{"rel_type":"m.replace","event_id":"$a"}}`,
		`{"msgtype":"m.image","body":"a.png","url":"mxc://hs.test/abc","info":{"size":99999999999}}`,
		`{"msgtype":"m.notice","body":"a bot"}`,
		`{"msgtype":"m.text"}`,
	} {
		f.Add(seed)
	}
	fk := newFakeHS(f)
	a := open(f, fk, nil, f.TempDir(), &sleeps{})
	f.Fuzz(func(t *testing.T, raw string) {
		evt := &event.Event{Type: event.EventMessage, ID: "$e1", RoomID: id.RoomID(group), Sender: id.UserID(alice), Timestamp: 1}
		if json.Unmarshal([]byte(raw), &evt.Content) != nil || evt.Content.ParseRaw(evt.Type) != nil {
			return
		}
		in, ok := a.message(t.Context(), evt)
		if !ok {
			return
		}
		if in.MessageID != "$e1" || in.UserID != alice || !strings.HasPrefix(in.ChatID, group) || in.Text == "" && len(in.Attachments) == 0 {
			t.Fatalf("got %+v from %s", in, raw)
		}
	})
}
