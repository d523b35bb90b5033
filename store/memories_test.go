package store

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func memTexts(ms []Memory) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Text
	}
	return out
}

func mustAdd(t *testing.T, s *Store, nm NewMemory) MemoryChange {
	t.Helper()
	if nm.Origin == "" {
		nm.Origin = OriginTool
	}
	ch, err := s.AddMemory(t.Context(), nm)
	if err != nil {
		t.Fatalf("AddMemory(%q): %v", nm.Text, err)
	}
	return ch
}

func TestMemoriesMergeSupersedeAndSearchByRelevance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		f := newFixture(t, s, "g1")
		ada, bob := UserKey("telegram", "1"), UserKey("telegram", "2")
		adaOnly := Owners{User: ada}

		peanuts := mustAdd(t, s, NewMemory{Scope: MemoryUser, Owner: ada, Text: "Is allergic to peanuts"})
		clk.Advance(time.Hour)
		mustAdd(t, s, NewMemory{Scope: MemoryUser, Owner: ada, Text: "Her daughter Mia plays the violin"})
		clk.Advance(time.Hour)
		berlin := mustAdd(t, s, NewMemory{Scope: MemoryUser, Owner: ada, Text: "Lives in Berlin"})
		mustAdd(t, s, NewMemory{Scope: MemoryUser, Owner: bob, Text: "Loves peanut butter"})
		mustAdd(t, s, NewMemory{Scope: MemoryChat, Owner: ChatOwner(f.chat.ID), Text: "This group plans a peanut-free picnic"})

		// The same fact again merges into the first one.
		again := mustAdd(t, s, NewMemory{Scope: MemoryUser, Owner: ada, Text: "  is allergic to PEANUTS. "})
		if !again.Merged || again.ID != peanuts.ID {
			t.Errorf("duplicate: got %+v, want a merge into %d", again, peanuts.ID)
		}

		// Relevance, not recency: the oldest memory matches, the newer ones do not.
		got, err := s.SearchMemories(t.Context(), adaOnly, []string{"peanu*", "snack"}, 10)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"Is allergic to peanuts"}; !slices.Equal(memTexts(got), want) {
			t.Errorf("search peanut as ada = %q, want %q (bob's and the group's stay out)", memTexts(got), want)
		}
		// More matched terms rank higher; the group's memory needs the chat owner.
		got, err = s.SearchMemories(t.Context(), Owners{User: ada, Chat: f.chat.ID}, []string{"peanu*", "picnic", "free"}, 10)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"This group plans a peanut-free picnic", "Is allergic to peanuts"}; !slices.Equal(memTexts(got), want) {
			t.Errorf("ranked search = %q, want %q", memTexts(got), want)
		}
		if got[0].Score <= got[1].Score {
			t.Errorf("scores %v, %v: want the first higher", got[0].Score, got[1].Score)
		}
		// Group chats pass no user: private memories never match there.
		got, _ = s.SearchMemories(t.Context(), Owners{Chat: f.chat.ID}, []string{"allergic", "berlin"}, 10)
		if len(got) != 0 {
			t.Errorf("group search found private memories %q", memTexts(got))
		}
		// Terms that are not plain words are ignored rather than breaking the query.
		if got, err := s.SearchMemories(t.Context(), adaOnly, []string{`"`, "OR(", "-x"}, 10); err != nil || len(got) != 0 {
			t.Errorf("odd terms: %q, %v", memTexts(got), err)
		}
		// Diacritics and case fold.
		mustAdd(t, s, NewMemory{Scope: MemoryUser, Owner: ada, Text: "Grew up in München"})
		if got, _ := s.SearchMemories(t.Context(), adaOnly, []string{"MUNCHEN"}, 10); len(got) != 1 {
			t.Errorf("search MUNCHEN = %q, want the München memory", memTexts(got))
		}

		// Supersede: Lisbon replaces Berlin, which leaves the index and the list.
		lisbon := mustAdd(t, s, NewMemory{Scope: MemoryUser, Owner: ada, Text: "Lives in Lisbon", Supersedes: berlin.ID})
		if lisbon.Superseded != berlin.ID {
			t.Errorf("supersede: %+v, want Superseded %d", lisbon, berlin.ID)
		}
		if got, _ := s.SearchMemories(t.Context(), adaOnly, []string{"lives"}, 10); !slices.Equal(memTexts(got), []string{"Lives in Lisbon"}) {
			t.Errorf("after supersede, search lives = %q", memTexts(got))
		}
		old, err := s.Memory(t.Context(), berlin.ID)
		if err != nil || old.SupersededBy != lisbon.ID {
			t.Errorf("old memory: %+v, %v; want superseded by %d", old, err, lisbon.ID)
		}
		// Someone else's memory is never superseded.
		bobs := mustAdd(t, s, NewMemory{Scope: MemoryUser, Owner: bob, Text: "Works nights"})
		if ch := mustAdd(t, s, NewMemory{Scope: MemoryUser, Owner: ada, Text: "Works days", Supersedes: bobs.ID}); ch.Superseded != 0 {
			t.Errorf("ada superseded bob's memory: %+v", ch)
		}
		list, err := s.Memories(t.Context(), adaOnly, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"Is allergic to peanuts", "Her daughter Mia plays the violin", "Grew up in München", "Lives in Lisbon", "Works days"}
		if !slices.Equal(memTexts(list), want) {
			t.Errorf("Memories(ada) = %q, want %q", memTexts(list), want)
		}

		if _, err := s.AddMemory(t.Context(), NewMemory{Scope: "world", Owner: ada, Text: "x", Origin: OriginTool}); err == nil {
			t.Error("a bad scope was accepted")
		}
		if _, err := s.AddMemory(t.Context(), NewMemory{Scope: MemoryUser, Owner: ada, Text: " . ", Origin: OriginTool}); err == nil {
			t.Error("an empty text was accepted")
		}
	})
}

func TestDeleteMemoryOwnedOnlyWithItsHistory(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		f := newFixture(t, s, "g1")
		ada, bob := UserKey("telegram", "1"), UserKey("telegram", "2")
		v1 := mustAdd(t, s, NewMemory{Scope: MemoryUser, Owner: ada, Text: "Lives in Berlin"})
		v2 := mustAdd(t, s, NewMemory{Scope: MemoryUser, Owner: ada, Text: "Lives in Paris", Supersedes: v1.ID})
		v3 := mustAdd(t, s, NewMemory{Scope: MemoryUser, Owner: ada, Text: "Lives in Lisbon", Supersedes: v2.ID})
		group := mustAdd(t, s, NewMemory{Scope: MemoryChat, Owner: ChatOwner(f.chat.ID), Text: "Meets on Fridays"})

		for _, tc := range []struct {
			name   string
			owners Owners
			id     int64
		}{
			{"another user", Owners{User: bob}, v3.ID},
			{"a superseded version", Owners{User: ada}, v1.ID},
			{"a private memory from the group", Owners{Chat: f.chat.ID}, v3.ID},
			{"a group memory from a DM", Owners{User: ada}, group.ID},
		} {
			if ok, err := s.DeleteMemory(t.Context(), tc.owners, tc.id); ok || err != nil {
				t.Errorf("%s: DeleteMemory = %v, %v; want false, nil", tc.name, ok, err)
			}
		}
		if ok, err := s.DeleteMemory(t.Context(), Owners{User: ada}, v3.ID); !ok || err != nil {
			t.Fatalf("DeleteMemory(own) = %v, %v", ok, err)
		}
		for _, id := range []int64{v1.ID, v2.ID, v3.ID} {
			if _, err := s.Memory(t.Context(), id); !errors.Is(err, ErrNotFound) {
				t.Errorf("memory %d after forget: %v, want ErrNotFound (the history goes too)", id, err)
			}
		}
		if got, _ := s.SearchMemories(t.Context(), Owners{User: ada}, []string{"lives", "berlin", "paris", "lisbon"}, 0); len(got) != 0 {
			t.Errorf("forgotten memories still found: %q", memTexts(got))
		}
		if ok, err := s.DeleteMemory(t.Context(), Owners{Chat: f.chat.ID}, group.ID); !ok || err != nil {
			t.Errorf("DeleteMemory(group) = %v, %v", ok, err)
		}
	})
}

// BenchmarkSearchMemories recalls for one user among 20 users with 500
// memories each (10,000 rows in the index), as a turn's prompt does.
func BenchmarkSearchMemories(b *testing.B) {
	forEachBackendB(b, func(b *testing.B, db backend) {
		s, _, _ := db.openTest(b)
		words := []string{"peanuts", "violin", "Berlin", "cycling", "coffee", "daughter", "garden", "chess", "jazz", "python",
			"allergic", "marathon", "Lisbon", "vegetarian", "piano", "hiking", "sister", "teacher", "cats", "sailing"}
		for u := range 20 {
			owner := UserKey("telegram", strconv.Itoa(u))
			for i := range 500 {
				text := fmt.Sprintf("Fact %d: likes %s and %s, mentions %s", i, words[i%20], words[(i*7+u)%20], words[(i*3)%20])
				if _, err := s.AddMemory(b.Context(), NewMemory{Scope: MemoryUser, Owner: owner, Text: text, Origin: OriginTool}); err != nil {
					b.Fatal(err)
				}
			}
		}
		owners := Owners{User: UserKey("telegram", "7")}
		terms := []string{"sugge*", "snack*", "peanu*", "butter*"}
		for b.Loop() {
			got, err := s.SearchMemories(b.Context(), owners, terms, 20)
			if err != nil || len(got) == 0 {
				b.Fatal(len(got), err)
			}
		}
	})
}

// TestSearchAgreesAcrossBackends: Postgres makes its lexemes in Go the way
// SQLite's unicode61 tokenizer makes tokens, and scores them with the same
// formula, so both backends recall the same memories with the same scores.
func TestSearchAgreesAcrossBackends(t *testing.T) {
	texts := []string{"Grew up in München", "Café au lait every morning", "Runs 10km on Sundays",
		"Uses e-mail, not Slack", "Straße names confuse her", "ÉCOLE normale, then Berlin",
		"日本語を勉強している", "naïve coöperation", "Loves Berlin in the summer", "Mail me at sundown"}
	queries := [][]string{{"munchen"}, {"MÜNCHEN"}, {"cafe*"}, {"10km"}, {"mail"}, {"e"}, {"strasse"}, {"ecole", "berlin"},
		{"日本語を勉強している"}, {"naive", "cooperation"}, {"sun*", "morn*"}, {"berlin"}, {"b*"}}
	want := map[string]string{ // a few results, to hold each backend to
		"munchen":           "Grew up in München",
		"MÜNCHEN":           "Grew up in München",
		"cafe*":             "Café au lait every morning",
		"strasse":           "",
		"naive cooperation": "naïve coöperation",
	}
	results := map[string][]string{}
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ada := UserKey("telegram", "1")
		for _, text := range texts {
			mustAdd(t, s, NewMemory{Scope: MemoryUser, Owner: ada, Text: text})
		}
		var got []string
		for _, q := range queries {
			ms, err := s.SearchMemories(t.Context(), Owners{User: ada}, q, 0)
			if err != nil {
				t.Fatalf("search %q: %v", q, err)
			}
			var line []string
			for _, m := range ms {
				line = append(line, fmt.Sprintf("%s=%.9f", m.Text, m.Score))
			}
			got = append(got, fmt.Sprintf("%q → %s", q, strings.Join(line, "; ")))
			if w, ok := want[strings.Join(q, " ")]; ok && (w == "") != (len(ms) == 0) || ok && w != "" && ms[0].Text != w {
				t.Errorf("search %q = %q, want %q first", q, memTexts(ms), w)
			}
		}
		results[db.name] = got
	})
	if sq, pg := results[DriverSQLite], results[DriverPostgres]; sq != nil && pg != nil {
		for i := range sq {
			if sq[i] != pg[i] {
				t.Errorf("backends differ:\n sqlite   %s\n postgres %s", sq[i], pg[i])
			}
		}
	}
}
