package agent

import (
	"encoding/json"
	"strings"
	"testing"
)

// A tool compiled later checks its arguments at its first call as one
// compiled at once does; tools made with the same schema share one
// resolution, and ResolveDeferred resolves what is left (the built-in
// tools' constant schemas are valid).
func TestCompileLater(t *testing.T) {
	params := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false,"description":"TestCompileLater"}`)
	a := &Tool{Name: "count", Parameters: params}
	a.CompileLater()
	b := &Tool{Name: "count", Parameters: params}
	b.CompileLater()
	if a.schema != nil || a.later == nil {
		t.Fatal("CompileLater resolved the schema at once")
	}
	if _, msg := a.validate(`{"n":"three"}`); !strings.Contains(msg, "do not match its schema") {
		t.Errorf("wrong arguments: %q, want a schema error", msg)
	}
	if _, msg := b.validate(`{"n":3}`); msg != "" {
		t.Errorf("right arguments: %q", msg)
	}
	sa, _ := a.resolved()
	sb, _ := b.resolved()
	if sa == nil || sa != sb {
		t.Error("two tools with one schema resolved it twice")
	}
	bad := &Tool{Name: "broken", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integr"}}}`)}
	bad.CompileLater()
	if err := ResolveDeferred(); err == nil || !strings.Contains(err.Error(), `tool "broken"`) {
		t.Errorf("ResolveDeferred = %v, want the broken schema named", err)
	}
	if _, msg := bad.validate(`{"n":1}`); !strings.Contains(msg, "broken cannot be called") {
		t.Errorf("a call of a tool with a broken schema: %q", msg)
	}
	deferredMu.Lock()
	delete(laters, string(bad.Parameters)) // not left for other tests
	deferredMu.Unlock()
	Builtin(nil, nil)
	if err := ResolveDeferred(); err != nil {
		t.Errorf("the built-in tools' schemas: %v", err)
	}
}
