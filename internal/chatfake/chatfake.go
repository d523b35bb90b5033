// Package chatfake holds the fakes of the tests that run a whole router
// (router's own and the reply side's): a channel that records what it is
// sent and how often it types, and an agent that answers "echo: <text>".
// It does not import the router, so the router's package-internal tests
// can use it too.
package chatfake

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
)

// Channel is a channel named "fake" that records what the router sends and
// how often it types.
type Channel struct {
	Mu     sync.Mutex
	Sent   []channels.Outbound
	Notify chan struct{} // receives after every send (buffered)
	typing int
}

// NewChannel returns a Channel.
func NewChannel() *Channel { return &Channel{Notify: make(chan struct{}, 100)} }

// Name implements channels.Channel.
func (c *Channel) Name() string { return "fake" }

// Run implements channels.Channel.
func (c *Channel) Run(ctx context.Context, _ channels.Sink) error { <-ctx.Done(); return nil }

// Send implements channels.Channel.
func (c *Channel) Send(_ context.Context, m channels.Outbound) (string, error) {
	c.Mu.Lock()
	c.Sent = append(c.Sent, m)
	n := len(c.Sent)
	c.Mu.Unlock()
	c.Notify <- struct{}{}
	return fmt.Sprintf("out-%d", n), nil
}

// Typing implements channels.Typer.
func (c *Channel) Typing(context.Context, string) error {
	c.Mu.Lock()
	c.typing++
	c.Mu.Unlock()
	return nil
}

// Texts returns the texts sent so far.
func (c *Channel) Texts() []string {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	var out []string
	for _, m := range c.Sent {
		out = append(out, m.Text)
	}
	return out
}

// Typed is how many typing indicators the channel was sent.
func (c *Channel) Typed() int {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	return c.typing
}

var (
	_ channels.Channel = (*Channel)(nil)
	_ channels.Typer   = (*Channel)(nil)
)

// Runner is an agent that answers "echo: <text>" through the chat,
// optionally blocking until released or cancelled.
type Runner struct {
	Mu      sync.Mutex
	Started chan string // the text of each turn as it starts
	Release map[string]chan struct{}
	Running int
	MaxSeen int
	Turns   []agent.Turn
}

// NewRunner returns a Runner.
func NewRunner() *Runner {
	return &Runner{Started: make(chan string, 100), Release: map[string]chan struct{}{}}
}

// Hold makes the turn for text block until released.
func (f *Runner) Hold(text string) chan struct{} {
	ch := make(chan struct{})
	f.Mu.Lock()
	f.Release[text] = ch
	f.Mu.Unlock()
	return ch
}

// Run runs a turn (router.Runner).
func (f *Runner) Run(ctx context.Context, t agent.Turn) agent.Result {
	f.Mu.Lock()
	f.Running++
	f.MaxSeen = max(f.MaxSeen, f.Running)
	f.Turns = append(f.Turns, t)
	wait := f.Release[t.Input.Content]
	f.Mu.Unlock()
	defer func() { f.Mu.Lock(); f.Running--; f.Mu.Unlock() }()
	f.Started <- t.Input.Content
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return agent.Result{StopReason: agent.StopCancelled}
		}
	}
	if _, err := t.Chat.Send(ctx, "echo: "+t.Input.Content); err != nil {
		return agent.Result{StopReason: agent.StopLLMError, Err: err}
	}
	return agent.Result{StopReason: agent.StopEndTurn, Delivered: true}
}

// Msg is a direct message from user in chat of the fake channel; each gets
// a message id of its own.
func Msg(chat, user, text string) channels.Inbound {
	return channels.Inbound{Channel: "fake", ChatID: chat, ChatType: channels.DM, MessageID: fmt.Sprint(seq.Add(1)),
		UserID: user, Text: text, Mentioned: true}
}

var seq atomic.Int64
