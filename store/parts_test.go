package store

import (
	"errors"
	"maps"
	"testing"
)

// The parts of a reply are recorded as the platform accepts them, by reply:
// another reply to the same message, or the same reply to another message,
// has parts of its own; recording a part again keeps the first id.
func TestReplyParts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		id, _, err := s.Intake(ctx, InboxItem{Channel: "telegram", ChatKey: "42", MessageID: "1001"})
		if err != nil {
			t.Fatal(err)
		}
		other, _, err := s.Intake(ctx, InboxItem{Channel: "telegram", ChatKey: "42", MessageID: "1002"})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.ReplyParts(ctx, id, "0:aa"); err != nil || len(got) != 0 {
			t.Fatalf("ReplyParts before any = %v, %v; want none", got, err)
		}
		for part, msg := range map[int]string{0: "501", 1: "502"} {
			if err := s.RecordReplyPart(ctx, id, "0:aa", part, msg); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.RecordReplyPart(ctx, id, "0:aa", 1, "999"); err != nil {
			t.Fatalf("recording a part again: %v", err)
		}
		if err := s.RecordReplyPart(ctx, id, "1:bb", 0, "601"); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordReplyPart(ctx, 12345, "0:aa", 0, "701"); !errors.Is(err, ErrNotFound) {
			t.Errorf("a part of a reply to an unknown message: err = %v, want ErrNotFound", err)
		}
		for _, c := range []struct {
			inbox int64
			reply string
			want  map[int]string
		}{
			{id, "0:aa", map[int]string{0: "501", 1: "502"}},
			{id, "1:bb", map[int]string{0: "601"}},
			{other, "0:aa", map[int]string{}},
		} {
			got, err := s.ReplyParts(ctx, c.inbox, c.reply)
			if err != nil || !maps.Equal(got, c.want) {
				t.Errorf("ReplyParts(%d, %s) = %v, %v; want %v", c.inbox, c.reply, got, err, c.want)
			}
		}
	})
}
