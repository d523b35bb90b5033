package store

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
)

// A chat's pending approval and open plan are found from the moment the
// call that wrote them returns, and gone from the moment the call that
// ended them returns, also when an earlier check remembered the chat as
// having none.
func TestApprovalAndPlanChecks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, _, _ := b.openTest(t)
		ctx := t.Context()
		turn := newFixture(t, s, "c1").beginTurn(t, s, "hi")
		pending := func(chat string) bool { t.Helper(); return hasPendingApproval(t, s, chat) }
		open := func(chat string) (Plan, bool) {
			t.Helper()
			p, found, err := s.OpenPlan(ctx, "telegram", chat)
			if err != nil {
				t.Fatal(err)
			}
			return p, found
		}

		if pending("c1") {
			t.Fatal("a new chat has a pending approval")
		}
		if pending("c1") { // the second check is answered from the set on SQLite
			t.Fatal("a new chat has a pending approval at the second check")
		}
		id, err := s.CreateApproval(ctx, Approval{TurnID: turn, ChatKey: "c1", Channel: "telegram", UserID: "u1",
			Calls: []llm.ToolCall{{ID: "1", Name: "run"}}, Origin: []byte("{}")}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if !pending("c1") {
			t.Fatal("the approval just created is not pending")
		}
		if pending("c2") {
			t.Error("another chat has the approval")
		}
		if won, err := s.DecideApproval(ctx, id, "approved", ""); err != nil || !won {
			t.Fatalf("DecideApproval = %v, %v", won, err)
		}
		if pending("c1") {
			t.Error("the decided approval is still pending")
		}

		if _, found := open("c1"); found {
			t.Fatal("a new chat has an open plan")
		}
		open("c1")
		pid, err := s.CreatePlan(ctx, Plan{Channel: "telegram", ChatKey: "c1", UserID: "u1", Task: "t",
			Steps: []PlanStep{{Title: "one"}}, Origin: []byte("{}")})
		if err != nil {
			t.Fatal(err)
		}
		p, found := open("c1")
		if !found || p.ID != pid || p.Status != "running" {
			t.Fatalf("OpenPlan = %+v, %v; want plan %d running", p, found, pid)
		}
		p.Status = "waiting"
		if err := s.UpdatePlan(ctx, p); err != nil {
			t.Fatal(err)
		}
		if p, found = open("c1"); !found || p.Status != "waiting" {
			t.Fatalf("OpenPlan = %+v, %v; want it waiting", p, found)
		}
		if won, err := s.ClaimPlan(ctx, pid); err != nil || !won {
			t.Fatalf("ClaimPlan = %v, %v", won, err)
		}
		p.Status = "done"
		if err := s.UpdatePlan(ctx, p); err != nil {
			t.Fatal(err)
		}
		if _, found := open("c1"); found {
			t.Error("the finished plan is still open")
		}
	})
}

// The set trusts that this store makes every change: a row written behind
// its back (on SQLite only another process could, and one process owns the
// file) stays unseen until the store's next write of that kind. This shows
// that the checks cost no query: for a chat checked before (c1), and while
// no chat has a pending approval, for a chat never checked (c3) as well.
// With an approval pending somewhere (c2's), a chat's own row is looked
// up. PostgreSQL, where replicas write too, queries every time.
func TestAbsentSetAnswersWithoutQuery(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, _, loc := b.openTest(t)
		ctx := t.Context()
		turn := newFixture(t, s, "c1").beginTurn(t, s, "hi")
		pending := func(chat string) bool { t.Helper(); return hasPendingApproval(t, s, chat) }
		if pending("c1") {
			t.Fatal("c1 has a pending approval")
		}
		raw := b.raw(t, loc)
		for _, chat := range []string{"c1", "c3"} {
			if _, err := raw.ExecContext(ctx, b.dialect.rebind(`INSERT INTO approvals (turn_id, channel, chat_key, user_id, calls, origin, status, created_at, expires_at)
VALUES (?, 'telegram', ?, 'u1', '[]', '', 'pending', 0, 0)`), turn, chat); err != nil {
				t.Fatal(err)
			}
		}
		for _, chat := range []string{"c1", "c3"} {
			if want := b.name == DriverPostgres; pending(chat) != want {
				t.Errorf("%s after a write behind the store's back: found %v, want %v", chat, !want, want)
			}
		}
		if _, err := s.CreateApproval(ctx, Approval{TurnID: turn, Channel: "telegram", ChatKey: "c2", Origin: []byte("{}")}, time.Hour); err != nil {
			t.Fatal(err)
		}
		for _, chat := range []string{"c1", "c2", "c3"} {
			if !pending(chat) {
				t.Errorf("%s after the store's own write: not found, want the row", chat)
			}
		}
		if pending("c4") {
			t.Error("c4, with approvals pending in other chats, has one")
		}
	})
}

// Under -race: checks of many chats run alongside the writes of others,
// and each writer sees its own writes at once.
func TestAbsentSetConcurrent(t *testing.T) {
	s, _, _ := backends[0].openTest(t)
	ctx := t.Context()
	turn := newFixture(t, s, "c1").beginTurn(t, s, "hi")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 8 {
		chat := fmt.Sprint("w", w)
		wg.Go(func() {
			for range 10 {
				id, err := s.CreateApproval(ctx, Approval{TurnID: turn, Channel: "telegram", ChatKey: chat, Origin: []byte("{}")}, time.Hour)
				if err != nil {
					errs <- err
					return
				}
				if _, found, err := s.PendingApproval(ctx, "telegram", chat); err != nil || !found {
					errs <- fmt.Errorf("%s: approval %d not found after its creation (%v)", chat, id, err)
					return
				}
				if _, err := s.DecideApproval(ctx, id, "denied", "no"); err != nil {
					errs <- err
					return
				}
				if _, found, err := s.PendingApproval(ctx, "telegram", chat); err != nil || found {
					errs <- fmt.Errorf("%s: approval %d still pending after its decision (%v)", chat, id, err)
					return
				}
			}
		})
		wg.Go(func() {
			for i := range 50 {
				if _, found, err := s.PendingApproval(ctx, "telegram", fmt.Sprint("r", w, "-", i%5)); err != nil || found {
					errs <- fmt.Errorf("reader: found %v, %v", found, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// The set is bounded: past absentMax chats it starts again empty.
func TestAbsentSetBounded(t *testing.T) {
	a := newAbsentSet()
	none := func() (int, bool, error) { return 0, false, nil }
	some := func() (bool, error) { return true, nil } // rows elsewhere: each chat is looked up
	for i := range absentMax + 10 {
		if _, _, err := lookupUnlessAbsent(a, "c", fmt.Sprint(i), none, some); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(a.at); n != 10 {
		t.Errorf("%d chats remembered after %d, want 10 (emptied at %d)", n, absentMax+10, absentMax)
	}
}

// hasPendingApproval reports whether the telegram chat has a pending approval.
func hasPendingApproval(t *testing.T, s *Store, chat string) bool {
	t.Helper()
	_, found, err := s.PendingApproval(t.Context(), "telegram", chat)
	if err != nil {
		t.Fatal(err)
	}
	return found
}
