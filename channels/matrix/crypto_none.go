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
	return nil, errors.New("matrix: this binary was built without Matrix encryption: build with `go build -tags goolm`, or set channels.matrix.encryption: false")
}
