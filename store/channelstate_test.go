package store

import "testing"

// A channel's state is kept by channel and key, replaced by a new value,
// survives a reopen, and is gone once deleted.
func TestChannelState(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		if _, ok, err := s.ChannelState(ctx, "matrix", "sync.since"); ok || err != nil {
			t.Fatalf("empty store: ok %v, err %v", ok, err)
		}
		for _, v := range []string{"s1", "s2"} {
			if err := s.SetChannelState(ctx, "matrix", "sync.since", v); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SetChannelState(ctx, "other", "sync.since", "x"); err != nil {
			t.Fatal(err)
		}
		if v, ok, err := s.ChannelState(ctx, "matrix", "sync.since"); v != "s2" || !ok || err != nil {
			t.Fatalf("got %q, %v, %v; want s2", v, ok, err)
		}
		if err := s.DeleteChannelState(ctx, "matrix", "sync.since"); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := s.ChannelState(ctx, "matrix", "sync.since"); ok {
			t.Fatal("deleted key still there")
		}
		if v, _, _ := s.ChannelState(ctx, "other", "sync.since"); v != "x" {
			t.Fatalf("another channel's key = %q, want x", v)
		}
	})
}
