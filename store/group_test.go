package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// groupRound holds the write lock with one transaction, queues n more
// behind it, releases it, and returns each queued caller's error and the
// sizes of the groups that ran. fn(i) is caller i's transaction, ctx(i)
// its context.
func groupRound(t *testing.T, s *Store, n int, fn func(i int) func(tx conn) error, ctx func(i int) context.Context) ([]error, []int) {
	t.Helper()
	var mu sync.Mutex
	var sizes []int
	s.hooks.group = func(size int) {
		mu.Lock()
		sizes = append(sizes, size)
		mu.Unlock()
	}
	t.Cleanup(func() { s.hooks.group = nil })

	var wg sync.WaitGroup
	release := holdWriteLock(t, s, &wg)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = s.inTx(ctx(i), fn(i)) })
	}
	queued := func() bool {
		s.groupMu.Lock()
		defer s.groupMu.Unlock()
		return len(s.group) == n
	}
	if err := waitfor.Poll(t.Context(), time.Millisecond, queued); err != nil {
		t.Fatalf("%d callers never queued: %v", n, err)
	}
	close(release)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return errs, slices.Clone(sizes)
}

// holdWriteLock starts a transaction (in wg) that holds the write lock
// until release is closed.
func holdWriteLock(t *testing.T, s *Store, wg *sync.WaitGroup) (release chan struct{}) {
	t.Helper()
	entered, release := make(chan struct{}), make(chan struct{})
	wg.Go(func() {
		_ = s.inTx(t.Context(), func(tx conn) error {
			close(entered)
			<-release
			return nil
		})
	})
	<-entered
	return release
}

func setKey(key string) func(tx conn) error {
	return func(tx conn) error {
		_, err := tx.ExecContext(context.Background(), sqlSetState, key, "v", 0)
		return err
	}
}

func stateKeys(t *testing.T, s *Store, prefix string, n int) []int {
	t.Helper()
	var have []int
	for i := range n {
		if _, ok, err := s.GetState(t.Context(), fmt.Sprint(prefix, i)); err != nil {
			t.Fatal(err)
		} else if ok {
			have = append(have, i)
		}
	}
	return have
}

// TestGroupCommit: the transactions queued behind a running one commit
// together, and each caller still gets its own outcome: a transaction that
// fails, or whose caller gave up, leaves no trace and does not undo the
// others'.
func TestGroupCommit(t *testing.T) {
	s, _, _ := backends[0].openTest(t)
	const n = 10
	errFail := errors.New("this one fails")
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	errs, sizes := groupRound(t, s, n, func(i int) func(tx conn) error {
		if i == 3 {
			return func(tx conn) error {
				if err := setKey("g3")(tx); err != nil {
					return err
				}
				return errFail
			}
		}
		return setKey(fmt.Sprint("g", i))
	}, func(i int) context.Context {
		if i == 5 {
			return cancelled
		}
		return t.Context()
	})
	if !slices.Equal(sizes, []int{1, n}) {
		t.Errorf("groups of %v, want [1 %d]: the queued transactions share one", sizes, n)
	}
	for i, err := range errs {
		switch {
		case i == 3 && !errors.Is(err, errFail):
			t.Errorf("caller 3: %v, want its own error", err)
		case i == 5 && !errors.Is(err, context.Canceled):
			t.Errorf("caller 5: %v, want context.Canceled", err)
		case i != 3 && i != 5 && err != nil:
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if have, want := stateKeys(t, s, "g", n), []int{0, 1, 2, 4, 6, 7, 8, 9}; !slices.Equal(have, want) {
		t.Errorf("committed %v, want %v", have, want)
	}
}

// TestGroupCommitBroken: when the shared transaction is lost (here a
// caller ends it; SQLite does the same on some I/O errors), every caller's
// transaction runs again on its own: the others are committed, and only the
// one at fault fails.
func TestGroupCommitBroken(t *testing.T) {
	s, _, _ := backends[0].openTest(t)
	const n = 6
	errs, sizes := groupRound(t, s, n, func(i int) func(tx conn) error {
		if i == 2 {
			return func(tx conn) error {
				_, err := tx.ExecContext(context.Background(), "ROLLBACK")
				return err
			}
		}
		return setKey(fmt.Sprint("b", i))
	}, func(int) context.Context { return t.Context() })
	if !slices.Equal(sizes, []int{1, n}) {
		t.Errorf("groups of %v, want [1 %d]", sizes, n)
	}
	for i, err := range errs {
		if (i == 2) != (err != nil) {
			t.Errorf("caller %d: error %v", i, err)
		}
	}
	if have, want := stateKeys(t, s, "b", n), []int{0, 1, 3, 4, 5}; !slices.Equal(have, want) {
		t.Errorf("committed %v, want %v", have, want)
	}
}

// Opening the first session of a chat (every new chat in a burst) queues in
// the group commit behind the transaction holding the write lock, instead
// of waiting for the lock in SQLite's busy handler, which sleeps.
func TestOpenSessionQueuesInGroupCommit(t *testing.T) {
	s, _, _ := backends[0].openTest(t)
	chat, err := s.EnsureChat(t.Context(), "telegram", "new", "private", "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	release := holdWriteLock(t, s, &wg)
	var sess Session
	wg.Go(func() { sess, err = s.OpenSession(t.Context(), chat.ID) })
	queued := func() bool {
		s.groupMu.Lock()
		defer s.groupMu.Unlock()
		return len(s.group) == 1
	}
	// Bounded, so that without the queueing the test fails instead of
	// hanging: the busy handler gives up after busyTimeout.
	ctx, cancel := context.WithTimeout(t.Context(), 2*busyTimeout)
	defer cancel()
	perr := waitfor.Poll(ctx, time.Millisecond, queued)
	close(release)
	wg.Wait()
	if perr != nil {
		t.Fatalf("OpenSession never queued behind the write lock: %v", perr)
	}
	if err != nil || sess.ID == 0 || sess.ChatID != chat.ID {
		t.Fatalf("OpenSession = %+v, %v", sess, err)
	}
}

// On SQLite a transaction runs to its end once started, even if its
// caller gives up meanwhile, and the caller is told what was stored: a
// cancelled statement would make SQLite roll back the whole transaction,
// which others may share. A caller that gave up before its transaction
// started is not run.
func TestStartedTransactionRunsToItsEnd(t *testing.T) {
	s, _, _ := backends[0].openTest(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err := s.inTx(ctx, func(tx conn) error {
		if err := setKey("first")(tx); err != nil {
			return err
		}
		cancel()
		_, err := tx.ExecContext(ctx, sqlSetState, "second", "v", 0)
		return err
	})
	if err != nil {
		t.Errorf("a transaction cancelled half-way: %v, want it finished", err)
	}
	if err := s.inTx(ctx, setKey("third")); !errors.Is(err, context.Canceled) {
		t.Errorf("a transaction cancelled before it started: %v, want context.Canceled", err)
	}
	for key, want := range map[string]bool{"first": true, "second": true, "third": false} {
		if _, ok, err := s.GetState(t.Context(), key); err != nil || ok != want {
			t.Errorf("key %s stored: %v (%v), want %v", key, ok, err, want)
		}
	}
}

// ctxRecorder is a querier that keeps the context of the last statement.
type ctxRecorder struct{ last context.Context }

func (r *ctxRecorder) ExecContext(ctx context.Context, _ string, _ ...any) (sql.Result, error) {
	r.last = ctx
	return nil, nil
}

func (r *ctxRecorder) QueryContext(ctx context.Context, _ string, _ ...any) (*sql.Rows, error) {
	r.last = ctx
	return nil, nil
}

func (r *ctxRecorder) QueryRowContext(ctx context.Context, _ string, _ ...any) *sql.Row {
	r.last = ctx
	return nil
}

// On SQLite the store's statements reach the driver without their
// context's cancellation (for a cancellable one, database/sql and the
// driver each start a goroutine to watch it), unless the context has
// already ended: then the statement fails at once, as before.
func TestStatementsCarryNoCancellation(t *testing.T) {
	rec := &ctxRecorder{}
	q := uncancelled{q: rec}
	live, cancel := context.WithCancel(t.Context())
	for name, run := range map[string]func(context.Context){
		"exec":     func(ctx context.Context) { _, _ = q.ExecContext(ctx, "") },
		"query":    func(ctx context.Context) { _, _ = q.QueryContext(ctx, "") },
		"queryRow": func(ctx context.Context) { q.QueryRowContext(ctx, "") },
	} {
		if run(live); rec.last.Done() != nil {
			t.Errorf("%s: the statement's context can be cancelled", name)
		}
	}
	cancel()
	if _, _ = q.ExecContext(live, ""); rec.last.Err() == nil {
		t.Error("an ended context reached the statement without its end")
	}
	if _, _ = (uncancelled{q: rec, started: true}).ExecContext(live, ""); rec.last.Err() != nil {
		t.Error("a statement of a transaction under way got its ended context")
	}

	s, _, _ := backends[0].openTest(t)
	if _, ok := s.db.q.(uncancelled); !ok {
		t.Errorf("the SQLite store's reads run on %T, want uncancelled", s.db.q)
	}
	if _, _, err := s.GetState(live, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("a read with an ended context: %v, want context.Canceled", err)
	}
}
