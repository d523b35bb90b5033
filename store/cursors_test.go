package store

import (
	"errors"
	"slices"
	"testing"

	"github.com/switchboard-gateway/switchboard/llm"
)

// turnFor begins a turn of user in the fixture's chat with text and, if
// assistant is set, an assistant answer after a tool step; finish ends it.
func turnFor(t *testing.T, s *Store, f fixture, user, kind, text, assistant string, finish bool) int64 {
	t.Helper()
	id, _, err := s.BeginTurn(t.Context(), TurnStart{ChatID: f.chat.ID, SessionID: f.sess.ID, UserID: user,
		Channel: "telegram", Kind: kind}, []llm.Message{{Role: llm.RoleUser, Content: text}})
	if err != nil {
		t.Fatal(err)
	}
	if assistant != "" {
		if _, err := s.CommitStep(t.Context(), id, 1, toolStep(1), llm.Usage{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CommitStep(t.Context(), id, 2, []StepMessage{
			{Message: llm.Message{Role: llm.RoleUser, Content: "[system] nudge"}, Hidden: true},
			{Message: llm.Message{Role: llm.RoleAssistant, Content: assistant}},
		}, llm.Usage{}); err != nil {
			t.Fatal(err)
		}
	}
	if finish {
		if err := s.FinishTurn(t.Context(), id, TurnEnd{StopReason: "end_turn", Status: TurnCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

func contents(ms []Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Role) + ":" + m.Content
	}
	return out
}

func TestLearningMessagesAndCursor(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		f := newFixture(t, s, "g1")
		c := Cursor{Job: "memory", Channel: "telegram", UserID: "u1", ChatID: f.chat.ID}

		turnFor(t, s, f, "u1", "user", "one", "", true)
		turnFor(t, s, f, "u2", "user", "not mine", "", true)
		turnFor(t, s, f, "u1", "job", "a scheduled prompt", "", true)
		turnFor(t, s, f, "u1", "user", "two", "answer two", true) // + a tool step
		turnFor(t, s, f, "u1", "user", "three", "", false)        // still running
		turnFor(t, s, f, "u1", "user", "four", "", true)

		// A new cursor starts before the last backlog messages.
		pos, err := s.LearningCursor(t.Context(), c, 2)
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := s.LearningMessages(t.Context(), c, pos, 10)
		if err != nil {
			t.Fatal(err)
		}
		// Own finished user turns only; no tool results, no hidden nudges,
		// nothing from the running turn or after it.
		if got, want := contents(msgs), []string{"assistant:checking", "assistant:answer two"}; !slices.Equal(got, want) {
			t.Errorf("messages after the backlog start = %q, want %q", got, want)
		}
		all, _ := s.LearningMessages(t.Context(), c, 0, 10)
		if got, want := contents(all), []string{"user:one", "user:two", "assistant:checking", "assistant:answer two"}; !slices.Equal(got, want) {
			t.Errorf("all messages = %q, want %q", got, want)
		}
		// The position is stored: asking again returns it, whatever the backlog.
		if again, _ := s.LearningCursor(t.Context(), c, 100); again != pos {
			t.Errorf("cursor = %d on second read, want %d", again, pos)
		}

		// Moving the cursor is compare-and-set.
		last := msgs[len(msgs)-1].ID
		if err := s.AdvanceCursor(t.Context(), c, pos+1, last); !errors.Is(err, ErrCursorMoved) {
			t.Errorf("advance from a stale position: %v, want ErrCursorMoved", err)
		}
		if err := s.AdvanceCursor(t.Context(), c, pos, last); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.LearningCursor(t.Context(), c, 0); got != last {
			t.Errorf("cursor = %d, want %d", got, last)
		}
		if err := s.AdvanceCursor(t.Context(), Cursor{Job: "memory"}, 0, 1); err == nil {
			t.Error("a cursor without user and chat was accepted")
		}
	})
}

func TestLearnMemoriesIsAllOrNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, path := db.openTest(t)
		f := newFixture(t, s, "d1")
		turn := turnFor(t, s, f, "u1", "user", "I'm allergic to peanuts", "noted", true)
		c := Cursor{Job: "memory", Channel: "telegram", UserID: "u1", ChatID: f.chat.ID}
		pos, _ := s.LearningCursor(t.Context(), c, 50)
		msgs, _ := s.LearningMessages(t.Context(), c, pos, 50)
		upTo := msgs[len(msgs)-1].ID
		owner := c.UserKey()
		good := NewMemory{Scope: MemoryUser, Owner: owner, Text: "Is allergic to peanuts", Origin: OriginExtracted,
			ChatID: f.chat.ID, SourceTurnID: turn}

		// One bad fact: nothing is stored and the cursor stays.
		if _, err := s.LearnMemories(t.Context(), c, pos, upTo, []NewMemory{good, {Scope: MemoryUser, Owner: owner, Origin: OriginExtracted}}); err == nil {
			t.Fatal("a batch with an empty fact was accepted")
		}
		if got, _ := s.Memories(t.Context(), Owners{User: owner}, 0); len(got) != 0 {
			t.Errorf("memories after a failed batch: %q", memTexts(got))
		}
		if got, _ := s.LearningCursor(t.Context(), c, 0); got != pos {
			t.Errorf("cursor moved to %d after a failed batch", got)
		}

		ch, err := s.LearnMemories(t.Context(), c, pos, upTo, []NewMemory{good})
		if err != nil {
			t.Fatal(err)
		}
		// The same batch again (a second run that read the same cursor) is refused.
		if _, err := s.LearnMemories(t.Context(), c, pos, upTo, []NewMemory{good}); !errors.Is(err, ErrCursorMoved) {
			t.Errorf("replayed batch: %v, want ErrCursorMoved", err)
		}
		// After a restart, the state is there.
		s.Close()
		s = db.openAt(t, path, newClock())
		got, _ := s.Memories(t.Context(), Owners{User: owner}, 0)
		if len(got) != 1 || got[0].ID != ch[0].ID || got[0].SourceTurnID != turn || got[0].ChatID != f.chat.ID || got[0].Origin != OriginExtracted {
			t.Errorf("memories after restart = %+v", got)
		}
		if cur, _ := s.LearningCursor(t.Context(), c, 0); cur != upTo {
			t.Errorf("cursor after restart = %d, want %d", cur, upTo)
		}
	})
}
