package assembly

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/router/routertest"
	"github.com/switchboard-gateway/switchboard/store"
)

// chatReads is the real store, counting its chat lookups.
type chatReads struct {
	*store.Store
	n atomic.Int64
}

func (c *chatReads) EnsureChat(ctx context.Context, channel, key, chatType, title string) (store.Chat, error) {
	c.n.Add(1)
	return c.Store.EnsureChat(ctx, channel, key, chatType, title)
}

// okRunner answers every turn with "ok".
type okRunner struct{}

func (okRunner) Run(ctx context.Context, t agent.Turn) agent.Result {
	if _, err := t.Chat.Send(ctx, "ok"); err != nil {
		return agent.Result{StopReason: agent.StopLLMError, Err: err}
	}
	return agent.Result{StopReason: agent.StopEndTurn, Delivered: true}
}

// A turn reads its chat once: the router reads it, and the assembler
// scopes the memories with the chat the router read instead of looking it
// up again.
func TestOneChatReadPerTurn(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cs := &chatReads{Store: st}
	learned := &fakeLearned{}
	a := New(Config{Learning: true, Memory: learned, Profiles: &fakeProfiles{}})
	rig := routertest.Start(t, router.Config{Store: cs, Agent: okRunner{}, Hooks: router.Hooks{Prepare: a.Message}})
	rig.Say(routertest.Msg("c1", "u1", "hello"))
	if got := rig.Ch.Texts(); len(got) != 1 || got[0] != "ok" {
		t.Fatalf("sent %q, want the turn's answer", got)
	}
	if n := cs.n.Load(); n != 1 {
		t.Errorf("the chat was read %d times for one turn, want once", n)
	}
	chat, err := st.EnsureChat(t.Context(), "fake", "c1", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(learned.scopes) != 1 || learned.scopes[0].ChatID != chat.ID {
		t.Errorf("memory scopes = %+v, want the turn's chat %d", learned.scopes, chat.ID)
	}
}
