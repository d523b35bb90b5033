package learning

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/skills"
	"github.com/switchboard-gateway/switchboard/store"
)

// reviewer answers review_skill calls with a fixed proposal and records
// the prompts.
type reviewer struct {
	improved string
	prompts  []string
}

func (r *reviewer) Complete(_ context.Context, req llm.Request, _ func(llm.Delta)) (llm.Response, error) {
	r.prompts = append(r.prompts, req.Messages[1].Content)
	args := `{"assessment":"mixed","notes":"Forgot the city.","improved_instructions":` + quote(r.improved) + `}`
	return llm.Response{Message: llm.Message{ToolCalls: []llm.ToolCall{{Name: req.ForceTool, Arguments: args}}}}, nil
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestSkillJobProposesForTurnsWithTheSkill(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	chat, _ := st.EnsureChat(ctx, "tg", "d1", "dm", "")
	sess, _ := st.CurrentSession(ctx, chat.ID)
	turn := func(text string) int64 {
		id, _, err := st.BeginTurn(ctx, store.TurnStart{ChatID: chat.ID, SessionID: sess.ID, UserID: "ada", Channel: "tg", Kind: "user"},
			[]llm.Message{{Role: llm.RoleUser, Content: text}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.CommitStep(ctx, id, 1, []store.StepMessage{{Message: llm.Message{Role: llm.RoleAssistant, Content: "It is 20 °C."}}}, llm.Usage{}); err != nil {
			t.Fatal(err)
		}
		if err := st.FinishTurn(ctx, id, store.TurnEnd{StopReason: "end_turn", Status: store.TurnCompleted}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	turn("hello there") // no skill active
	weather := turn("weather in Paris?")

	files := skills.Load(fstest.MapFS{"w.yaml": {Data: []byte(
		"name: weather\ndescription: Weather.\nactivation: triggers\ntriggers: [weather]\ninstructions: Answer with the temperature.\n")}}, nil, skills.Env{})
	model := &reviewer{improved: "Name the city, then the temperature."}
	overlay := skills.NewOverlay(st, nil)
	job := SkillJob(SkillJobConfig{Store: st, Model: model, Files: func() *skills.Registry { return files }, Overlay: overlay})

	tr := Trigger{Channel: "tg", UserID: "ada", ChatID: chat.ID, TurnID: weather}
	if job.Wants(tr) {
		t.Error("the job wants a trigger without skills")
	}
	tr.Skills = map[int64][]string{weather: {"weather"}, 999: {"gone"}}
	if !job.Wants(tr) {
		t.Fatal("the job does not want a trigger with skills")
	}
	if err := job.Run(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if len(model.prompts) != 1 {
		t.Fatalf("%d review calls, want 1", len(model.prompts))
	}
	p := model.prompts[0]
	if !strings.Contains(p, "weather in Paris?") || strings.Contains(p, "hello there") ||
		!strings.Contains(p, "Answer with the temperature.") || !strings.Contains(p, "completed (end_turn)") {
		t.Errorf("review prompt:\n%s\nwant only the turn the skill was active in, with how it ended", p)
	}
	ps, _ := st.SkillProposals(ctx, 0)
	if len(ps) != 1 || ps[0].Skill != "weather" || ps[0].Status != store.ProposalProposed || ps[0].SourceTurnID != weather ||
		ps[0].BaseHash != skills.InstructionsHash("Answer with the temperature.") || ps[0].Notes != "Forgot the city." {
		t.Fatalf("proposals = %+v", ps)
	}

	// The same turns are not reviewed twice; an unchanged text is no proposal.
	if err := job.Run(ctx, tr); err != nil || len(model.prompts) != 1 {
		t.Errorf("second run: %v, %d calls; want none", err, len(model.prompts))
	}
	again := turn("weather in Rome?")
	model.improved = "Answer with the temperature."
	if err := job.Run(ctx, Trigger{Channel: "tg", UserID: "ada", ChatID: chat.ID, Skills: map[int64][]string{again: {"weather"}}}); err != nil {
		t.Fatal(err)
	}
	if ps, _ := st.SkillProposals(ctx, 0); len(ps) != 1 {
		t.Errorf("%d proposals; an unchanged text must not become one", len(ps))
	}

	// Apply mode: the proposal is the overlay at once.
	applyJob := SkillJob(SkillJobConfig{Store: st, Model: model, Files: func() *skills.Registry { return files }, Overlay: overlay, Apply: true})
	last := turn("weather in Oslo?")
	model.improved = "Say the city first."
	if err := applyJob.Run(ctx, Trigger{Channel: "tg", UserID: "ada", ChatID: chat.ID, Skills: map[int64][]string{last: {"weather"}}}); err != nil {
		t.Fatal(err)
	}
	if s, _ := overlay.Apply(ctx, files).Get("weather"); s.Instructions != "Say the city first." {
		t.Errorf("after an apply-mode review, weather = %q", s.Instructions)
	}
}
