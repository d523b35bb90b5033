package reply_test

import (
	"path/filepath"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/tgfake"
	"github.com/switchboard-gateway/switchboard/reply"
)

// A message answered with one reply costs five store transactions: its
// intake, the turn's beginning, its step, the reply's delivery with the
// record of its (last) part, and the turn's end. The part's record and
// the delivery's follow each other, so they share one commit.
func TestAnsweredMessageTransactions(t *testing.T) {
	fake := tgfake.New(t, "123:ABC")
	st := openStore(t, filepath.Join(t.TempDir(), "tx.db"))
	e := startTgRouter(t, st, fake, newVclock(t), 0)
	answer := func(n int, text string) {
		t.Helper()
		fake.PushText(7, 7, "ada", text)
		if _, err := fake.WaitSent(t.Context(), n); err != nil {
			t.Fatal(err)
		}
		if err := e.r.Drain(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	answer(1, "first") // the chat and its session are made once
	tx0, _ := st.TxCounts()
	answer(2, "second")
	tx1, _ := st.TxCounts()
	if n := tx1 - tx0; n != 5 {
		t.Errorf("the second message took %d store transactions, want 5", n)
	}
	parts, err := st.ReplyParts(t.Context(), 2, reply.ReplyKey(0, "re: second"))
	if err != nil || len(parts) != 1 {
		t.Errorf("reply parts of the second message: %v (%v), want its one part recorded", parts, err)
	}
	if n, err := st.Deliveries(t.Context(), 2); err != nil || n != 1 {
		t.Errorf("deliveries of the second message: %d (%v), want 1", n, err)
	}
}
