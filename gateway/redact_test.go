package gateway

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/redact"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

// Issue 29: the configuration's secrets are redacted from the start, and a
// secret a reload brings is redacted from then on (the old ones stay
// hidden: the running parts still hold them).
func TestReloadRefreshesRedaction(t *testing.T) {
	model := testkit.NewFakeLLM(t)
	dir := t.TempDir()
	c := config.Default()
	c.LLM.BaseURL, c.LLM.APIKey, c.LLM.Model = model.URL, "sk-first-key-0123456789", "fake-model"
	c.Store.Path = filepath.Join(dir, "sb.db")
	c.Skills.Dir = filepath.Join(dir, "skills")
	c.Learning.Enabled = false
	path := cfgfile.Write(t, c)
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Build(t.Context(), cfg, Options{ConfigPath: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	if got := g.redact.String("key sk-first-key-0123456789"); got != "key [redacted]" {
		t.Errorf("before reload: %q", got)
	}

	c.Tools.Web.Search.Provider, c.Tools.Web.Search.APIKey = "brave", "brave-second-key-0123456789"
	if err := cfgfile.WriteFile(path, c); err != nil {
		t.Fatal(err)
	}
	g.Reload()
	if got := g.redact.String("sk-first-key-0123456789 brave-second-key-0123456789"); got != "[redacted] [redacted]" {
		t.Errorf("after reload: %q", got)
	}
}

// A variable granted to a skill is that skill's key, whatever its name:
// hidden like the gateway's own secrets (an API that echoes it back).
func TestGrantedVariablesAreRedacted(t *testing.T) {
	t.Setenv("WEATHER_CREDS", "wx-granted-value-0123456789")
	c := config.Default()
	if got := redact.New(secretsOf(c)).String("k=wx-granted-value-0123456789"); got != "k=wx-granted-value-0123456789" {
		t.Fatalf("an ungranted variable with an ordinary name: %q", got)
	}
	c.Skills.Grants = map[string]config.SkillGrant{"weather": {Env: []string{"WEATHER_CREDS"}}}
	if got := redact.New(secretsOf(c)).String("k=wx-granted-value-0123456789"); strings.Contains(got, "wx-granted") {
		t.Errorf("the granted variable's value shows: %q", got)
	}
}

// The outbound guard's one allowance for Discord attachments: a configured
// api_base other than Discord's, exactly its host and port.
func TestOwnAPIHost(t *testing.T) {
	const discord = "https://discord.com/api/v9"
	tests := []struct {
		base string
		want []string
	}{
		{discord, nil},
		{"http://127.0.0.1:4567/api/v9", []string{"127.0.0.1:4567"}},
		{"https://proxy.internal/api/v9", []string{"proxy.internal:443"}},
		{"http://[::1]:80/api", []string{"[::1]:80"}},
		{"::not a url", nil},
	}
	for _, tt := range tests {
		if got := ownAPIHost(tt.base, discord); !slices.Equal(got, tt.want) {
			t.Errorf("ownAPIHost(%q) = %q, want %q", tt.base, got, tt.want)
		}
	}
}

// What the loop stores besides tool results is redacted too: the user's
// message, the model's text and tool-call arguments, a turn's error.
func TestRedactingStore(t *testing.T) {
	const secret = "ghp_pasted-token-0123456789"
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "sb.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	chat, err := st.EnsureChat(t.Context(), "test", "c1", "dm", "")
	if err != nil {
		t.Fatal(err)
	}
	rs := redactingStore{Store: st, redact: redact.New([]redact.Secret{{Name: "GITHUB_TOKEN", Value: secret}}).String}
	turn, _, err := rs.BeginTurn(t.Context(), store.TurnStart{ChatID: chat.ID, Kind: "user"},
		[]llm.Message{{Role: llm.RoleUser, Content: "my token is " + secret}})
	if err != nil {
		t.Fatal(err)
	}
	step := []store.StepMessage{{Message: llm.Message{Role: llm.RoleAssistant, Content: "you said " + secret,
		ToolCalls: []llm.ToolCall{{ID: "c1", Name: "remember", Arguments: `{"fact":"` + secret + `"}`}}}},
		{Message: llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Content: "ok"}}}
	if _, err := rs.CommitStep(t.Context(), turn, 1, step, llm.Usage{}); err != nil {
		t.Fatal(err)
	}
	if err := rs.FinishTurn(t.Context(), turn, store.TurnEnd{Status: store.TurnFailed, Error: "401 for " + secret}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(step[0].ToolCalls[0].Arguments, "[redacted") {
		t.Errorf("the caller's tool call was changed in place")
	}
	sess, err := st.CurrentSession(t.Context(), chat.ID)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := st.Messages(t.Context(), sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 {
		t.Fatalf("stored %d messages, want 3", len(msgs))
	}
	for _, m := range msgs {
		all := m.Content
		for _, c := range m.ToolCalls {
			all += c.Arguments
		}
		if strings.Contains(all, secret) {
			t.Errorf("stored %s message holds the secret: %q", m.Role, all)
		}
	}
	if got := msgs[0].Content; got != "my token is [redacted:GITHUB_TOKEN]" {
		t.Errorf("user message = %q", got)
	}
}
