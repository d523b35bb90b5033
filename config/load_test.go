package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLoadExpandsEnvironment(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		get  func(*Config) any
		want any
	}{
		{
			name: "variable",
			yaml: doc("agent:", "  system_prompt: ${P}"),
			env:  map[string]string{"P": "be brief"},
			get:  func(c *Config) any { return c.Agent.SystemPrompt },
			want: "be brief",
		},
		{
			name: "text around the reference",
			yaml: doc("agent:", "  system_prompt: pre-${P}-post"),
			env:  map[string]string{"P": "mid"},
			get:  func(c *Config) any { return c.Agent.SystemPrompt },
			want: "pre-mid-post",
		},
		{
			name: "unset variable is empty",
			yaml: doc("agent:", "  system_prompt: a${SWITCHBOARD_TEST_UNSET}b"),
			get:  func(c *Config) any { return c.Agent.SystemPrompt },
			want: "ab",
		},
		{
			name: "default when unset",
			yaml: doc("agent:", "  system_prompt: ${SWITCHBOARD_TEST_UNSET:-fallback text}"),
			get:  func(c *Config) any { return c.Agent.SystemPrompt },
			want: "fallback text",
		},
		{
			name: "default when empty",
			yaml: doc("agent:", "  system_prompt: ${P:-fallback}"),
			env:  map[string]string{"P": ""},
			get:  func(c *Config) any { return c.Agent.SystemPrompt },
			want: "fallback",
		},
		{
			name: "value beats default",
			yaml: doc("agent:", "  system_prompt: ${P:-fallback}"),
			env:  map[string]string{"P": "set"},
			get:  func(c *Config) any { return c.Agent.SystemPrompt },
			want: "set",
		},
		{
			name: "empty default",
			yaml: doc("agent:", "  system_prompt: x${SWITCHBOARD_TEST_UNSET:-}y"),
			get:  func(c *Config) any { return c.Agent.SystemPrompt },
			want: "xy",
		},
		{
			name: "double dollar is a literal dollar",
			yaml: doc("agent:", "  system_prompt: cost $$5 and $${P}"),
			env:  map[string]string{"P": "expanded"},
			get:  func(c *Config) any { return c.Agent.SystemPrompt },
			want: "cost $5 and ${P}",
		},
		{
			name: "four dollars are two",
			yaml: doc("agent:", "  system_prompt: a$$$$b"),
			get:  func(c *Config) any { return c.Agent.SystemPrompt },
			want: "a$$b",
		},
		{
			name: "lone dollar stays",
			yaml: doc("agent:", "  system_prompt: costs $5, see $HOME, ends in $"),
			env:  map[string]string{"HOME": "/root"},
			get:  func(c *Config) any { return c.Agent.SystemPrompt },
			want: "costs $5, see $HOME, ends in $",
		},
		{
			name: "double-quoted",
			yaml: doc("agent:", `  system_prompt: "${P}"`),
			env:  map[string]string{"P": "quoted"},
			get:  func(c *Config) any { return c.Agent.SystemPrompt },
			want: "quoted",
		},
		{
			name: "block scalar",
			yaml: doc("agent:", "  system_prompt: |", "    line one ${P}", "    line two"),
			env:  map[string]string{"P": "here"},
			get:  func(c *Config) any { return c.Agent.SystemPrompt },
			want: "line one here\nline two\n",
		},
		{
			name: "expanded value is not parsed as YAML",
			yaml: doc("agent:", "  system_prompt: ${P}"),
			env:  map[string]string{"P": "key: value\n- item\n#not a comment"},
			get:  func(c *Config) any { return c.Agent.SystemPrompt },
			want: "key: value\n- item\n#not a comment",
		},
		{
			name: "number",
			yaml: doc("llm:", "  model: m", "  context_window: ${CW}"),
			env:  map[string]string{"CW": "4096"},
			get:  func(c *Config) any { return c.LLM.ContextWindow },
			want: 4096,
		},
		{
			name: "number from default",
			yaml: doc("llm:", "  context_window: ${SWITCHBOARD_TEST_UNSET:-2048}"),
			get:  func(c *Config) any { return c.LLM.ContextWindow },
			want: 2048,
		},
		{
			name: "unset number keeps the built-in default",
			yaml: doc("llm:", "  context_window: ${SWITCHBOARD_TEST_UNSET}"),
			get:  func(c *Config) any { return c.LLM.ContextWindow },
			want: defaultContextWindow,
		},
		{
			name: "bool",
			yaml: doc("channels:", "  telegram:", "    enabled: ${TG_ON:-false}"),
			env:  map[string]string{"TG_ON": "true"},
			get:  func(c *Config) any { return telegramOf(c).Enabled },
			want: true,
		},
		{
			name: "duration",
			yaml: doc("agent:", "  turn_timeout: ${SWITCHBOARD_TEST_UNSET:-5m}"),
			get:  func(c *Config) any { return c.Agent.TurnTimeout },
			want: 5 * time.Minute,
		},
		{
			name: "numeric string stays a string",
			yaml: doc("channels:", "  console:", "    user: ${U}"),
			env:  map[string]string{"U": "007"},
			get:  func(c *Config) any { return c.Channels.Console.User },
			want: "007",
		},
		{
			name: "list items",
			yaml: doc("channels:", "  telegram:", `    allow_users: ["${U1}", "@bob", "${U2:-@carol}"]`),
			env:  map[string]string{"U1": "12345"},
			get:  func(c *Config) any { return telegramOf(c).AllowUsers },
			want: []string{"12345", "@bob", "@carol"},
		},
		{
			name: "alias target expanded once",
			yaml: doc("agent:", "  system_prompt: &p $${P}", "channels:", "  console:", "    user: *p"),
			env:  map[string]string{"P": "twice"},
			get:  func(c *Config) any { return [2]string{c.Agent.SystemPrompt, c.Channels.Console.User} },
			want: [2]string{"${P}", "${P}"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.get(mustLoad(t, tt.yaml, tt.env))
			switch w := tt.want.(type) {
			case []string:
				if !slices.Equal(got.([]string), w) {
					t.Errorf("got %q, want %q", got, w)
				}
			default:
				if got != tt.want {
					t.Errorf("got %#v, want %#v", got, tt.want)
				}
			}
		})
	}
}

func TestLoadRejectsBadReferences(t *testing.T) {
	tests := []struct {
		yaml string
		want string
	}{
		{
			doc("llm:", "  model: ${OPENAI_MODEL"),
			`config.yaml:2: llm.model: "${" is not closed; close it with "}", or write "$$" for a literal "$"`,
		},
		{
			doc("llm:", "  model: gpt", "  api_key: ${1KEY}"),
			`config.yaml:3: llm.api_key: "${1KEY}" is not a valid reference: write ${NAME} or ${NAME:-default} with NAME made of letters, digits and "_", or "$$" for a literal "$"`,
		},
		{
			doc("agent:", "  system_prompt: price ${}"),
			`config.yaml:2: agent.system_prompt: "${}" is not a valid reference: write ${NAME} or ${NAME:-default} with NAME made of letters, digits and "_", or "$$" for a literal "$"`,
		},
		{
			doc("agent:", "  system_prompt: ${MY VAR}"),
			`config.yaml:2: agent.system_prompt: "${MY VAR}" is not a valid reference: write ${NAME} or ${NAME:-default} with NAME made of letters, digits and "_", or "$$" for a literal "$"`,
		},
		{ // keys are never expanded, so a reference in a key is an unknown key
			doc("llm:", "  ${KEY}: x"),
			`config.yaml:2: unknown key "llm.${KEY}"; llm takes base_url, api_key, model, context_window, fallback_models, max_retries, request_timeout, stream_idle_timeout, max_concurrent_requests, max_output_tokens, vision, transcription_model, provider, api_version, temperature, models, prices, currency`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := loadString(t, tt.yaml, map[string]string{"KEY": "model"})
			got := messages(t, err)
			if !slices.Equal(got, []string{tt.want}) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestLoadUnknownKeys(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
		key  string
	}{
		{
			name: "top-level typo",
			yaml: doc("llm:", "  model: m", "chanels:", "  console:", "    user: me"),
			want: `config.yaml:3: unknown key "chanels" (did you mean "channels"?)`,
			key:  "chanels",
		},
		{
			name: "nested swap",
			yaml: doc("llm:", "  modle: m"),
			want: `config.yaml:2: unknown key "llm.modle" (did you mean "llm.model"?)`,
			key:  "llm.modle",
		},
		{
			name: "camel case",
			yaml: doc("llm:", "  baseURL: http://x"),
			want: `config.yaml:2: unknown key "llm.baseURL" (did you mean "llm.base_url"?)`,
			key:  "llm.baseURL",
		},
		{
			name: "right key in the wrong section",
			yaml: doc("agent:", "  model: m"),
			want: `config.yaml:2: unknown key "agent.model" (did you mean "llm.model"?)`,
			key:  "agent.model",
		},
		{
			name: "deep typo",
			yaml: doc("channels:", "  telegram:", "    alow_users: [1]"),
			want: `config.yaml:3: unknown key "channels.telegram.alow_users" (did you mean "channels.telegram.allow_users"?)`,
			key:  "channels.telegram.alow_users",
		},
		{
			name: "nothing close",
			yaml: doc("log:", "  colour: red"),
			want: `config.yaml:2: unknown key "log.colour"; log takes level, format`,
			key:  "log.colour",
		},
		{
			name: "nothing close at the top",
			yaml: doc("zzz: 1"),
			want: `config.yaml:1: unknown key "zzz"; the top level takes llm, store, agent, channels, skills, learning, tools, mcp, schedule, http, log, cluster, shutdown_timeout`,
			key:  "zzz",
		},
		{
			name: "duplicate",
			yaml: doc("llm:", "  model: a", "  model: b"),
			want: `config.yaml:3: llm.model: set twice (first at line 2); keep one`,
			key:  "llm.model",
		},
		{
			name: "merge key",
			yaml: doc("base: &b", "  model: a", "llm:", "  <<: *b"),
			want: `config.yaml:1: unknown key "base"; the top level takes llm, store, agent, channels, skills, learning, tools, mcp, schedule, http, log, cluster, shutdown_timeout`,
			key:  "base",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadString(t, tt.yaml, nil)
			ps := problems(t, err)
			if len(ps) == 0 {
				t.Fatal("Load succeeded, want an error")
			}
			if got := ps[0].Error(); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if ps[0].Key != tt.key {
				t.Errorf("Key = %q, want %q", ps[0].Key, tt.key)
			}
		})
	}
}

func TestLoadMergeKeyIsRejected(t *testing.T) {
	_, err := loadString(t, doc("llm:", "  model: a", "agent:", "  <<: {name: x}"), nil)
	want := []string{`config.yaml:4: agent: merge keys (<<) are not supported; write the keys out`}
	if got := messages(t, err); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestLoadTypeErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"number", doc("llm:", "  model: m", "  context_window: abc"),
			`config.yaml:3: llm.context_window: expected a number, got "abc"`},
		{"fraction", doc("agent:", "  max_steps: 1.5"),
			`config.yaml:2: agent.max_steps: expected a whole number, got "1.5"`},
		{"too large", doc("agent:", "  max_steps: 99999999999999999999"),
			`config.yaml:2: agent.max_steps: expected a whole number, got "99999999999999999999"`},
		{"quoted number", doc("agent:", `  max_steps: "5"`),
			`config.yaml:2: agent.max_steps: expected a number, got "5"`},
		{"temperature word", doc("llm:", "  models:", "    m1:", "      temperature: warm"),
			`config.yaml:4: llm.models.m1.temperature: expected a number such as 0.40, got "warm"`},
		{"bool", doc("channels:", "  telegram:", "    enabled: yes"),
			`config.yaml:3: channels.telegram.enabled: expected true or false, got "yes"`},
		{"duration without unit", doc("llm:", "  request_timeout: 180"),
			`config.yaml:2: llm.request_timeout: expected a duration such as "90s" or "10m", got "180"`},
		{"duration word", doc("agent:", "  turn_timeout: soon"),
			`config.yaml:2: agent.turn_timeout: expected a duration such as "90s" or "10m", got "soon"`},
		{"list given a scalar", doc("llm:", "  fallback_models: gpt-4o"),
			`config.yaml:2: llm.fallback_models: expected a list such as [a, b], got "gpt-4o"`},
		{"string given a list", doc("llm:", "  model: [a, b]"),
			`config.yaml:2: llm.model: expected a string, got a list`},
		{"list item given a list", doc("channels:", "  telegram:", "    allow_users:", "      - [1]"),
			`config.yaml:4: channels.telegram.allow_users[0]: expected a string, got a list`},
		{"section given a scalar", doc("llm: 5"),
			`config.yaml:1: llm: expected a mapping of keys, got "5"`},
		{"top level is a list", doc("- a"),
			`config.yaml:1: the top level: expected a mapping of keys, got a list`},
		{"bad binary", doc("llm:", `  model: !!binary "%%%"`),
			`config.yaml:2: llm.model: expected a string, got "%%%"`},
		{"expanded value is shown as written, not as expanded", doc("llm:", "  context_window: ${OPENAI_API_KEY}"),
			`config.yaml:2: llm.context_window: expected a number, got the expansion of "${OPENAI_API_KEY}"`},
		{"long value is shortened", doc("agent:", "  max_steps: "+strings.Repeat("x", 50)),
			`config.yaml:2: agent.max_steps: expected a number, got "` + strings.Repeat("x", 40) + `…"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadString(t, tt.yaml, map[string]string{"OPENAI_API_KEY": "sk-secret"})
			if got := messages(t, err); !slices.Equal(got, []string{tt.want}) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestLoadCollectsEveryProblemInLineOrder(t *testing.T) {
	_, err := loadString(t, doc(
		"llm:",
		"  context_window: big",
		"  modle: m",
		"agent:",
		"  max_steps: many",
	), nil)
	want := []string{
		`config.yaml:2: llm.context_window: expected a number, got "big"`,
		`config.yaml:3: unknown key "llm.modle" (did you mean "llm.model"?)`,
		`config.yaml:5: agent.max_steps: expected a number, got "many"`,
	}
	if got := messages(t, err); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	var ce *Error
	if !errors.As(err, &ce) || ce.Line != 2 {
		t.Errorf("errors.As found %+v, want the problem at line 2", ce)
	}
}

func TestLoadSyntaxErrors(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string
		wantLine int
		prefix   string
	}{
		{"unclosed flow", doc("llm:", "  model: [a", "agent:", "  name: x"), 2, "invalid YAML: did not find expected ',' or ']'"},
		// The flow mapping opens on line 1, so the parser names the line where it gave up.
		{"unclosed flow on line 1", doc("llm: {model: a", "agent:", "  name: x"), 2, "invalid YAML: did not find expected ',' or '}'"},
		{"bad indentation", doc("llm:", "  model: a", " base_url: b"), 3, "invalid YAML: did not find expected key"},
		{"scanner error", doc("llm:", "  model: a", "  api_key: @x"), 3, "invalid YAML: found character that cannot start any token"},
		{"second document", doc("llm:", "  model: a", "---", "llm:", "  model: b"), 3, `a second YAML document ("---") follows the first`},
		{"tab indentation", "llm:\n\tmodel: a\n", 2, "invalid YAML: found character that cannot start any token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadString(t, tt.yaml, nil)
			ps := problems(t, err)
			if len(ps) != 1 {
				t.Fatalf("got %d problems (%v), want 1", len(ps), err)
			}
			p := ps[0]
			if p.File != "config.yaml" || p.Line != tt.wantLine || !strings.HasPrefix(p.Msg, tt.prefix) {
				t.Errorf("got %+v, want config.yaml line %d with a message starting %q", p, tt.wantLine, tt.prefix)
			}
		})
	}
}

func TestLoadNullsAndEmptyFilesKeepDefaults(t *testing.T) {
	for _, content := range []string{
		"",
		"# only a comment\n",
		"---\n",
		"~\n",
		doc("llm:", "agent:", "  max_steps: ~", "  turn_timeout:", "channels:", "  telegram:", "    allow_users: ~"),
	} {
		t.Run(content, func(t *testing.T) {
			got := mustLoad(t, content, map[string]string{"OPENAI_MODEL": "gpt-env"})
			want := Default()
			want.LLM.Model = "gpt-env"
			assertConfig(t, got, want)
		})
	}
}

func TestLoadPrecedence(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		get  func(*Config) string
		want string
	}{
		{"file beats environment", doc("llm:", "  model: from-file"),
			map[string]string{"OPENAI_MODEL": "from-env"},
			func(c *Config) string { return c.LLM.Model }, "from-file"},
		{"environment fills an empty value", doc("llm:", `  model: ""`),
			map[string]string{"OPENAI_MODEL": "from-env"},
			func(c *Config) string { return c.LLM.Model }, "from-env"},
		{"environment fills a missing key", doc("log:", "  level: info"),
			map[string]string{"OPENAI_API_KEY": "sk-env"},
			func(c *Config) string { return c.LLM.APIKey }, "sk-env"},
		{"environment beats the built-in base_url", "",
			map[string]string{"OPENAI_BASE_URL": "http://localhost:11434/v1"},
			func(c *Config) string { return c.LLM.BaseURL }, "http://localhost:11434/v1"},
		{"built-in base_url when nothing is set", doc("llm:", `  base_url: ""`), nil,
			func(c *Config) string { return c.LLM.BaseURL }, defaultBaseURL},
		{"file base_url beats environment", doc("llm:", "  base_url: http://file/v1"),
			map[string]string{"OPENAI_BASE_URL": "http://env/v1"},
			func(c *Config) string { return c.LLM.BaseURL }, "http://file/v1"},
		{"telegram token from environment", "",
			map[string]string{"TELEGRAM_BOT_TOKEN": "123:abc"},
			func(c *Config) string { return telegramOf(c).Token }, "123:abc"},
		{"discord token from environment", "",
			map[string]string{"DISCORD_BOT_TOKEN": "dc"},
			func(c *Config) string { return discordOf(c).Token }, "dc"},
		{"telegram token from file", doc("channels:", "  telegram:", "    token: file-token"),
			map[string]string{"TELEGRAM_BOT_TOKEN": "env-token"},
			func(c *Config) string { return telegramOf(c).Token }, "file-token"},
		{"http token from environment when the file has none", doc("http:", "  listen: 127.0.0.1:8080"),
			map[string]string{"SWITCHBOARD_HTTP_TOKEN": "env-http-token-0123456789"},
			func(c *Config) string { return c.HTTP.Token }, "env-http-token-0123456789"},
		{"http token from file beats environment", doc("http:", "  token: file-http-token-0123456789"),
			map[string]string{"SWITCHBOARD_HTTP_TOKEN": "env-http-token-0123456789"},
			func(c *Config) string { return c.HTTP.Token }, "file-http-token-0123456789"},
		{"explicit empty listen disables HTTP", doc("http:", `  listen: ""`), nil,
			func(c *Config) string { return c.HTTP.Listen }, ""},
		{"explicit empty system prompt", doc("agent:", `  name: ""`), nil,
			func(c *Config) string { return c.Agent.Name }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.get(mustLoad(t, tt.yaml, tt.env)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLoadMissingDefaultPathUsesDefaultsAndEnvironment(t *testing.T) {
	for _, path := range []string{"", DefaultPath, "./" + DefaultPath} {
		t.Run(path, func(t *testing.T) {
			setEnv(t, map[string]string{"OPENAI_MODEL": "gpt-env", "OPENAI_API_KEY": "sk-env"})
			t.Chdir(t.TempDir())
			cfg, err := Load(path)
			if err != nil {
				t.Fatalf("Load(%q): %v", path, err)
			}
			want := Default()
			want.LLM.Model = "gpt-env"
			want.LLM.APIKey = "sk-env"
			assertConfig(t, cfg, want)
		})
	}
}

func TestLoadEmptyPathReadsDefaultPath(t *testing.T) {
	setEnv(t, nil)
	t.Chdir(t.TempDir())
	if err := os.WriteFile(DefaultPath, []byte(doc("llm:", "  model: from-default-file")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LLM.Model != "from-default-file" {
		t.Errorf("model = %q, want the one in %s", cfg.LLM.Model, DefaultPath)
	}
}

func TestLoadExplicitMissingPathIsAnError(t *testing.T) {
	setEnv(t, nil)
	dir := t.TempDir()
	for _, path := range []string{
		filepath.Join(dir, "absent.yaml"),
		filepath.Join(dir, DefaultPath), // not the default path: that is relative to the working directory
	} {
		t.Run(path, func(t *testing.T) {
			cfg, err := Load(path)
			if err == nil {
				t.Fatalf("Load(%q) = %+v, want an error", path, cfg)
			}
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("errors.Is(%v, fs.ErrNotExist) = false", err)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.File != path {
				t.Fatalf("got %v, want a *Error for %s", err, path)
			}
			want := path + ": configuration file not found; create it from config.example.yaml, or give no path to run on built-in defaults and the environment"
			if err.Error() != want {
				t.Errorf("got  %s\nwant %s", err, want)
			}
		})
	}
}

func TestLoadUnreadablePath(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(dir)
	var ce *Error
	if !errors.As(err, &ce) || ce.File != dir || !strings.HasPrefix(ce.Msg, "cannot read configuration: ") {
		t.Errorf("Load(directory) = %v, want a *Error saying it cannot read %s", err, dir)
	}
}

func TestErrorRendering(t *testing.T) {
	tests := []struct {
		err  Error
		want string
	}{
		{Error{File: "c.yaml", Line: 7, Key: "k", Msg: "k: bad"}, "c.yaml:7: k: bad"},
		{Error{File: "c.yaml", Msg: "not found"}, "c.yaml: not found"},
		{Error{Line: 3, Msg: "bad"}, "line 3: bad"},
		{Error{Key: "llm.model", Msg: "llm.model: must not be empty"}, "llm.model: must not be empty"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%+v.Error() = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestClosest(t *testing.T) {
	keys := []string{"level", "format"}
	tests := []struct{ name, want string }{
		{"levle", "level"},
		{"LEVEL", "level"},
		{"fromat", "format"},
		{"formats", "format"},
		{"lvl", ""},
		{"colour", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Closest(tt.name, keys); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
