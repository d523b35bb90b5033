// Package memory keeps the durable facts the bot learns about people and
// chats. A background job extracts them from what users say, with a forced
// structured call to the model; a turn's prompt recalls the ones relevant to
// the message at hand, within a token budget; the tools remember, recall and
// forget let the model manage them during a turn, and /memory lets a user
// see and delete them.
//
// Isolation: a private memory belongs to one user and is only ever shown in
// that user's private chats; a group chat sees only the memories that belong
// to the group. Facts are learned only from the user's own messages, never
// from tool results, web pages or the assistant's words.
package memory

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/learning"
	"github.com/switchboard-gateway/switchboard/store"
)

// Defaults.
const (
	// DefaultPromptTokens budgets the recalled memories in a prompt: a
	// dozen facts, small next to any context window.
	DefaultPromptTokens = 500
	// recallCandidates is how many matches are ranked for the prompt.
	recallCandidates = 20
)

// Store is the part of the store memories need.
type Store interface {
	AddMemory(ctx context.Context, nm store.NewMemory) (store.MemoryChange, error)
	Memories(ctx context.Context, o store.Owners, limit int) ([]store.Memory, error)
	SearchMemories(ctx context.Context, o store.Owners, terms []string, limit int) ([]store.Memory, error)
	DeleteMemory(ctx context.Context, o store.Owners, id int64) (bool, error)
	learning.PassStore // Learn
}

// Config wires a Service.
type Config struct {
	Store Store
	Model learning.Model // for extraction; may be nil when Learn is not used
	// PromptTokens budgets the recalled memories in a prompt; 0 takes
	// DefaultPromptTokens, a negative value keeps them out of prompts.
	PromptTokens int
	Logger       *slog.Logger
}

// Service recalls, stores and extracts memories. It is safe for concurrent use.
type Service struct {
	cfg Config
	log *slog.Logger
}

// New returns a Service with defaults applied.
func New(cfg Config) *Service {
	if cfg.PromptTokens == 0 {
		cfg.PromptTokens = DefaultPromptTokens
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, log: cfg.Logger.With("component", "memory")}
}

// Scope is whose memories a turn may see and change: in a private chat the
// user's own and the chat's, in a group chat only the group's.
type Scope struct {
	Channel string
	UserID  string // the platform user id
	ChatID  int64  // the store's chat id
	Group   bool
}

// Owners is the scope as a store query filter.
func (s Scope) Owners() store.Owners {
	if s.Group || s.UserID == "" {
		return store.Owners{Chat: s.ChatID}
	}
	return store.Owners{User: store.UserKey(s.Channel, s.UserID), Chat: s.ChatID}
}

// owner is the owner of a new memory of the given scope.
func (s Scope) owner(scope string) string {
	if scope == store.MemoryChat {
		return store.ChatOwner(s.ChatID)
	}
	return store.UserKey(s.Channel, s.UserID)
}

// Section recalls the memories relevant to text (the user's message) into
// a block of the dynamic prompt tail, best first, within the token budget.
// ok is false when nothing relevant is remembered. A store failure is
// logged and leaves the turn without memories.
func (m *Service) Section(ctx context.Context, sc Scope, text string) (sec agent.Section, ok bool) {
	if m.cfg.PromptTokens < 0 {
		return agent.Section{}, false
	}
	found, err := m.cfg.Store.SearchMemories(ctx, sc.Owners(), Terms(text), recallCandidates)
	if err != nil {
		m.log.Warn("recall failed; the turn goes on without memories", "err", err)
		return agent.Section{}, false
	}
	budget := m.cfg.PromptTokens * 4 // about four characters a token
	var b strings.Builder
	for _, mem := range found {
		line := "- " + oneLine(mem.Text) + " (" + mem.UpdatedAt.Format("2 Jan 2006") + ")\n"
		if b.Len()+len(line) > budget {
			continue // a shorter, less relevant one may still fit
		}
		b.WriteString(line)
	}
	if b.Len() == 0 {
		return agent.Section{}, false
	}
	title := "What you remember about the user"
	if sc.Group {
		title = "What you remember about this group"
	}
	intro := "From earlier conversations; use what helps, and do not recite it. The recall tool finds more.\n"
	return agent.Section{Title: title, Body: intro + b.String()}, true
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// List returns the memories the scope may see, oldest first.
func (m *Service) List(ctx context.Context, sc Scope) ([]store.Memory, error) {
	return m.cfg.Store.Memories(ctx, sc.Owners(), 0)
}

// Forget deletes a memory the scope may see; it reports whether there was one.
func (m *Service) Forget(ctx context.Context, sc Scope, id int64) (bool, error) {
	return m.cfg.Store.DeleteMemory(ctx, sc.Owners(), id)
}

// describe renders a memory for tool results and commands.
func describe(mem store.Memory) string {
	return fmt.Sprintf("#%d %s (%s)", mem.ID, oneLine(mem.Text), mem.UpdatedAt.Format(time.DateOnly))
}
