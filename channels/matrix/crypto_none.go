//go:build !goolm

package matrix

import (
	"context"
	"errors"
)

// cryptoBuilt reports whether this binary can encrypt (the goolm tag).
const cryptoBuilt = false

// newCrypto refuses: this binary was built without the goolm tag, which
// selects mautrix's pure-Go Olm.
func newCrypto(context.Context, *Adapter) (cryptoEngine, error) {
	return nil, errors.New("matrix: encryption is on but this binary was built without end-to-end encryption (go build -tags goolm); build with the tag, or set channels.matrix.encryption: false")
}
