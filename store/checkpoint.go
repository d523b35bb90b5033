package store

import (
	"context"
	"time"
)

// checkpointEvery is how often, after a commit, the checkpointer copies the
// write-ahead log into the database file.
var checkpointEvery = time.Second

// startCheckpointer runs SQLite's WAL checkpoints in a goroutine of their
// own. Left to SQLite (wal_autocheckpoint), the commit that grows the log
// past 1000 pages copies it back and syncs the file before it returns, and
// the message whose turn made that commit waits: those were the slowest
// replies of a busy gateway. A PASSIVE checkpoint waits for no reader or
// writer, so turns go on while it runs; frames that a reader still needs
// are copied at the next tick. When the last connection closes, SQLite
// checkpoints what is left.
func (s *Store) startCheckpointer() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.stopCheckpoint = func() {
		cancel()
		<-done
	}
	go func() {
		defer close(done)
		t := time.NewTicker(checkpointEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if s.walDirty.Swap(false) && !s.checkpoint(ctx) {
				s.walDirty.Store(true)
			}
		}
	}()
}

// checkpoint runs one PASSIVE checkpoint and reports whether it copied the
// whole log. A failure (a full disk, say) is left for the next tick; the
// write that hits the same condition reports it.
func (s *Store) checkpoint(ctx context.Context) bool {
	var busy, logFrames, copied int
	err := s.raw.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logFrames, &copied)
	return err == nil && copied >= logFrames
}
