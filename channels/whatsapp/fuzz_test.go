package whatsapp

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-gateway/switchboard/channels/textsplit"
)

// FuzzNormalise feeds webhook bodies to the normalisation: it never
// panics, and a message it keeps has its chat, id and sender.
func FuzzNormalise(f *testing.F) {
	f.Add(textDelivery("wamid.A", testUser, "hi *there*"))
	f.Add(deliveryOf(map[string]any{"from": testUser, "id": "wamid.B", "type": "interactive",
		"interactive": map[string]any{"type": "button_reply", "button_reply": map[string]string{"id": "approve:1", "title": "Approve"}}}))
	f.Add(deliveryOf(map[string]any{"from": testUser, "id": "wamid.C", "type": "location", "location": map[string]any{"latitude": 1, "longitude": 2}}))
	f.Add([]byte(`{"entry":[{"changes":[{"field":"messages","value":{"messages":[{"type":"audio","audio":null,"from":"1","id":"2"}]}}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var d delivery
		if json.Unmarshal(body, &d) != nil {
			return
		}
		for _, e := range d.Entry {
			for _, ch := range e.Changes {
				for _, m := range ch.Value.Messages {
					in, md, skip := normalise(m, "", ch.Value.Metadata.DisplayPhoneNumber)
					if skip != "" {
						continue
					}
					if in.ChatID == "" || in.MessageID == "" || in.UserID != in.ChatID {
						t.Fatalf("kept a message without chat, id or sender: %+v", in)
					}
					if md != nil && md.kind == "" {
						t.Fatalf("media without a kind: %+v", md)
					}
				}
			}
		}
		// Rendering and splitting whatever text came never loses the limit.
		text := string(body)
		if !utf8.ValidString(text) {
			return
		}
		for _, p := range textsplit.Split(Render(text), 64) {
			if textsplit.Units(p) > 64 {
				t.Fatalf("a part of %d units", textsplit.Units(p))
			}
		}
	})
}
