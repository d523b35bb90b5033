package skills

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/llm"
)

// fakeModel records the request and answers with a fixed reply.
type fakeModel struct {
	got   llm.Request
	calls int
	reply string
	err   error
	block bool // wait for the context to end
}

func (m *fakeModel) Complete(ctx context.Context, req llm.Request, _ func(llm.Delta)) (llm.Response, error) {
	m.calls++
	m.got = req
	if m.block {
		<-ctx.Done()
		return llm.Response{}, ctx.Err()
	}
	return llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: m.reply}, FinishReason: llm.FinishStop}, m.err
}

func TestPromptKind(t *testing.T) {
	errDown := errors.New("model is down")
	tests := []struct {
		name     string
		def      ToolDef
		model    *fakeModel
		args     string
		want     string
		wantMsgs []llm.Message
		wantErr  string
	}{
		{
			name:  "system and user",
			def:   ToolDef{System: "You are {role}.", Prompt: "Summarise in {style}: {text}", Parameters: schema("role", "style", "text")},
			model: &fakeModel{reply: "done"},
			args:  `{"role":"terse","style":"bullets","text":"a \"long\" story"}`,
			want:  "done",
			wantMsgs: []llm.Message{{Role: llm.RoleSystem, Content: "You are terse."},
				{Role: llm.RoleUser, Content: `Summarise in bullets: a "long" story`}},
		},
		{
			name:     "user only, values of every type",
			def:      ToolDef{Prompt: "{n} {ok} {obj} [{missing}] {{braces}}", Parameters: schema("n", "ok", "obj", "missing")},
			model:    &fakeModel{reply: "fine"},
			args:     `{"n":3,"ok":true,"obj":{"a":[1,2]}}`,
			want:     "fine",
			wantMsgs: []llm.Message{{Role: llm.RoleUser, Content: `3 true {"a":[1,2]} [] {braces}`}},
		},
		{name: "empty reply", def: ToolDef{Prompt: "hi"}, model: &fakeModel{reply: " \n"}, wantErr: "empty reply"},
		{name: "model error", def: ToolDef{Prompt: "hi"}, model: &fakeModel{err: errDown}, wantErr: "model call: model is down"},
		{name: "timeout", def: ToolDef{Prompt: "hi", Timeout: 50 * time.Millisecond}, model: &fakeModel{block: true},
			wantErr: "the model did not answer within 50ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.def.Name, tc.def.Kind = "p", "prompt"
			tool := buildTool(t, tc.def, Env{Model: tc.model})
			got, err := tool.Fn(t.Context(), json.RawMessage(tc.args))
			if tc.model.calls != 1 || tc.model.got.Tools != nil || tc.model.got.ForceTool != "" {
				t.Errorf("got %d calls with tools %v %q, want one call without tools", tc.model.calls, tc.model.got.Tools, tc.model.got.ForceTool)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				if tc.model.err != nil && !errors.Is(err, tc.model.err) {
					t.Errorf("got %v, want it to wrap %v", err, tc.model.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
			if !reflect.DeepEqual(tc.model.got.Messages, tc.wantMsgs) {
				t.Errorf("got messages %+v\nwant %+v", tc.model.got.Messages, tc.wantMsgs)
			}
		})
	}
}

func TestPromptKindWithoutModel(t *testing.T) {
	tool := buildTool(t, ToolDef{Name: "p", Kind: "prompt", Prompt: "hi"}, Env{})
	if _, err := tool.Fn(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "no model is configured") {
		t.Errorf("got %v, want an error saying no model is configured", err)
	}
}
