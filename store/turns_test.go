package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
)

// snapshot is everything a step may change.
type snapshot struct {
	msgs []Message
	turn Turn
}

func snap(t *testing.T, s *Store, sessionID, turnID int64) snapshot {
	t.Helper()
	msgs, err := s.Messages(t.Context(), sessionID)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := s.Turn(t.Context(), turnID)
	if err != nil {
		t.Fatal(err)
	}
	return snapshot{msgs, tr}
}

func TestCommitStepIsAtomic(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		ctx := t.Context()
		f := newFixture(t, s, "1")
		turnID := f.beginTurn(t, s, "hi")
		if _, err := s.CommitStep(ctx, turnID, 1, toolStep(1), llm.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}); err != nil {
			t.Fatal(err)
		}
		before := snap(t, s, f.sess.ID, turnID)
		if len(before.msgs) != 4 || before.turn.Steps != 1 || before.turn.Usage.TotalTokens != 5 {
			t.Fatalf("after step 1: %d messages, turn %+v", len(before.msgs), before.turn)
		}
		clk.Advance(time.Second)

		canceled, cancel := context.WithCancel(ctx)
		cancel()
		cases := []struct {
			name string
			ctx  context.Context
			msgs []StepMessage
		}{
			// The turn row is updated and two messages inserted before the third
			// violates the role CHECK constraint.
			{"constraint violation on the last message", ctx,
				append(toolStep(2), StepMessage{Message: llm.Message{Role: "narrator", Content: "x"}})},
			{"canceled context", canceled, toolStep(2)},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ids, err := s.CommitStep(c.ctx, turnID, 2, c.msgs, llm.Usage{PromptTokens: 100, CompletionTokens: 100, TotalTokens: 200})
				if err == nil {
					t.Fatalf("CommitStep succeeded with ids %v", ids)
				}
				if !strings.HasPrefix(err.Error(), "store: commit step 2 of turn") {
					t.Errorf("error %q lacks context", err)
				}
				if after := snap(t, s, f.sess.ID, turnID); !reflect.DeepEqual(after, before) {
					t.Errorf("store changed by a failed step:\n got %+v\nwant %+v", after, before)
				}
			})
		}

		// The step can be retried and then lands in full.
		ids, err := s.CommitStep(ctx, turnID, 2, toolStep(2), llm.Usage{PromptTokens: 100, CompletionTokens: 100, TotalTokens: 200})
		if err != nil {
			t.Fatal(err)
		}
		after := snap(t, s, f.sess.ID, turnID)
		if len(ids) != 3 || len(after.msgs) != 7 || after.turn.Steps != 2 || after.turn.Usage.TotalTokens != 205 {
			t.Fatalf("after retried step 2: ids %v, %d messages, turn %+v", ids, len(after.msgs), after.turn)
		}
		for i, id := range ids {
			if m := after.msgs[4+i]; m.ID != id || m.TurnID != turnID || m.SessionID != f.sess.ID {
				t.Errorf("message %d = %+v, want id %d in turn %d", 4+i, m, id, turnID)
			}
		}
	})
}

func TestCommitStepRefusesFinishedOrUnknownTurn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		f := newFixture(t, s, "1")
		turnID := f.beginTurn(t, s, "hi")
		if err := s.FinishTurn(ctx, turnID, TurnEnd{Status: TurnFailed, Error: "crashed"}); err != nil {
			t.Fatal(err)
		}
		before := snap(t, s, f.sess.ID, turnID)
		_, err := s.CommitStep(ctx, turnID, 1, toolStep(1), llm.Usage{TotalTokens: 9})
		if !errors.Is(err, ErrTurnNotRunning) {
			t.Errorf("CommitStep on a finished turn: err = %v, want ErrTurnNotRunning", err)
		}
		if after := snap(t, s, f.sess.ID, turnID); !reflect.DeepEqual(after, before) {
			t.Errorf("store changed: got %+v, want %+v", after, before)
		}
		if _, err := s.CommitStep(ctx, 999, 1, toolStep(1), llm.Usage{}); !errors.Is(err, ErrNotFound) {
			t.Errorf("CommitStep on unknown turn: err = %v, want ErrNotFound", err)
		}
	})
}

func TestBeginTurn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		ctx := t.Context()
		f := newFixture(t, s, "1")
		g := newFixture(t, s, "2")
		inbox, _, err := s.Intake(ctx, InboxItem{Channel: "telegram", ChatKey: "1", MessageID: "7", UserID: "u1"})
		if err != nil {
			t.Fatal(err)
		}
		start := TurnStart{ChatID: f.chat.ID, SessionID: f.sess.ID, InboxID: inbox, UserID: "u1", Channel: "telegram", Kind: "user"}
		first := []llm.Message{{Role: llm.RoleSystem, Content: "be brief"}, {Role: llm.RoleUser, Content: "hi"}}
		turnID, ids, err := s.BeginTurn(ctx, start, first)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := s.Turn(ctx, turnID)
		if err != nil {
			t.Fatal(err)
		}
		want := Turn{ID: turnID, ChatID: f.chat.ID, SessionID: f.sess.ID, InboxID: inbox, UserID: "u1", Channel: "telegram",
			Kind: "user", Status: TurnRunning, StartedAt: clk.Now()}
		if !reflect.DeepEqual(tr, want) {
			t.Errorf("Turn = %+v, want %+v", tr, want)
		}
		msgs, err := s.Messages(ctx, f.sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 2 || len(ids) != 2 {
			t.Fatalf("messages %+v, ids %v; want 2", msgs, ids)
		}
		for i, m := range msgs {
			if m.ID != ids[i] || m.TurnID != turnID || !reflect.DeepEqual(m.Message, first[i]) || m.Hidden {
				t.Errorf("message %d = %+v, want %+v with id %d", i, m, first[i], ids[i])
			}
		}

		bad := []struct {
			name    string
			start   TurnStart
			first   []llm.Message
			notFoud bool
		}{
			{"no kind", TurnStart{ChatID: f.chat.ID, SessionID: f.sess.ID}, nil, false},
			{"session of another chat", TurnStart{ChatID: f.chat.ID, SessionID: g.sess.ID, Kind: "user"}, nil, false},
			{"unknown session", TurnStart{ChatID: f.chat.ID, SessionID: 999, Kind: "user"}, nil, true},
			{"unknown chat", TurnStart{ChatID: 999, Kind: "user"}, nil, true},
			{"unknown inbox", TurnStart{ChatID: f.chat.ID, SessionID: f.sess.ID, InboxID: 999, Kind: "user"}, nil, false},
			{"bad first message", TurnStart{ChatID: f.chat.ID, SessionID: f.sess.ID, Kind: "user"},
				[]llm.Message{{Role: llm.RoleUser, Content: "ok"}, {Role: "", Content: "no role"}}, false},
		}
		for _, b := range bad {
			t.Run(b.name, func(t *testing.T) {
				id, _, err := s.BeginTurn(ctx, b.start, b.first)
				if err == nil {
					t.Fatalf("BeginTurn succeeded with turn %d", id)
				}
				if b.notFoud && !errors.Is(err, ErrNotFound) {
					t.Errorf("err = %v, want ErrNotFound", err)
				}
				// Nothing of the failed turn is stored.
				turns, err := s.Turns(ctx, f.chat.ID, 0)
				if err != nil || len(turns) != 1 {
					t.Errorf("turns of chat = %d, %v; want only the first", len(turns), err)
				}
				if got, err := s.Messages(ctx, f.sess.ID); err != nil || !reflect.DeepEqual(got, msgs) {
					t.Errorf("messages changed: %+v, %v", got, err)
				}
			})
		}
	})
}

func TestFinishTurn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		ctx := t.Context()
		f := newFixture(t, s, "1")
		turnID := f.beginTurn(t, s, "hi")
		if _, err := s.CommitStep(ctx, turnID, 3, nil, llm.Usage{}); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishTurn(ctx, turnID, TurnEnd{Status: "done"}); err == nil {
			t.Error("FinishTurn with an invalid status succeeded")
		}
		clk.Advance(2345 * time.Millisecond)
		if err := s.FinishTurn(ctx, turnID, TurnEnd{StopReason: "max_steps", Status: TurnCancelled, Error: "user said stop", Model: "m2"}); err != nil {
			t.Fatal(err)
		}
		tr, err := s.Turn(ctx, turnID)
		if err != nil {
			t.Fatal(err)
		}
		end := clk.Now()
		if tr.Status != TurnCancelled || tr.StopReason != "max_steps" || tr.Error != "user said stop" || tr.Model != "m2" ||
			tr.Steps != 3 || tr.EndedAt == nil || !tr.EndedAt.Equal(end) || tr.Duration != 2345*time.Millisecond {
			t.Errorf("finished turn = %+v (ended %v); want cancelled, 3 steps kept, ended %v after 2.345s", tr, tr.EndedAt, end)
		}
		if err := s.FinishTurn(ctx, turnID, TurnEnd{Status: TurnCompleted}); !errors.Is(err, ErrTurnNotRunning) {
			t.Errorf("second FinishTurn err = %v, want ErrTurnNotRunning", err)
		}
		if err := s.FinishTurn(ctx, 999, TurnEnd{Status: TurnCompleted}); !errors.Is(err, ErrNotFound) {
			t.Errorf("FinishTurn(unknown) err = %v, want ErrNotFound", err)
		}

		t2 := f.beginTurn(t, s, "again")
		if err := s.FinishTurn(ctx, t2, TurnEnd{Status: TurnCompleted, Steps: 7}); err != nil {
			t.Fatal(err)
		}
		if tr, err := s.Turn(ctx, t2); err != nil || tr.Steps != 7 {
			t.Errorf("Steps = %d, %v; want 7 from TurnEnd", tr.Steps, err)
		}
	})
}

func TestRunningTurnsAfterRestart(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, path := db.openTest(t)
		ctx := t.Context()
		f := newFixture(t, s, "1")
		done := f.beginTurn(t, s, "a")
		crashed := f.beginTurn(t, s, "b")
		if _, err := s.CommitStep(ctx, crashed, 1, toolStep(1), llm.Usage{TotalTokens: 4}); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishTurn(ctx, done, TurnEnd{Status: TurnCompleted}); err != nil {
			t.Fatal(err)
		}
		// Simulate the crash: the store is closed with the turn still running.
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s2 := db.openAt(t, path, clk)
		running, err := s2.RunningTurns(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(running) != 1 || running[0].ID != crashed || running[0].Steps != 1 || running[0].EndedAt != nil {
			t.Fatalf("RunningTurns = %+v, want only turn %d at step 1", running, crashed)
		}
		if err := s2.FinishTurn(ctx, crashed, TurnEnd{Status: TurnFailed, Error: "interrupted by restart"}); err != nil {
			t.Fatal(err)
		}
		if running, err := s2.RunningTurns(ctx); err != nil || len(running) != 0 {
			t.Errorf("RunningTurns after recovery = %+v, %v; want none", running, err)
		}
	})
}

func TestTurnsAndTurnForInbox(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		f := newFixture(t, s, "1")
		inbox, _, err := s.Intake(ctx, InboxItem{Channel: "telegram", ChatKey: "1", MessageID: "5"})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := s.TurnForInbox(ctx, inbox); err != nil || ok {
			t.Fatalf("TurnForInbox before any turn: ok=%v err=%v", ok, err)
		}
		var ids []int64
		for range 3 {
			id, _, err := s.BeginTurn(ctx, TurnStart{ChatID: f.chat.ID, InboxID: inbox, Kind: "user"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if tr, ok, err := s.TurnForInbox(ctx, inbox); err != nil || !ok || tr.ID != ids[2] || tr.InboxID != inbox {
			t.Errorf("TurnForInbox = %+v, %v, %v; want the newest, %d", tr, ok, err, ids[2])
		}
		for _, c := range []struct {
			limit int
			want  []int64
		}{{0, []int64{ids[2], ids[1], ids[0]}}, {2, []int64{ids[2], ids[1]}}} {
			ts, err := s.Turns(ctx, f.chat.ID, c.limit)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, tr := range ts {
				got = append(got, tr.ID)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Turns(limit %d) = %v, want %v", c.limit, got, c.want)
			}
		}
		if _, err := s.Turn(ctx, 999); !errors.Is(err, ErrNotFound) {
			t.Errorf("Turn(999) err = %v, want ErrNotFound", err)
		}
	})
}

func TestUsageSince(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		ctx := t.Context()
		f := newFixture(t, s, "1")
		turn := func(user string, u llm.Usage) {
			t.Helper()
			id, _, err := s.BeginTurn(ctx, TurnStart{ChatID: f.chat.ID, UserID: user, Kind: "user"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Usage arrives over two steps.
			half := llm.Usage{PromptTokens: u.PromptTokens / 2, CompletionTokens: u.CompletionTokens / 2, TotalTokens: u.TotalTokens / 2}
			for step, su := range []llm.Usage{half, {PromptTokens: u.PromptTokens - half.PromptTokens,
				CompletionTokens: u.CompletionTokens - half.CompletionTokens, TotalTokens: u.TotalTokens - half.TotalTokens}} {
				if _, err := s.CommitStep(ctx, id, step+1, nil, su); err != nil {
					t.Fatal(err)
				}
			}
		}
		turn("alice", llm.Usage{PromptTokens: 1000, CompletionTokens: 1000, TotalTokens: 2000}) // yesterday
		clk.Advance(24 * time.Hour)
		midnight := clk.Now()
		turn("alice", llm.Usage{PromptTokens: 10, CompletionTokens: 4, TotalTokens: 14}) // exactly at since: counts
		turn("bob", llm.Usage{PromptTokens: 500, CompletionTokens: 500, TotalTokens: 1000})
		clk.Advance(time.Hour)
		turn("alice", llm.Usage{PromptTokens: 21, CompletionTokens: 9, TotalTokens: 30})

		cases := []struct {
			user  string
			since time.Time
			want  llm.Usage
		}{
			{"alice", midnight, llm.Usage{PromptTokens: 31, CompletionTokens: 13, TotalTokens: 44}},
			{"alice", midnight.Add(-48 * time.Hour), llm.Usage{PromptTokens: 1031, CompletionTokens: 1013, TotalTokens: 2044}},
			{"alice", midnight.Add(time.Millisecond), llm.Usage{PromptTokens: 21, CompletionTokens: 9, TotalTokens: 30}},
			{"bob", midnight, llm.Usage{PromptTokens: 500, CompletionTokens: 500, TotalTokens: 1000}},
			{"carol", midnight, llm.Usage{}},
			// A since in another zone is the same instant.
			{"alice", midnight.In(time.FixedZone("UTC+2", 7200)), llm.Usage{PromptTokens: 31, CompletionTokens: 13, TotalTokens: 44}},
		}
		for _, c := range cases {
			got, err := s.UsageSince(ctx, c.user, c.since)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("UsageSince(%s, %v) = %+v, want %+v", c.user, c.since, got, c.want)
			}
		}
	})
}

// TestConcurrentWriters runs 8 goroutines × 25 iterations, each iteration
// one CommitStep, one SaveSummary and one Intake, against one file: no
// "database is locked", every row present.
func TestConcurrentWriters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		const workers, iterations = 8, 25
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		f := newFixture(t, s, "1")
		turns := make([]int64, workers)
		for w := range turns {
			turns[w] = f.beginTurn(t, s, fmt.Sprint("worker ", w))
		}

		var mu sync.Mutex
		var errs []error
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range workers {
			wg.Go(func() {
				<-start
				for i := range iterations {
					ids, err1 := s.CommitStep(ctx, turns[w], i+1, toolStep(i), llm.Usage{PromptTokens: 2, CompletionTokens: 1, TotalTokens: 3})
					if err1 == nil {
						// Reads, then writes: the transaction shape that fails
						// at once without _txlock=immediate.
						err1 = s.SaveSummary(ctx, f.sess.ID, ids[2], fmt.Sprint(w, "/", i))
					}
					_, fresh, err2 := s.Intake(ctx, InboxItem{Channel: "telegram", ChatKey: "1",
						MessageID: fmt.Sprintf("%d-%d", w, i), Payload: []byte(`{}`)})
					if err2 == nil && !fresh {
						err2 = fmt.Errorf("intake %d-%d: not fresh", w, i)
					}
					if err := errors.Join(err1, err2); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				}
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("%d failed iterations:\n%v", len(errs), err)
		}

		msgs, err := s.Messages(ctx, f.sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := workers + workers*iterations*3; len(msgs) != want {
			t.Errorf("%d messages, want %d", len(msgs), want)
		}
		perTurn := map[int64]int{}
		for _, m := range msgs {
			perTurn[m.TurnID]++
		}
		for w, id := range turns {
			tr, err := s.Turn(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if perTurn[id] != 1+iterations*3 || tr.Usage.TotalTokens != 3*iterations {
				t.Errorf("worker %d: %d messages, usage %+v; want %d and %d total tokens",
					w, perTurn[id], tr.Usage, 1+iterations*3, 3*iterations)
			}
		}
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var summaries int
		if err := s.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM summaries").Scan(&summaries); err != nil {
			t.Fatal(err)
		}
		if summaries != workers*iterations || st.Messages != len(msgs) {
			t.Errorf("%d summaries, stats %+v; want %d and %d messages", summaries, st, workers*iterations, len(msgs))
		}
		pending, err := s.PendingInbox(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) != workers*iterations {
			t.Errorf("%d inbox rows, want %d", len(pending), workers*iterations)
		}
	})
}

// TestOpenWaitsForAnotherProcess: a process opening a database another one
// holds a lock on must wait, not fail. On SQLite, converting a new file to
// WAL needs exclusive access and SQLite does not run its busy handler for
// it, so Open retries; on Postgres, another process migrating the schema
// holds the migration lock, and Open waits for it.
func TestOpenWaitsForAnotherProcess(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		loc := db.fresh(t)
		retrying := make(chan struct{})
		var once sync.Once
		hook := func() { once.Do(func() { close(retrying) }) }
		var release func() error
		var set func(*hooks)
		if db.name == DriverSQLite {
			// Another process, still in rollback-journal mode, holding the write lock.
			other, err := sql.Open("sqlite3", "file:"+loc+"?_txlock=immediate")
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			tx, err := other.BeginTx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			release = tx.Rollback
			set = func(h *hooks) { h.connectRetry = hook }
		} else {
			// Another process in the middle of migrating the schema.
			c, err := db.raw(t, loc).Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.ExecContext(t.Context(), sqlMigrateLock); err != nil {
				t.Fatal(err)
			}
			release = func() error { _, err := c.ExecContext(t.Context(), sqlMigrateUnlock); return err }
			set = func(h *hooks) { h.migrateWait = hook }
		}

		opened := make(chan error, 1)
		go func() {
			s, err := db.open(t.Context(), loc, withHooks(set))
			if err == nil {
				err = s.Close()
			}
			opened <- err
		}()
		select {
		case <-retrying: // Open hit the lock and is waiting
		case err := <-opened:
			t.Fatalf("Open returned %v while the database was locked, want it to wait", err)
		}
		if err := release(); err != nil {
			t.Fatal(err)
		}
		if err := <-opened; err != nil {
			t.Fatalf("Open after the lock was released: %v", err)
		}
	})
}

// TestConcurrentOpensOfNewDatabase: processes starting at once on a new
// database race to create it (on SQLite, to convert the file to WAL, which
// SQLite does without its busy handler: about one race in twelve failed
// before Open retried); each migration must be applied once.
func TestConcurrentOpensOfNewDatabase(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		// SQLite lost about one race in twelve; the Postgres migration lock
		// is taken or waited for every time, so fewer rounds show it.
		rounds, openers := 10, 4
		if db.dialect.postgres {
			rounds = 3
		}
		for r := range rounds {
			loc := db.fresh(t)
			var wg sync.WaitGroup
			start := make(chan struct{})
			errs := make([]error, openers)
			for i := range errs {
				wg.Go(func() {
					<-start
					s, err := db.open(t.Context(), loc)
					if err == nil {
						err = s.Close()
					}
					errs[i] = err
				})
			}
			close(start)
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("round %d: %v", r, err)
			}
			s := db.openAt(t, loc, newClock())
			if got := schemaVersions(t, s.DB()); len(got) != len(migrations) {
				t.Fatalf("round %d: versions %v, want %d", r, got, len(migrations))
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// FinishTurn with FinishInbox marks the turn's message done in the same
// transaction; without it, or for a turn no longer running, the message
// stays as it was.
func TestFinishTurnFinishesItsInbox(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		f := newFixture(t, s, "1")
		status := func(id int64) string {
			t.Helper()
			st, err := s.InboxStatus(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		turnFor := func(msgID string) (inbox, turn int64) {
			t.Helper()
			inbox, _, err := s.Intake(ctx, InboxItem{Channel: "telegram", ChatKey: "1", MessageID: msgID})
			if err != nil {
				t.Fatal(err)
			}
			turn, _, err = s.BeginTurn(ctx, TurnStart{ChatID: f.chat.ID, InboxID: inbox, Kind: "user"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return inbox, turn
		}
		done := TurnEnd{StopReason: "end_turn", Status: TurnCompleted, FinishInbox: true}
		in1, t1 := turnFor("a")
		if err := s.FinishTurn(ctx, t1, done); err != nil {
			t.Fatal(err)
		}
		if got := status(in1); got != InboxDone {
			t.Errorf("inbox after FinishTurn with FinishInbox: %s", got)
		}
		in2, t2 := turnFor("b")
		if err := s.FinishTurn(ctx, t2, TurnEnd{StopReason: "end_turn", Status: TurnCompleted}); err != nil {
			t.Fatal(err)
		}
		if got := status(in2); got != InboxPending {
			t.Errorf("inbox after FinishTurn without FinishInbox: %s", got)
		}
		// A turn already finished: nothing changes, the message included.
		if err := s.FinishTurn(ctx, t2, done); !errors.Is(err, ErrTurnNotRunning) {
			t.Fatalf("finishing a finished turn: %v", err)
		}
		if got := status(in2); got != InboxPending {
			t.Errorf("inbox after a refused FinishTurn: %s", got)
		}
	})
}

// A NUL character, which PostgreSQL text cannot hold, does not fail the
// write: SQLite stores it as it is, PostgreSQL as U+FFFD. Bytes (BYTEA)
// keep it on both.
func TestNULInText(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		f := newFixture(t, s, "1")
		payload := []byte("raw\x00bytes")
		inbox, _, err := s.Intake(ctx, InboxItem{Channel: "telegram", ChatKey: "1", MessageID: "n\x00ul", UserID: "u1", Payload: payload})
		if err != nil {
			t.Fatalf("Intake: %v", err)
		}
		turn, _, err := s.BeginTurn(ctx, TurnStart{ChatID: f.chat.ID, SessionID: f.sess.ID, InboxID: inbox, UserID: "u1",
			Channel: "telegram", Kind: "user"}, []llm.Message{{Role: llm.RoleUser, Content: "a\x00b"}})
		if err != nil {
			t.Fatalf("BeginTurn: %v", err)
		}
		if _, err := s.CommitStep(ctx, turn, 1, []StepMessage{{Message: llm.Message{Role: llm.RoleAssistant, Content: "out\x00put",
			ToolCalls: []llm.ToolCall{{ID: "c1", Name: "run", Arguments: `{"x":"\u0000"}`}}}}}, llm.Usage{}); err != nil {
			t.Fatalf("CommitStep: %v", err)
		}
		msgs, err := s.Messages(ctx, f.sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"a\x00b", "out\x00put"}
		if db.name == DriverPostgres {
			want = []string{"a\uFFFDb", "out\uFFFDput"}
		}
		if len(msgs) != 2 || msgs[0].Content != want[0] || msgs[1].Content != want[1] {
			t.Fatalf("stored %+v, want contents %q", msgs, want)
		}
		pending, err := s.PendingInbox(ctx)
		if err != nil || len(pending) != 1 || string(pending[0].Payload) != string(payload) {
			t.Errorf("inbox payload %+v (%v), want the bytes as given", pending, err)
		}
	})
}
