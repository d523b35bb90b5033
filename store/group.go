package store

import (
	"context"
	"database/sql"
	"slices"
)

// maxGroup bounds the transactions one group commit takes, so that a
// caller at the end of a long queue is not held by an ever longer one.
const maxGroup = 64

// groupTx is one caller's transaction, queued for a group commit.
type groupTx struct {
	ctx  context.Context
	fn   func(tx conn) error
	err  error
	done chan struct{}
}

// groupCommit runs fn in a SQLite transaction shared with the other callers
// waiting at that moment: one BEGIN and one COMMIT for the lot. The caller
// that finds the write lock free leads: it takes the queue (its own fn
// included), runs it and hands every caller its result after the COMMIT. A
// commit writes each changed page to the write-ahead log, and a turn's few
// small transactions change the same pages of the same tables as
// everybody else's: a thousand chats at once spent a sixth of the
// gateway's CPU committing them one by one.
//
// If a fn fails, or the shared transaction fails as a whole (COMMIT fails,
// or SQLite rolls it back itself, as on a full disk), nothing of it is
// kept and each fn is run again in a transaction of its own, so every
// caller gets its own outcome and a failing fn never undoes the others.
// Failures are rare, and this is cheaper than a savepoint around each fn
// (two more statements each, a twentieth of a burst's CPU). As on
// Postgres (see inTx), fn must set everything it reports afresh on each
// run.
func (s *Store) groupCommit(ctx context.Context, fn func(tx conn) error) error {
	me := &groupTx{ctx: ctx, fn: fn, done: make(chan struct{})}
	s.groupMu.Lock()
	s.group = append(s.group, me)
	s.groupMu.Unlock()
	select {
	case <-me.done:
		return me.err
	case s.groupLead <- struct{}{}:
	}
	defer func() { <-s.groupLead }()
	for {
		select {
		case <-me.done:
			return me.err
		default:
		}
		s.groupMu.Lock()
		n := min(len(s.group), maxGroup)
		batch := s.group[:n:n]
		// A fresh array for the rest: the taken entries' closures would
		// stay reachable through the old one.
		if n == len(s.group) {
			s.group = nil
		} else {
			s.group = slices.Clone(s.group[n:])
		}
		s.groupMu.Unlock()
		s.runGroup(batch)
	}
}

// runGroup runs batch as described at groupCommit and closes each done.
func (s *Store) runGroup(batch []*groupTx) {
	defer func() {
		for _, g := range batch {
			close(g.done)
		}
	}()
	if s.hooks.group != nil {
		s.hooks.group(len(batch))
	}
	if err := s.runShared(batch); err == nil || len(batch) == 1 {
		return
	}
	for _, g := range batch {
		s.runShared([]*groupTx{g})
	}
}

// runShared runs batch's fns in one transaction, setting each one's err;
// it returns the transaction's error, which is also the err of a lone fn
// whose COMMIT failed. A fn whose caller has gone is not run, but one
// that started runs to its end: a cancelled context interrupts the
// connection's statement, and SQLite then rolls back the whole
// transaction, so one caller's cancellation would undo the others'
// writes. Statements without a cancellation also run on the calling
// goroutine: the driver hands a cancellable one to a goroutine of its own
// and waits, a few wakeups per statement.
func (s *Store) runShared(batch []*groupTx) error {
	err := s.txOnce(context.Background(), nil, func(tx conn) error {
		shared := conn{q: uncancelled{q: tx.q, started: true}, d: tx.d}
		for _, g := range batch {
			if g.err = g.ctx.Err(); g.err != nil {
				continue
			}
			if g.err = g.fn(shared); g.err != nil {
				return g.err
			}
		}
		return nil
	})
	if err != nil && len(batch) == 1 {
		batch[0].err = err
	}
	return err
}

// uncancelled runs statements as if their context had no cancellation.
// In a transaction under way (started) that is all: it runs to its end
// (see runShared). Elsewhere a statement whose context has already ended
// is handed that context, and database/sql fails it at once without
// running it (see setDB).
type uncancelled struct {
	q       querier
	started bool
}

func (u uncancelled) detach(ctx context.Context) context.Context {
	if !u.started && ctx.Err() != nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

func (u uncancelled) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return u.q.ExecContext(u.detach(ctx), query, args...)
}

func (u uncancelled) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return u.q.QueryContext(u.detach(ctx), query, args...)
}

func (u uncancelled) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return u.q.QueryRowContext(u.detach(ctx), query, args...)
}

// write runs one write statement: on SQLite in a group commit, where it
// shares the COMMIT of concurrent transactions; on Postgres on its own.
// Every write outside a transaction goes through it (or writeID): on its
// own, a SQLite statement would wait for the write lock in SQLite's busy
// handler, which sleeps.
func (s *Store) write(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if s.d.postgres {
		return s.db.ExecContext(ctx, query, args...)
	}
	var res sql.Result
	err := s.inTx(ctx, func(tx conn) error {
		var err error
		res, err = tx.ExecContext(ctx, query, args...)
		return err
	})
	return res, err
}

// writeID is write for an INSERT, returning the new row's id.
func (s *Store) writeID(ctx context.Context, query string, args ...any) (int64, error) {
	if s.d.postgres {
		return s.db.insertID(ctx, query, args...)
	}
	var id int64
	err := s.inTx(ctx, func(tx conn) error {
		var err error
		id, err = tx.insertID(ctx, query, args...)
		return err
	})
	return id, err
}
