package gateway

import (
	"os"

	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/redact"
)

// secretsOf is what the gateway hides from tool results, replies and the
// dashboard: the values of secret-bearing environment variables (named in
// the marker: OPENAI_API_KEY, a skill's WEATHER_API_KEY, …) and every secret
// the configuration holds (config.Config.Secrets: keys, tokens, webhook
// secrets, passwords in URLs and DSNs, MCP credentials).
func secretsOf(cfg *config.Config) []redact.Secret {
	return append(redact.FromEnv(os.Environ()), redact.Values(cfg.Secrets())...)
}
