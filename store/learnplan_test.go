package store

import (
	"fmt"
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
		if (name == "messages" || name == "backlog") && !strings.Contains(all, "USING INDEX messages_session (session_id=?") {
			t.Errorf("%s query does not read the session's messages through messages_session:\n%s", name, all)
		}
	}
}
