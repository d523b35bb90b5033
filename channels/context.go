package channels

import "context"

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
