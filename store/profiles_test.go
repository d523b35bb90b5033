package store

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestProfileNewestEntryWins(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		f := newFixture(t, s, "d1")
		turnFor(t, s, f, "u1", "user", "hi", "", true)
		ada := UserKey("telegram", "u1")
		set := func(dim, v string) {
			t.Helper()
			if err := s.SetProfile(t.Context(), ProfileEntry{UserKey: ada, Dimension: dim, Value: v}); err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Minute)
		}
		set(ProfileTimezone, "Europe/Berlin")
		set(ProfileName, "Ada")
		set(ProfileTimezone, "Europe/Lisbon")
		set(ProfileName, "Ada") // unchanged: no new entry
		if err := s.SetProfile(t.Context(), ProfileEntry{UserKey: ada, Dimension: "shoe size", Value: "38"}); err == nil {
			t.Error("an unknown dimension was accepted")
		}

		c := Cursor{Job: "profile", Channel: "telegram", UserID: "u1", ChatID: f.chat.ID}
		pos, _ := s.LearningCursor(t.Context(), c, 10)
		if err := s.LearnProfile(t.Context(), c, pos, pos+2, []ProfileEntry{{UserKey: ada, Dimension: ProfileStyle, Value: "brief"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.LearnProfile(t.Context(), c, pos, pos+2, nil); !errors.Is(err, ErrCursorMoved) {
			t.Errorf("stale LearnProfile: %v", err)
		}

		p, err := s.Profile(t.Context(), ada)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range p {
			got = append(got, e.Dimension+"="+e.Value)
		}
		if want := []string{"name=Ada", "timezone=Europe/Lisbon", "style=brief"}; !slices.Equal(got, want) {
			t.Errorf("profile = %q, want %q", got, want)
		}
		if p[0].CreatedAt != newClock().Now().Add(time.Minute) {
			t.Errorf("name dated %v: the unchanged second entry must not replace the first", p[0].CreatedAt)
		}
		if other, _ := s.Profile(t.Context(), UserKey("telegram", "u2")); len(other) != 0 {
			t.Errorf("another user's profile = %+v", other)
		}
		if n, err := s.ForgetProfile(t.Context(), ada, ProfileTimezone); n != 2 || err != nil {
			t.Errorf("ForgetProfile(timezone) = %d, %v; want both entries", n, err)
		}
		if n, _ := s.ForgetProfile(t.Context(), ada, ""); n != 2 {
			t.Errorf("ForgetProfile(all) = %d, want 2", n)
		}
	})
}
