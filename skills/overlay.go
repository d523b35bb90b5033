package skills

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/switchboard-gateway/switchboard/store"
)

// The learned overlay: instructions the bot proposed for a skill after
// turns in which it was active (see package learning), applied by the
// operator (`switchboard skills proposals apply ID`) or automatically with
// skills.self_improve: apply. It lives in the store beside the operator's
// files and never rewrites them: a turn uses the skill's learned
// instructions instead of the file's only while the file's instructions are
// the ones the proposal was made for, and a revert restores the file's.

// ErrStaleProposal is matched (errors.Is) when a proposal was made for
// instructions the operator has changed since.
var ErrStaleProposal = errors.New("skills: the skill's instructions changed since the proposal was made")

// ErrUnknownSkill is matched (errors.Is) when a proposal names a skill that
// is not loaded.
var ErrUnknownSkill = errors.New("skills: no such skill")

// InstructionsHash identifies instructions as written, ignoring leading and
// trailing space.
func InstructionsHash(text string) string {
	sum := sha256.Sum256([]byte(strings.TrimSpace(text)))
	return hex.EncodeToString(sum[:12])
}

// OverlayStore is the part of the store the overlay needs.
type OverlayStore interface {
	AppliedSkillProposals(ctx context.Context) ([]store.SkillProposal, error)
	SkillProposals(ctx context.Context, limit int) ([]store.SkillProposal, error)
	SkillProposal(ctx context.Context, id int64) (store.SkillProposal, error)
	ApplySkillProposal(ctx context.Context, id int64) (store.SkillProposal, error)
	RevertSkill(ctx context.Context, skill string) (store.SkillProposal, error)
}

// Overlay applies the learned instructions to registries and manages the
// proposals. It is safe for concurrent use.
type Overlay struct {
	st  OverlayStore
	log *slog.Logger

	mu     sync.Mutex
	base   *Registry // the last registry Apply saw…
	key    string    // …with these applied proposals…
	out    *Registry // …and what it returned
	warned map[int64]bool
}

// NewOverlay returns the overlay kept in st.
func NewOverlay(st OverlayStore, log *slog.Logger) *Overlay {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Overlay{st: st, log: log, warned: map[int64]bool{}}
}

// Apply returns reg with the applied proposals' instructions in place of
// the skills' own; reg itself when there are none or the store cannot be
// read. Proposals for a skill that is gone or whose file's instructions
// changed are skipped (and logged once). The result is cached, so the
// static prompt prefix stays byte-identical from turn to turn.
func (o *Overlay) Apply(ctx context.Context, reg *Registry) *Registry {
	applied, err := o.st.AppliedSkillProposals(ctx)
	if err != nil {
		o.log.Warn("skills: cannot read the learned overlay; using the skill files as they are", "err", err)
		return reg
	}
	var use []store.SkillProposal
	var key strings.Builder
	for _, p := range applied {
		s, ok := reg.byName[p.Skill]
		if !ok || InstructionsHash(s.Instructions) != p.BaseHash {
			o.warnStale(p, ok)
			continue
		}
		use = append(use, p)
		key.WriteString(strconv.FormatInt(p.ID, 10) + ",")
	}
	if len(use) == 0 {
		return reg
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.base == reg && o.key == key.String() {
		return o.out
	}
	out := reg.withInstructions(use)
	o.base, o.key, o.out = reg, key.String(), out
	return out
}

func (o *Overlay) warnStale(p store.SkillProposal, skillExists bool) {
	o.mu.Lock()
	seen := o.warned[p.ID]
	o.warned[p.ID] = true
	o.mu.Unlock()
	if seen {
		return
	}
	why := "the skill's file changed since the proposal was made"
	if !skillExists {
		why = "the skill is not loaded"
	}
	o.log.Warn("skills: learned instructions not used", "skill", p.Skill, "proposal", p.ID, "why", why,
		"hint", "switchboard skills proposals revert "+p.Skill)
}

// withInstructions returns a copy of r whose skills named by the proposals
// carry the proposals' instructions. Everything else is shared: a Registry
// is never modified after it is built.
func (r *Registry) withInstructions(ps []store.SkillProposal) *Registry {
	c := *r
	c.skills = slices.Clone(r.skills)
	c.byName = maps.Clone(r.byName)
	ids := make([]string, 0, len(ps))
	for _, p := range ps {
		i := slices.IndexFunc(c.skills, func(s *Skill) bool { return s.Name == p.Skill })
		if i < 0 {
			continue
		}
		s := *c.skills[i]
		s.Instructions = p.Instructions
		c.skills[i] = &s
		c.byName[s.Name] = &s
		ids = append(ids, strconv.FormatInt(p.ID, 10))
	}
	c.version = r.version + "+learned:" + strings.Join(ids, ",")
	return &c
}

// Proposals lists up to limit proposals (<= 0: all), newest first.
func (o *Overlay) Proposals(ctx context.Context, limit int) ([]store.SkillProposal, error) {
	return o.st.SkillProposals(ctx, limit)
}

// ApplyProposal makes proposal id the learned instructions of its skill,
// after checking against reg (the registry of the operator's files) that
// the skill exists and its instructions are the ones the proposal improves.
func (o *Overlay) ApplyProposal(ctx context.Context, reg *Registry, id int64) (store.SkillProposal, error) {
	p, err := o.st.SkillProposal(ctx, id)
	if err != nil {
		return store.SkillProposal{}, err
	}
	s, ok := reg.Get(p.Skill)
	if !ok {
		return p, fmt.Errorf("apply proposal %d: %w: %q", id, ErrUnknownSkill, p.Skill)
	}
	if InstructionsHash(s.Instructions) != p.BaseHash {
		return p, fmt.Errorf("apply proposal %d for %q: %w", id, p.Skill, ErrStaleProposal)
	}
	return o.st.ApplySkillProposal(ctx, id)
}

// Revert removes the skill's learned instructions; the file's apply again
// from the next turn. It returns the proposal that was applied.
func (o *Overlay) Revert(ctx context.Context, skill string) (store.SkillProposal, error) {
	return o.st.RevertSkill(ctx, skill)
}
