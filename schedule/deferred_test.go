package schedule

import (
	"testing"

	"github.com/switchboard-gateway/switchboard/agent"
)

// The schedule tools' constant schemas, resolved once the gateway serves
// (agent.CompileLater), are valid.
func TestStaticSchemas(t *testing.T) {
	if err := agent.ResolveDeferred(); err != nil {
		t.Fatal(err)
	}
}
