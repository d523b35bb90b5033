// Package matrix is the Matrix adapter, on maunium.net/go/mautrix: it
// reads /sync (sync.go), normalises room messages to channels.Inbound
// (inbound.go) and sends replies, edits, reactions, typing and files as
// room events (outbound.go). End-to-end encryption (Olm/Megolm, pure Go)
// lives in crypto_goolm.go, built with the goolm tag; without it the
// adapter runs plaintext only and refuses encryption: true.
//
// Intake is at-least-once and never loses: the sync token is stored only
// after every message of the batch was handed to Sink.Deliver, so a crash
// replays the batch, and the store takes each event id once.
//
// Sends are exactly-once: every part of a reply is PUT with a transaction
// id derived from the message being answered and the part, so a part sent
// again after a crash is the event the homeserver already has.
package matrix

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mau.fi/util/dbutil"
	_ "go.mau.fi/util/dbutil/litestream" // the sqlite3-fk-wal driver on go-sqlite3
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
	"maunium.net/go/mautrix/sqlstatestore"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/internal/waitfor"
)

// Options configure an Adapter.
type Options struct {
	// Homeserver is the client-server API's base URL.
	Homeserver string
	// UserID is the bot's MXID, @bot:example.org.
	UserID string
	// AccessToken, when set, is used as is (its device is the device);
	// else Password logs in once and the token is kept in State.
	AccessToken string
	Password    string
	// DeviceID is the device to log in as (password login) or that the
	// token must belong to; empty: the homeserver's choice, kept.
	DeviceID string
	// Encryption turns Olm/Megolm on (needs the goolm build tag).
	Encryption bool
	// PickleKey encrypts the Olm account and sessions in StatePath; empty:
	// a random key made once and kept in State.
	PickleKey string
	// StatePath is the SQLite file of the room state and the crypto
	// state (created 0600); required.
	StatePath string
	// State keeps the sync token and the login; nil: in memory only.
	State channels.State
	// Admit decides whether user may reach the bot: an invite from them
	// is joined (else declined) and their messages are delivered (else
	// dropped before the model). nil admits nobody.
	Admit func(user string) bool
	// HTTPClient is copied; default: a 90 s timeout (above the 30 s long
	// poll of /sync).
	HTTPClient *http.Client
	// MaxDownloadBytes caps inbound files (default 16 MiB).
	MaxDownloadBytes int64
	// MaxRateLimitWait is the longest M_LIMIT_EXCEEDED wait (default one
	// minute); longer, the send fails as unavailable.
	MaxRateLimitWait time.Duration
	// SyncTimeout is the long poll of /sync (default 30 s).
	SyncTimeout time.Duration
	// Sleep waits between retries; default: a timer that ends with ctx.
	Sleep  func(ctx context.Context, d time.Duration) error
	Logger *slog.Logger
}

// Adapter is the Matrix channel. Create it with Open.
type Adapter struct {
	o      Options
	cli    *mautrix.Client
	db     *dbutil.Database
	states *sqlstatestore.SQLStateStore
	syncer *mautrix.DefaultSyncer
	crypto cryptoEngine // nil: plaintext only
	state  channels.State
	log    *slog.Logger
	secret *strings.Replacer
	files  *http.Client

	connected atomic.Bool
	running   atomic.Bool

	mu sync.Mutex
	// sent are event ids this process sent (a reply to one mentions the bot).
	sent map[string]bool
	// edited is when each preview was last edited (the bounded rate).
	edited map[string]time.Time
	// warned are rooms whose encrypted events could not be read, warned once.
	warned map[string]bool
	// pending are encrypted events waiting for their keys (sync.go).
	pending map[string]*pendingEvent
	// ownName is the bot's display name (a mention by name).
	ownName string
}

// memState is a channels.State in memory (tests, or no store).
type memState struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *memState) GetState(_ context.Context, key string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	return v, ok, nil
}

func (s *memState) SetState(_ context.Context, key, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = value
	return nil
}

func (s *memState) DeleteState(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

// Open checks o, logs in (or checks the token), opens the state file and
// sets up encryption. It contacts the homeserver.
func Open(ctx context.Context, o Options) (*Adapter, error) {
	a, err := newAdapter(o)
	if err != nil {
		return nil, err
	}
	if err := a.start(ctx); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// newAdapter checks o and prepares the client; nothing is contacted.
func newAdapter(o Options) (*Adapter, error) {
	o.AccessToken, o.Password, o.PickleKey = strings.TrimSpace(o.AccessToken), strings.TrimSpace(o.Password), strings.TrimSpace(o.PickleKey)
	u, err := url.Parse(strings.TrimSuffix(o.Homeserver, "/"))
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, fmt.Errorf("matrix: homeserver %q must be an absolute http(s) URL", o.Homeserver)
	case !validUserID(o.UserID):
		return nil, fmt.Errorf("matrix: user id %q is not an MXID such as @bot:example.org", o.UserID)
	case o.AccessToken == "" && o.Password == "":
		return nil, errors.New("matrix: an access token or a password is required")
	case o.StatePath == "":
		return nil, errors.New("matrix: the state file's path is required")
	}
	o.MaxDownloadBytes = cmp.Or(max(o.MaxDownloadBytes, 0), 16<<20)
	o.MaxRateLimitWait = cmp.Or(max(o.MaxRateLimitWait, 0), time.Minute)
	o.SyncTimeout = cmp.Or(max(o.SyncTimeout, 0), 30*time.Second)
	o.Logger = cmp.Or(o.Logger, slog.Default())
	if o.Sleep == nil {
		o.Sleep = waitfor.Sleep
	}
	state := o.State
	if state == nil {
		state = &memState{m: map[string]string{}}
	}
	cli, err := mautrix.NewClient(u.String(), id.UserID(o.UserID), "")
	if err != nil {
		return nil, fmt.Errorf("matrix: homeserver %q: %w", o.Homeserver, err)
	}
	client := *cmp.Or(o.HTTPClient, &http.Client{Timeout: 90 * time.Second}) // a copy
	cli.Client = &client
	cli.DefaultHTTPRetries = 0 // our retries: M_LIMIT_EXCEEDED's retry_after_ms, 5xx as unavailable
	cli.IgnoreRateLimit = true
	cli.UserAgent = "Switchboard (mautrix-go)"
	a := &Adapter{o: o, cli: cli, state: state, log: o.Logger.With("channel", Name), sent: map[string]bool{}, edited: map[string]time.Time{},
		warned: map[string]bool{}, pending: map[string]*pendingEvent{},
		files: &http.Client{Timeout: client.Timeout, Transport: client.Transport,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	a.secret = strings.NewReplacer(a.secretPairs()...)
	return a, nil
}

// validUserID reports whether s looks like @localpart:server.
func validUserID(s string) bool {
	local, server, ok := strings.Cut(strings.TrimPrefix(s, "@"), ":")
	return strings.HasPrefix(s, "@") && ok && local != "" && server != "" && !strings.ContainsAny(s, " \t\n")
}

// start logs in, opens the state file and sets up encryption.
func (a *Adapter) start(ctx context.Context) error {
	if err := a.login(ctx); err != nil {
		return err
	}
	if v, err := a.cli.Versions(ctx); err == nil {
		a.cli.SpecVersions = v
	} else {
		a.log.Warn("matrix: could not read the homeserver's versions", "err", a.redact(err))
	}
	if err := a.openState(ctx); err != nil {
		return err
	}
	if r, err := a.cli.GetOwnDisplayName(ctx); err == nil {
		a.ownName = r.DisplayName
	}
	a.syncer = mautrix.NewDefaultSyncer()
	if a.o.Encryption {
		engine, err := newCrypto(ctx, a)
		if err != nil {
			return err
		}
		a.crypto = engine
	}
	a.syncer.OnEvent(a.cli.StateStoreSyncHandler)
	return nil
}

// openState opens (creates, 0600) the SQLite file of the room state and,
// with encryption, of the crypto state.
func (a *Adapter) openState(ctx context.Context) error {
	f, err := os.OpenFile(a.o.StatePath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("matrix: state file: %w", err)
	}
	_ = f.Close()
	if err := os.Chmod(a.o.StatePath, 0o600); err != nil {
		return fmt.Errorf("matrix: state file: %w", err)
	}
	db, err := dbutil.NewWithDialect("file:"+a.o.StatePath+"?_txlock=immediate", "sqlite3-fk-wal")
	if err != nil {
		return fmt.Errorf("matrix: state file %s: %w", a.o.StatePath, err)
	}
	a.db = db
	a.states = sqlstatestore.NewSQLStateStore(db, dbutil.NoopLogger, false)
	if err := a.states.Upgrade(ctx); err != nil {
		return fmt.Errorf("matrix: state file %s: %w", a.o.StatePath, err)
	}
	a.cli.StateStore = a.states
	return nil
}

// Close closes the state file.
func (a *Adapter) Close() {
	if a.db != nil {
		_ = a.db.Close()
	}
}

// State keys (channels.State, scoped to this channel).
const (
	keySince     = "sync.since"         // the next_batch of the last batch delivered
	keyToken     = "login.access_token" // a password login's token
	keyDevice    = "login.device_id"    // … and its device
	keyPickle    = "crypto.pickle_key"  // the generated pickle key
	keyDMPrefix  = "dm:"                // a room the inviter marked is_direct
	keyAskPrefix = "ask:"               // a question's reactions → actions
	keyThread    = "thread:"            // a thread the bot took part in
	keyPending   = "pending:"           // an encrypted event waiting for its keys
)

// login sets the client's token and device: the configured token, or the
// kept one, or a password login whose token and device are kept.
func (a *Adapter) login(ctx context.Context) error {
	if a.o.AccessToken != "" {
		a.cli.AccessToken = a.o.AccessToken
		return a.whoami(ctx, "channels.matrix.access_token or MATRIX_ACCESS_TOKEN")
	}
	token, ok, err := a.state.GetState(ctx, keyToken)
	if err != nil {
		return fmt.Errorf("matrix: read the kept login: %w", err)
	}
	device, _, err := a.state.GetState(ctx, keyDevice)
	if err != nil {
		return fmt.Errorf("matrix: read the kept login: %w", err)
	}
	if ok && token != "" && (a.o.DeviceID == "" || a.o.DeviceID == device) {
		a.cli.AccessToken = token
		err := a.whoami(ctx, "")
		if err == nil || !errors.Is(err, mautrix.MUnknownToken) {
			return err
		}
		a.log.Warn("matrix: the kept access token was refused; logging in again with the password", "device_id", device)
	}
	dev := cmp.Or(a.o.DeviceID, device)
	resp, err := a.cli.Login(ctx, &mautrix.ReqLogin{
		Type:                     mautrix.AuthTypePassword,
		Identifier:               mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: a.o.UserID},
		Password:                 a.o.Password,
		DeviceID:                 id.DeviceID(dev),
		InitialDeviceDisplayName: "Switchboard",
	})
	if err != nil {
		return a.wrap(err, "matrix: log in as %s (check channels.matrix.password or MATRIX_PASSWORD)", a.o.UserID)
	}
	a.cli.AccessToken, a.cli.DeviceID = resp.AccessToken, resp.DeviceID
	a.secret = strings.NewReplacer(append(a.secretPairs(), resp.AccessToken, "[redacted]")...)
	if err := a.state.SetState(ctx, keyToken, resp.AccessToken); err != nil {
		return fmt.Errorf("matrix: keep the login: %w", err)
	}
	if err := a.state.SetState(ctx, keyDevice, string(resp.DeviceID)); err != nil {
		return fmt.Errorf("matrix: keep the login: %w", err)
	}
	a.log.Info("matrix: logged in", "user_id", a.o.UserID, "device_id", resp.DeviceID)
	return nil
}

// whoami checks the token and learns its device.
func (a *Adapter) whoami(ctx context.Context, fix string) error {
	a.secret = strings.NewReplacer(append(a.secretPairs(), a.cli.AccessToken, "[redacted]")...)
	w, err := a.cli.Whoami(ctx)
	if err != nil {
		if fix != "" && errors.Is(err, mautrix.MUnknownToken) {
			return a.wrap(err, "matrix: the access token was refused; set %s", fix)
		}
		return a.wrap(err, "matrix: whoami")
	}
	if string(w.UserID) != a.o.UserID {
		return fmt.Errorf("matrix: the access token belongs to %s, not to user_id %s", w.UserID, a.o.UserID)
	}
	if a.o.DeviceID != "" && w.DeviceID != "" && string(w.DeviceID) != a.o.DeviceID {
		return fmt.Errorf("matrix: the access token belongs to device %s, not to device_id %s", w.DeviceID, a.o.DeviceID)
	}
	a.cli.DeviceID = cmp.Or(w.DeviceID, id.DeviceID(a.o.DeviceID))
	return nil
}

// secretPairs are the configured secrets for the redactor.
func (a *Adapter) secretPairs() []string {
	var pairs []string
	for _, s := range []string{a.o.AccessToken, a.o.Password, a.o.PickleKey} {
		if len(s) >= 6 {
			pairs = append(pairs, s, "[redacted]")
		}
	}
	return pairs
}

// redact is err's text without the secrets.
func (a *Adapter) redact(err error) string { return a.secret.Replace(err.Error()) }

// Name is "matrix".
func (a *Adapter) Name() string { return Name }

// Connected reports whether the last /sync succeeded.
func (a *Adapter) Connected() bool { return a.connected.Load() }

// UserID is the bot's MXID; DeviceID its device.
func (a *Adapter) UserID() string   { return a.o.UserID }
func (a *Adapter) DeviceID() string { return string(a.cli.DeviceID) }

var (
	_ channels.Channel    = (*Adapter)(nil)
	_ channels.Typer      = (*Adapter)(nil)
	_ channels.Reactor    = (*Adapter)(nil)
	_ channels.Editor     = (*Adapter)(nil)
	_ channels.Deleter    = (*Adapter)(nil)
	_ channels.Fitter     = (*Adapter)(nil)
	_ channels.FileSender = (*Adapter)(nil)
	_ channels.Asker      = (*Adapter)(nil)
	_ channels.Connecter  = (*Adapter)(nil)
)
