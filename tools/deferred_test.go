package tools_test

import (
	"testing"

	"github.com/switchboard-gateway/switchboard/agent"
)

// The file tools' constant schemas, resolved once the gateway serves
// (agent.CompileLater), are valid.
func TestStaticSchemas(t *testing.T) {
	if err := agent.ResolveDeferred(); err != nil {
		t.Fatal(err)
	}
}
