package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/llm"
)

// fillToCap writes ballast until the database is at its page cap.
func fillToCap(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, `CREATE TABLE ballast (b BLOB)`); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		_, err := db.ExecContext(ctx, `INSERT INTO ballast VALUES (randomblob(1000))`)
		if why, ok := Unavailable(err); ok && why == "storage is full" {
			return
		}
		if err != nil || i > 100_000 {
			t.Fatalf("ballast row %d: %v, want the cap reached", i, err)
		}
	}
}

func integrityOK(t *testing.T, db *sql.DB) {
	t.Helper()
	var res string
	if err := db.QueryRowContext(t.Context(), `PRAGMA integrity_check`).Scan(&res); err != nil || res != "ok" {
		t.Fatalf("integrity_check = %q, %v", res, err)
	}
}

func TestFullDatabase(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "full.db"), WithMaxPages(200))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f := newFixture(t, s, "42")
	turn := f.beginTurn(t, s, "remember: apple")
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping before the cap = %v", err)
	}
	fillToCap(t, s.DB())

	if err := s.Ping(ctx); !isFull(err) {
		t.Errorf("Ping at the cap = %v, want storage is full", err)
	}
	big := InboxItem{Channel: "telegram", ChatKey: "42", MessageID: "m1", Payload: []byte(strings.Repeat("x", 5000))}
	if _, _, err := s.Intake(ctx, big); !isFull(err) {
		t.Fatalf("Intake at the cap = %v, want storage is full", err)
	}
	_, err = s.CommitStep(ctx, turn, 1, []StepMessage{{Message: llm.Message{Role: llm.RoleAssistant, Content: strings.Repeat("y", 6000)}}}, llm.Usage{})
	if !isFull(err) {
		t.Fatalf("CommitStep at the cap = %v, want storage is full", err)
	}
	integrityOK(t, s.DB())
	if msgs, err := s.MessagesAfter(ctx, f.sess.ID, 0); err != nil || len(msgs) != 1 || msgs[0].Content != "remember: apple" {
		t.Fatalf("messages after the failed writes = %+v, %v; want the first one only", msgs, err)
	}

	// Space is freed: the failed write is still reported until a write
	// succeeds.
	if _, err := s.DB().ExecContext(ctx, `DELETE FROM ballast`); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err == nil || !strings.Contains(err.Error(), "the last write failed") {
		t.Errorf("Ping after freeing space, before a write = %v, want the last write's failure", err)
	}
	if _, _, err := s.Intake(ctx, big); err != nil {
		t.Fatalf("Intake after freeing space: %v", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping after a successful write = %v", err)
	}
	integrityOK(t, s.DB())
}

func TestReadOnlyDatabase(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "ro.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Intake(ctx, InboxItem{Channel: "telegram", ChatKey: "42", MessageID: "m1"}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	ro, err := Open(ctx, path, WithReadOnly())
	if err != nil {
		t.Fatalf("Open read-only: %v", err)
	}
	if p, err := ro.PendingInbox(ctx); err != nil || len(p) != 1 {
		t.Fatalf("PendingInbox read-only = %+v, %v; want the stored message", p, err)
	}
	_, _, err = ro.Intake(ctx, InboxItem{Channel: "telegram", ChatKey: "42", MessageID: "m2"})
	if why, ok := Unavailable(err); !ok || why != "storage is read-only" {
		t.Fatalf("Intake read-only = %v (%q), want storage is read-only", err, why)
	}
	if _, ok := Unavailable(ro.Ping(ctx)); !ok {
		t.Errorf("Ping read-only = %v, want a read-only error", ro.Ping(ctx))
	}
	integrityOK(t, ro.DB())
	ro.Close()

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping writable again = %v", err)
	}
}

func TestUnavailable(t *testing.T) {
	for _, err := range []error{nil, errors.New("database or disk is full"), context.Canceled, ErrNotFound} {
		if why, ok := Unavailable(err); ok {
			t.Errorf("Unavailable(%v) = %q, want false", err, why)
		}
	}
}

func isFull(err error) bool {
	why, ok := Unavailable(err)
	return ok && why == "storage is full"
}
