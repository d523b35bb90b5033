package llm_test

import (
	"context"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

// BenchmarkStepRequest is one model call of a step with the gateway's
// tool set and a 20-turn history, the model answering at once: the cost of
// building, encoding and sending the request (and the fake's decoding).
func BenchmarkStepRequest(b *testing.B) {
	h := newHarness(b, nil)
	h.fake.SetDefault(&testkit.Reply{Text: "ok"})
	h.fake.DiscardRequests()
	req := llm.StepRequest(20)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.client.Complete(ctx, req, nil); err != nil {
			b.Fatal(err)
		}
	}
}
