package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
)

// doctor probes the model and says what works, warning where the
// configuration relies on what does not: images with llm.vision on
// (DeepSeek refuses them), usage with a token budget (LM Studio streams
// none), on Azure through a deployment's URL.
func TestDoctorProbesTheModel(t *testing.T) {
	for _, tt := range []struct {
		p      testkit.Profile
		adjust func(*config.Config)
		want   []string
		reject []string
	}{
		{testkit.ProfileDeepSeek, func(c *config.Config) { c.LLM.Vision = true }, []string{
			"ok    model     provider other",
			"ok    model     tool calls: called current_time",
			"ok    model     forced calls: called report_status",
			"ok    model     streaming usage: ",
			"warn  model     images: no: refused an image input: ",
			"fix: llm.vision is on but the model refused an image",
		}, nil},
		{testkit.ProfileLMStudio, func(c *config.Config) { c.Agent.TurnTokenBudget = 50_000 }, []string{
			"ok    model     provider other (detected from llm.base_url; llm.provider names it)",
			"warn  model     streaming usage: no: a streamed answer carried no usage",
			"ok    model     images: answered",
		}, []string{"warn  model     images"}},
		{testkit.ProfileAzure, nil, []string{
			"ok    model     provider azure (detected from llm.base_url",
			"answers (it does not list its models)",
			"ok    model     tool calls: called current_time",
		}, []string{"warn  model", "FAIL"}},
	} {
		t.Run(tt.p.String(), func(t *testing.T) {
			fake := testkit.NewFakeLLMProfile(t, tt.p)
			fake.SetDefault(testkit.Capable())
			dir := t.TempDir()
			cfg := config.Default()
			mc := tt.p.ClientConfig(fake)
			cfg.LLM.BaseURL, cfg.LLM.APIKey, cfg.LLM.Model = mc.BaseURL, mc.APIKey, mc.Model
			cfg.Store.Path = filepath.Join(dir, "switchboard.db")
			cfg.Skills.Dir = filepath.Join(dir, "skills")
			cfg.HTTP.Listen = "127.0.0.1:0"
			if tt.adjust != nil {
				tt.adjust(cfg)
			}
			path := filepath.Join(dir, "config.yaml")
			if err := cfgfile.WriteFile(path, cfg); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if code := run(t.Context(), []string{"doctor", "--config", path}, strings.NewReader(""), &out, &out); code != ExitOK {
				t.Errorf("exit %d, want %d", code, ExitOK)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("report lacks %q", w)
				}
			}
			for _, r := range tt.reject {
				if strings.Contains(out.String(), r) {
					t.Errorf("report says %q", r)
				}
			}
			if strings.Contains(out.String(), tt.p.Key) && tt.p.Key != "" {
				t.Errorf("report shows the API key")
			}
			if t.Failed() {
				t.Logf("report:\n%s", out.String())
			}
		})
	}
}
