package store

import (
	"context"
	"sync"
	"sync/atomic"
)

// absentMax bounds an absentSet: past it, the set starts again empty (the
// next check of each chat queries once more).
const absentMax = 10000

// absentSet remembers the chats whose last check found no row of one kind:
// no pending approval, no open plan. Every inbound message checks both, and
// nearly always finds nothing; remembered, that costs no query. While no
// chat has such a row at all (the usual case), one query says so for
// every chat, new ones included.
//
// It is used on SQLite only, where one process owns the file (see cluster),
// so every write to those rows goes through this store and calls changed.
// changed starts a new generation, and a remembered absence counts only in
// the generation its query began in: a query that overlapped a write is
// never trusted, and a write is seen by every check that starts after it
// returned. On PostgreSQL other replicas write too, and the set is nil.
type absentSet struct {
	gen atomic.Uint64
	// none and asked hold gen+1 of the generation in which the query for
	// any row found none, and in which it was asked (0: not yet).
	none, asked atomic.Uint64
	mu          sync.Mutex
	at          map[string]uint64 // chat → generation in which a query found nothing
}

func newAbsentSet() *absentSet { return &absentSet{at: map[string]uint64{}} }

// changed ends every remembered absence; call it after each write (or
// attempted write) of the rows. A nil set does nothing.
func (a *absentSet) changed() {
	if a != nil {
		a.gen.Add(1)
	}
}

// lookupUnlessAbsent answers "not found" when no chat has a row (asking
// anyRow once a generation) or this chat is remembered absent in the
// current generation; otherwise it runs query and remembers a chat it
// found nothing for. With a nil set it always runs query.
func lookupUnlessAbsent[T any](a *absentSet, channel, chatKey string, query func() (T, bool, error), anyRow func() (bool, error)) (T, bool, error) {
	var zero T
	if a == nil {
		return query()
	}
	gen := a.gen.Load()
	if a.none.Load() == gen+1 {
		return zero, false, nil
	}
	if a.asked.Load() != gen+1 {
		if some, err := anyRow(); err == nil {
			a.asked.Store(gen + 1)
			if !some {
				a.none.Store(gen + 1)
				return zero, false, nil
			}
		}
	}
	key := channel + "\x00" + chatKey
	a.mu.Lock()
	at, known := a.at[key]
	a.mu.Unlock()
	if known && at == gen {
		return zero, false, nil
	}
	v, found, err := query()
	if err == nil && !found {
		a.mu.Lock()
		if len(a.at) >= absentMax {
			clear(a.at)
		}
		a.at[key] = gen
		a.mu.Unlock()
	}
	return v, found, err
}

// exists runs a SELECT EXISTS query.
func (s *Store) exists(ctx context.Context, query string) (bool, error) {
	var some bool
	err := s.db.QueryRowContext(ctx, query).Scan(&some)
	return some, err
}
