// Package mcpclient connects to Model Context Protocol servers, local
// commands over stdio or URLs over streamable HTTP, and offers their tools to
// the agent as one tool source named "mcp".
//
// A server's tool "search" becomes "<server>__search" for the model; its
// description starts with "[<server>] " and its input schema is the tool's
// parameter schema, so the loop validates arguments before a call reaches
// the server. A server that fails to start is reported and skipped; one whose
// session dies later is reconnected on the next call.
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

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"switchboard/agent"
	"switchboard/config"
)

// SourceName is the name of the tool source, as agent.Source reports it.
const SourceName = "mcp"

// Manager holds the sessions with the configured MCP servers and the tools
// they offer. It is safe for concurrent use.
type Manager struct {
	servers []*server
	tools   []*agent.Tool // sorted by name; fixed after Connect

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
}

// Connect starts or connects every configured server concurrently and lists
// its tools. A server that fails to start, connect or list its tools is
// reported in the returned errors, each naming the server, and skipped; it
// never stops the others. Tools whose model-facing names collide are
// reported the same way (the first, in config and then tool-name order,
// wins). The Manager is never nil, and Connect logs none of the errors it
// returns. Each server has its timeout (default 60s) to start and list its
// tools; ctx bounds start-up only, and Close ends the sessions.
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
	m := &Manager{servers: make([]*server, len(cfgs))}
	errs := make([]error, len(cfgs))
	lists := make([][]*mcp.Tool, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		s, err := newServer(cfg, log, opts)
		m.servers[i] = s
		if err != nil {
			errs[i] = err
			continue
		}
		wg.Go(func() { lists[i], errs[i] = s.start(ctx) })
	}
	wg.Wait()

	// Name the tools in a fixed order so that a collision always drops the
	// same one.
	taken := map[string]string{} // model-facing name → "server/tool"
	for i, s := range m.servers {
		list := slices.DeleteFunc(slices.Clone(lists[i]), func(t *mcp.Tool) bool { return t == nil || t.Name == "" })
		slices.SortStableFunc(list, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
		n := 0
		for _, mt := range list {
			name := toolName(s.name, mt.Name)
			if prev, dup := taken[name]; dup {
				errs = append(errs, fmt.Errorf("mcp server %q: tool %q is named %s like %s; skipped", s.name, mt.Name, name, prev))
				continue
			}
			taken[name] = s.name + "/" + mt.Name
			m.tools = append(m.tools, s.tool(name, mt))
			n++
		}
		s.mu.Lock()
		s.tools = n
		s.mu.Unlock()
	}
	slices.SortFunc(m.tools, func(a, b *agent.Tool) int { return strings.Compare(a.Name, b.Name) })
	return m, slices.DeleteFunc(errs, func(err error) bool { return err == nil })
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
		return s.call(ctx, original, args)
	}
	return t
}

// Source is the agent's tool source for the servers' tools, named "mcp",
// with the tools sorted by name. The tool set is the one listed at Connect;
// a server that is down keeps its tools and is reconnected when one is called.
func (m *Manager) Source() agent.Source { return source{m: m} }

type source struct{ m *Manager }

func (s source) Name() string { return SourceName }

func (s source) Tools(agent.TurnInfo) []*agent.Tool { return slices.Clone(s.m.tools) }

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
