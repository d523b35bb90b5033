package store

import (
	"errors"
	"testing"
	"time"
)

func TestPairing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) { testPairing(t, db) })
}

func testPairing(t *testing.T, db backend) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	st, err := db.open(t.Context(), db.fresh(t), WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	code, fresh, err := st.PairingCode(ctx, "telegram", "42", "ada", "ABC123", time.Hour)
	if err != nil || !fresh || code != "ABC123" {
		t.Fatalf("first code = %q %v %v", code, fresh, err)
	}
	// Asking again returns the same pending code.
	if code, fresh, _ := st.PairingCode(ctx, "telegram", "42", "ada", "ZZZ999", time.Hour); fresh || code != "ABC123" {
		t.Fatalf("second ask = %q %v", code, fresh)
	}
	if list, _ := st.PendingPairings(ctx); len(list) != 1 || list[0].UserID != "42" {
		t.Fatalf("pending = %+v", list)
	}
	if ok, _ := st.IsApproved(ctx, "telegram", "42"); ok {
		t.Fatal("approved before approval")
	}
	p, err := st.ApprovePairing(ctx, "ABC123")
	if err != nil || p.UserID != "42" || p.Channel != "telegram" {
		t.Fatalf("approve = %+v %v", p, err)
	}
	if ok, _ := st.IsApproved(ctx, "telegram", "42"); !ok {
		t.Fatal("not approved after approval")
	}
	if ok, _ := st.IsApproved(ctx, "discord", "42"); ok {
		t.Fatal("approval leaked to another channel")
	}
	if _, err := st.ApprovePairing(ctx, "NOPE00"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown code: %v", err)
	}
	// Codes expire.
	st.PairingCode(ctx, "telegram", "7", "", "OLD777", time.Hour)
	now = now.Add(2 * time.Hour)
	if _, err := st.ApprovePairing(ctx, "OLD777"); !errors.Is(err, ErrPairingExpired) {
		t.Fatalf("expired code: %v", err)
	}
	if list, _ := st.PendingPairings(ctx); len(list) != 0 {
		t.Fatalf("expired codes listed: %+v", list)
	}
	if code, fresh, _ := st.PairingCode(ctx, "telegram", "7", "", "NEW777", time.Hour); !fresh || code != "NEW777" {
		t.Fatalf("after expiry = %q %v", code, fresh)
	}
	if ok, _ := st.RevokeUser(ctx, "telegram", "42"); !ok {
		t.Fatal("revoke failed")
	}
	if ok, _ := st.IsApproved(ctx, "telegram", "42"); ok {
		t.Fatal("still approved after revoke")
	}
}

func TestDenyPairing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) { testDenyPairing(t, db) })
}

// A denied request leaves the pending list, admits no one and cannot be
// approved afterwards; the user's next message gets a new code.
func testDenyPairing(t *testing.T, db backend) {
	st, _, _ := db.openTest(t)
	ctx := t.Context()
	st.PairingCode(ctx, "telegram", "42", "ada", "ABC123", time.Hour)
	st.PairingCode(ctx, "telegram", "43", "bob", "DEF456", time.Hour)
	p, err := st.DenyPairing(ctx, "ABC123")
	if err != nil || p.UserID != "42" || p.Channel != "telegram" || p.Username != "ada" {
		t.Fatalf("deny = %+v %v", p, err)
	}
	if list, _ := st.PendingPairings(ctx); len(list) != 1 || list[0].Code != "DEF456" {
		t.Fatalf("pending after deny = %+v", list)
	}
	if ok, _ := st.IsApproved(ctx, "telegram", "42"); ok {
		t.Fatal("a denied user is approved")
	}
	if _, err := st.ApprovePairing(ctx, "ABC123"); err == nil {
		t.Fatal("a denied code was approved")
	}
	for _, code := range []string{"ABC123", "NOPE00"} {
		if _, err := st.DenyPairing(ctx, code); !errors.Is(err, ErrNotFound) {
			t.Errorf("deny %s again: %v, want ErrNotFound", code, err)
		}
	}
	if _, err := st.ApprovePairing(ctx, "DEF456"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DenyPairing(ctx, "DEF456"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deny an approved code: %v, want ErrNotFound", err)
	}
	if ok, _ := st.IsApproved(ctx, "telegram", "43"); !ok {
		t.Error("denying an approved code took the approval back")
	}
	if code, fresh, _ := st.PairingCode(ctx, "telegram", "42", "ada", "NEW777", time.Hour); !fresh || code != "NEW777" {
		t.Fatalf("after deny = %q %v, want a new code", code, fresh)
	}
}

// Issue 29: a message without an author (a Telegram update without from)
// gets no pairing code, and an approval stored for the empty user id (by an
// older version) admits no one.
func TestPairingNeedsAUserID(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		st, err := db.open(t.Context(), db.fresh(t))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ctx := t.Context()
		if code, fresh, err := st.PairingCode(ctx, "telegram", "", "", "EMPTY234", time.Hour); !errors.Is(err, ErrNoUserID) || fresh || code != "" {
			t.Fatalf("PairingCode for no user = %q %v %v, want ErrNoUserID", code, fresh, err)
		}
		if list, _ := st.PendingPairings(ctx); len(list) != 0 {
			t.Fatalf("pending = %+v, want none", list)
		}
		if _, err := st.write(ctx, sqlApproveUser, "telegram", "", "", time.Now().UnixMilli(), "", 0); err != nil {
			t.Fatal(err)
		}
		if ok, err := st.IsApproved(ctx, "telegram", ""); ok || err != nil {
			t.Fatalf("IsApproved for the empty user id = %v %v, want false", ok, err)
		}
	})
}

// A code given in a chat is kept with it; approving it owes the user a
// greeting there, claimed once; the approved users are listed, and a
// revoked user is neither listed nor greeted. A code without a chat owes
// no greeting.
func TestPairedUsersAndGreetings(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		st, err := db.open(t.Context(), db.fresh(t))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ctx := t.Context()
		if _, _, err := st.PairingCodeIn(ctx, "discord", "dm-7", "7", "ada", "CODE7777", time.Hour); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.PairingCode(ctx, "telegram", "8", "bob", "CODE8888", time.Hour); err != nil {
			t.Fatal(err)
		}
		for _, code := range []string{"CODE7777", "CODE8888"} {
			if _, err := st.ApprovePairing(ctx, code); err != nil {
				t.Fatal(err)
			}
		}
		owed, err := st.GreetingsOwed(ctx)
		if err != nil || len(owed) != 1 || owed[0].Channel != "discord" || owed[0].UserID != "7" || owed[0].ChatKey != "dm-7" || owed[0].Username != "ada" {
			t.Fatalf("greetings owed = %+v, %v; want ada's in dm-7 alone", owed, err)
		}
		if ok, err := st.ClaimGreeting(ctx, "discord", "7"); !ok || err != nil {
			t.Fatalf("first claim = %v, %v", ok, err)
		}
		if ok, err := st.ClaimGreeting(ctx, "discord", "7"); ok || err != nil {
			t.Fatalf("second claim = %v, %v; want false", ok, err)
		}
		if owed, _ := st.GreetingsOwed(ctx); len(owed) != 0 {
			t.Fatalf("owed after the claim: %+v", owed)
		}
		users, err := st.ApprovedUsers(ctx)
		if err != nil || len(users) != 2 || users[0].Channel != "discord" || users[1].UserID != "8" || users[1].ApprovedAt.IsZero() {
			t.Fatalf("approved users = %+v, %v", users, err)
		}
		if ok, err := st.RevokeUser(ctx, "discord", "7"); !ok || err != nil {
			t.Fatalf("revoke = %v, %v", ok, err)
		}
		if users, _ := st.ApprovedUsers(ctx); len(users) != 1 || users[0].UserID != "8" {
			t.Fatalf("approved users after the revoke = %+v", users)
		}
		if ok, _ := st.IsApproved(ctx, "discord", "7"); ok {
			t.Fatal("a revoked user is still approved")
		}
	})
}
