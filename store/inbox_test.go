package store

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestIntakeIsIdempotent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, path := db.openTest(t)
		ctx := t.Context()
		it := InboxItem{Channel: "telegram", ChatKey: "42", MessageID: "1001", UserID: "u1", Payload: []byte(`{"text":"hi"}`)}
		id, fresh, err := s.Intake(ctx, it)
		if err != nil || !fresh || id == 0 {
			t.Fatalf("first Intake = %d, %v, %v; want a fresh id", id, fresh, err)
		}
		clk.Advance(time.Second)
		dup := it
		dup.Payload = []byte(`{"text":"changed"}`)
		id2, fresh, err := s.Intake(ctx, dup)
		if err != nil || fresh || id2 != id {
			t.Fatalf("duplicate Intake = %d, %v, %v; want %d, not fresh", id2, fresh, err, id)
		}
		// The same message id in another chat is another message.
		other, fresh, err := s.Intake(ctx, InboxItem{Channel: "telegram", ChatKey: "43", MessageID: "1001"})
		if err != nil || !fresh || other == id {
			t.Fatalf("Intake in another chat = %d, %v, %v; want a new fresh id", other, fresh, err)
		}

		pending, err := s.PendingInbox(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []InboxItem{
			{ID: id, Channel: "telegram", ChatKey: "42", MessageID: "1001", UserID: "u1", Payload: []byte(`{"text":"hi"}`),
				Status: InboxPending, ReceivedAt: newClock().Now()},
			{ID: other, Channel: "telegram", ChatKey: "43", MessageID: "1001", Payload: []byte{},
				Status: InboxPending, ReceivedAt: newClock().Now().Add(time.Second)},
		}
		if !reflect.DeepEqual(pending, want) {
			t.Errorf("PendingInbox = %+v\nwant %+v", pending, want)
		}

		if err := s.FinishInbox(ctx, id, InboxDone); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishInbox(ctx, other, InboxSkipped); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishInbox(ctx, other, InboxPending); err == nil {
			t.Error("FinishInbox back to pending succeeded")
		}
		if err := s.FinishInbox(ctx, 999, InboxDone); !errors.Is(err, ErrNotFound) {
			t.Errorf("FinishInbox(unknown) err = %v, want ErrNotFound", err)
		}
		if pending, err := s.PendingInbox(ctx); err != nil || len(pending) != 0 {
			t.Errorf("PendingInbox after finishing = %+v, %v; want none", pending, err)
		}

		// A redelivery after a restart is still a duplicate and does not reopen it.
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s2 := db.openAt(t, path, clk)
		if id3, fresh, err := s2.Intake(ctx, it); err != nil || fresh || id3 != id {
			t.Errorf("Intake after restart = %d, %v, %v; want %d, not fresh", id3, fresh, err, id)
		}
		st, err := s2.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if wantInbox := map[string]int{InboxDone: 1, InboxSkipped: 1}; !reflect.DeepEqual(st.Inbox, wantInbox) {
			t.Errorf("inbox counts = %v, want %v (one row per message)", st.Inbox, wantInbox)
		}
	})
}

func TestIntakeValidates(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		for _, it := range []InboxItem{
			{ChatKey: "1", MessageID: "1"},
			{Channel: "t", MessageID: "1"},
			{Channel: "t", ChatKey: "1"},
			{Channel: "t", ChatKey: "1", MessageID: "1", Status: "weird"},
		} {
			if _, _, err := s.Intake(t.Context(), it); err == nil {
				t.Errorf("Intake(%+v) succeeded", it)
			}
		}
	})
}

func TestDeliveries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		f := newFixture(t, s, "1")
		inbox, _, err := s.Intake(ctx, InboxItem{Channel: "telegram", ChatKey: "1", MessageID: "9"})
		if err != nil {
			t.Fatal(err)
		}
		turnID := f.beginTurn(t, s, "hi")
		if n, err := s.Deliveries(ctx, inbox); err != nil || n != 0 {
			t.Fatalf("Deliveries before = %d, %v; want 0", n, err)
		}
		steps := []struct {
			turn  int64
			msgID string
			want  int
		}{
			{turnID, "p1", 1},
			{turnID, "p1", 1}, // the platform confirmed the same message twice
			{turnID, "p2", 2},
			{0, "", 3}, // a platform without message ids: never merged
			{0, "", 4},
		}
		for _, st := range steps {
			if err := s.RecordDelivery(ctx, inbox, st.turn, st.msgID); err != nil {
				t.Fatal(err)
			}
			if n, err := s.Deliveries(ctx, inbox); err != nil || n != st.want {
				t.Errorf("after RecordDelivery(%q): Deliveries = %d, %v; want %d", st.msgID, n, err, st.want)
			}
		}
		if err := s.RecordDelivery(ctx, 999, 0, "p"); !errors.Is(err, ErrNotFound) {
			t.Errorf("RecordDelivery(unknown inbox) err = %v, want ErrNotFound", err)
		}
		if err := s.RecordDelivery(ctx, inbox, 999, "p9"); !errors.Is(err, ErrNotFound) {
			t.Errorf("RecordDelivery(unknown turn) err = %v, want ErrNotFound", err)
		}
	})
}

func TestLatestInbound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		for _, it := range []InboxItem{
			{Channel: "discord", ChatKey: "c1", MessageID: "99"},
			{Channel: "discord", ChatKey: "c1", MessageID: "1300000000000000007", Status: InboxDone},
			{Channel: "discord", ChatKey: "c1", MessageID: "200000000000000000"}, // larger as text, smaller as a number
			{Channel: "discord", ChatKey: "c1", MessageID: "ia:1400000000000000000"},
			{Channel: "discord", ChatKey: "c2", MessageID: "5", Status: InboxSkipped},
			{Channel: "discord", ChatKey: "c3", MessageID: "ia:7"},                    // no numeric id
			{Channel: "discord", ChatKey: "c4", MessageID: "99999999999999999999999"}, // too long for a snowflake
			{Channel: "telegram", ChatKey: "c1", MessageID: "1500000000000000000"},
		} {
			if _, _, err := s.Intake(ctx, it); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.LatestInbound(ctx, "discord")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"c1": "1300000000000000007", "c2": "5"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("LatestInbound(discord) = %v, want %v", got, want)
		}
		if got, err := s.LatestInbound(ctx, "console"); err != nil || len(got) != 0 {
			t.Errorf("LatestInbound(console) = %v, %v; want none", got, err)
		}
	})
}

func TestLatestInboundAt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		for _, it := range []InboxItem{
			{Channel: "whatsapp", ChatKey: "15551234567", MessageID: "wamid.a", ReceivedAt: t0},
			{Channel: "whatsapp", ChatKey: "15551234567", MessageID: "wamid.b", ReceivedAt: t0.Add(3 * time.Hour), Status: InboxDone},
			{Channel: "whatsapp", ChatKey: "15550000000", MessageID: "wamid.c", ReceivedAt: t0.Add(9 * time.Hour)},
			{Channel: "telegram", ChatKey: "15551234567", MessageID: "1", ReceivedAt: t0.Add(5 * time.Hour)},
		} {
			if _, _, err := s.Intake(ctx, it); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.LatestInboundAt(ctx, "whatsapp", "15551234567")
		if err != nil || !got.Equal(t0.Add(3*time.Hour)) {
			t.Errorf("LatestInboundAt(whatsapp, 15551234567) = %v, %v; want %v", got, err, t0.Add(3*time.Hour))
		}
		if got, err := s.LatestInboundAt(ctx, "whatsapp", "15559999999"); err != nil || !got.IsZero() {
			t.Errorf("LatestInboundAt of a chat with no message = %v, %v; want zero", got, err)
		}
	})
}
