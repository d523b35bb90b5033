//go:build goolm

package e2e

import (
	"path/filepath"
	"testing"

	_ "go.mau.fi/util/dbutil/litestream" // the sqlite3-fk-wal driver of the crypto store
	"maunium.net/go/mautrix/crypto/cryptohelper"
)

// mxCryptoBuilt: this test binary has Olm/Megolm (the goolm tag).
const mxCryptoBuilt = true

// startUserCrypto gives u's client Olm and Megolm, its state in a SQLite
// file of the test's: it encrypts what it sends to encrypted rooms and
// decrypts what it receives.
func startUserCrypto(t *testing.T, u *mxUser) {
	t.Helper()
	helper, err := cryptohelper.NewCryptoHelper(u.cli, []byte("user-pickle-"+u.UserID.Localpart()), filepath.Join(t.TempDir(), "crypto.db"))
	if err != nil {
		t.Fatalf("%s's crypto: %v", u.UserID, err)
	}
	if err := helper.Init(t.Context()); err != nil {
		t.Fatalf("%s's crypto: %v", u.UserID, err)
	}
	u.cli.Crypto = helper
	t.Cleanup(func() { _ = helper.Close() })
}
