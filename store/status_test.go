package store

import (
	"testing"
	"time"
)

// A status callback lands on the delivery of its message on its channel,
// never takes it back to an earlier status, and keeps a failure's reason.
func TestSetDeliveryStatus(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		inbox, _, err := s.Intake(ctx, InboxItem{Channel: "whatsapp", ChatKey: "15551234567", MessageID: "wamid.in"})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"wamid.a", "wamid.b"} {
			if err := s.RecordDelivery(ctx, inbox, 0, id); err != nil {
				t.Fatal(err)
			}
		}
		at := time.UnixMilli(1_780_000_000_000)
		steps := []struct {
			channel, id, status, errText string
			want                         bool
		}{
			{"whatsapp", "wamid.a", "sent", "", true},
			{"whatsapp", "wamid.a", "read", "", true},
			{"whatsapp", "wamid.a", "delivered", "", false}, // late: read stays
			{"telegram", "wamid.b", "delivered", "", false}, // another channel's message
			{"whatsapp", "wamid.none", "delivered", "", false},
			{"whatsapp", "wamid.b", "deleted", "", false}, // not a status the store keeps
			{"whatsapp", "wamid.b", "failed", "131047: Re-engagement message", true},
		}
		for _, st := range steps {
			got, err := s.SetDeliveryStatus(ctx, st.channel, st.id, st.status, st.errText, at)
			if err != nil || got != st.want {
				t.Errorf("SetDeliveryStatus(%s, %s, %s) = %v, %v; want %v", st.channel, st.id, st.status, got, err, st.want)
			}
		}
		for _, w := range []struct{ id, status, errText string }{{"wamid.a", "read", ""}, {"wamid.b", "failed", "131047: Re-engagement message"}} {
			var status, errText string
			var statusAt int64
			if err := s.DB().QueryRowContext(ctx, db.dialect.rebind("SELECT status, status_at, status_error FROM deliveries WHERE platform_msg_id = ?"), w.id).
				Scan(&status, &statusAt, &errText); err != nil {
				t.Fatal(err)
			}
			if status != w.status || errText != w.errText || statusAt != at.UnixMilli() {
				t.Errorf("%s: status %q at %d, error %q; want %q at %d, %q", w.id, status, statusAt, errText, w.status, at.UnixMilli(), w.errText)
			}
		}
	})
}
