package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxScanLine is the longest line (an SSE data line, or a whole JSON answer)
// taskTools reads; a longer one is passed through unread.
const maxScanLine = 16 << 20

// taskTools remembers, for one session, the tools whose tools/list entry
// says "execution": {"taskSupport": "required"} (MCP 2025-11-25): such a
// tool must be called as a task, which this client does not do. The SDK's
// Tool type does not carry the field, so the answers are read on the way in:
// by scanTransport for stdio, by headerTransport's body for HTTP.
type taskTools struct {
	mu  sync.Mutex
	req map[string]bool
}

func (t *taskTools) required(name string) bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.req[name]
}

// note reads one JSON-RPC message or result; those that are no list of
// tools change nothing.
func (t *taskTools) note(raw []byte) {
	if !bytes.Contains(raw, []byte("taskSupport")) {
		return
	}
	var msg struct {
		Result *json.RawMessage `json:"result"`
	}
	if json.Unmarshal(raw, &msg) == nil && msg.Result != nil {
		raw = *msg.Result
	}
	var res struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution *struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	if json.Unmarshal(raw, &res) != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.req == nil {
		t.req = map[string]bool{}
	}
	for _, tl := range res.Tools {
		t.req[tl.Name] = tl.Execution != nil && tl.Execution.TaskSupport == "required"
	}
}

// scanBody passes an HTTP answer through, noting each line of it (an SSE
// "data:" line, or a JSON answer) as it is read.
func (t *taskTools) scanBody(body io.ReadCloser) io.ReadCloser {
	return &bodyScanner{ReadCloser: body, tasks: t}
}

type bodyScanner struct {
	io.ReadCloser
	tasks *taskTools
	line  []byte
	skip  bool // the current line is too long: pass it unread
}

func (b *bodyScanner) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	rest := p[:n]
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			b.add(rest)
			break
		}
		b.add(rest[:i])
		b.flush()
		rest = rest[i+1:]
	}
	if err != nil {
		b.flush()
	}
	return n, err
}

func (b *bodyScanner) add(p []byte) {
	if b.skip {
		return
	}
	if len(b.line)+len(p) > maxScanLine {
		b.line, b.skip = nil, true
		return
	}
	b.line = append(b.line, p...)
}

func (b *bodyScanner) flush() {
	line := bytes.TrimPrefix(bytes.TrimSpace(b.line), []byte("data:"))
	if !b.skip && len(line) > 0 {
		b.tasks.note(line)
	}
	b.line, b.skip = b.line[:0], false
}

// scanTransport notes the answers of a stdio session. (An HTTP session is
// read through its body instead: wrapping its connection would hide the
// SDK's own interfaces on it.)
type scanTransport struct {
	mcp.Transport
	tasks *taskTools
}

func (t *scanTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &scanConn{Connection: c, tasks: t.tasks}, nil
}

type scanConn struct {
	mcp.Connection
	tasks *taskTools
}

func (c *scanConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if r, ok := msg.(*jsonrpc.Response); ok && err == nil && r.Error == nil {
		c.tasks.note(r.Result)
	}
	return msg, err
}
