package e2e

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-gateway/switchboard/channels/discord"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/config"
)

// The hardened example configuration loads and validates with its secrets
// in the environment, and keeps the HTTP server on loopback behind a token.
func TestDeployConfig(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-deploy")
	t.Setenv("OPENAI_MODEL", "gpt-deploy")
	t.Setenv("TELEGRAM_BOT_TOKEN", "123:deploy")
	t.Setenv("SWITCHBOARD_HTTP_TOKEN", "deploy-http-token-0123456789")
	cfg, err := config.Load("../deploy/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if cfg.HTTP.Token == "" || cfg.HTTP.Listen != "127.0.0.1:8080" || cfg.Tools.Command.Enabled || cfg.Log.Format != "json" ||
		cfg.Agent.UserDailyTokenBudget == 0 || !strings.HasPrefix(cfg.Store.Path, "/var/lib/switchboard/") {
		t.Fatalf("../deploy/config.yaml is not hardened as documented: %+v", cfg.Redacted())
	}

	// The unit runs serve with that file, reloads with SIGHUP, gives the
	// shutdown time to finish, and keeps its sandbox.
	f, err := os.Open("../deploy/switchboard.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unit := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			unit[k] = v
		}
	}
	if !strings.HasSuffix(unit["ExecStart"], "serve --config /etc/switchboard/config.yaml") || !strings.Contains(unit["ExecReload"], "-HUP") {
		t.Errorf("ExecStart %q, ExecReload %q", unit["ExecStart"], unit["ExecReload"])
	}
	stop, err := time.ParseDuration(unit["TimeoutStopSec"])
	if err != nil || stop < cfg.ShutdownTimeout+10*time.Second {
		t.Errorf("TimeoutStopSec %q leaves too little room after shutdown_timeout %s", unit["TimeoutStopSec"], cfg.ShutdownTimeout)
	}
	for k, want := range map[string]string{"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
		"PrivateTmp": "yes", "CapabilityBoundingSet": "", "StateDirectory": "switchboard", "User": "switchboard"} {
		if got, ok := unit[k]; !ok || got != want {
			t.Errorf("%s=%q, want %q", k, got, want)
		}
	}
}

// The replica example: every instance of the template unit loads the shared
// file with its own name and ports, on PostgreSQL, with the webhook served
// by each replica and Discord shards claimed.
func TestDeployReplicas(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-deploy")
	t.Setenv("OPENAI_MODEL", "gpt-deploy")
	t.Setenv("TELEGRAM_BOT_TOKEN", "123:deploy")
	t.Setenv("TELEGRAM_WEBHOOK_SECRET", "deploy-webhook-secret")
	t.Setenv("SWITCHBOARD_HTTP_TOKEN", "deploy-http-token-0123456789")
	t.Setenv("SWITCHBOARD_DB_PASSWORD", "deploy-db-password")
	t.Setenv("SWITCHBOARD_WEBHOOK_URL", "https://bot.example.com/telegram")
	t.Setenv("SWITCHBOARD_HOST", "gw")
	ids := map[string]bool{}
	ports := map[string]bool{}
	for _, instance := range []string{"1", "2", "3"} {
		t.Setenv("SWITCHBOARD_INSTANCE", instance)
		cfg, err := config.Load("../deploy/replicas/config.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("instance %s: Validate: %v", instance, err)
		}
		tg := config.Section[*telegram.Config](cfg)
		if cfg.Store.Driver != config.StorePostgres || cfg.Cluster.ReplicaID != "gw-"+instance ||
			tg.Webhook.Listen != "127.0.0.1:844"+instance || cfg.HTTP.Listen != "127.0.0.1:808"+instance ||
			config.Section[*discord.Config](cfg).ShardCount != 3 || config.Section[*discord.Config](cfg).ShardID != nil {
			t.Fatalf("instance %s: %+v", instance, cfg.Redacted())
		}
		ids[cfg.Cluster.ReplicaID] = true
		ports[tg.Webhook.Listen] = true
		ports[cfg.HTTP.Listen] = true
	}
	if len(ids) != 3 || len(ports) != 6 {
		t.Fatalf("instances share names or ports: %v %v", ids, ports)
	}
	unit, err := os.ReadFile("../deploy/replicas/switchboard@.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Environment=SWITCHBOARD_INSTANCE=%i", "StateDirectory=switchboard-%i",
		"serve --config /etc/switchboard/replicas.yaml", "NoNewPrivileges=yes", "Restart=on-failure"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("the template unit lacks %q", want)
		}
	}
}
