package testkit

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// RecordingChat is the chat a turn sends to (agent.Chat) in the tests that run the
// real loop: it records what is sent and answers with the message ids m1,
// m2, …
type RecordingChat struct {
	mu   sync.Mutex
	sent []string
	// Fail, when set (before the turn runs), is what every Send returns,
	// recording nothing.
	Fail error
}

// Send implements agent.Chat.
func (c *RecordingChat) Send(_ context.Context, text string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Fail != nil {
		return "", c.Fail
	}
	c.sent = append(c.sent, text)
	return fmt.Sprintf("m%d", len(c.sent)), nil
}

// Sent returns the texts sent so far, in order.
func (c *RecordingChat) Sent() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sent)
}
