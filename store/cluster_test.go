package store

import (
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

const leaseTTL = 30 * time.Second

// heartbeat records replicas as alive at the clock's time.
func heartbeat(t *testing.T, s *Store, replicas ...string) {
	t.Helper()
	for _, r := range replicas {
		if err := s.Heartbeat(t.Context(), r, "host-"+r); err != nil {
			t.Fatalf("Heartbeat(%s): %v", r, err)
		}
	}
}

func acquireChat(t *testing.T, s *Store, chat, owner string) bool {
	t.Helper()
	ok, err := s.AcquireChat(t.Context(), "telegram", chat, owner, leaseTTL)
	if err != nil {
		t.Fatalf("AcquireChat(%s, %s): %v", chat, owner, err)
	}
	return ok
}

func acquireRole(t *testing.T, s *Store, role, owner string) bool {
	t.Helper()
	ok, err := s.AcquireRole(t.Context(), role, owner, leaseTTL)
	if err != nil {
		t.Fatalf("AcquireRole(%s, %s): %v", role, owner, err)
	}
	return ok
}

func leases(t *testing.T, s *Store, owner string) []Lease {
	t.Helper()
	ls, err := s.Leases(t.Context(), owner)
	if err != nil {
		t.Fatalf("Leases(%s): %v", owner, err)
	}
	return ls
}

// chatHolder is the owner of the chat's lease row, "" when there is none.
func chatHolder(t *testing.T, s *Store, chat string) string {
	t.Helper()
	var owner string
	err := s.db.QueryRowContext(t.Context(), `SELECT owner FROM chat_leases WHERE channel = 'telegram' AND chat_key = ?`, chat).Scan(&owner)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return owner
}

func pendingItem(t *testing.T, s *Store, chat, msg string) int64 {
	t.Helper()
	id, _, err := s.Intake(t.Context(), InboxItem{Channel: "telegram", ChatKey: chat, MessageID: msg, Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestHeartbeatAndReplicas(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		ctx := t.Context()
		t0 := clk.Now()
		if rs, err := s.Replicas(ctx); err != nil || len(rs) != 0 {
			t.Fatalf("Replicas on a new store = %v, %v; want none", rs, err)
		}
		if err := s.Heartbeat(ctx, "r2", "v1"); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
		if err := s.Heartbeat(ctx, "r1", "other"); err != nil {
			t.Fatal(err)
		}
		clk.Advance(4 * time.Second)
		if err := s.Heartbeat(ctx, "r2", "v2"); err != nil {
			t.Fatal(err)
		}
		rs, err := s.Replicas(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []Replica{
			{ID: "r1", Info: "other", StartedAt: t0.Add(time.Second), HeartbeatAt: t0.Add(time.Second)},
			{ID: "r2", Info: "v2", StartedAt: t0, HeartbeatAt: t0.Add(5 * time.Second)},
		}
		if !reflect.DeepEqual(rs, want) {
			t.Errorf("Replicas = %+v\nwant %+v", rs, want)
		}
	})
}

func TestAcquireChatLiveness(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		t0 := clk.Now()
		heartbeat(t, s, "a", "b")

		if !acquireChat(t, s, "1", "a") {
			t.Fatal("a could not take a free chat")
		}
		if acquireChat(t, s, "1", "b") {
			t.Fatal("b took a chat a holds with a fresh heartbeat")
		}
		// The holder takes it again; its acquired_at stays.
		clk.Advance(time.Second)
		heartbeat(t, s, "a")
		if !acquireChat(t, s, "1", "a") {
			t.Fatal("a could not take again the chat it holds")
		}
		if got, want := leases(t, s, "a"), []Lease{{Channel: "telegram", ChatKey: "1", Owner: "a", AcquiredAt: t0}}; !reflect.DeepEqual(got, want) {
			t.Errorf("Leases(a) after taking it again = %+v, want %+v", got, want)
		}

		// a's heartbeat (t0+1s) is live until exactly ttl later.
		clk.Advance(leaseTTL - time.Millisecond)
		heartbeat(t, s, "b")
		if acquireChat(t, s, "1", "b") {
			t.Fatal("b took the chat 1ms before a's heartbeat expired")
		}
		clk.Advance(time.Millisecond)
		if !acquireChat(t, s, "1", "b") {
			t.Fatal("b could not take the chat of a, dead for ttl")
		}
		if got, want := leases(t, s, "b"), []Lease{{Channel: "telegram", ChatKey: "1", Owner: "b", AcquiredAt: clk.Now()}}; !reflect.DeepEqual(got, want) {
			t.Errorf("Leases(b) after the takeover = %+v, want %+v", got, want)
		}
		if got := leases(t, s, "a"); len(got) != 0 {
			t.Errorf("Leases(a) after the takeover = %+v, want none", got)
		}
		// a comes back: b is live now.
		heartbeat(t, s, "a")
		if acquireChat(t, s, "1", "a") {
			t.Error("a took the chat back from live b")
		}
	})
}

func TestAcquireChatFromOwnerWithoutReplicaRow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		heartbeat(t, s, "a")
		// An owner that never heartbeat may take a free chat…
		if !acquireChat(t, s, "1", "ghost") {
			t.Fatal("ghost could not take a free chat")
		}
		if !acquireChat(t, s, "1", "ghost") {
			t.Fatal("ghost could not take again the chat it holds")
		}
		// …but is dead to the others.
		if !acquireChat(t, s, "1", "a") {
			t.Fatal("a could not take the chat of an owner without a replicas row")
		}
		if got := chatHolder(t, s, "1"); got != "a" {
			t.Errorf("holder = %q, want a", got)
		}
		// The chat lease is per chat: another chat is still free.
		if !acquireChat(t, s, "2", "ghost") || chatHolder(t, s, "1") != "a" {
			t.Error("taking chat 2 changed chat 1")
		}
		// And per channel.
		if ok, err := s.AcquireChat(t.Context(), "discord", "1", "ghost", leaseTTL); err != nil || !ok {
			t.Errorf("AcquireChat(discord/1) = %v, %v; want a free chat", ok, err)
		}
	})
}

func TestAcquireRole(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		t0 := clk.Now()
		heartbeat(t, s, "a", "b")
		if !acquireRole(t, s, "scheduler", "a") {
			t.Fatal("a could not take a free role")
		}
		if acquireRole(t, s, "scheduler", "b") {
			t.Fatal("b took a role a holds with a fresh heartbeat")
		}
		if !acquireRole(t, s, "learning", "b") {
			t.Fatal("b could not take another free role")
		}
		clk.Advance(time.Second)
		if !acquireRole(t, s, "scheduler", "a") {
			t.Fatal("a could not take again the role it holds")
		}
		if got, want := leases(t, s, "a"), []Lease{{Role: "scheduler", Owner: "a", AcquiredAt: t0}}; !reflect.DeepEqual(got, want) {
			t.Errorf("Leases(a) = %+v, want %+v", got, want)
		}

		// Releasing someone else's role changes nothing.
		if err := s.ReleaseRole(t.Context(), "scheduler", "b"); err != nil {
			t.Fatal(err)
		}
		if acquireRole(t, s, "scheduler", "b") {
			t.Fatal("b took the role after releasing a's")
		}
		if err := s.ReleaseRole(t.Context(), "scheduler", "a"); err != nil {
			t.Fatal(err)
		}
		if !acquireRole(t, s, "scheduler", "b") {
			t.Fatal("b could not take the role a released")
		}

		// b's heartbeat expires: a takes both roles over.
		clk.Advance(leaseTTL)
		heartbeat(t, s, "a")
		if !acquireRole(t, s, "scheduler", "a") || !acquireRole(t, s, "learning", "a") {
			t.Fatal("a could not take the roles of b, dead for ttl")
		}
		want := []Lease{
			{Role: "learning", Owner: "a", AcquiredAt: clk.Now()},
			{Role: "scheduler", Owner: "a", AcquiredAt: clk.Now()},
		}
		if got := leases(t, s, "a"); !reflect.DeepEqual(got, want) {
			t.Errorf("Leases(a) = %+v, want %+v", got, want)
		}
		// An owner without a replicas row is dead too.
		if !acquireRole(t, s, "janitor", "ghost") || !acquireRole(t, s, "janitor", "a") {
			t.Error("a could not take the role of an owner without a replicas row")
		}
	})
}

func TestReleaseChatKeepsChatsWithPendingItems(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		heartbeat(t, s, "a", "b")
		item := pendingItem(t, s, "1", "m1")
		pendingItem(t, s, "2", "m1") // another chat's pending item does not keep chat 1
		if _, _, err := s.Intake(ctx, InboxItem{Channel: "discord", ChatKey: "1", MessageID: "m1"}); err != nil {
			t.Fatal(err) // nor does another channel's
		}
		if !acquireChat(t, s, "1", "a") {
			t.Fatal("a could not take a free chat")
		}

		released, err := s.ReleaseChat(ctx, "telegram", "1", "a")
		if err != nil || released {
			t.Fatalf("ReleaseChat with a pending item = %v, %v; want false", released, err)
		}
		if got := chatHolder(t, s, "1"); got != "a" {
			t.Fatalf("holder after a refused release = %q, want a", got)
		}
		if acquireChat(t, s, "1", "b") {
			t.Fatal("b took the chat a could not release")
		}

		if err := s.FinishInbox(ctx, item, InboxDone); err != nil {
			t.Fatal(err)
		}
		// b holds no lease on the chat: released, and a's lease stays.
		if released, err := s.ReleaseChat(ctx, "telegram", "1", "b"); err != nil || !released {
			t.Errorf("ReleaseChat by b, which does not hold it = %v, %v; want true", released, err)
		}
		if got := chatHolder(t, s, "1"); got != "a" {
			t.Fatalf("holder after b's release = %q, want a", got)
		}
		if released, err := s.ReleaseChat(ctx, "telegram", "1", "a"); err != nil || !released {
			t.Fatalf("ReleaseChat after the item is done = %v, %v; want true", released, err)
		}
		if got := chatHolder(t, s, "1"); got != "" {
			t.Fatalf("holder after the release = %q, want none", got)
		}
		if released, err := s.ReleaseChat(ctx, "telegram", "1", "a"); err != nil || !released {
			t.Errorf("second ReleaseChat = %v, %v; want true", released, err)
		}
		if !acquireChat(t, s, "1", "b") {
			t.Error("b could not take the released chat")
		}
	})
}

func TestRetireReplicaFreesEverything(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		ctx := t.Context()
		heartbeat(t, s, "a", "b")
		for _, c := range []string{"1", "2"} {
			if !acquireChat(t, s, c, "a") {
				t.Fatal("a could not take a free chat")
			}
		}
		if !acquireRole(t, s, "scheduler", "a") || !acquireChat(t, s, "3", "b") || !acquireRole(t, s, "learning", "b") {
			t.Fatal("could not take free leases")
		}
		pendingItem(t, s, "1", "m1") // a pending item does not keep a retiring replica's chat
		if err := s.RetireReplica(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if got := leases(t, s, "a"); len(got) != 0 {
			t.Errorf("Leases(a) after retiring = %+v, want none", got)
		}
		if rs, err := s.Replicas(ctx); err != nil || len(rs) != 1 || rs[0].ID != "b" {
			t.Errorf("Replicas after retiring a = %+v, %v; want only b", rs, err)
		}
		want := []Lease{
			{Role: "learning", Owner: "b", AcquiredAt: clk.Now()},
			{Channel: "telegram", ChatKey: "3", Owner: "b", AcquiredAt: clk.Now()},
		}
		if got := leases(t, s, "b"); !reflect.DeepEqual(got, want) {
			t.Errorf("Leases(b) = %+v, want %+v (untouched)", got, want)
		}
		// a's heartbeat is fresh, yet everything it held is free at once.
		heartbeat(t, s, "c")
		if !acquireChat(t, s, "1", "c") || !acquireChat(t, s, "2", "c") || !acquireRole(t, s, "scheduler", "c") {
			t.Error("c could not take what a held")
		}
		if err := s.RetireReplica(ctx, "unknown"); err != nil {
			t.Errorf("RetireReplica(unknown) = %v, want nil", err)
		}
	})
}

func TestClaimablePending(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		ctx := t.Context()
		heartbeat(t, s, "dead")
		clk.Advance(leaseTTL)
		heartbeat(t, s, "a", "b")
		for chat, owner := range map[string]string{"own": "a", "other": "b", "dead": "dead", "ghost": "ghost"} {
			if !acquireChat(t, s, chat, owner) {
				t.Fatalf("%s could not take free chat %s", owner, chat)
			}
		}
		ids, takenIn := map[string][]int64{}, clk.Now()
		for i := range 2 {
			for _, chat := range []string{"other", "free", "own", "dead", "ghost"} {
				ids[chat] = append(ids[chat], pendingItem(t, s, chat, fmt.Sprint("m", i)))
			}
		}
		if err := s.FinishInbox(ctx, ids["free"][1], InboxDone); err != nil { // done items are not offered
			t.Fatal(err)
		}

		claim := func(owner string, limit int) []int64 {
			t.Helper()
			items, err := s.ClaimablePending(ctx, owner, leaseTTL, limit)
			if err != nil {
				t.Fatalf("ClaimablePending(%s): %v", owner, err)
			}
			var got []int64
			for _, it := range items {
				if it.Status != InboxPending || it.Channel != "telegram" || string(it.Payload) != `{}` || !it.ReceivedAt.Equal(takenIn) {
					t.Errorf("item %+v is not the pending item taken in", it)
				}
				got = append(got, it.ID)
			}
			return got
		}
		// Everything but b's live chat, in id order.
		want := []int64{ids["free"][0], ids["own"][0], ids["dead"][0], ids["ghost"][0],
			ids["own"][1], ids["dead"][1], ids["ghost"][1]}
		if got := claim("a", 0); !reflect.DeepEqual(got, want) {
			t.Errorf("ClaimablePending(a) = %v, want %v", got, want)
		}
		if got := claim("a", 3); !reflect.DeepEqual(got, want[:3]) {
			t.Errorf("ClaimablePending(a, limit 3) = %v, want %v", got, want[:3])
		}
		// For b, a's chat is the one left out.
		want = []int64{ids["other"][0], ids["free"][0], ids["dead"][0], ids["ghost"][0],
			ids["other"][1], ids["dead"][1], ids["ghost"][1]}
		if got := claim("b", -1); !reflect.DeepEqual(got, want) {
			t.Errorf("ClaimablePending(b) = %v, want %v", got, want)
		}
		// It only reads.
		if got := chatHolder(t, s, "free"); got != "" {
			t.Errorf("ClaimablePending took chat free for %q", got)
		}
		// Once a and b are dead too, a newcomer may claim everything.
		clk.Advance(leaseTTL)
		if got := claim("c", 0); len(got) != 9 {
			t.Errorf("ClaimablePending(c) after all died = %v, want all 9 pending items", got)
		}
	})
}

func TestInboxStatus(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		id := pendingItem(t, s, "1", "m1")
		if st, err := s.InboxStatus(ctx, id); err != nil || st != InboxPending {
			t.Errorf("InboxStatus = %q, %v; want pending", st, err)
		}
		if err := s.FinishInbox(ctx, id, InboxSkipped); err != nil {
			t.Fatal(err)
		}
		if st, err := s.InboxStatus(ctx, id); err != nil || st != InboxSkipped {
			t.Errorf("InboxStatus after skipping = %q, %v; want skipped", st, err)
		}
		if _, err := s.InboxStatus(ctx, id+1); !errors.Is(err, ErrNotFound) {
			t.Errorf("InboxStatus(unknown) err = %v, want ErrNotFound", err)
		}
	})
}

func TestClusterValidates(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		ttl := leaseTTL
		check := func(name string, err error) {
			t.Helper()
			if err == nil {
				t.Errorf("%s succeeded", name)
			} else if errors.Is(err, ErrNotFound) {
				t.Errorf("%s: %v, want a validation error", name, err)
			}
		}
		acquireChatErr := func(ch, chat, owner string, ttl time.Duration) error {
			_, err := s.AcquireChat(ctx, ch, chat, owner, ttl)
			return err
		}
		acquireRoleErr := func(role, owner string, ttl time.Duration) error {
			_, err := s.AcquireRole(ctx, role, owner, ttl)
			return err
		}
		releaseChatErr := func(ch, chat, owner string) error {
			_, err := s.ReleaseChat(ctx, ch, chat, owner)
			return err
		}
		claimErr := func(owner string, ttl time.Duration) error {
			_, err := s.ClaimablePending(ctx, owner, ttl, 0)
			return err
		}
		leasesErr := func(owner string) error {
			_, err := s.Leases(ctx, owner)
			return err
		}
		check("Heartbeat(empty)", s.Heartbeat(ctx, "", "x"))
		check("RetireReplica(empty)", s.RetireReplica(ctx, ""))
		check("AcquireChat(no channel)", acquireChatErr("", "1", "a", ttl))
		check("AcquireChat(no chat)", acquireChatErr("telegram", "", "a", ttl))
		check("AcquireChat(no owner)", acquireChatErr("telegram", "1", "", ttl))
		check("AcquireChat(ttl 0)", acquireChatErr("telegram", "1", "a", 0))
		check("AcquireChat(ttl < 0)", acquireChatErr("telegram", "1", "a", -time.Second))
		check("AcquireRole(no role)", acquireRoleErr("", "a", ttl))
		check("AcquireRole(no owner)", acquireRoleErr("scheduler", "", ttl))
		check("AcquireRole(ttl 0)", acquireRoleErr("scheduler", "a", 0))
		check("ReleaseChat(no channel)", releaseChatErr("", "1", "a"))
		check("ReleaseChat(no chat)", releaseChatErr("telegram", "", "a"))
		check("ReleaseChat(no owner)", releaseChatErr("telegram", "1", ""))
		check("ReleaseRole(no role)", s.ReleaseRole(ctx, "", "a"))
		check("ReleaseRole(no owner)", s.ReleaseRole(ctx, "scheduler", ""))
		check("Leases(empty)", leasesErr(""))
		check("ClaimablePending(no owner)", claimErr("", ttl))
		check("ClaimablePending(ttl 0)", claimErr("a", 0))
		// Nothing was stored.
		if rs, err := s.Replicas(ctx); err != nil || len(rs) != 0 {
			t.Errorf("Replicas = %+v, %v; want none", rs, err)
		}
		if got := chatHolder(t, s, "1"); got != "" {
			t.Errorf("chat 1 held by %q after invalid calls", got)
		}
	})
}

// TestRacingAcquireHasOneWinner: replicas (each its own Store, as separate
// processes) race for the same chats and roles from many goroutines, free
// ones and ones a dead replica holds: each has exactly one winner, every
// call of whose replica succeeds and every other call fails.
func TestRacingAcquireHasOneWinner(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		const procs, perProc, chats = 4, 4, 10
		ss, _ := db.processes(t, procs)
		ctx := t.Context()
		owner := func(p int) string { return fmt.Sprint("r", p) }
		for p, s := range ss {
			heartbeat(t, s, owner(p))
		}
		// Half the chats and one role are held by a replica without a row.
		for c := range chats / 2 {
			if !acquireChat(t, ss[0], fmt.Sprint(c), "ghost") {
				t.Fatal("ghost could not take a free chat")
			}
		}
		if !acquireRole(t, ss[0], "learning", "ghost") {
			t.Fatal("ghost could not take a free role")
		}
		roles := []string{"scheduler", "learning"}
		type result struct {
			chat, role []bool
			err        error
		}
		got := make([]result, procs*perProc)
		race(procs*perProc, func(g int) {
			s, me := ss[g%procs], owner(g%procs)
			r := &got[g]
			for c := range chats {
				ok, err := s.AcquireChat(ctx, "telegram", fmt.Sprint(c), me, leaseTTL)
				r.chat = append(r.chat, ok)
				r.err = errors.Join(r.err, err)
			}
			for _, role := range roles {
				ok, err := s.AcquireRole(ctx, role, me, leaseTTL)
				r.role = append(r.role, ok)
				r.err = errors.Join(r.err, err)
			}
		})
		for g, r := range got {
			if r.err != nil {
				t.Fatalf("goroutine %d: %v", g, r.err)
			}
		}
		check := func(what string, holder string, won func(r result) bool) {
			t.Helper()
			winners := map[string]int{}
			for g, r := range got {
				if won(r) {
					winners[owner(g%procs)]++
				}
			}
			if len(winners) != 1 {
				t.Errorf("%s: winners %v, want exactly one replica", what, winners)
				return
			}
			for w, n := range winners {
				if n != perProc {
					t.Errorf("%s: %d of %s's %d calls won, want all", what, n, w, perProc)
				}
				if holder != w {
					t.Errorf("%s: held by %q, but %s won", what, holder, w)
				}
			}
		}
		for c := range chats {
			check(fmt.Sprint("chat ", c), chatHolder(t, ss[0], fmt.Sprint(c)), func(r result) bool { return r.chat[c] })
		}
		for i, role := range roles {
			var holder string
			for p := range procs {
				for _, l := range leases(t, ss[0], owner(p)) {
					if l.Role == role {
						holder = l.Owner
					}
				}
			}
			check("role "+role, holder, func(r result) bool { return r.role[i] })
		}
	})
}

// TestAcquireSeesHolderThatJustStarted: while another process's
// transaction is taking a lease (a free one, one a dead replica held, or
// one for a replica whose first heartbeat is in the same transaction), an
// acquire of the same lease waits for it, then finds it held by a live
// replica and fails. On Postgres the last case fails under READ COMMITTED,
// where the waiting statement reads replicas from the snapshot it started
// with and so takes the new replica for dead.
func TestAcquireSeesHolderThatJustStarted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, loc := db.openTest(t)
		ctx := t.Context()
		heartbeat(t, s, "a", "b")
		if !acquireChat(t, s, "dead", "ghost") || !acquireRole(t, s, "dead", "ghost") {
			t.Fatal("ghost could not take free leases")
		}
		now, bound := clk.Now().UnixMilli(), clk.Now().Add(-leaseTTL).UnixMilli()
		for _, c := range []struct {
			name, lease, holder string
			role, newReplica    bool
		}{
			{name: "free chat", lease: "free", holder: "b"},
			{name: "chat of a dead replica", lease: "dead", holder: "b"},
			{name: "chat for a new replica", lease: "new", holder: "c", newReplica: true},
			{name: "free role", lease: "free", holder: "b", role: true},
			{name: "role of a dead replica", lease: "dead", holder: "b", role: true},
			{name: "role for a new replica", lease: "new", holder: "d", role: true, newReplica: true},
		} {
			other := db.raw(t, loc)
			tx, err := other.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.newReplica {
				if _, err := tx.ExecContext(ctx, db.dialect.rebind(sqlHeartbeat), c.holder, "", now, now); err != nil {
					t.Fatal(err)
				}
			}
			if c.role {
				_, err = tx.ExecContext(ctx, db.dialect.rebind(sqlAcquireRole), c.lease, c.holder, now, bound)
			} else {
				_, err = tx.ExecContext(ctx, db.dialect.rebind(sqlAcquireChat), "telegram", c.lease, c.holder, now, bound)
			}
			if err != nil {
				t.Fatal(err)
			}
			var pid int
			if db.dialect.postgres {
				if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
					t.Fatal(err)
				}
			}
			type res struct {
				ok  bool
				err error
			}
			done := make(chan res, 1)
			go func() {
				var r res
				if c.role {
					r.ok, r.err = s.AcquireRole(ctx, c.lease, "a", leaseTTL)
				} else {
					r.ok, r.err = s.AcquireChat(ctx, "telegram", c.lease, "a", leaseTTL)
				}
				done <- r
			}()
			if db.dialect.postgres {
				waitForBlocked(t, other, pid) // the acquire waits for the lease row
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if r := <-done; r.err != nil || r.ok {
				t.Errorf("%s: acquire by a during %s's = %v, %v; want false", c.name, c.holder, r.ok, r.err)
			}
			var holder string
			for _, l := range leases(t, s, c.holder) {
				if l.Role == c.lease && c.role || l.ChatKey == c.lease && !c.role {
					holder = l.Owner
				}
			}
			if holder != c.holder {
				t.Errorf("%s: %s does not hold it (leases %+v, a's %+v)", c.name, c.holder, leases(t, s, c.holder), leases(t, s, "a"))
			}
		}
	})
}

// ClaimableRefs lists the same items as ClaimablePending, without their
// content.
func TestClaimableRefs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		for i, chat := range []string{"1", "2", "1"} {
			if _, _, err := s.Intake(ctx, InboxItem{Channel: "telegram", ChatKey: chat, MessageID: fmt.Sprint(i), Payload: []byte(`{"x":1}`)}); err != nil {
				t.Fatal(err)
			}
		}
		full, err := s.ClaimablePending(ctx, "a", time.Minute, 0)
		if err != nil {
			t.Fatal(err)
		}
		refs, err := s.ClaimableRefs(ctx, "a", time.Minute, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(full) != 3 || len(refs) != 2 {
			t.Fatalf("%d items, %d refs with limit 2", len(full), len(refs))
		}
		for i, r := range refs {
			if r.ID != full[i].ID || r.Channel != full[i].Channel || r.ChatKey != full[i].ChatKey || r.Payload != nil {
				t.Errorf("ref %d = %+v; want the id and chat of %+v, no payload", i, r, full[i])
			}
		}
		if _, err := s.ClaimableRefs(ctx, "", time.Minute, 0); err == nil {
			t.Error("ClaimableRefs without an owner")
		}
	})
}
