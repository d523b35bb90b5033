package config

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/discord"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   []string // nil: valid
	}{
		{"valid", func(*Config) {}, nil},

		// llm
		{"base_url scheme", func(c *Config) { c.LLM.BaseURL = "ftp://example.com" },
			[]string{`llm.base_url: "ftp://example.com" is not a http or https URL; write it like https://api.openai.com/v1`}},
		{"base_url without host", func(c *Config) { c.LLM.BaseURL = "api.openai.com/v1" },
			[]string{`llm.base_url: "api.openai.com/v1" is not a http or https URL; write it like https://api.openai.com/v1`}},
		{"base_url password is not printed", func(c *Config) { c.LLM.BaseURL = "ftp://u:hunter2@example.com" },
			[]string{`llm.base_url: "ftp://u:***@example.com" is not a http or https URL; write it like https://api.openai.com/v1`}},
		{"base_url http", func(c *Config) { c.LLM.BaseURL = "http://localhost:11434/v1" }, nil},

		// tools.command
		{"connect_ports out of range", func(c *Config) {
			c.Tools.Command.Enabled = true
			c.Tools.Command.ConnectPorts = []int{443, 0, 70000}
		}, []string{
			"tools.command.connect_ports[1]: 0 is not a TCP port; list ports from 1 to 65535, such as 443",
			"tools.command.connect_ports[2]: 70000 is not a TCP port; list ports from 1 to 65535, such as 443",
		}},
		{"connect_ports", func(c *Config) { c.Tools.Command.Enabled = true; c.Tools.Command.ConnectPorts = []int{443} }, nil},
		{"model empty", func(c *Config) { c.LLM.Model = " " },
			[]string{"llm.model: must not be empty; set it or OPENAI_MODEL"}},
		{"context_window zero", func(c *Config) { c.LLM.ContextWindow = 0 },
			[]string{"llm.context_window: must be a positive number, got 0; set it to the model's context size in tokens, such as 128000"}},
		{"fallback model empty", func(c *Config) { c.LLM.FallbackModels = []string{"a", ""} },
			[]string{"llm.fallback_models[1]: must not be empty; remove the entry or name a model"}},
		{"max_retries negative", func(c *Config) { c.LLM.MaxRetries = -1 },
			[]string{"llm.max_retries: must not be negative, got -1 (0 disables retries)"}},
		{"max_retries zero", func(c *Config) { c.LLM.MaxRetries = 0 }, nil},
		{"provider unknown", func(c *Config) { c.LLM.Provider = "azur" },
			[]string{`llm.provider: unknown provider "azur"; use one of openai, azure, anthropic, gemini, deepseek, mistral, groq, openrouter, ollama, vllm, llamacpp, lmstudio, other, or leave it empty to detect it from llm.base_url`}},
		{"provider and models", func(c *Config) {
			t, f := 0.2, false
			c.LLM.Provider, c.LLM.Temperature = "azure", &t
			c.LLM.Models = map[string]LLMModel{"prod": {Reasoning: &f, Temperature: &t}}
		}, nil},
		{"temperature out of range", func(c *Config) {
			hot, cold, yes := 2.5, -1.0, true
			c.LLM.Temperature = &hot
			c.LLM.Models = map[string]LLMModel{"o3": {Reasoning: &yes, Temperature: &cold}}
		}, []string{
			"llm.temperature: 2.5 is out of range; use a value from 0 to 2, or leave it unset for the server's default",
			"llm.models.o3.temperature: -1 is out of range; use a value from 0 to 2, or leave it unset for the server's default",
			"llm.models.o3.temperature: a reasoning model takes no temperature; remove it, or set reasoning: false",
		}},
		{"request_timeout zero", func(c *Config) { c.LLM.RequestTimeout = 0 },
			[]string{`llm.request_timeout: must be a positive duration, got 0s; set it to something like "120s"`}},
		{"max_output_tokens negative", func(c *Config) { c.LLM.MaxOutputTokens = -5 },
			[]string{"llm.max_output_tokens: must not be negative, got -5 (0 leaves the limit to the server)"}},
		{"max_output_tokens fills the window", func(c *Config) { c.LLM.ContextWindow = 1000; c.LLM.MaxOutputTokens = 1000 },
			[]string{"llm.max_output_tokens: must be less than llm.context_window (1000), or no room is left for the prompt; lower it, or set 0 to leave it to the server"}},
		{"max_output_tokens fits", func(c *Config) { c.LLM.MaxOutputTokens = 4096 }, nil},
		{"a negative price", func(c *Config) { c.LLM.Prices = map[string]Price{"gpt-x": {Input: 0.4, Cached: -1, Output: 1.6}} },
			[]string{"llm.prices.gpt-x.cached: -1 is not a price: write what a million tokens cost, 0 or more, such as 0.40"}},
		{"prices", func(c *Config) { c.LLM.Prices = map[string]Price{"gpt-x": {Input: 0.4, Cached: 0.1, Output: 1.6}} }, nil},

		// store, agent, skills
		{"store.path empty", func(c *Config) { c.Store.Path = "" },
			[]string{`store.path: must not be empty; set it to a file name for the SQLite database, such as "switchboard.db"`}},
		{"store.driver unknown", func(c *Config) { c.Store.Driver = "mysql" },
			[]string{`store.driver: "mysql" is not one of sqlite, postgres`}},
		{"store.dsn missing", func(c *Config) { c.Store.Driver = "postgres" },
			[]string{`store.dsn: required when store.driver is postgres; set it to a PostgreSQL connection string, such as "postgres://switchboard:${SWITCHBOARD_DB_PASSWORD}@127.0.0.1:5432/switchboard"`}},
		{"store.dsn not a postgres URL, password not printed", func(c *Config) {
			c.Store.Driver, c.Store.DSN = "postgres", "mysql://sb:hunter2@db/sb"
		}, []string{`store.dsn: is not a postgres:// URL; write it such as "postgres://switchboard:${SWITCHBOARD_DB_PASSWORD}@127.0.0.1:5432/switchboard", or as key=value pairs (host=… user=… dbname=…)`}},
		{"store.dsn neither form", func(c *Config) { c.Store.Driver, c.Store.DSN = "postgres", "db.internal" },
			[]string{`store.dsn: is neither a postgres:// URL nor key=value pairs; write it such as "postgres://switchboard:${SWITCHBOARD_DB_PASSWORD}@127.0.0.1:5432/switchboard"`}},
		{"store.dsn URL", func(c *Config) {
			c.Store.Driver, c.Store.Path, c.Store.DSN = "postgres", "", "postgresql://sb:pw@db.internal:5432/sb?sslmode=require"
		}, nil},
		{"store.dsn key=value", func(c *Config) { c.Store.Driver, c.Store.DSN = "postgres", "host=db.internal user=sb dbname=sb" }, nil},
		{"agent.name empty", func(c *Config) { c.Agent.Name = "" },
			[]string{`agent.name: must not be empty; set it to the name the bot goes by, such as "Switchboard"`}},
		{"timezone empty", func(c *Config) { c.Agent.Timezone = "" },
			[]string{`agent.timezone: must not be empty; set an IANA zone such as "Europe/Berlin", or "UTC"`}},
		{"timezone unknown", func(c *Config) { c.Agent.Timezone = "Mars/Olympus_Mons" },
			[]string{`agent.timezone: unknown time zone "Mars/Olympus_Mons"; use an IANA name such as "Europe/Berlin" or "America/New_York", or "UTC"`}},
		{"timezone IANA", func(c *Config) { c.Agent.Timezone = "Pacific/Chatham" }, nil},
		{"max_steps zero", func(c *Config) { c.Agent.MaxSteps = 0 },
			[]string{"agent.max_steps: must be a positive number, got 0; set it to the model calls allowed in one turn, such as 50"}},
		{"max_concurrent_turns negative", func(c *Config) { c.Agent.MaxConcurrentTurns = -1 },
			[]string{"agent.max_concurrent_turns: must be a positive number, got -1; set it to such as 64"}},
		{"turn_timeout negative", func(c *Config) { c.Agent.TurnTimeout = -time.Second },
			[]string{`agent.turn_timeout: must be a positive duration, got -1s; set it to something like "10m"`}},
		{"max_input_chars zero", func(c *Config) { c.Channels.MaxInputChars = 0 },
			[]string{"channels.max_input_chars: must be a positive number, got 0; set it to such as 32000"}},
		{"tool_result_max_chars zero", func(c *Config) { c.Agent.ToolResultMaxChars = 0 },
			[]string{"agent.tool_result_max_chars: must be a positive number, got 0; set it to such as 50000"}},
		{"turn_token_budget negative", func(c *Config) { c.Agent.TurnTokenBudget = -1 },
			[]string{"agent.turn_token_budget: must not be negative, got -1 (0 means unlimited)"}},
		{"user_daily_token_budget negative", func(c *Config) { c.Agent.UserDailyTokenBudget = -1 },
			[]string{"agent.user_daily_token_budget: must not be negative, got -1 (0 means unlimited)"}},
		{"budgets set", func(c *Config) { c.Agent.TurnTokenBudget = 10000; c.Agent.UserDailyTokenBudget = 1e6 }, nil},
		{"skills.dir empty", func(c *Config) { c.Skills.Dir = "" },
			[]string{`skills.dir: must not be empty; set it to a directory of skill files, such as "switchboard-skills" (it may be empty)`}},
		{"self_improve unknown", func(c *Config) { c.Skills.SelfImprove = "always" },
			[]string{`skills.self_improve: "always" is not one of off, propose, apply`}},
		{"self_improve apply", func(c *Config) { c.Skills.SelfImprove = "apply" }, nil},

		// learning
		{"learning numbers wrong", func(c *Config) {
			c.Learning.EveryNTurns, c.Learning.JobTimeout, c.Learning.QueueSize, c.Learning.MemoryPromptTokens = 0, 0, -1, -1
		}, []string{
			"learning.every_n_turns: must be a positive number, got 0; set it to 1 to learn after every turn",
			`learning.job_timeout: must be a positive duration, got 0s; set it to something like "60s"`,
			"learning.queue_size: must be a positive number, got -1; set it to such as 64",
			"learning.memory_prompt_tokens: must not be negative, got -1 (0 keeps memories out of the prompt)",
		}},
		{"learning off: its numbers are not checked", func(c *Config) { c.Learning = Learning{} }, nil},

		// tools.web, tools.files
		{"web defaults are on and valid", func(c *Config) {
			if !c.Tools.Web.Enabled || c.Tools.Files.Enabled {
				panic("want web on and files off by default")
			}
		}, nil},
		{"web allow_hosts", func(c *Config) {
			c.Tools.Web.AllowHosts = []string{"wiki.internal", "10.0.0.5", "10.0.0.0/8", "fd00::/8", "[::1]", "localhost",
				"https://wiki.internal", "wiki.internal:8080", "", "10.0.0.0/33", "10.0.0.5:8080", "[fd00::5]:443", "wiki.internal:0", "10.0.0.0/8:80"}
		}, []string{
			`tools.web.allow_hosts[6]: "https://wiki.internal" is a URL, not a host; write a host name (wiki.internal), an address (10.0.0.5) or a network (10.0.0.0/8); a name or an address may carry a port, then only that port is allowed (wiki.internal:8080, 10.0.0.5:8080, [fd00::5]:8080)`,
			`tools.web.allow_hosts[8]: "" is empty; write a host name (wiki.internal), an address (10.0.0.5) or a network (10.0.0.0/8); a name or an address may carry a port, then only that port is allowed (wiki.internal:8080, 10.0.0.5:8080, [fd00::5]:8080)`,
			`tools.web.allow_hosts[9]: "10.0.0.0/33" is not a host name, an address or a network; write a host name (wiki.internal), an address (10.0.0.5) or a network (10.0.0.0/8); a name or an address may carry a port, then only that port is allowed (wiki.internal:8080, 10.0.0.5:8080, [fd00::5]:8080)`,
			`tools.web.allow_hosts[12]: "wiki.internal:0" has a port that is not a number from 1 to 65535; write a host name (wiki.internal), an address (10.0.0.5) or a network (10.0.0.0/8); a name or an address may carry a port, then only that port is allowed (wiki.internal:8080, 10.0.0.5:8080, [fd00::5]:8080)`,
			`tools.web.allow_hosts[13]: "10.0.0.0/8:80" is a network with a port; a port can only follow a host name or an address; write a host name (wiki.internal), an address (10.0.0.5) or a network (10.0.0.0/8); a name or an address may carry a port, then only that port is allowed (wiki.internal:8080, 10.0.0.5:8080, [fd00::5]:8080)`,
		}},
		{"web numbers wrong", func(c *Config) {
			c.Tools.Web.Timeout, c.Tools.Web.MaxBytes, c.Tools.Web.MaxChars, c.Tools.Web.MaxRedirects = 0, 0, -1, -1
		}, []string{
			`tools.web.timeout: must be a positive duration, got 0s; set it to something like "15s"`,
			"tools.web.max_bytes: must be a positive number, got 0; set it to such as 2097152 (2 MiB)",
			"tools.web.max_chars: must be a positive number, got -1; set it to such as 20000",
			"tools.web.max_redirects: must not be negative, got -1 (0 follows no redirects)",
		}},
		{"web search providers", func(c *Config) { c.Tools.Web.Search = WebSearch{Provider: "google"} },
			[]string{`tools.web.search.provider: "google" is not one of searxng, brave, tavily (or "" for no web_search)`}},
		{"searxng without url", func(c *Config) { c.Tools.Web.Search = WebSearch{Provider: "searxng"} },
			[]string{"tools.web.search.url: required with provider searxng: the instance's address, such as http://127.0.0.1:8888"}},
		{"searxng bad url", func(c *Config) { c.Tools.Web.Search = WebSearch{Provider: "searxng", URL: "searx.local"} },
			[]string{`tools.web.search.url: "searx.local" is not a http or https URL; write it like http://127.0.0.1:8888`}},
		{"searxng", func(c *Config) { c.Tools.Web.Search = WebSearch{Provider: "searxng", URL: "http://127.0.0.1:8888"} }, nil},
		{"brave without key", func(c *Config) { c.Tools.Web.Search = WebSearch{Provider: "brave"} },
			[]string{"tools.web.search.api_key: required with provider brave; set it, for example to ${SWITCHBOARD_SEARCH_API_KEY}"}},
		{"tavily", func(c *Config) { c.Tools.Web.Search = WebSearch{Provider: "tavily", APIKey: "tvly-x"} }, nil},
		{"web off: its settings are not checked", func(c *Config) {
			c.Tools.Web = WebTools{AllowHosts: []string{"http://x"}, Search: WebSearch{Provider: "google"}}
		}, nil},
		{"files on", func(c *Config) { c.Tools.Files.Enabled = true; c.Tools.Files.PerChat = true }, nil},
		{"files numbers wrong", func(c *Config) { c.Tools.Files = FileTools{Enabled: true, Root: " ", MaxBytes: 0} }, []string{
			`tools.files.root: must not be empty; set it to the directory the file tools are confined to, such as "workspace"`,
			"tools.files.max_bytes: must be a positive number, got 0; set it to such as 1048576 (1 MiB)",
		}},
		{"files off: its settings are not checked", func(c *Config) { c.Tools.Files = FileTools{} }, nil},

		// channels
		{"console.user empty", func(c *Config) { c.Channels.Console.User = "" },
			[]string{`channels.console.user: must not be empty; set it to your name in "switchboard chat", such as "local"`}},
		{"telegram without token", func(c *Config) { telegramOf(c).Enabled = true },
			[]string{"channels.telegram.token: required when channels.telegram.enabled is true; set it or TELEGRAM_BOT_TOKEN"}},
		{"telegram complete", func(c *Config) {
			*telegramOf(c) = telegram.Config{Common: channels.Common{Enabled: true, AllowUsers: []string{"123", "@bob_1"}}, Token: "1:x", APIEndpoint: "http://127.0.0.1:9", PollTimeout: time.Second}
		}, nil},
		{"telegram bad fields", func(c *Config) {
			*telegramOf(c) = telegram.Config{Common: channels.Common{Enabled: true, AllowUsers: []string{"bob", "12ab", ""}}, Token: "1:x", APIEndpoint: "telegram"}
		}, []string{
			`channels.telegram.api_endpoint: "telegram" is not a http or https URL; write it like https://api.telegram.org`,
			`channels.telegram.poll_timeout: must be a positive duration, got 0s; set it to something like "30s"`,
			`channels.telegram.allow_users[0]: "bob" is neither a numeric user id nor an @username; write "@bob" or the numeric id`,
			`channels.telegram.allow_users[1]: "12ab" is neither a numeric user id nor an @username; write the numeric id`,
			`channels.telegram.allow_users[2]: "" is neither a numeric user id nor an @username; write the numeric id`,
		}},
		{"telegram admins are ids", func(c *Config) {
			*telegramOf(c) = telegram.Config{Common: channels.Common{Enabled: true, Admins: []string{"123", "@bob", "*"}}, Token: "1:x", APIEndpoint: "http://127.0.0.1:9", PollTimeout: time.Second}
		}, []string{
			`channels.telegram.admins[1]: "@bob" is not a numeric user id; admins takes ids only (a username can pass to someone else): the bot logs the id of a user it refuses, or ask @userinfobot`,
			`channels.telegram.admins[2]: "*" is not a numeric user id; admins takes ids only (a username can pass to someone else): the bot logs the id of a user it refuses, or ask @userinfobot`,
		}},
		{"telegram disabled is not checked", func(c *Config) {
			*telegramOf(c) = telegram.Config{Common: channels.Common{AllowUsers: []string{"junk"}}, APIEndpoint: "junk"}
		}, nil},
		{"discord without token", func(c *Config) { discordOf(c).Enabled = true },
			[]string{"channels.discord.token: required when channels.discord.enabled is true; set it or DISCORD_BOT_TOKEN"}},
		{"discord complete", func(c *Config) {
			*discordOf(c) = discord.Config{Common: channels.Common{Enabled: true, AllowUsers: []string{"80351110224678912"}}, Token: "t", APIBase: "https://discord.com/api/v9", GatewayURL: "wss://gateway.discord.gg", AllowGuilds: []string{"1"}, AllowChannels: []string{"2"}}
		}, nil},
		{"discord bad fields", func(c *Config) {
			*discordOf(c) = discord.Config{Common: channels.Common{Enabled: true, AllowUsers: []string{"bob#1234"}}, Token: "t", APIBase: "discord.com", GatewayURL: "https://gateway.discord.gg", AllowGuilds: []string{"my server"}, AllowChannels: []string{"#general"}}
		}, []string{
			`channels.discord.api_base: "discord.com" is not a http or https URL; write it like https://discord.com/api/v9`,
			`channels.discord.gateway_url: "https://gateway.discord.gg" is not a ws or wss URL; write it like wss://gateway.discord.gg, or leave it empty to ask the API`,
			`channels.discord.allow_users[0]: "bob#1234" is not a Discord id; use the numeric id (Developer Mode, then Copy User ID)`,
			`channels.discord.allow_guilds[0]: "my server" is not a Discord id; use the numeric id (Developer Mode, then Copy Server ID)`,
			`channels.discord.allow_channels[0]: "#general" is not a Discord id; use the numeric id (Developer Mode, then Copy Channel ID)`,
		}},
		{"discord admins are ids", func(c *Config) {
			*discordOf(c) = discord.Config{Common: channels.Common{Enabled: true, Admins: []string{"80351110224678912", "bob"}}, Token: "t", APIBase: "https://discord.com/api/v9"}
		}, []string{
			`channels.discord.admins[1]: "bob" is not a Discord id; use the numeric id (Developer Mode, then Copy User ID)`,
		}},
		{"discord disabled is not checked", func(c *Config) { *discordOf(c) = discord.Config{APIBase: "junk"} }, nil},

		// http
		{"listen disabled", func(c *Config) { c.HTTP.Listen = "" }, nil},
		{"listen localhost", func(c *Config) { c.HTTP.Listen = "localhost:8080" }, nil},
		{"listen IPv6 loopback", func(c *Config) { c.HTTP.Listen = "[::1]:8080" }, nil},
		{"listen 127.0.0.2", func(c *Config) { c.HTTP.Listen = "127.0.0.2:8080" }, nil},
		{"listen not host:port", func(c *Config) { c.HTTP.Listen = "8080" },
			[]string{`http.listen: "8080" is not host:port; write it like "127.0.0.1:8080", or leave it empty to disable the HTTP API`}},
		{"listen port out of range", func(c *Config) { c.HTTP.Listen = "127.0.0.1:99999" },
			[]string{`http.listen: "127.0.0.1:99999" is not host:port; write it like "127.0.0.1:8080", or leave it empty to disable the HTTP API`}},
		{"listen all interfaces without token", func(c *Config) { c.HTTP.Listen = ":8080" },
			[]string{`http.token: required when http.listen (":8080") is not a loopback address; set it, for example to ${SWITCHBOARD_HTTP_TOKEN}, or listen on 127.0.0.1`}},
		{"listen public without token", func(c *Config) { c.HTTP.Listen = "0.0.0.0:8080" },
			[]string{`http.token: required when http.listen ("0.0.0.0:8080") is not a loopback address; set it, for example to ${SWITCHBOARD_HTTP_TOKEN}, or listen on 127.0.0.1`}},
		{"listen hostname without token", func(c *Config) { c.HTTP.Listen = "gateway.internal:8080" },
			[]string{`http.token: required when http.listen ("gateway.internal:8080") is not a loopback address; set it, for example to ${SWITCHBOARD_HTTP_TOKEN}, or listen on 127.0.0.1`}},
		{"listen public with token", func(c *Config) { c.HTTP.Listen = ":8080"; c.HTTP.Token = "0123456789abcdef" }, nil},
		{"listen public with a 1-character token", func(c *Config) { c.HTTP.Listen = "0.0.0.0:8080"; c.HTTP.Token = "x" },
			[]string{`http.token: is 1 characters, too short to guard http.listen ("0.0.0.0:8080"), which is not a loopback address: use at least 16 random characters (openssl rand -hex 32), or listen on 127.0.0.1`}},
		{"listen public with a 15-character token", func(c *Config) { c.HTTP.Listen = ":8080"; c.HTTP.Token = "0123456789abcde" },
			[]string{`http.token: is 15 characters, too short to guard http.listen (":8080"), which is not a loopback address: use at least 16 random characters (openssl rand -hex 32), or listen on 127.0.0.1`}},
		{"listen loopback with a short token", func(c *Config) { c.HTTP.Listen = "127.0.0.1:8080"; c.HTTP.Token = "x" }, nil},
		{"public hosts", func(c *Config) {
			c.HTTP.PublicHosts = []string{"bot.example.com", "Dash.Example.com:8443", "10.0.0.5", "[2001:db8::1]:80", "localhost."}
		}, nil},
		{"public host as URL", func(c *Config) { c.HTTP.PublicHosts = []string{"https://bot.example.com"} },
			[]string{`http.public_hosts[0]: "https://bot.example.com" is a URL, not a host name; write the name clients use, optionally with :port, such as dash.example.com or dash.example.com:8443`}},
		{"public host with path, bad port, empty", func(c *Config) {
			c.HTTP.PublicHosts = []string{"bot.example.com/dash", "bot.example.com:http", " ", "bot_example com"}
		}, []string{
			`http.public_hosts[0]: "bot.example.com/dash" is a URL, not a host name; write the name clients use, optionally with :port, such as dash.example.com or dash.example.com:8443`,
			`http.public_hosts[1]: "bot.example.com:http" has a port that is not a number from 1 to 65535; write the name clients use, optionally with :port, such as dash.example.com or dash.example.com:8443`,
			`http.public_hosts[2]: " " is empty; write the name clients use, optionally with :port, such as dash.example.com or dash.example.com:8443`,
			`http.public_hosts[3]: "bot_example com" is not a host name; write the name clients use, optionally with :port, such as dash.example.com or dash.example.com:8443`,
		}},

		// log
		{"log level", func(c *Config) { c.Log.Level = "INFO" },
			[]string{`log.level: "INFO" is not one of debug, info, warn, error`}},
		{"log format", func(c *Config) { c.Log.Format = "xml" },
			[]string{`log.format: "xml" is not one of text, json`}},
		{"log debug json", func(c *Config) { c.Log.Level = "debug"; c.Log.Format = "json" }, nil},

		{"every problem is reported", func(c *Config) {
			c.LLM.Model = ""
			c.Agent.MaxSteps = 0
			c.Log.Format = "xml"
		}, []string{
			"llm.model: must not be empty; set it or OPENAI_MODEL",
			"agent.max_steps: must be a positive number, got 0; set it to the model calls allowed in one turn, such as 50",
			`log.format: "xml" is not one of text, json`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.change(c)
			err := c.Validate()
			if got := messages(t, err); !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
			for _, p := range problems(t, err) {
				if p.Key == "" {
					t.Errorf("problem %q names no key", p.Msg)
				}
			}
		})
	}
}

func TestValidateNamesFileLineAndSource(t *testing.T) {
	cfg := mustLoad(t, doc(
		"llm:",
		`  model: ""`,
		"agent:",
		"  max_steps: 0",
		"channels:",
		"  telegram:",
		"    enabled: true",
		"    allow_users: [\"@ok\", bob]",
	), map[string]string{"OPENAI_BASE_URL": "ftp://proxy"})
	err := cfg.Validate()
	want := []string{
		"config.yaml:2: llm.model: must not be empty; set it or OPENAI_MODEL",
		"config.yaml:4: agent.max_steps: must be a positive number, got 0; set it to the model calls allowed in one turn, such as 50",
		`config.yaml:8: channels.telegram.allow_users[1]: "bob" is neither a numeric user id nor an @username; write "@bob" or the numeric id`,
		`llm.base_url: "ftp://proxy" is not a http or https URL; write it like https://api.openai.com/v1 (the value comes from OPENAI_BASE_URL)`,
		"channels.telegram.token: required when channels.telegram.enabled is true; set it or TELEGRAM_BOT_TOKEN",
	}
	if got := messages(t, err); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "llm.model" || ce.Line != 2 {
		t.Errorf("errors.As = %+v, want the llm.model problem at line 2", ce)
	}
}

func TestValidateNil(t *testing.T) {
	var c *Config
	var ce *Error
	if err := c.Validate(); !errors.As(err, &ce) {
		t.Errorf("nil Config: Validate = %v, want a *Error", err)
	}
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   []string
	}{
		{"none", func(*Config) {}, nil},
		{"disabled channels admit nobody quietly", func(c *Config) { telegramOf(c).Token = "x" }, nil},
		{"telegram admits nobody", func(c *Config) { telegramOf(c).Enabled = true },
			[]string{"channels.telegram.allow_users is empty, so the bot admits nobody on Telegram; add numeric user ids or @usernames"}},
		{"telegram admits someone", func(c *Config) {
			telegramOf(c).Enabled = true
			telegramOf(c).AllowUsers = []string{"42"}
		}, nil},
		{"telegram admits a username", func(c *Config) {
			telegramOf(c).Enabled = true
			telegramOf(c).AllowUsers = []string{"42", "@bob"}
		}, []string{"channels.telegram.allow_users[1] is the username @bob: it admits whoever holds that name, also someone who takes it after a rename; the numeric user id stays with the person (the bot logs it when it refuses someone)"}},
		{"discord admits nobody", func(c *Config) {
			discordOf(c).Enabled = true
			discordOf(c).AllowGuilds = []string{"1"}
		}, []string{"channels.discord.allow_users is empty, so the bot admits nobody on Discord; add user ids"}},
		{"openai without key", func(c *Config) { c.LLM.APIKey = "" },
			[]string{"llm.api_key is empty, but api.openai.com requires one; set it or OPENAI_API_KEY"}},
		{"local server without key", func(c *Config) { c.LLM.APIKey = ""; c.LLM.BaseURL = "http://localhost:11434/v1" }, nil},
		{"http on all interfaces without public hosts", func(c *Config) { c.HTTP.Listen = "0.0.0.0:8080"; c.HTTP.Token = "secret" },
			[]string{`http.public_hosts is empty and http.listen ("0.0.0.0:8080") is not loopback: the server answers only to localhost and IP addresses in the Host header (421 otherwise); list the names clients use`}},
		{"http on all interfaces with public hosts", func(c *Config) {
			c.HTTP.Listen, c.HTTP.Token, c.HTTP.PublicHosts = ":8080", "secret", []string{"bot.example.com"}
		}, nil},
		{"http disabled", func(c *Config) { c.HTTP.Listen = "" }, nil},
		// The defaults fit ("none"); these do not.
		{"model attempts outlast the turn", func(c *Config) { c.LLM.RequestTimeout = 180 * time.Second },
			[]string{"agent.turn_timeout (10m0s) is shorter than one model call can take: 4 attempt(s) of llm.request_timeout (3m0s) and 1m0s of waits between retries come to 13m0s, so a hung model ends the turn before the model's retries and fallbacks are done; raise agent.turn_timeout, or lower llm.request_timeout or llm.max_retries"}},
		{"fallbacks count too", func(c *Config) { c.LLM.FallbackModels = []string{"small"} },
			[]string{"agent.turn_timeout (10m0s) is shorter than one model call can take: 8 attempt(s) of llm.request_timeout (2m0s) and 1m0s of waits between retries come to 17m0s, so a hung model ends the turn before the model's retries and fallbacks are done; raise agent.turn_timeout, or lower llm.request_timeout or llm.max_retries"}},
		{"a longer turn fits them", func(c *Config) { c.LLM.FallbackModels = []string{"small"}; c.Agent.TurnTimeout = 20 * time.Minute }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			c.LLM.APIKey = "sk-test"
			tt.change(c)
			if got := c.Warnings(); !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestWarningsNameFileAndLine(t *testing.T) {
	cfg := mustLoad(t, doc(
		"llm:",
		"  model: m",
		"  api_key: sk",
		"channels:",
		"  telegram:",
		"    enabled: true",
		"  discord:",
		"    enabled: true",
		"    allow_users: []",
	), nil)
	want := []string{
		"config.yaml:6: channels.telegram.allow_users is empty, so the bot admits nobody on Telegram; add numeric user ids or @usernames",
		"config.yaml:9: channels.discord.allow_users is empty, so the bot admits nobody on Discord; add user ids",
	}
	if got := cfg.Warnings(); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
