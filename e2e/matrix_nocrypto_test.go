//go:build !goolm

package e2e

import (
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
)

// mxCryptoBuilt: this test binary has no Olm/Megolm (built without the
// goolm tag).
const mxCryptoBuilt = false

// startUserCrypto: without the goolm tag there is no pure-Go Olm, so the
// encrypted tests cannot run: counted as missing (a failure under CI=true).
func startUserCrypto(t *testing.T, _ *mxUser) {
	t.Helper()
	testkit.Missing(t, "this test binary was built without -tags goolm: Matrix end-to-end encryption (pure-Go Olm) is not in it; go test -tags goolm ./e2e/")
}
