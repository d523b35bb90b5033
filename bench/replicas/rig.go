package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"database/sql"
	"encoding/json"
	"fmt"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/testkit/cfgfile"
	"github.com/switchboard-gateway/switchboard/internal/webhooklb"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for the schema and pg_stat_activity

	"github.com/switchboard-gateway/switchboard/bench/internal/gateway"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/internal/tgfake"
)

const (
	tgToken    = "7300000001:AAF-bench-Secret_0123456789abcdef"
	hookSecret = "bench-hook-Secret_0123456789"
	hookPath   = "/telegram/hook"
)

// cleanups run in reverse order when the program ends, also after Ctrl-C.
type cleanups struct {
	mu  sync.Mutex
	fns []func()
}

func (c *cleanups) add(f func()) {
	c.mu.Lock()
	c.fns = append(c.fns, f)
	c.mu.Unlock()
}

func (c *cleanups) run() {
	c.mu.Lock()
	fns := c.fns
	c.fns = nil
	c.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// ---- PostgreSQL ----

var schemaSeq atomic.Int64

// schema is a fresh schema on the server: every replica's store.dsn sets
// search_path to it, so their tables go there.
type schema struct {
	name string
	dsn  string // the server's DSN with search_path=name
}

// newSchema creates an empty schema through admin; drop removes it.
func newSchema(ctx context.Context, admin *sql.DB, serverDSN string) (*schema, error) {
	name := fmt.Sprintf("sbbench_%d_%d", os.Getpid(), schemaSeq.Add(1))
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+name); err != nil {
		return nil, fmt.Errorf("create schema %s: %w", name, err)
	}
	dsn, err := testkit.WithDSNParam(serverDSN, "search_path", name)
	if err != nil {
		return nil, err
	}
	return &schema{name: name, dsn: dsn}, nil
}

func (s *schema) drop(admin *sql.DB) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := admin.ExecContext(ctx, "DROP SCHEMA IF EXISTS "+s.name+" CASCADE")
	return err
}

// appName is application_name of replica id's connections, which lets
// pg_stat_activity tell the replicas' backends apart.
func (s *schema) appName(id string) string { return s.name + "_" + id }

// ---- replicas ----

// replica is one `switchboard serve` process.
type replica struct {
	id       string
	proc     *gateway.Process
	hookAddr string // its webhook's listen address, as bound
	stopped  atomic.Bool
}

// replicaConfig is serve's configuration for replica id: PostgreSQL store,
// Telegram in webhook mode behind the load balancer at hookURL.
func replicaConfig(o options, sc *schema, id, dir, modelURL, tgURL, hookURL string, users int) (*config.Config, error) {
	dsn, err := testkit.WithDSNParam(sc.dsn, "application_name", sc.appName(id))
	if err != nil {
		return nil, err
	}
	allow := make([]string, users)
	for i := range allow {
		allow[i] = strconv.Itoa(i + 1)
	}
	cfg := config.Default()
	cfg.LLM.BaseURL, cfg.LLM.APIKey, cfg.LLM.Model, cfg.LLM.ContextWindow = modelURL, "sk-bench", "fake-model", 8192
	cfg.Agent.MaxConcurrentTurns = o.maxTurns
	cfg.Store.Driver, cfg.Store.DSN = config.StorePostgres, dsn
	cfg.Skills.Dir = filepath.Join(dir, "skills")
	cfg.Learning.Enabled = false
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Log.Format = "json"
	cfg.Cluster.ReplicaID, cfg.Cluster.LeaseTTL, cfg.Cluster.PollInterval = id, o.leaseTTL, o.poll
	cfg.ShutdownTimeout = 5 * time.Second
	tg := config.Section[*telegram.Config](cfg)
	tg.Enabled, tg.Token, tg.APIEndpoint, tg.AllowUsers = true, tgToken, tgURL, allow
	tg.Webhook = telegram.Webhook{URL: hookURL, Listen: "127.0.0.1:0", SecretToken: hookSecret}
	return cfg, nil
}

// startReplica writes the configuration under dir and starts bin; it
// returns once /readyz answers 200 and the webhook is registered.
func startReplica(ctx context.Context, bin, dir string, settings *config.Config, id string) (*replica, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := cfgfile.WriteFile(cfg, settings); err != nil {
		return nil, err
	}
	p, err := gateway.Start(ctx, bin, dir, cfg)
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", id, err)
	}
	r := &replica{id: id, proc: p}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for r.hookAddr == "" {
		sc := bufio.NewScanner(strings.NewReader(p.Log()))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var line struct{ Msg, Listen string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "telegram: webhook registered" {
				r.hookAddr = line.Listen
			}
		}
		if r.hookAddr != "" {
			break
		}
		select {
		case <-ctx.Done():
			r.kill()
			return nil, fmt.Errorf("replica %s: the webhook was not registered: %w\nlog:\n%s", id, ctx.Err(), p.Log())
		case <-tick.C:
		}
	}
	return r, nil
}

// stop sends SIGTERM and waits up to a minute for a clean exit, then kills.
func (r *replica) stop() error {
	if r.stopped.Swap(true) {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- r.proc.Stop() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		_ = syscall.Kill(r.proc.Pid(), syscall.SIGKILL)
		<-done
		return fmt.Errorf("replica %s did not stop within a minute of SIGTERM: killed", r.id)
	}
}

func (r *replica) kill() {
	if !r.stopped.Swap(true) {
		r.proc.Kill()
	}
}

// sentCounter reads switchboard_messages_sent_total{channel="telegram"}
// (labelled with the replica) from the replica's /metrics.
func (r *replica) sentCounter(ctx context.Context) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.proc.Base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("replica %s: /metrics answered %d", r.id, resp.StatusCode)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "switchboard_messages_sent_total{") || !strings.Contains(line, `channel="telegram"`) {
			continue
		}
		if !strings.Contains(line, `replica="`+r.id+`"`) {
			return 0, fmt.Errorf("replica %s: /metrics has no replica label: %s", r.id, line)
		}
		f := strings.Fields(line)
		return strconv.ParseFloat(f[len(f)-1], 64)
	}
	return 0, nil // no message sent yet
}

// resetPeakRSS resets VmHWM to the current RSS (Linux: clear_refs 5), so
// that the peak after a run is that run's.
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// ---- the load balancer ----

// balancer is the HTTPS endpoint Telegram posts to, in front of the
// replicas' webhooks (webhooklb.Balancer).
type balancer struct {
	*webhooklb.Balancer
	srv    *httptest.Server
	client *http.Client
}

func newBalancer() *balancer {
	b := &balancer{client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 0, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 0,
	}}}
	b.Balancer = webhooklb.New(b.client)
	b.srv = httptest.NewUnstartedServer(b.Balancer)
	b.srv.StartTLS()
	return b
}

// URL is the webhook URL to register.
func (b *balancer) URL() string { return b.srv.URL + hookPath }

// senderClient is what Telegram posts with: it trusts the balancer's
// certificate and keeps a connection per concurrent update.
func (b *balancer) senderClient() *http.Client {
	tr := b.srv.Client().Transport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost, tr.IdleConnTimeout = 0, 4096, 0
	tr.TLSClientConfig = tr.TLSClientConfig.Clone()
	tr.TLSClientConfig.ClientSessionCache = tls.NewLRUClientSessionCache(4096)
	return &http.Client{Timeout: 30 * time.Second, Transport: tr}
}

func (b *balancer) add(name, addr string) { b.Add(name, addr) }

// acceptedBy is a copy of the per-replica count of updates accepted.
func (b *balancer) acceptedBy() map[string]int { return b.Accepted() }

func (b *balancer) close() {
	b.srv.CloseClientConnections()
	b.srv.Close()
	b.client.CloseIdleConnections()
}

// ---- the cluster of one scenario ----

// cluster is one scenario's schema, fakes, balancer and replicas.
type cluster struct {
	sc       *schema
	tg       *tgfake.Fake
	model    *testkit.FakeLLM
	lb       *balancer
	replicas []*replica
	hookURL  string
	secret   string
}

// startCluster creates a schema and starts n replicas on it behind a
// fresh balancer, with fresh fakes; users are the allowed Telegram ids
// 1..users. Everything it starts is registered with cl.
func startCluster(ctx context.Context, o options, bin, dir string, admin *sql.DB, n, users int, cl *cleanups, progress io.Writer) (*cluster, error) {
	sc, err := newSchema(ctx, admin, o.dsn)
	if err != nil {
		return nil, err
	}
	cl.add(func() {
		if err := sc.drop(admin); err != nil {
			fmt.Fprintf(progress, "drop schema %s: %v\n", sc.name, err)
		}
	})
	c := &cluster{sc: sc, tg: tgfake.Start(tgToken), model: testkit.Start("127.0.0.1:0"), lb: newBalancer()}
	cl.add(func() { c.model.Close(); c.tg.Close(); c.lb.close() })
	c.model.SetDefault(echo(o.latency))
	for i := range n {
		id := fmt.Sprintf("r%d", i+1)
		rdir := filepath.Join(dir, id)
		if err := os.MkdirAll(rdir, 0o700); err != nil {
			return nil, err
		}
		cfg, err := replicaConfig(o, sc, id, rdir, c.model.URL, c.tg.URL, c.lb.URL(), users)
		if err != nil {
			return nil, err
		}
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		r, err := startReplica(sctx, bin, rdir, cfg, id)
		cancel()
		if err != nil {
			return nil, err
		}
		cl.add(func() {
			if err := r.stop(); err != nil {
				fmt.Fprintf(progress, "stop %s: %v\n", r.id, firstLines(err.Error(), 20))
			}
		})
		c.replicas = append(c.replicas, r)
		c.lb.add(id, r.hookAddr)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.tg.WaitWebhook(wctx); err != nil {
		return nil, err
	}
	c.hookURL, c.secret = c.tg.Webhook()
	if c.hookURL != c.lb.URL() || c.secret != hookSecret {
		return nil, fmt.Errorf("webhook registered as %q, want %q with the configured secret", c.hookURL, c.lb.URL())
	}
	return c, nil
}

// echo is the fake model: "You said: <the user's message>" after delay.
func echo(delay time.Duration) *testkit.Reply {
	return &testkit.Reply{Func: func(r testkit.Recorded) testkit.Reply {
		last := ""
		if len(r.Messages) > 0 {
			last = r.Messages[len(r.Messages)-1].Content
		}
		return testkit.Reply{Text: "You said: " + last, Delay: delay}
	}}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n")
}
