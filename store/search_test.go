package store

import (
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/llm"
)

// Search finds turns by a word of their user message or replies (not of a
// tool's result), without case and with LIKE's wildcards taken literally,
// and chats by key or title.
func TestDashboardSearch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		a := newFixture(t, s, "alice-42")
		t1 := a.beginTurn(t, s, "Remind me about the Gardening club")
		if _, err := s.CommitStep(ctx, t1, 1, toolStep(1), llm.Usage{}); err != nil { // "checking", tool result "sunny"
			t.Fatal(err)
		}
		t2 := a.beginTurn(t, s, "what is 50% of 8_000?")
		b := newFixture(t, s, "bob-7")
		t3 := b.beginTurn(t, s, "the gardening tools are in the shed")

		ids := func(ts []Turn) []int64 {
			var out []int64
			for _, tr := range ts {
				out = append(out, tr.ID)
			}
			return out
		}
		for _, tt := range []struct {
			text string
			want []int64
		}{
			{"gardening", []int64{t3, t1}},
			{"GARDENING club", []int64{t1}},
			{"checking", []int64{t1}}, // the assistant's text of a step
			{"sunny", nil},            // a tool's result is not searched
			{"50%", []int64{t2}},
			{"%", []int64{t2}},
			{"8_0", []int64{t2}},
			{"_", []int64{t2}},
			{"nothing like it", nil},
		} {
			got, err := s.SearchTurns(ctx, tt.text, 10)
			if err != nil {
				t.Fatalf("SearchTurns(%q): %v", tt.text, err)
			}
			if !slices.Equal(ids(got), tt.want) {
				t.Errorf("SearchTurns(%q) = turns %v, want %v", tt.text, ids(got), tt.want)
			}
		}
		if got, err := s.SearchTurns(ctx, "gardening", 1); err != nil || len(got) != 1 || got[0].ID != t3 {
			t.Errorf("SearchTurns with limit 1 = %v, %v; want turn %d", ids(got), err, t3)
		}

		chats, err := s.SearchChats(ctx, "ALICE-", 10)
		if err != nil || len(chats) != 1 || chats[0].Key != "alice-42" || chats[0].Turns != 2 {
			t.Errorf("SearchChats(ALICE-) = %+v, %v; want alice-42 with 2 turns", chats, err)
		}
		for _, bad := range []string{"", "   ", strings.Repeat("x", MaxSearchLen+1)} {
			if _, err := s.SearchTurns(ctx, bad, 10); err == nil || !strings.Contains(err.Error(), "store: search") {
				t.Errorf("SearchTurns(%.10q…) err = %v, want a search error", bad, err)
			}
		}
	})
}
