// Package mcpclient connects to Model Context Protocol servers, local
// commands over stdio or URLs over streamable HTTP, and offers their tools to
// the agent as one tool source named "mcp".
//
// A server's tool "search" becomes "<server>__search" for the model; its
// description starts with "[<server>] " and its input schema is the tool's
// parameter schema, so the loop validates arguments before a call reaches
// the server. A server that fails to start, or whose session dies later, is
// retried in the background with capped exponential backoff, and its tools
// join the set when it answers; a call to a tool of a dead session also
// reconnects at once. The tool set follows the servers: a server's
// notifications/tools/list_changed lists its tools again.
package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/config"
)

// SourceName is the name of the tool source, as agent.Source reports it.
const SourceName = "mcp"

// Manager holds the sessions with the configured MCP servers and the tools
// they offer. It is safe for concurrent use.
type Manager struct {
	servers []*server
	log     *slog.Logger

	mu         sync.Mutex
	tools      []*agent.Tool   // sorted by name; rebuilt when a server's list changes
	skipped    map[string]bool // "server/tool" of the colliding tools already reported
	ready      bool            // the first rebuild is done
	collisions []error         // found by the first rebuild

	closeOnce sync.Once
	closeErr  error
}

// ServerStatus describes one configured server, for /status, check and the
// dashboard.
type ServerStatus struct {
	Name      string
	Transport string // "stdio" or "http"
	Connected bool   // a live session right now
	Tools     int    // tools it offers to the model
	LastError string // the last start, connection or transport error; "" after a successful (re)connect
	// Retrying is true while the server is down and retried in the
	// background; Attempts counts the retries so far and NextRetry is when
	// the next one starts.
	Retrying  bool
	Attempts  int
	NextRetry time.Time
}

// Connect starts or connects every configured server concurrently and lists
// its tools. A server that fails to start, connect or list its tools is
// reported in the returned errors, each naming the server, and retried in
// the background until Close; it never stops the others. Tools whose
// model-facing names collide are reported the same way (the first, in
// config and then tool-name order, wins). The Manager is never nil, and
// Connect logs none of the errors it returns. Each server has its
// startup_timeout (default 60s) to start and list its tools; ctx bounds this
// first start only, and Close ends the sessions and the retries.
func Connect(ctx context.Context, servers []config.MCPServer, log *slog.Logger) (*Manager, []error) {
	return connect(ctx, servers, log, options{grace: defaultGrace})
}

func connect(ctx context.Context, cfgs []config.MCPServer, log *slog.Logger, opts options) (*Manager, []error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.grace <= 0 {
		opts.grace = defaultGrace
	}
	if opts.backoff == nil {
		opts.backoff = backoff
	}
	if opts.wait == nil {
		opts.wait = wait
	}
	m := &Manager{servers: make([]*server, len(cfgs)), log: log}
	errs := make([]error, len(cfgs))
	for i, cfg := range cfgs {
		m.servers[i], errs[i] = newServer(cfg, log, opts)
		m.servers[i].changed = func() {
			if m.rebuild(false) && opts.notify != nil {
				opts.notify()
			}
		}
	}
	var wg sync.WaitGroup
	for i, s := range m.servers {
		if errs[i] == nil {
			wg.Go(func() { errs[i] = s.start(ctx) })
		}
	}
	wg.Wait()
	m.rebuild(true)
	errs = append(errs, m.collisions...)
	return m, slices.DeleteFunc(errs, func(err error) bool { return err == nil })
}

// rebuild names every server's current tools in a fixed order, so that a
// collision always drops the same one, and swaps in the new tool set. The
// first rebuild, at the end of Connect, keeps its collisions for Connect to
// return; later ones log new collisions, once each. Changes before the first
// (a retry that succeeds during Connect) wait for it: false.
func (m *Manager) rebuild(first bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !first && !m.ready {
		return false
	}
	m.ready = true
	var errs []error
	var tools []*agent.Tool
	taken := map[string]string{} // model-facing name → "server/tool"
	skipped := map[string]bool{}
	for _, s := range m.servers {
		s.mu.Lock()
		list := slices.Clone(s.list)
		s.mu.Unlock()
		list = slices.DeleteFunc(list, func(t *mcp.Tool) bool { return t == nil || t.Name == "" })
		slices.SortStableFunc(list, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
		n := 0
		for _, mt := range list {
			name := toolName(s.name, mt.Name)
			if prev, dup := taken[name]; dup {
				err := fmt.Errorf("mcp server %q: tool %q is named %s like %s; skipped", s.name, mt.Name, name, prev)
				if first {
					errs = append(errs, err)
				} else if !m.skipped[s.name+"/"+mt.Name] {
					m.log.Warn("mcp tool skipped", "err", err)
				}
				skipped[s.name+"/"+mt.Name] = true
				continue
			}
			taken[name] = s.name + "/" + mt.Name
			tools = append(tools, s.tool(name, mt))
			n++
		}
		s.mu.Lock()
		s.tools = n
		s.mu.Unlock()
	}
	slices.SortFunc(tools, func(a, b *agent.Tool) int { return strings.Compare(a.Name, b.Name) })
	m.tools, m.skipped = tools, skipped
	if first {
		m.collisions = errs
	}
	return true
}

// tool wraps one of the server's tools for the agent.
func (s *server) tool(name string, mt *mcp.Tool) *agent.Tool {
	t := &agent.Tool{
		Name:            name,
		Description:     description(s.name, mt),
		ConcurrencySafe: readOnly(mt),
		Source:          SourceName + ":" + s.name,
		// Results come from another program and often carry outside text
		// (pages, mail, tickets): labelled as data, not instructions.
		Untrusted: true,
		// A tool the server does not mark read-only may change something:
		// after untrusted content it asks first, or is withdrawn.
		Acts: !readOnly(mt),
	}
	params, err := parameters(mt)
	if err != nil {
		s.log.Warn("mcp tool schema unusable; offering the tool without parameters", "tool", mt.Name, "err", err)
	}
	t.Parameters = params
	if err := t.Compile(); err != nil {
		s.log.Warn("mcp tool schema does not compile; its arguments will not be validated", "tool", mt.Name, "err", err)
	}
	original := mt.Name
	t.Fn = func(ctx context.Context, args json.RawMessage) (string, error) {
		return s.call(ctx, name, original, args)
	}
	return t
}

// Source is the agent's tool source for the servers' tools, named "mcp",
// with the tools sorted by name. Each call returns the current set: a server
// that comes up later adds its tools, a list_changed notification updates
// them, and a server whose session dropped keeps its last list while it is
// retried (a call reconnects at once).
func (m *Manager) Source() agent.Source { return source{m: m} }

type source struct{ m *Manager }

func (s source) Name() string { return SourceName }

func (s source) Tools(agent.TurnInfo) []*agent.Tool {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	return slices.Clone(s.m.tools)
}

// Status reports every configured server, in config order, including those
// that failed to start.
func (m *Manager) Status() []ServerStatus {
	out := make([]ServerStatus, len(m.servers))
	for i, s := range m.servers {
		out[i] = s.status()
	}
	return out
}

// Close ends every session and stops every child process: stdin is closed,
// then SIGTERM and SIGKILL follow if the process does not exit in time. It
// waits for that, and is idempotent; later calls return the first result.
func (m *Manager) Close() error {
	m.closeOnce.Do(func() {
		errs := make([]error, len(m.servers))
		var wg sync.WaitGroup
		for i, s := range m.servers {
			wg.Go(func() { errs[i] = s.close() })
		}
		wg.Wait()
		m.closeErr = errors.Join(errs...)
	})
	return m.closeErr
}

var _ agent.Source = source{}
