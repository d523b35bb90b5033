package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/registry"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// The guide's promise (docs/development.md, "Adding a channel"): a new
// platform is its package and one line in registry.All. This test is that
// line for a platform the tree has never heard of ("memo"), and checks that
// everything that used to be glue ranges over it: strict config keys with
// file:line errors, its secret redacted and hidden in logs, the environment
// fallback, serve accepting it as the only channel, its allowlist (and a
// reload of it), skills and jobs that name it, the preview switch, and a
// message answered through it end to end.
func TestANewChannelIsOneLineInTheRegistry(t *testing.T) {
	adapter := newMemoAdapter()
	saved := registry.All
	registry.All = append(slices.Clone(saved), memoDefinition(adapter)) // the one line
	t.Cleanup(func() { registry.All = saved })

	model := testkit.NewFakeLLM(t)
	dir := t.TempDir()
	skillsDir := filepath.Join(dir, "skills")
	if err := os.MkdirAll(skillsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	skill := "name: memo-only\ndescription: answers on memo\nactivation: always\nchannels: [memo]\ninstructions: Be brief on memo.\n"
	if err := os.WriteFile(filepath.Join(skillsDir, "memo-only.yaml"), []byte(skill), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(users string, extra string) string {
		t.Helper()
		path := filepath.Join(dir, "config.yaml")
		data := fmt.Sprintf(`llm:
  base_url: %s
  api_key: sk-test-0123456789
  model: fake-model
store:
  path: %s
skills:
  dir: %s
learning:
  enabled: false
schedule:
  jobs:
    - name: memo-digest
      spec: "@daily"
      channel: memo
      chat: c1
      kind: reminder
      text: good morning
channels:
  memo:
    enabled: true
    allow_users: [%s]
    stream_preview: true
%s`, model.URL, filepath.Join(dir, "sb.db"), skillsDir, users, extra)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	// A misspelt key of the new section is refused at its line, like any
	// other section's.
	_, err := LoadConfig(write("u1", "    tokn: x\n"))
	if err == nil || !strings.Contains(err.Error(), "config.yaml:24") || !strings.Contains(err.Error(), "tokn") {
		t.Fatalf("a misspelt key in channels.memo: %v; want an error naming config.yaml:24 and the key", err)
	}

	// The token from the environment, as its tag says.
	const token = "memo-secret-token-0123456789"
	t.Setenv("MEMO_BOT_TOKEN", token)
	path := write("u1", "")
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	sec := config.Section[*memoConfig](cfg)
	if sec == nil || sec.Token != token {
		t.Fatalf("channels.memo = %+v; want the token from MEMO_BOT_TOKEN", sec)
	}
	if !slices.Contains(cfg.Secrets(), token) {
		t.Error("the new channel's token is not among the secrets the logs hide")
	}
	if got := config.Section[*memoConfig](cfg.Redacted()).Token; got != "***" {
		t.Errorf("check would print the new channel's token as %q", got)
	}
	if err := CheckServable(cfg); err != nil {
		t.Errorf("serve with only the new channel: %v", err)
	}
	if sw := channelSwitch(cfg, func(c *channels.Common) bool { return c.StreamPreview }); !sw["memo"] {
		t.Errorf("preview switches %v: want memo on", sw)
	}

	log := &testkit.SyncBuffer{}
	g, err := Build(t.Context(), cfg, Options{ConfigPath: path, Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	if problems := g.skills.Current().Problems(); len(problems) != 0 {
		t.Errorf("a skill naming the new channel: %v", problems)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- g.Serve(ctx, nil) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	sink := adapter.running(t)

	// The admitted user is answered through the new channel; the token
	// the model echoes is redacted on the way out.
	model.Push(testkit.Reply{Text: "hello from memo " + token})
	if err := sink.Deliver(t.Context(), memoMessage("u1", "m1", "hi")); err != nil {
		t.Fatal(err)
	}
	if got := adapter.next(t); got.ChatID != "c1" || !strings.HasPrefix(got.Text, "hello from memo") || strings.Contains(got.Text, token) {
		t.Errorf("reply %+v; want the model's text to c1 with the token redacted", got)
	}

	// Its allowlist holds: u2 is not admitted, and the model is not asked.
	calls := model.Calls()
	if err := sink.Deliver(t.Context(), memoMessage("u2", "m2", "let me in")); err != nil {
		t.Fatal(err)
	}
	if got := adapter.next(t); strings.Contains(got.Text, "hello") || model.Calls() != calls {
		t.Errorf("a stranger got %q (model calls %d → %d); want a refusal without a model call", got.Text, calls, model.Calls())
	}

	// A reload applies the new channel's allowlist.
	write("u1, u2", "")
	g.Reload()
	model.Push(testkit.Reply{Text: "welcome u2"})
	if err := sink.Deliver(t.Context(), memoMessage("u2", "m3", "again")); err != nil {
		t.Fatal(err)
	}
	if got := adapter.next(t); got.Text != "welcome u2" {
		t.Errorf("after reload u2 got %q; want the model's answer", got.Text)
	}
	// … and so does the adapter's own view (BuildEnv.Access), for one that
	// filters strangers itself (Matrix's invites and intake).
	if adapter.access == nil || !slices.Contains(adapter.access().Users, "u2") {
		t.Errorf("after reload the adapter's BuildEnv.Access does not admit u2")
	}
	if strings.Contains(log.String(), token) {
		t.Error("the new channel's token shows in the log")
	}
}

func memoMessage(user, id, text string) channels.Inbound {
	return channels.Inbound{Channel: "memo", ChatID: "c1", ChatType: channels.DM, MessageID: id,
		UserID: user, Text: text, Mentioned: true, Time: time.Now()}
}

// memoConfig is the new platform's section, as its package would own it.
type memoConfig struct {
	channels.Common `yaml:",inline"`
	Token           string `yaml:"token" secret:"true" env:"MEMO_BOT_TOKEN"`
}

func (c *memoConfig) Access() channels.Access {
	return channels.Access{Users: c.AllowUsers, Admins: c.Admins}
}

func (c *memoConfig) Validate(key string, v channels.Checker) {
	if c.Enabled {
		channels.RequireToken(v, key, c.Token, "MEMO_BOT_TOKEN")
	}
}

func (c *memoConfig) Warnings(string, func(key, fallback, msg string)) {}

func memoDefinition(a *memoAdapter) channels.Definition {
	return channels.Definition{
		Name: "memo", Title: "Memo",
		NewConfig: func() channels.Section { return &memoConfig{} },
		Build: func(_ channels.Section, env channels.BuildEnv) channels.Launch {
			a.access = env.Access
			return channels.Launch{Build: func(context.Context) (channels.Channel, error) { return a, nil }}
		},
	}
}

// memoAdapter is the new platform's adapter: it hands the test its sink
// and records what it is sent.
type memoAdapter struct {
	sinks  chan channels.Sink
	sent   chan channels.Outbound
	once   sync.Once
	access func() channels.Access // BuildEnv.Access
}

func newMemoAdapter() *memoAdapter {
	return &memoAdapter{sinks: make(chan channels.Sink, 1), sent: make(chan channels.Outbound, 16)}
}

func (a *memoAdapter) Name() string { return "memo" }

func (a *memoAdapter) Run(ctx context.Context, sink channels.Sink) error {
	a.once.Do(func() { a.sinks <- sink })
	<-ctx.Done()
	return nil
}

func (a *memoAdapter) Send(_ context.Context, m channels.Outbound) (string, error) {
	select {
	case a.sent <- m:
		return "sent-" + m.ChatID, nil
	default:
		return "", errors.New("memo: test buffer full")
	}
}

func (a *memoAdapter) running(t *testing.T) channels.Sink {
	t.Helper()
	select {
	case s := <-a.sinks:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("the supervisor never ran the new channel")
		return nil
	}
}

func (a *memoAdapter) next(t *testing.T) channels.Outbound {
	t.Helper()
	select {
	case m := <-a.sent:
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("nothing was sent to the new channel")
		return channels.Outbound{}
	}
}
