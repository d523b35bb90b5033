package store

import (
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// TestCheckpointer: commits leave the write-ahead log to the checkpointer
// (no connection checkpoints on its own), which copies it into the
// database file soon after a commit, and stops with the store.
func TestCheckpointer(t *testing.T) {
	defer func(d time.Duration) { checkpointEvery = d }(checkpointEvery)
	checkpointEvery = 5 * time.Millisecond
	s, _, _ := backends[0].openTest(t)
	ctx := t.Context()

	var auto int
	if err := s.DB().QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&auto); err != nil {
		t.Fatal(err)
	}
	if auto != 0 {
		t.Errorf("wal_autocheckpoint = %d, want 0: the commit that fills the log would copy it back itself", auto)
	}

	for i := range 50 {
		if err := s.SetState(ctx, "k", string(rune('a'+i%26))); err != nil {
			t.Fatal(err)
		}
	}
	// Every frame in the log copied: a checkpoint that finds nothing to do
	// reports as many frames copied as there are in the log.
	copied := func() bool {
		var busy, logFrames, done int
		if err := s.DB().QueryRowContext(ctx, "PRAGMA wal_checkpoint(NOOP)").Scan(&busy, &logFrames, &done); err != nil {
			t.Fatal(err)
		}
		return !s.walDirty.Load() && done == logFrames
	}
	if err := waitfor.Poll(ctx, time.Millisecond, copied); err != nil {
		t.Fatalf("the log was not checkpointed: %v", err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.SetState(ctx, "k", "z"); err == nil {
		t.Error("a write after Close succeeded")
	}
}
