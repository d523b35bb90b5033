package discord

import (
	"context"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels"
)

// The nonce of a reply is the same when the same answer to the same message
// is sent again (by a process restarted after a crash, which has no memory
// of the first send), so Discord's enforce_nonce returns the message it
// already has; it differs for another message, part or text, and is random
// for a send that answers no message.
func TestPartNonce(t *testing.T) {
	answering := func(msg string) context.Context {
		return channels.WithInbound(context.Background(), channels.Inbound{Channel: "discord", ChatID: "c1", MessageID: msg})
	}
	a := partNonce(answering("m1"), "c1", "hello", 0)
	if len(a) > 25 {
		t.Fatalf("nonce %q is longer than Discord's 25 characters", a)
	}
	if b := partNonce(answering("m1"), "c1", "hello", 0); a != b {
		t.Errorf("the same answer got nonces %q and %q, want equal", a, b)
	}
	for name, other := range map[string]string{
		"another message": partNonce(answering("m2"), "c1", "hello", 0),
		"another part":    partNonce(answering("m1"), "c1", "hello", 1),
		"another text":    partNonce(answering("m1"), "c1", "bye", 0),
		"another channel": partNonce(answering("m1"), "c2", "hello", 0),
	} {
		if other == a {
			t.Errorf("%s: same nonce %q", name, a)
		}
	}
	if x, y := partNonce(context.Background(), "c1", "hello", 0), partNonce(context.Background(), "c1", "hello", 0); x == y {
		t.Errorf("sends that answer no message got the same nonce %q; want random ones", x)
	}
}
