package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/switchboard-gateway/switchboard/llm"
)

// PlanStep is one step the model proposed for a task.
type PlanStep struct {
	Title        string `json:"title"`
	Instructions string `json:"instructions"`
}

// Plan sizes: fewer steps is no plan, more is too many to steer.
const (
	minPlanSteps = 3
	maxPlanSteps = 7
)

const submitPlan = "submit_plan"

var planSchema = json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"steps":{"type":"array","minItems":%d,"maxItems":%d,"items":{"type":"object","properties":{"title":{"type":"string","description":"a few words"},"instructions":{"type":"string","description":"what to do in this step, self-contained"}},"required":["title","instructions"]}}},"required":["steps"]}`, minPlanSteps, maxPlanSteps))

// MakePlan asks the model to break a task into 3–7 steps, as structured
// output (a forced call to submit_plan). An invalid answer is retried once
// with the reason; context is extra background (the conversation so far).
func (a *Agent) MakePlan(ctx context.Context, task, context string) ([]PlanStep, llm.Usage, error) {
	msgs := []llm.Message{
		{Role: llm.RoleSystem, Content: a.prefix("") + "\n\n# Planning\nBreak the user's task into 3 to 7 steps that can each be done on their own, in order, with the tools available. Each step's instructions must make sense without the others. Call submit_plan with the steps."},
	}
	if strings.TrimSpace(context) != "" {
		msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: "Background from our conversation:\n" + context})
	}
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: "Task: " + task})
	var usage llm.Usage
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		resp, err := a.cfg.Model.Complete(ctx, llm.Request{Messages: msgs, ForceTool: submitPlan,
			Tools: []llm.ToolSpec{{Name: submitPlan, Description: "Submit the plan's steps.", Parameters: planSchema}}}, nil)
		if err != nil {
			return nil, usage, fmt.Errorf("agent: make plan: %w", err)
		}
		usage = usage.Add(resp.Usage)
		steps, perr := parsePlan(resp.Message)
		if perr == nil {
			return steps, usage, nil
		}
		lastErr = perr
		call := llm.ToolCall{ID: "plan_1", Name: submitPlan, Arguments: "{}"}
		if len(resp.Message.ToolCalls) > 0 {
			call = resp.Message.ToolCalls[0]
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}},
			llm.Message{Role: llm.RoleTool, ToolCallID: call.ID, Name: submitPlan, Content: "error: " + perr.Error() + "; call submit_plan again with 3 to 7 steps"})
	}
	return nil, usage, fmt.Errorf("agent: make plan: the model gave no valid plan: %w", lastErr)
}

func parsePlan(m llm.Message) ([]PlanStep, error) {
	if len(m.ToolCalls) == 0 {
		return nil, errors.New("no submit_plan call")
	}
	var p struct {
		Steps []PlanStep `json:"steps"`
	}
	if err := json.Unmarshal([]byte(m.ToolCalls[0].Arguments), &p); err != nil {
		return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	var out []PlanStep
	for _, s := range p.Steps {
		s.Title, s.Instructions = strings.TrimSpace(s.Title), strings.TrimSpace(s.Instructions)
		if s.Instructions == "" {
			continue
		}
		if s.Title == "" {
			s.Title = clipText(s.Instructions, 40)
		}
		out = append(out, s)
	}
	if len(out) < minPlanSteps || len(out) > maxPlanSteps {
		return nil, fmt.Errorf("the plan has %d usable steps; it needs %d to %d", len(out), minPlanSteps, maxPlanSteps)
	}
	return out, nil
}

func clipText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
