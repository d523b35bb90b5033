package store

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestLearningQueryPlan checks that the learning queries read through
// indexes, in order: no temporary B-tree to sort, no scan of a table, so
// their cost does not grow with the chat's length.
func TestLearningQueryPlan(t *testing.T) {
	s, _, _ := backends[0].openTest(t)
	f := newFixture(t, s, "p1")
	for i := range 50 {
		turnFor(t, s, f, "u1", "user", fmt.Sprint("message ", i), "answer", true)
	}
	if _, err := s.raw.ExecContext(t.Context(), "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]string{
		"messages": sqlLearnMsgs, "backlog": sqlLearnBacklog, "barrier": sqlLearnBarrier, "sessions": sqlLearnSessions,
	} {
		args := make([]any, strings.Count(q, "?"))
		for i := range args {
			args[i] = 1
		}
		rows, err := s.raw.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		all := strings.Join(plan, "\n")
		for _, bad := range []string{"TEMP B-TREE", "SCAN "} {
			if strings.Contains(all, bad) {
				t.Errorf("%s query plan has %q:\n%s", name, bad, all)
			}
		}
		t.Logf("%s:\n%s", name, all)
		if (name == "messages" || name == "backlog") && !strings.Contains(all, "USING INDEX messages_session (session_id=?") {
			t.Errorf("%s query does not read the session's messages through messages_session:\n%s", name, all)
		}
	}
}

// The learning-pass migration gives each user and chat one learning-pass cursor at the
// older of its memory and profile cursors, so no message is skipped.
func TestMigrationMergesLearningCursors(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		db := b.raw(t, b.fresh(t))
		ctx := t.Context()
		before := slices.IndexFunc(migrations, func(m migration) bool { return m.sql == migrationLearningPass })
		if err := migrate(ctx, db, b.dialect, migrations[:before], 1, nil); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			`INSERT INTO chats (id, channel, chat_key, created_at, updated_at) VALUES (1, 'tg', 'c1', 0, 0)`,
			`INSERT INTO learning_cursors (job, user_key, chat_id, message_id, updated_at) VALUES
				('memory', 'tg:a', 1, 50, 1), ('profile', 'tg:a', 1, 30, 2), ('memory', 'tg:b', 1, 70, 3), ('skills', 'tg:a', 1, 90, 4)`,
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		if err := migrate(ctx, db, b.dialect, migrations, 2, nil); err != nil {
			t.Fatal(err)
		}
		rows, err := db.QueryContext(ctx, `SELECT job, user_key, message_id FROM learning_cursors ORDER BY job, user_key`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var job, user string
			var pos int64
			if err := rows.Scan(&job, &user, &pos); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s %s %d", job, user, pos))
		}
		if want := []string{"learn tg:a 30", "learn tg:b 70", "skills tg:a 90"}; !slices.Equal(got, want) {
			t.Errorf("cursors after the migration = %q, want %q", got, want)
		}
	})
}
