package store

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
)

func TestOpenAppliesConnectionSettings(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		loc := db.fresh(t)
		if db.name == DriverSQLite {
			// '?', '#' and '%' would end or alter the path part of a file: URI.
			loc = filepath.Join(t.TempDir(), "a b", "we?ird#dir%20", "chat.db")
		}
		s := db.openAt(t, loc, newClock())
		if db.name == DriverSQLite {
			if _, err := os.Stat(loc); err != nil {
				t.Fatalf("database file not at %q: %v", loc, err)
			}
		}

		// The settings must hold on every pooled connection, not just the first.
		ctx := t.Context()
		var conns []*sql.Conn
		for range 3 {
			c, err := s.DB().Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for i, c := range conns {
			if db.name == DriverSQLite {
				checkPragmas(t, i, c)
			} else {
				checkSessionSettings(t, i, c)
			}
			_ = c.Close()
		}
	})
}

func checkPragmas(t *testing.T, i int, c *sql.Conn) {
	t.Helper()
	ctx := t.Context()
	var mode string
	var fk, busy, sync, cache int
	if err := c.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&cache); err != nil {
		t.Fatal(err)
	}
	if cache != -512 {
		t.Errorf("conn %d: cache_size=%d, want -512 (KiB: the page cache bounded)", i, cache)
	}
	if err := c.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || fk != 1 || busy != 5000 || sync != 1 {
		t.Errorf("conn %d: journal_mode=%s foreign_keys=%d busy_timeout=%d synchronous=%d, want wal 1 5000 1",
			i, mode, fk, busy, sync)
	}
}

func checkSessionSettings(t *testing.T, i int, c *sql.Conn) {
	t.Helper()
	var lockTimeout, app, schema string
	if err := c.QueryRowContext(t.Context(), "SELECT current_setting('lock_timeout'), current_setting('application_name'), current_schema()").
		Scan(&lockTimeout, &app, &schema); err != nil {
		t.Fatal(err)
	}
	if lockTimeout != "5s" || app != "switchboard" || !strings.HasPrefix(schema, "sbtest_") {
		t.Errorf("conn %d: lock_timeout=%s application_name=%s schema=%s, want 5s switchboard sbtest_…", i, lockTimeout, app, schema)
	}
}

func TestOpenPostgresKeepsSettingsOfTheDSN(t *testing.T) {
	needPostgres(t)
	loc := freshSchema(t)
	loc = withParam(t, withParam(t, loc, "lock_timeout", "250ms"), "application_name", "replica-2")
	s := backends[1].openAt(t, loc, newClock())
	var lockTimeout, app string
	if err := s.DB().QueryRowContext(t.Context(), "SELECT current_setting('lock_timeout'), current_setting('application_name')").
		Scan(&lockTimeout, &app); err != nil {
		t.Fatal(err)
	}
	if lockTimeout != "250ms" || app != "replica-2" {
		t.Errorf("lock_timeout=%s application_name=%s, want the DSN's 250ms and replica-2", lockTimeout, app)
	}
}

func TestOpenEmptyLocation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		if _, err := db.open(t.Context(), ""); err == nil {
			t.Fatal(`Open("") succeeded`)
		}
	})
	if _, err := OpenDriver(t.Context(), "mysql", "x"); err == nil || !strings.Contains(err.Error(), `unknown driver "mysql"`) {
		t.Errorf("OpenDriver(mysql) err = %v, want unknown driver", err)
	}
}

// Created is true only for the Open that made the schema of a new file
// (serve skips the integrity check of such a store), also of an empty file
// that was there before.
func TestCreated(t *testing.T) {
	for _, existing := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "new.db")
		if existing {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for i, want := range []bool{true, false} {
			s, err := Open(t.Context(), path)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Created(); got != want {
				t.Errorf("empty file there before: %v; open %d: Created() = %v, want %v", existing, i+1, got, want)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestOpenPostgresErrorsHideThePassword needs no server: nothing listens on
// 127.0.0.1:1, and a DSN that does not parse fails before any connection.
func TestOpenPostgresErrorsHideThePassword(t *testing.T) {
	const pw = "s3cret-Pa55"
	for _, dsn := range []string{
		"postgres://sb:" + pw + "@127.0.0.1:1/sb?connect_timeout=5",
		"postgres://sb@127.0.0.1:1/sb?password=" + pw + "&connect_timeout=5",
		"host=127.0.0.1 port=1 user=sb password=" + pw + " dbname=sb connect_timeout=5",
		"host=127.0.0.1 port=1 user=sb password='" + pw + "' dbname=sb connect_timeout=5",
		"postgres://sb:" + pw + "@127.0.0.1:notaport/sb",              // does not parse
		"host=127.0.0.1 port=x user=sb password=" + pw + " dbname=sb", // does not parse
	} {
		s, err := OpenPostgres(t.Context(), dsn)
		if err == nil {
			s.Close()
			t.Errorf("OpenPostgres(%q) succeeded", strings.ReplaceAll(dsn, pw, "***"))
			continue
		}
		if strings.Contains(err.Error(), pw) || !strings.HasPrefix(err.Error(), "store: open postgres") {
			t.Errorf("error %q: want it to start with store: open postgres and hide the password", err)
		}
	}
}

func TestDSNPasswords(t *testing.T) {
	for _, c := range []struct {
		dsn  string
		want []string
	}{
		{"postgres://u:p%40ss@h/db", []string{"p%40ss", "p@ss"}},
		{"postgresql://u@h/db?sslmode=disable&password=qp", []string{"qp", "qp"}},
		{"host=h password = 'it\\'s here' dbname=d", []string{"it's here"}},
		{"host=h password=plain dbname=d", []string{"plain"}},
		{"postgres://u@h/db", nil},
		{"host=h user=passwordless", nil},
	} {
		if got := dsnPasswords(c.dsn); !reflect.DeepEqual(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("dsnPasswords(%q) = %q, want %q", c.dsn, got, c.want)
		}
	}
}

func schemaVersions(t *testing.T, db *sql.DB) map[int]int64 {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT version, applied_at FROM schema_version ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[int]int64{}
	for rows.Next() {
		var v int
		var at int64
		if err := rows.Scan(&v, &at); err != nil {
			t.Fatal(err)
		}
		got[v] = at
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestMigrationsIdempotentOnReopen(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		clk := newClock()
		loc := db.fresh(t)
		if db.name == DriverSQLite {
			loc = filepath.Join(t.TempDir(), "db", "s.db")
		}
		s, err := db.open(t.Context(), loc, WithClock(clk.Now))
		if err != nil {
			t.Fatal(err)
		}
		first := schemaVersions(t, s.DB())
		if len(first) != len(migrations) {
			t.Fatalf("after first open: %d versions, want %d", len(first), len(migrations))
		}
		for v, at := range first {
			if v < 1 || v > len(migrations) || at != clk.Now().UnixMilli() {
				t.Errorf("version %d applied_at %d: want 1..%d at the clock's %d", v, at, len(migrations), clk.Now().UnixMilli())
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		for range 2 {
			clk.Advance(time.Second)
			s := db.openAt(t, loc, clk)
			if got := schemaVersions(t, s.DB()); !reflect.DeepEqual(got, first) {
				t.Fatalf("after reopen: versions %v, want unchanged %v", got, first)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, loc := db.openTest(t)
		if _, err := s.DB().ExecContext(t.Context(),
			"INSERT INTO schema_version (version, name, applied_at) VALUES (99, 'future', 0)"); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		_, err := db.open(t.Context(), loc)
		if err == nil || !strings.Contains(err.Error(), "newer") {
			t.Fatalf("Open on a newer schema: err = %v, want a 'newer' error", err)
		}
	})
}

func TestFailedMigrationRollsBack(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		db := b.raw(t, b.fresh(t))
		ms := []migration{
			{1, "good", `CREATE TABLE good (a INTEGER);`},
			{2, "bad", `CREATE TABLE half (a INTEGER); CREATE TABLE broken (`},
		}
		if err := migrate(t.Context(), db, b.dialect, ms, 1, nil); err == nil {
			t.Fatal("migrate with a broken migration succeeded")
		}
		// The pending migrations are one transaction: nothing of the run
		// stays, not even the good one before the broken one.
		if got := schemaVersions(t, db); len(got) != 0 {
			t.Errorf("versions %v, want none", got)
		}
		if n := b.tableCount(t, db, "good", "half"); n != 0 {
			t.Errorf("%d of tables good/half exist, want none (the run must roll back whole)", n)
		}

		// Fixed, it applies on the next run, once.
		ms[1].sql = `CREATE TABLE half (a INTEGER);`
		for range 2 {
			if err := migrate(t.Context(), db, b.dialect, ms, 2, nil); err != nil {
				t.Fatalf("migrate: %v", err)
			}
		}
		if got := schemaVersions(t, db); !reflect.DeepEqual(got, map[int]int64{1: 2, 2: 2}) {
			t.Errorf("versions %v, want 1 and 2, applied by the second run", got)
		}
	})
}

func TestHistorySurvivesRestart(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, path := db.openTest(t)
		f := newFixture(t, s, "42")
		ctx := t.Context()
		img := llm.Image{MIME: "image/png", Data: []byte("\x89PNG....")}
		turnID, firstIDs, err := s.BeginTurn(ctx, TurnStart{ChatID: f.chat.ID, SessionID: f.sess.ID, UserID: "u1",
			Channel: "telegram", Kind: "user"},
			[]llm.Message{{Role: llm.RoleUser, Content: "weather?", Images: []llm.Image{img, {MIME: "image/jpeg", URL: "https://x/y.jpg"}}}})
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(1500 * time.Millisecond)
		if _, err := s.CommitStep(ctx, turnID, 1, toolStep(1), llm.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CommitStep(ctx, turnID, 2, []StepMessage{
			{Message: llm.Message{Role: llm.RoleUser, Content: "use the tool result"}, Hidden: true},
			{Message: llm.Message{Role: llm.RoleAssistant, Content: "Sunny in Paris."}},
		}, llm.Usage{PromptTokens: 20, CompletionTokens: 7, TotalTokens: 27}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(500 * time.Millisecond)
		if err := s.FinishTurn(ctx, turnID, TurnEnd{StopReason: llm.FinishStop, Status: TurnCompleted, Model: "m1"}); err != nil {
			t.Fatal(err)
		}
		beforeMsgs, err := s.Messages(ctx, f.sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		beforeTurn, err := s.Turn(ctx, turnID)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		s2 := db.openAt(t, path, clk)
		msgs, err := s2.Messages(ctx, f.sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(msgs, beforeMsgs) {
			t.Errorf("messages after restart differ:\n got %+v\nwant %+v", msgs, beforeMsgs)
		}
		t0 := newClock().Now()
		want := []Message{
			{ID: firstIDs[0], SessionID: f.sess.ID, TurnID: turnID, CreatedAt: t0, Message: llm.Message{Role: llm.RoleUser,
				Content: "weather?", Images: []llm.Image{{MIME: "image/png"}, {MIME: "image/jpeg", URL: "https://x/y.jpg"}}}},
		}
		for _, m := range toolStep(1) {
			want = append(want, Message{SessionID: f.sess.ID, TurnID: turnID, CreatedAt: t0.Add(1500 * time.Millisecond), Message: m.Message})
		}
		want = append(want,
			Message{SessionID: f.sess.ID, TurnID: turnID, CreatedAt: t0.Add(1500 * time.Millisecond), Hidden: true,
				Message: llm.Message{Role: llm.RoleUser, Content: "use the tool result"}},
			Message{SessionID: f.sess.ID, TurnID: turnID, CreatedAt: t0.Add(1500 * time.Millisecond),
				Message: llm.Message{Role: llm.RoleAssistant, Content: "Sunny in Paris."}})
		if len(msgs) != len(want) {
			t.Fatalf("got %d messages, want %d", len(msgs), len(want))
		}
		for i := range want {
			if i > 0 {
				want[i].ID = msgs[i].ID
				if msgs[i].ID <= msgs[i-1].ID {
					t.Errorf("message %d id %d not after %d", i, msgs[i].ID, msgs[i-1].ID)
				}
			}
			if !reflect.DeepEqual(msgs[i], want[i]) {
				t.Errorf("message %d:\n got %+v\nwant %+v", i, msgs[i], want[i])
			}
		}

		turn, err := s2.Turn(ctx, turnID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(turn, beforeTurn) {
			t.Errorf("turn after restart = %+v, want %+v", turn, beforeTurn)
		}
		end := t0.Add(2000 * time.Millisecond)
		wantTurn := Turn{ID: turnID, ChatID: f.chat.ID, SessionID: f.sess.ID, UserID: "u1", Channel: "telegram", Kind: "user",
			Status: TurnCompleted, StopReason: "stop", Model: "m1", Steps: 2,
			Usage:     llm.Usage{PromptTokens: 30, CompletionTokens: 12, TotalTokens: 42},
			StartedAt: t0, EndedAt: &end, Duration: 2000 * time.Millisecond}
		if !reflect.DeepEqual(turn, wantTurn) {
			t.Errorf("turn = %+v, want %+v", turn, wantTurn)
		}
		if c, err := s2.ChatByID(ctx, f.chat.ID); err != nil || c != f.chat {
			t.Errorf("ChatByID after restart = %+v, %v; want %+v", c, err, f.chat)
		}
		if sess, err := s2.CurrentSession(ctx, f.chat.ID); err != nil || sess.ID != f.sess.ID || sess.Messages != 6 {
			t.Errorf("CurrentSession after restart = %+v, %v; want id %d with 6 messages", sess, err, f.sess.ID)
		}
	})
}

func TestEnsureChat(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		ctx := t.Context()
		c1, err := s.EnsureChat(ctx, "telegram", "-100", "group", "Old")
		if err != nil {
			t.Fatal(err)
		}
		if c1.ID == 0 || c1.Channel != "telegram" || c1.Key != "-100" || c1.Type != "group" || c1.Title != "Old" ||
			!c1.CreatedAt.Equal(clk.Now()) || c1.CreatedAt.Location() != time.UTC {
			t.Fatalf("new chat = %+v", c1)
		}
		clk.Advance(time.Hour)
		steps := []struct {
			typ, title         string
			wantTyp, wantTitle string
		}{
			{"group", "Old", "group", "Old"},
			{"supergroup", "New", "supergroup", "New"},
			{"", "", "supergroup", "New"}, // empty never erases
			{"", "Newer", "supergroup", "Newer"},
		}
		for _, st := range steps {
			c, err := s.EnsureChat(ctx, "telegram", "-100", st.typ, st.title)
			if err != nil {
				t.Fatal(err)
			}
			want := Chat{ID: c1.ID, Channel: "telegram", Key: "-100", Type: st.wantTyp, Title: st.wantTitle, CreatedAt: c1.CreatedAt}
			if c != want {
				t.Errorf("EnsureChat(%q, %q) = %+v, want %+v", st.typ, st.title, c, want)
			}
		}
		other, err := s.EnsureChat(ctx, "discord", "-100", "group", "Old")
		if err != nil {
			t.Fatal(err)
		}
		if other.ID == c1.ID {
			t.Error("same key on another channel reused the chat")
		}
		if _, err := s.EnsureChat(ctx, "", "x", "", ""); err == nil {
			t.Error("EnsureChat with empty channel succeeded")
		}
		if _, err := s.ChatByID(ctx, 999); !errors.Is(err, ErrNotFound) {
			t.Errorf("ChatByID(999) err = %v, want ErrNotFound", err)
		}
	})
}

func TestSessions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		ctx := t.Context()
		f := newFixture(t, s, "1")
		again, err := s.CurrentSession(ctx, f.chat.ID)
		if err != nil || again.ID != f.sess.ID || again.EndedAt != nil {
			t.Fatalf("CurrentSession again = %+v, %v; want stable id %d, open", again, err, f.sess.ID)
		}
		if _, err := s.CurrentSession(ctx, 999); !errors.Is(err, ErrNotFound) {
			t.Errorf("CurrentSession(unknown chat) err = %v, want ErrNotFound", err)
		}
		if _, err := s.NewSession(ctx, 999); !errors.Is(err, ErrNotFound) {
			t.Errorf("NewSession(unknown chat) err = %v, want ErrNotFound", err)
		}

		f.beginTurn(t, s, "hello")
		oldMsgs, err := s.Messages(ctx, f.sess.ID)
		if err != nil || len(oldMsgs) != 1 {
			t.Fatalf("Messages = %v, %v; want 1", oldMsgs, err)
		}

		clk.Advance(time.Minute)
		ended := clk.Now()
		next, err := s.NewSession(ctx, f.chat.ID)
		if err != nil {
			t.Fatal(err)
		}
		if next.ID == f.sess.ID || next.EndedAt != nil || !next.StartedAt.Equal(ended) || next.Messages != 0 {
			t.Errorf("NewSession = %+v, want a new open session started at %v", next, ended)
		}
		cur, err := s.CurrentSession(ctx, f.chat.ID)
		if err != nil || cur.ID != next.ID {
			t.Errorf("CurrentSession after NewSession = %+v, %v; want %d", cur, err, next.ID)
		}
		if got, err := s.Messages(ctx, f.sess.ID); err != nil || !reflect.DeepEqual(got, oldMsgs) {
			t.Errorf("old session messages = %v, %v; want %v", got, err, oldMsgs)
		}
		if got, err := s.Messages(ctx, next.ID); err != nil || len(got) != 0 {
			t.Errorf("new session messages = %v, %v; want none", got, err)
		}

		all, err := s.Sessions(ctx, f.chat.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := []Session{
			{ID: next.ID, ChatID: f.chat.ID, StartedAt: ended},
			{ID: f.sess.ID, ChatID: f.chat.ID, StartedAt: f.sess.StartedAt, EndedAt: &ended, Messages: 1},
		}
		if !reflect.DeepEqual(all, want) {
			t.Errorf("Sessions = %+v, want %+v", all, want)
		}
		if got, err := s.Session(ctx, f.sess.ID); err != nil || !reflect.DeepEqual(got, want[1]) {
			t.Errorf("Session(old) = %+v, %v; want %+v", got, err, want[1])
		}

		// A turn without a session id lands in the current session.
		id, _, err := s.BeginTurn(ctx, TurnStart{ChatID: f.chat.ID, Kind: "job"}, []llm.Message{{Role: llm.RoleUser, Content: "tick"}})
		if err != nil {
			t.Fatal(err)
		}
		if tr, err := s.Turn(ctx, id); err != nil || tr.SessionID != next.ID {
			t.Errorf("turn session = %d, %v; want current %d", tr.SessionID, err, next.ID)
		}
	})
}

func TestSummaries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		f := newFixture(t, s, "1")
		if _, _, ok, err := s.LatestSummary(ctx, f.sess.ID); err != nil || ok {
			t.Fatalf("LatestSummary on empty = ok %v, %v; want none", ok, err)
		}
		turn := f.beginTurn(t, s, "one")
		ids, err := s.CommitStep(ctx, turn, 1, toolStep(1), llm.Usage{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SaveSummary(ctx, f.sess.ID, ids[0], "first"); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveSummary(ctx, f.sess.ID, ids[2], "second"); err != nil {
			t.Fatal(err)
		}
		text, upTo, ok, err := s.LatestSummary(ctx, f.sess.ID)
		if err != nil || !ok || text != "second" || upTo != ids[2] {
			t.Errorf("LatestSummary = %q, %d, %v, %v; want second, %d", text, upTo, ok, err, ids[2])
		}
		after, err := s.MessagesAfter(ctx, f.sess.ID, ids[0])
		if err != nil || len(after) != 2 || after[0].ID != ids[1] || after[1].ID != ids[2] {
			t.Errorf("MessagesAfter(%d) = %+v, %v; want ids %v", ids[0], after, err, ids[1:])
		}

		g := newFixture(t, s, "2")
		if err := s.SaveSummary(ctx, g.sess.ID, ids[0], "wrong session"); err == nil {
			t.Error("SaveSummary with another session's message succeeded")
		}
		if err := s.SaveSummary(ctx, f.sess.ID, 999, "x"); !errors.Is(err, ErrNotFound) {
			t.Errorf("SaveSummary(unknown message) err = %v, want ErrNotFound", err)
		}
		if _, _, ok, _ := s.LatestSummary(ctx, g.sess.ID); ok {
			t.Error("a failed SaveSummary left a summary")
		}
	})
}

func TestState(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, path := db.openTest(t)
		ctx := t.Context()
		if _, ok, err := s.GetState(ctx, "telegram/offset"); err != nil || ok {
			t.Fatalf("GetState(missing) ok=%v err=%v", ok, err)
		}
		for _, v := range []string{"17", "18", ""} {
			if err := s.SetState(ctx, "telegram/offset", v); err != nil {
				t.Fatal(err)
			}
			if got, ok, err := s.GetState(ctx, "telegram/offset"); err != nil || !ok || got != v {
				t.Errorf("GetState = %q, %v, %v; want %q", got, ok, err, v)
			}
		}
		if err := s.SetState(ctx, "", "x"); err == nil {
			t.Error("SetState with empty key succeeded")
		}
		if err := s.SetState(ctx, "flag", "on"); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s2 := db.openAt(t, path, clk)
		if got, ok, err := s2.GetState(ctx, "flag"); err != nil || !ok || got != "on" {
			t.Errorf("GetState after restart = %q, %v, %v; want on", got, ok, err)
		}
	})
}

func TestStatsAndPing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		if err := s.Ping(ctx); err != nil {
			t.Fatalf("Ping: %v", err)
		}
		f := newFixture(t, s, "1")
		t1 := f.beginTurn(t, s, "a")
		f.beginTurn(t, s, "b")
		if _, err := s.CommitStep(ctx, t1, 1, toolStep(1), llm.Usage{}); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishTurn(ctx, t1, TurnEnd{Status: TurnFailed, Error: "boom"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Intake(ctx, InboxItem{Channel: "telegram", ChatKey: "1", MessageID: "m1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.NewSession(ctx, f.chat.ID); err != nil {
			t.Fatal(err)
		}
		got, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := Stats{Chats: 1, Sessions: 2, Messages: 5,
			Turns: map[string]int{TurnRunning: 1, TurnFailed: 1}, Inbox: map[string]int{InboxPending: 1}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Stats = %+v, want %+v", got, want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Ping(ctx); err == nil {
			t.Error("Ping after Close succeeded")
		}
	})
}

// TestPingReportsReadOnlyDatabase: a database that opens but takes no
// writes (a read-only SQLite file; a Postgres standby or read-only role)
// fails Ping and writes with Unavailable's "storage is read-only".
func TestPingReportsReadOnlyDatabase(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, loc := db.openTest(t)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		var ro *Store
		var err error
		if db.dialect.postgres {
			ro, err = db.open(t.Context(), withParam(t, loc, "default_transaction_read_only", "on"))
		} else {
			ro, err = db.open(t.Context(), loc, WithReadOnly())
		}
		if err != nil {
			t.Fatalf("Open read-only: %v", err)
		}
		defer ro.Close()
		err = ro.Ping(t.Context())
		if why, ok := Unavailable(err); !ok || why != "storage is read-only" {
			t.Errorf("Ping = %v (Unavailable %q, %v), want storage is read-only", err, why, ok)
		}
		_, _, err = ro.Intake(t.Context(), InboxItem{Channel: "telegram", ChatKey: "1", MessageID: "1"})
		if why, ok := Unavailable(err); !ok || why != "storage is read-only" {
			t.Errorf("Intake = %v (Unavailable %q, %v), want storage is read-only", err, why, ok)
		}
	})
}

// OpenSession is the turn's CurrentSession: the same session, opened if
// needed, without counting its messages.
func TestOpenSession(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		chat, err := s.EnsureChat(ctx, "telegram", "42", "private", "")
		if err != nil {
			t.Fatal(err)
		}
		opened, err := s.OpenSession(ctx, chat.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.BeginTurn(ctx, TurnStart{ChatID: chat.ID, SessionID: opened.ID, UserID: "u", Channel: "telegram", Kind: "user"},
			[]llm.Message{{Role: llm.RoleUser, Content: "hi"}}); err != nil {
			t.Fatal(err)
		}
		full, err := s.CurrentSession(ctx, chat.ID)
		if err != nil || full.ID != opened.ID || full.Messages != 1 {
			t.Fatalf("CurrentSession = %+v %v; want session %d with 1 message", full, err, opened.ID)
		}
		again, err := s.OpenSession(ctx, chat.ID)
		if err != nil || again.ID != opened.ID || again.Messages != 0 {
			t.Fatalf("OpenSession again = %+v %v; want session %d, messages not counted", again, err, opened.ID)
		}
		if _, err := s.OpenSession(ctx, chat.ID+1000); !errors.Is(err, ErrNotFound) {
			t.Fatalf("OpenSession of a missing chat: %v", err)
		}
	})
}

// ReleaseIdle closes the idle connections but one (keepWarm on SQLite), and
// the pool keeps maxIdleConns afterwards.
func TestReleaseIdle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		releaseIdle(t, s)
	})
}

func releaseIdle(t *testing.T, s *Store) {
	ctx := t.Context()
	hold := func() {
		var conns []*sql.Conn
		for range 4 {
			c, err := s.DB().Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.PingContext(ctx); err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			_ = c.Close()
		}
	}
	hold()
	if n := s.DB().Stats().Idle; n < 4 {
		t.Fatalf("%d idle connections after using 4, want at least 4", n)
	}
	s.ReleaseIdle()
	want := 1 // PostgreSQL: server sessions
	if s.Driver() == DriverSQLite {
		want = keepWarm // warm for the next turn, their page caches emptied
	}
	if n := s.DB().Stats().Idle; n != want {
		t.Errorf("%d idle connections after ReleaseIdle, want %d", n, want)
	}
	hold()
	if n := s.DB().Stats().Idle; n < 4 {
		t.Errorf("%d idle connections after using 4 again, want at least 4 (the pool's bound put back)", n)
	}
}
