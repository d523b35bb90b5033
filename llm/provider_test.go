package llm_test

import (
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// Features (doctor's probe) says what each profile's server can do.
func TestFeaturesPerProfile(t *testing.T) {
	for _, p := range testkit.Profiles() {
		t.Run(p.String(), func(t *testing.T) {
			fake := testkit.NewFakeLLMProfile(t, p)
			fake.SetDefault(testkit.Capable())
			c, err := llm.New(p.ClientConfig(fake))
			if err != nil {
				t.Fatal(err)
			}
			caps, err := c.Features(t.Context())
			if err != nil {
				t.Fatalf("Features: %v", err)
			}
			want := map[string]bool{"tools": true, "forced": true, "usage": !p.NoStreamUsage, "images": !p.NoImages}
			got := map[string]llm.Capability{"tools": caps.Tools, "forced": caps.ForcedCall, "usage": caps.StreamUsage, "images": caps.Images}
			for k, w := range want {
				if got[k].OK != w || got[k].Detail == "" {
					t.Errorf("%s: %+v, want OK %v and a detail", k, got[k], w)
				}
			}
		})
	}
}

func TestDetectProvider(t *testing.T) {
	for _, tt := range []struct{ url, want string }{
		{"https://api.openai.com/v1", llm.ProviderOpenAI},
		{"https://my-res.openai.azure.com", llm.ProviderAzure},
		{"https://my-res.cognitiveservices.azure.com/openai/deployments/x", llm.ProviderAzure},
		{"https://proxy.example/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21", llm.ProviderAzure},
		{"https://api.anthropic.com/v1/", llm.ProviderAnthropic},
		{"https://generativelanguage.googleapis.com/v1beta/openai/", llm.ProviderGemini},
		{"https://api.deepseek.com", llm.ProviderDeepSeek},
		{"https://api.mistral.ai/v1", llm.ProviderMistral},
		{"https://api.groq.com/openai/v1", llm.ProviderGroq},
		{"https://openrouter.ai/api/v1", llm.ProviderOpenRouter},
		{"http://localhost:11434/v1", llm.ProviderOllama},
		{"http://127.0.0.1:1234/v1", llm.ProviderLMStudio},
		{"http://10.0.0.5:8000/v1", llm.ProviderOther},
	} {
		if got := llm.DetectProvider(tt.url); got != tt.want {
			t.Errorf("DetectProvider(%s) = %s, want %s", tt.url, got, tt.want)
		}
	}
	for _, tt := range []struct {
		model string
		want  bool
	}{{"o1", true}, {"o3-mini", true}, {"o4-mini-2025-04-16", true}, {"gpt-5", true}, {"openai/gpt-5-mini", true},
		{"gpt-4o", false}, {"gpt-4.1-mini", false}, {"omni-moderation", false}, {"qwen3:8b", false}, {"prod-reasoner", false}} {
		if got := llm.IsReasoningModel(tt.model); got != tt.want {
			t.Errorf("IsReasoningModel(%s) = %v, want %v", tt.model, got, tt.want)
		}
	}
}
