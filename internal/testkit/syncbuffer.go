package testkit

import (
	"bytes"
	"context"
	"sync"
)

// SyncBuffer is a bytes.Buffer that several goroutines may write to (a
// logger and a channel printing at once) while a test reads it, or waits
// for a line to appear (WaitFor).
type SyncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed by the next Write; nil: nobody waits
}

// Write implements io.Writer.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WaitFor returns what find finds in the text written so far, looking
// again after every write until it finds something or ctx ends (then it
// returns ctx's error).
func (s *SyncBuffer) WaitFor(ctx context.Context, find func(text string) (string, bool)) (string, error) {
	for {
		s.mu.Lock()
		text := s.b.String()
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()
		if m, ok := find(text); ok {
			return m, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}
