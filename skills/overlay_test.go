package skills

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/store"
)

// fakeProposals is an OverlayStore in memory.
type fakeProposals struct {
	mu    sync.Mutex
	ps    []store.SkillProposal
	err   error // returned by AppliedSkillProposals when set
	reads int
}

func (f *fakeProposals) AppliedSkillProposals(context.Context) ([]store.SkillProposal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	var out []store.SkillProposal
	for _, p := range f.ps {
		if p.Status == store.ProposalApplied {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f *fakeProposals) SkillProposals(context.Context, int) ([]store.SkillProposal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]store.SkillProposal(nil), f.ps...), nil
}

func (f *fakeProposals) SkillProposal(_ context.Context, id int64) (store.SkillProposal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.ps {
		if p.ID == id {
			return p, nil
		}
	}
	return store.SkillProposal{}, store.ErrNotFound
}

func (f *fakeProposals) ApplySkillProposal(_ context.Context, id int64) (store.SkillProposal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out store.SkillProposal
	for i := range f.ps {
		if f.ps[i].ID == id {
			for j := range f.ps {
				if f.ps[j].Skill == f.ps[i].Skill && f.ps[j].Status == store.ProposalApplied {
					f.ps[j].Status = store.ProposalReplaced
				}
			}
			f.ps[i].Status = store.ProposalApplied
			out = f.ps[i]
		}
	}
	return out, nil
}

func (f *fakeProposals) RevertSkill(_ context.Context, skill string) (store.SkillProposal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.ps {
		if f.ps[i].Skill == skill && f.ps[i].Status == store.ProposalApplied {
			f.ps[i].Status = store.ProposalReverted
			return f.ps[i], nil
		}
	}
	return store.SkillProposal{}, store.ErrNotFound
}

const (
	weatherYAML = "name: weather\ndescription: Weather.\nactivation: triggers\ntriggers: [weather]\ninstructions: Answer with the temperature.\n"
	toneYAML    = "name: tone\ndescription: Tone.\nactivation: always\ninstructions: Be friendly.\n"
	lookupYAML  = "name: lookup\ndescription: Look things up.\ninstructions: Search first.\n"
)

func overlayRegistry() *Registry {
	return Load(fstest.MapFS{
		"weather.yaml": {Data: []byte(weatherYAML)},
		"tone.yaml":    {Data: []byte(toneYAML)},
		"lookup.yaml":  {Data: []byte(lookupYAML)},
	}, nil, Env{})
}

func sectionText(ss []agent.Section) string {
	var b strings.Builder
	for _, s := range ss {
		b.WriteString(s.Title + ": " + s.Body + "\n")
	}
	return b.String()
}

func TestOverlayReplacesInstructionsUntilReverted(t *testing.T) {
	reg := overlayRegistry()
	if p := reg.Problems(); len(p) > 0 {
		t.Fatal(p)
	}
	fs := &fakeProposals{ps: []store.SkillProposal{
		{ID: 1, Skill: "weather", BaseHash: InstructionsHash("Answer with the temperature."), Instructions: "Say the city, then the temperature in °C.", Status: store.ProposalProposed},
		{ID: 2, Skill: "tone", BaseHash: InstructionsHash("Be friendly."), Instructions: "Be friendly and brief.", Status: store.ProposalProposed},
		{ID: 3, Skill: "lookup", BaseHash: InstructionsHash("Search first."), Instructions: "Search, then cite.", Status: store.ProposalProposed},
		{ID: 4, Skill: "weather", BaseHash: InstructionsHash("an older text"), Instructions: "Stale.", Status: store.ProposalProposed},
		{ID: 5, Skill: "gone", BaseHash: "x", Instructions: "Nobody.", Status: store.ProposalProposed},
	}}
	o := NewOverlay(fs, nil)
	ctx := t.Context()

	if got := o.Apply(ctx, reg); got != reg {
		t.Fatal("without applied proposals, Apply must return the registry itself")
	}
	// Applying is checked against the operator's files.
	if _, err := o.ApplyProposal(ctx, reg, 4); !errors.Is(err, ErrStaleProposal) {
		t.Errorf("apply a stale proposal: %v, want ErrStaleProposal", err)
	}
	if _, err := o.ApplyProposal(ctx, reg, 5); !errors.Is(err, ErrUnknownSkill) {
		t.Errorf("apply for an unknown skill: %v, want ErrUnknownSkill", err)
	}
	if _, err := o.ApplyProposal(ctx, reg, 99); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("apply an unknown proposal: %v, want ErrNotFound", err)
	}
	for _, id := range []int64{1, 2, 3} {
		if p, err := o.ApplyProposal(ctx, reg, id); err != nil || p.Status != store.ProposalApplied {
			t.Fatalf("ApplyProposal(%d) = %+v, %v", id, p, err)
		}
	}

	got := o.Apply(ctx, reg)
	if got == reg {
		t.Fatal("Apply returned the registry unchanged")
	}
	// Triggered skill: its section in the tail.
	if s := sectionText(got.ForTurn("console", "dm", "weather please").Sections()); !strings.Contains(s, "Say the city, then the temperature in °C.") {
		t.Errorf("triggered skill section = %q, want the learned instructions", s)
	}
	// Always-on skill: the catalogue in the static prefix.
	if c := got.Catalogue(0); !strings.Contains(c, "Be friendly and brief.") || strings.Contains(c, "Be friendly.\n") {
		t.Errorf("catalogue = %q, want the learned tone", c)
	}
	// Auto skill: what use_skill returns.
	turn := got.ForTurn("console", "dm", "hi")
	var use *agent.Tool
	for _, tool := range turn.Tools(agent.TurnInfo{}) {
		if tool.Name == UseSkillTool {
			use = tool
		}
	}
	if use == nil {
		t.Fatal("no use_skill tool")
	}
	if out, err := use.Fn(ctx, []byte(`{"name":"lookup"}`)); err != nil || !strings.Contains(out, "Search, then cite.") {
		t.Errorf("use_skill(lookup) = %q, %v", out, err)
	}
	// The operator's registry is untouched.
	if s, _ := reg.Get("weather"); s.Instructions != "Answer with the temperature." {
		t.Errorf("the base registry changed: %q", s.Instructions)
	}
	// Cached: the same registry for the same overlay.
	if again := o.Apply(ctx, reg); again != got {
		t.Error("a second Apply with the same overlay built a new registry")
	}

	// The operator edits the file: the learned text is no longer used.
	edited := Load(fstest.MapFS{
		"weather.yaml": {Data: []byte(strings.Replace(weatherYAML, "Answer with the temperature.", "Answer in Fahrenheit.", 1))},
		"tone.yaml":    {Data: []byte(toneYAML)},
		"lookup.yaml":  {Data: []byte(lookupYAML)},
	}, nil, Env{})
	e := o.Apply(ctx, edited)
	if s, _ := e.Get("weather"); s.Instructions != "Answer in Fahrenheit." {
		t.Errorf("after the operator's edit, weather = %q; the file must win", s.Instructions)
	}
	if s, _ := e.Get("tone"); s.Instructions != "Be friendly and brief." {
		t.Errorf("tone = %q; its unchanged file keeps the learned text", s.Instructions)
	}

	// Revert restores the file's instructions.
	if p, err := o.Revert(ctx, "weather"); err != nil || p.ID != 1 {
		t.Fatalf("Revert = %+v, %v", p, err)
	}
	after := o.Apply(ctx, reg)
	if s, _ := after.Get("weather"); s.Instructions != "Answer with the temperature." {
		t.Errorf("after revert, weather = %q", s.Instructions)
	}
	if _, err := o.Revert(ctx, "weather"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second revert: %v", err)
	}

	// A store that cannot be read leaves the files in force.
	fs.mu.Lock()
	fs.err = errors.New("disk gone")
	fs.mu.Unlock()
	if o.Apply(ctx, reg) != reg {
		t.Error("with an unreadable overlay, Apply must return the registry itself")
	}
}
