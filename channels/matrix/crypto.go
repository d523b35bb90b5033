package matrix

import (
	"context"

	"maunium.net/go/mautrix/event"
)

// cryptoEngine is end-to-end encryption as the adapter uses it; newCrypto
// (crypto_goolm.go with the goolm build tag, crypto_none.go without)
// makes it and hooks it into the sync and into sends.
type cryptoEngine interface {
	// decrypt decrypts a Megolm event.
	decrypt(ctx context.Context, evt *event.Event) (*event.Event, error)
	// noSession reports whether decrypt failed for want of the keys,
	// which may still arrive.
	noSession(err error) bool
	// requestKeys asks the sender's devices (and the bot's others) for
	// the keys of evt.
	requestKeys(ctx context.Context, evt *event.Event)
	// status says whether the bot's device is cross-signed and verified.
	status(ctx context.Context) (crossSigned, verified bool, err error)
}
