package store

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
)

func TestOverviewQueries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		ctx := t.Context()
		a := newFixture(t, s, "a")
		t1 := a.beginTurn(t, s, "first")
		if _, err := s.CommitStep(ctx, t1, 1, toolStep(1), llm.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishTurn(ctx, t1, TurnEnd{StopReason: "end_turn", Status: TurnCompleted}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(2 * time.Hour)
		b := newFixture(t, s, "b")
		t2 := b.beginTurn(t, s, "second")
		if _, err := s.CommitStep(ctx, t2, 1, nil, llm.Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10}); err != nil {
			t.Fatal(err)
		}

		turns, err := s.RecentTurns(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(turns) != 2 || turns[0].ID != t2 || turns[1].ID != t1 {
			t.Fatalf("RecentTurns = %+v, want turns %d then %d", turns, t2, t1)
		}
		if turns, _ := s.RecentTurns(ctx, 1); len(turns) != 1 {
			t.Fatalf("RecentTurns(1) returned %d turns", len(turns))
		}

		msgs, err := s.TurnMessages(ctx, t1)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 4 || msgs[0].Content != "first" || len(msgs[1].ToolCalls) != 2 || msgs[1].ToolCalls[0].Name != "get_weather" || msgs[2].Name != "get_weather" {
			t.Fatalf("TurnMessages = %+v", msgs)
		}

		chats, err := s.Chats(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(chats) != 2 || chats[0].Key != "b" || chats[0].Turns != 1 || chats[1].Key != "a" || !chats[0].LastActive.After(chats[1].LastActive) {
			t.Fatalf("Chats = %+v, want b (newest) then a", chats)
		}

		series, err := s.UsageSeries(ctx, clk.Now().Add(-24*time.Hour), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if len(series) != 2 || series[0].Usage.TotalTokens != 15 || series[1].Usage.TotalTokens != 10 || series[0].Turns != 1 ||
			series[1].Start.Sub(series[0].Start) != 2*time.Hour {
			t.Fatalf("UsageSeries = %+v", series)
		}
		if only, _ := s.UsageSeries(ctx, clk.Now().Add(-time.Minute), time.Hour); len(only) != 1 || only[0].Usage.PromptTokens != 7 {
			t.Fatalf("UsageSeries since a minute ago = %+v", only)
		}
		if _, err := s.UsageSeries(ctx, clk.Now(), time.Millisecond); err == nil {
			t.Fatal("a sub-second bucket was accepted")
		}
	})
}

func TestLearnedUsers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, clk, _ := db.openTest(t)
		ctx := t.Context()
		if got, err := s.LearnedUsers(ctx, 10); err != nil || len(got) != 0 {
			t.Fatalf("LearnedUsers on an empty store = %v, %v", got, err)
		}
		if err := s.SetProfile(ctx, ProfileEntry{UserKey: UserKey("telegram", "1"), Dimension: "name", Value: "Ada"}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
		if _, err := s.AddMemory(ctx, NewMemory{Scope: MemoryUser, Owner: UserKey("discord", "2"), Text: "likes tea", Origin: OriginTool}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddMemory(ctx, NewMemory{Scope: MemoryChat, Owner: ChatOwner(7), Text: "the team meets on Mondays", Origin: OriginTool}); err != nil {
			t.Fatal(err)
		}
		got, err := s.LearnedUsers(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0] != "discord:2" || got[1] != "telegram:1" {
			t.Fatalf("LearnedUsers = %q, want discord:2 (newest) then telegram:1; chat memories are not users", got)
		}
	})
}

// LastInbound finds the message behind the chat's newest turn that came
// from one, skipping turns of its own (a scheduled job's).
func TestLastInbound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		ctx := t.Context()
		a := newFixture(t, s, "a")
		if _, err := s.LastInbound(ctx, a.chat.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("LastInbound of a chat without turns: %v, want ErrNotFound", err)
		}
		for i, payload := range []string{`{"UserName":"old"}`, `{"UserName":"ada","DisplayName":"Ada L."}`} {
			id, _, err := s.Intake(ctx, InboxItem{Channel: "telegram", ChatKey: "a", MessageID: strconv.Itoa(i), UserID: "u1", Payload: []byte(payload)})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.BeginTurn(ctx, TurnStart{ChatID: a.chat.ID, InboxID: id, UserID: "u1", Channel: "telegram", Kind: "user"},
				[]llm.Message{{Role: llm.RoleUser, Content: payload}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := s.BeginTurn(ctx, TurnStart{ChatID: a.chat.ID, Channel: "telegram", Kind: "job"}, nil); err != nil {
			t.Fatal(err)
		}
		got, err := s.LastInbound(ctx, a.chat.ID)
		if err != nil || string(got) != `{"UserName":"ada","DisplayName":"Ada L."}` {
			t.Fatalf("LastInbound = %s, %v; want the newest user message's payload", got, err)
		}
	})
}
