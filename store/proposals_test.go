package store

import (
	"errors"
	"testing"
)

func TestSkillProposalsApplyReplaceRevert(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db backend) {
		s, _, _ := db.openTest(t)
		f := newFixture(t, s, "d1")
		turn := turnFor(t, s, f, "u1", "user", "weather?", "sunny", true)
		c := Cursor{Job: "skills", Channel: "telegram", UserID: "u1", ChatID: f.chat.ID}
		pos, _ := s.LearningCursor(t.Context(), c, 10)
		ids, err := s.LearnSkillProposals(t.Context(), c, pos, pos+1, []SkillProposal{
			{Skill: "weather", BaseHash: "h1", Instructions: "Say the city first.", Assessment: "mixed", Notes: "forgot the city", SourceTurnID: turn},
		}, false)
		if err != nil || len(ids) != 1 {
			t.Fatalf("LearnSkillProposals = %v, %v", ids, err)
		}
		if applied, _ := s.AppliedSkillProposals(t.Context()); len(applied) != 0 {
			t.Errorf("propose mode applied %+v", applied)
		}
		// Apply mode: the new proposal is applied in the same transaction.
		ids2, err := s.LearnSkillProposals(t.Context(), c, pos+1, pos+2, []SkillProposal{
			{Skill: "weather", BaseHash: "h1", Instructions: "Use Celsius."},
		}, true)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := s.ApplySkillProposal(t.Context(), ids[0]); err != nil || p.Status != ProposalApplied {
			t.Fatalf("ApplySkillProposal = %+v, %v", p, err)
		}
		if p, _ := s.SkillProposal(t.Context(), ids2[0]); p.Status != ProposalReplaced {
			t.Errorf("the previously applied proposal is %q, want replaced", p.Status)
		}
		applied, _ := s.AppliedSkillProposals(t.Context())
		if len(applied) != 1 || applied[0].ID != ids[0] || applied[0].Notes != "forgot the city" || applied[0].SourceTurnID != turn {
			t.Errorf("applied = %+v", applied)
		}
		if _, err := s.ApplySkillProposal(t.Context(), 999); !errors.Is(err, ErrNotFound) {
			t.Errorf("apply unknown: %v", err)
		}
		if p, err := s.RevertSkill(t.Context(), "weather"); err != nil || p.ID != ids[0] || p.Status != ProposalReverted {
			t.Errorf("RevertSkill = %+v, %v", p, err)
		}
		if applied, _ := s.AppliedSkillProposals(t.Context()); len(applied) != 0 {
			t.Errorf("after revert: %+v", applied)
		}
		if _, err := s.RevertSkill(t.Context(), "weather"); !errors.Is(err, ErrNotFound) {
			t.Errorf("second revert: %v, want ErrNotFound", err)
		}
		all, _ := s.SkillProposals(t.Context(), 0)
		if len(all) != 2 || all[0].ID != ids2[0] {
			t.Errorf("SkillProposals = %+v, want both, newest first", all)
		}
	})
}
