package e2e

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/llm"
)

// serve reads the provider settings from its configuration file: Azure
// from a deployment's URL (api-version and api-key header), a reasoning
// deployment named in llm.models (max_completion_tokens from the first
// request, no temperature), llm.temperature for the others.
func TestProviderSettingsThroughServe(t *testing.T) {
	const token = "chat-api-token-FAKE-providers-0123"
	p := testkit.ProfileAzure
	model := testkit.NewFakeLLMProfile(t, p)
	mc := p.ClientConfig(model)
	cfg := config.Default()
	yes, temp := true, 0.4
	cfg.LLM.BaseURL, cfg.LLM.APIKey, cfg.LLM.Model, cfg.LLM.MaxRetries = mc.BaseURL, mc.APIKey, mc.Model, 0
	cfg.LLM.MaxOutputTokens, cfg.LLM.Temperature = 800, &temp
	cfg.LLM.Models = map[string]config.LLMModel{p.Model: {Reasoning: &yes}}
	dir := t.TempDir()
	cfg.Store.Path = filepath.Join(dir, "switchboard.db")
	cfg.Skills.Dir = filepath.Join(dir, "skills")
	cfg.Learning.Enabled = false
	cfg.HTTP.Listen, cfg.HTTP.Token = "127.0.0.1:0", token
	_, url := serveReady(t, cfgfile.Write(t, cfg), token)

	model.Push(testkit.Reply{ToolCalls: []llm.ToolCall{testkit.Call("c1", "current_time", `{}`)}},
		testkit.Reply{Text: "It is time."})
	if got, _ := testkit.Chat(t, url, token, "ada", "what time is it?"); got != "It is time." {
		t.Fatalf("reply %q\nrequests: %d", got, len(model.Requests()))
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2 (none refused)", len(reqs))
	}
	for i, r := range reqs {
		var body struct {
			MaxTokens           *int     `json:"max_tokens"`
			MaxCompletionTokens *int     `json:"max_completion_tokens"`
			Temperature         *float64 `json:"temperature"`
		}
		if err := json.Unmarshal(r.Raw, &body); err != nil {
			t.Fatal(err)
		}
		if r.Path != "/openai/deployments/"+p.Model+"/chat/completions" || r.Header.Get("api-key") != p.Key || r.Header.Get("Authorization") != "" {
			t.Errorf("request %d: %s with api-key %q, Authorization %q; want the deployment's path and the key in api-key only",
				i, r.Path, r.Header.Get("api-key"), r.Header.Get("Authorization"))
		}
		if body.MaxTokens != nil || body.Temperature != nil || body.MaxCompletionTokens == nil || *body.MaxCompletionTokens != 800 {
			t.Errorf("request %d: max_tokens %v, temperature %v, max_completion_tokens %v; want only max_completion_tokens 800",
				i, body.MaxTokens, body.Temperature, body.MaxCompletionTokens)
		}
	}
}
