package store

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/switchboard-gateway/switchboard/llm"
)

// TestMessagesAfterReadsWhatOthersWrote: the history cache answers exactly
// what the database holds, whatever wrote it: this store, another process
// on the same file, after a summary moved the boundary up, or when asked
// for less recent messages than it holds.
func TestMessagesAfterReadsWhatOthersWrote(t *testing.T) {
	db := backends[0]
	s, clk, loc := db.openTest(t)
	other := db.openAt(t, loc, clk) // a second process on the same file
	ctx := t.Context()
	f := newFixture(t, s, "1")

	check := func(step string, after int64) {
		t.Helper()
		got, err := s.MessagesAfter(ctx, f.sess.ID, after)
		if err != nil {
			t.Fatalf("%s: MessagesAfter: %v", step, err)
		}
		want, err := s.queryMessages(ctx, f.sess.ID, after)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 {
			want = nil
		}
		if len(got) == 0 {
			got = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: after %d got %d messages, want %d:\n got %+v\nwant %+v", step, after, len(got), len(want), got, want)
		}
	}
	check("empty session", 0)
	turn := f.beginTurn(t, s, "hello")
	check("first turn", 0)
	var ids []int64
	for i := range 3 {
		w := s
		if i%2 == 1 {
			w = other
		}
		got, err := w.CommitStep(ctx, turn, i+1, toolStep(i), llm.Usage{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
		check(fmt.Sprintf("step %d", i+1), 0)
	}
	// A summary covers the first messages: later reads start above it.
	check("after a summary", ids[2])
	check("same boundary again", ids[2])
	if _, err := other.CommitStep(ctx, turn, 4, toolStep(4), llm.Usage{}); err != nil {
		t.Fatal(err)
	}
	check("written by the other process", ids[2])
	// Below the boundary the cache holds: read from the database.
	check("older messages again", 0)
	check("past every message", ids[len(ids)-1]+100)

	// Messages reads the database and leaves the cache alone.
	all, err := s.Messages(ctx, f.sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1+4*3 {
		t.Errorf("Messages: %d messages, want %d", len(all), 1+4*3)
	}
}

// TestHistoryCacheBudget: the cache keeps within its budget by dropping the
// least recently read sessions, and its size is the sum of its entries.
func TestHistoryCacheBudget(t *testing.T) {
	msg := func(id int64, text string) Message {
		return Message{ID: id, Message: llm.Message{Role: llm.RoleUser, Content: text}}
	}
	one := messageSize(msg(1, "0123456789"))
	c := newHistoryCache(3 * one)
	for s := int64(1); s <= 3; s++ {
		c.put(s, 0, 0, 1, []Message{msg(1, "0123456789")})
	}
	if _, _, ok := c.get(1, 0); !ok { // session 1 is now the most recent
		t.Fatal("session 1 not cached")
	}
	c.put(4, 0, 0, 1, []Message{msg(1, "0123456789")})
	if _, _, ok := c.get(2, 0); ok {
		t.Error("session 2, the least recently read, is still cached over the budget")
	}
	for _, s := range []int64{1, 3, 4} {
		if _, _, ok := c.get(s, 0); !ok {
			t.Errorf("session %d dropped", s)
		}
	}
	// Extending an entry and moving its floor up keep the accounting.
	c.put(1, 0, 1, 2, []Message{msg(2, "0123456789")})
	c.put(1, 1, 2, 2, nil)
	got, last, ok := c.get(1, 1)
	if !ok || last != 2 || len(got) != 1 || got[0].ID != 2 {
		t.Errorf("session 1 after 1: %+v (last %d, ok %v), want message 2", got, last, ok)
	}
	sum := 0
	for el := c.lru.Front(); el != nil; el = el.Next() {
		sum += el.Value.(*historyEntry).size
	}
	if sum != c.size || c.size > c.budget {
		t.Errorf("size %d, entries sum to %d, budget %d", c.size, sum, c.budget)
	}
	// The reader's entry was dropped between its get and its put: put
	// keeps what it is given but does not claim to hold the rest.
	if _, _, ok := c.get(4, 0); !ok {
		t.Fatal("session 4 not cached")
	}
	c.drop(c.byID[4])
	if got, ok := c.put(4, 0, 1, 2, []Message{msg(2, "0123456789")}); ok {
		t.Errorf("put after a drop answered %+v, want ok false: message 1 is missing", got)
	}
	// A session bigger than the whole budget is not kept.
	c.put(5, 0, 0, 1, []Message{msg(1, string(make([]byte, 4*one)))})
	if _, _, ok := c.get(5, 0); ok {
		t.Error("a session over the whole budget is cached")
	}
	if _, _, ok := c.get(1, 1); !ok {
		t.Error("a session over the whole budget pushed out the others")
	}
}
