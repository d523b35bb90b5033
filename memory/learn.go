package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/switchboard-gateway/switchboard/learning"
	"github.com/switchboard-gateway/switchboard/store"
)

// Extraction limits.
const (
	// knownMemories is how many existing memories the model sees, so that
	// it can tell an update from a new fact.
	knownMemories = 30
	// maxFactRunes clips a fact to a sentence.
	maxFactRunes = 300
)

// FactsArg is the memories' argument of the learning pass's call.
const FactsArg = "facts"

var factsSchema = json.RawMessage(`{"type":"array","items":{"type":"object","properties":{` +
	`"text":{"type":"string","description":"the fact: one short sentence in the third person"},` +
	`"scope":{"type":"string","enum":["user","chat"],"description":"user: about the user (private to them); chat: about the group as a whole (group chats only)"},` +
	`"source":{"type":"integer","description":"the number of the USER line the fact comes from"},` +
	`"supersedes":{"type":"integer","description":"id of a known memory this fact updates or contradicts"}},` +
	`"required":["text","scope","source"],"additionalProperties":false}}`)

const factsRules = `The long-term memory: the durable facts worth remembering in future conversations: stable facts about the user (life, work, family, plans, likes and dislikes, constraints such as allergies) and, in a group chat, facts about the group.
- Skip small talk, questions, one-off requests, and facts already known unless they changed.
- Write each fact as one short sentence in the third person without the user's name, such as "Is allergic to peanuts" or "Has a daughter, Mia, aged 7".
- scope "user" for facts about the user; scope "chat" only in a group chat, for facts about the group as a whole.
- When a fact updates or contradicts a known memory, set supersedes to that memory's id.`

// Part is the memories' share of the learning pass (learning.Pass): it
// shows the model the known memories and turns its facts into memories.
func (m *Service) Part() learning.Part { return factsPart{m} }

// Learn runs a learning pass with the memories alone (learning.RunPass).
func (m *Service) Learn(ctx context.Context, sc Scope) error {
	return learning.RunPass(ctx, learning.PassConfig{Store: m.cfg.Store, Model: m.cfg.Model, Parts: []learning.Part{m.Part()},
		Logger: m.cfg.Logger}, learning.Trigger{Channel: sc.Channel, UserID: sc.UserID, ChatID: sc.ChatID, Group: sc.Group})
}

type factsPart struct{ m *Service }

func (factsPart) Property() string        { return FactsArg }
func (factsPart) Schema() json.RawMessage { return factsSchema }
func (factsPart) Rules() string           { return factsRules }

// Prepare lists the memories the model may update; only their ids are
// accepted as supersedes, and only for a fact of the same scope.
func (p factsPart) Prepare(ctx context.Context, t learning.Trigger, lines []learning.Line) (learning.Prepared, error) {
	sc := Scope{Channel: t.Channel, UserID: t.UserID, ChatID: t.ChatID, Group: t.Group}
	known, err := p.m.known(ctx, sc, lines)
	if err != nil {
		return learning.Prepared{}, err
	}
	knownScope := map[int64]string{}
	var b strings.Builder
	b.WriteString("Known memories:\n")
	if len(known) == 0 {
		b.WriteString("(none)\n")
	}
	for _, k := range known {
		knownScope[k.ID] = k.Scope
		fmt.Fprintf(&b, "#%d [%s] %s\n", k.ID, k.Scope, oneLine(k.Text))
	}
	decode := func(arg json.RawMessage, into *store.Learned) error {
		if arg == nil {
			return nil
		}
		var facts []struct {
			Text       string `json:"text"`
			Scope      string `json:"scope"`
			Source     int    `json:"source"`
			Supersedes int64  `json:"supersedes"`
		}
		if err := json.Unmarshal(arg, &facts); err != nil {
			return fmt.Errorf("memory: the facts are not valid: %w", err)
		}
		for _, f := range facts {
			text := clip(oneLine(f.Text), maxFactRunes)
			src, ok := learning.UserLine(lines, f.Source)
			if text == "" || !ok {
				p.m.log.Info("extracted fact dropped: not from a user line", "source", f.Source)
				continue
			}
			scope := store.MemoryUser
			if f.Scope == store.MemoryChat && sc.Group {
				scope = store.MemoryChat
			}
			supersedes := f.Supersedes
			if knownScope[supersedes] != scope {
				supersedes = 0
			}
			into.Memories = append(into.Memories, store.NewMemory{Scope: scope, Owner: sc.owner(scope), Text: text,
				Origin: store.OriginExtracted, ChatID: sc.ChatID, SourceTurnID: src.TurnID, Supersedes: supersedes})
		}
		return nil
	}
	return learning.Prepared{Context: b.String(), Decode: decode}, nil
}

// known returns the memories the model may update: the user's and the
// chat's newest ones and those matching what was said. Only their ids are
// accepted as supersedes.
func (m *Service) known(ctx context.Context, sc Scope, lines []learning.Line) ([]store.Memory, error) {
	var said []string
	for _, l := range lines {
		if l.FromUser() {
			said = append(said, l.Text)
		}
	}
	owners := store.Owners{User: store.UserKey(sc.Channel, sc.UserID), Chat: sc.ChatID}
	out, err := m.cfg.Store.SearchMemories(ctx, owners, Terms(strings.Join(said, " ")), knownMemories)
	if err != nil {
		return nil, err
	}
	all, err := m.cfg.Store.Memories(ctx, owners, 0)
	if err != nil {
		return nil, err
	}
	all = all[max(0, len(all)-knownMemories):]
	for _, mem := range all {
		if !slices.ContainsFunc(out, func(o store.Memory) bool { return o.ID == mem.ID }) {
			out = append(out, mem)
		}
	}
	return out, nil
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
