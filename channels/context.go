package channels

import (
	"context"
	"crypto/sha256"
)

type inboundKey struct{}

// WithInbound returns ctx marked with the message that a Send made with it
// answers. The router marks every Send this way, so a channel that must pair
// replies with requests (the HTTP API) can tell which request a reply is for.
func WithInbound(ctx context.Context, in Inbound) context.Context {
	return context.WithValue(ctx, inboundKey{}, in)
}

// InboundOf returns the message ctx was marked with by WithInbound.
func InboundOf(ctx context.Context) (Inbound, bool) {
	in, ok := ctx.Value(inboundKey{}).(Inbound)
	return in, ok
}

// ReplyDigest is the SHA-256 of one part of a reply, from the chat, the
// message the turn answers (ctx's Inbound), the part's name and its text:
// the same answer sent again after a restart has the same digest, for a
// platform's idempotency key (Discord's nonce, Matrix's transaction id).
// ok is false when ctx answers no message; the key must then be random.
func ReplyDigest(ctx context.Context, chatID, part, text string) (sum [sha256.Size]byte, ok bool) {
	in, ok := InboundOf(ctx)
	if !ok || in.MessageID == "" {
		return sum, false
	}
	return sha256.Sum256([]byte(chatID + "\x00" + in.MessageID + "\x00" + part + "\x00" + text)), true
}
