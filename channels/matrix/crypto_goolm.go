//go:build goolm

package matrix

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/crypto/cryptohelper"
	"maunium.net/go/mautrix/event"
)

// cryptoBuilt reports whether this binary can encrypt (the goolm tag).
const cryptoBuilt = true

// olm is mautrix's crypto helper over the state file: the Olm account,
// the Olm and Megolm sessions and the device lists, pickled with the
// pickle key, so a restart loses no session.
type olm struct {
	helper *cryptohelper.CryptoHelper
	mach   *crypto.OlmMachine
}

// newCrypto sets up encryption for a: the crypto store in a's state file,
// the device's keys uploaded once, sends encrypted in encrypted rooms,
// and the sync's to-device events, device lists and member changes fed to
// the Olm machine.
func newCrypto(ctx context.Context, a *Adapter) (cryptoEngine, error) {
	key, err := a.pickleKey(ctx)
	if err != nil {
		return nil, err
	}
	// The helper hooks itself into the client's syncer; it gets one of
	// its own, never run: the adapter's sync decrypts and dispatches.
	a.cli.Syncer = mautrix.NewDefaultSyncer()
	helper, err := cryptohelper.NewCryptoHelper(a.cli, key, a.db)
	if err != nil {
		return nil, fmt.Errorf("matrix: encryption: %w", err)
	}
	helper.DBAccountID = a.o.UserID
	if err := helper.Init(ctx); err != nil {
		return nil, a.wrap(err, "matrix: encryption: set up the device %s (a device_id or token of another device than the one kept in %s? use that device, or a new state file)", a.cli.DeviceID, a.o.StatePath)
	}
	mach := helper.Machine()
	a.cli.Crypto = helper
	a.cli.Syncer = a.syncer
	a.syncer.OnSync(mach.ProcessSyncResponse)
	a.syncer.OnEventType(event.StateMember, mach.HandleMemberEvent)
	a.syncer.OnEventType(event.StateHistoryVisibility, mach.HandleHistoryVisibility)
	return &olm{helper: helper, mach: mach}, nil
}

// pickleKey is the configured pickle key, or the one made once and kept.
func (a *Adapter) pickleKey(ctx context.Context) ([]byte, error) {
	if a.o.PickleKey != "" {
		return []byte(a.o.PickleKey), nil
	}
	v, ok, err := a.state.GetState(ctx, keyPickle)
	if err != nil {
		return nil, fmt.Errorf("matrix: read the pickle key: %w", err)
	}
	if ok && v != "" {
		return []byte(v), nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("matrix: make a pickle key: %w", err)
	}
	v = hex.EncodeToString(b)
	if err := a.state.SetState(ctx, keyPickle, v); err != nil {
		return nil, fmt.Errorf("matrix: keep the pickle key: %w", err)
	}
	return []byte(v), nil
}

func (o *olm) decrypt(ctx context.Context, evt *event.Event) (*event.Event, error) {
	return o.mach.DecryptMegolmEvent(ctx, evt)
}

func (o *olm) noSession(err error) bool { return errors.Is(err, crypto.ErrNoSessionFound) }

func (o *olm) requestKeys(ctx context.Context, evt *event.Event) {
	c := evt.Content.AsEncrypted()
	if c == nil {
		return
	}
	o.helper.RequestSession(ctx, evt.RoomID, c.SenderKey, c.SessionID, evt.Sender, c.DeviceID)
}

func (o *olm) status(ctx context.Context) (crossSigned, verified bool, err error) {
	return o.mach.GetOwnVerificationStatus(ctx)
}
