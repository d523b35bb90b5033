package matrix

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/switchboard-gateway/switchboard/channels"
)

// Name is the channel's name: its configuration key and stored name.
const Name = "matrix"

// DefaultStateFile is the state file's name beside the store when
// state_path is empty.
const DefaultStateFile = "matrix-state.db"

// Config is the channels.matrix section.
type Config struct {
	// allow_users and admins: MXIDs, @alice:example.org.
	channels.Common `yaml:",inline"`

	// Homeserver is the client-server API's base URL,
	// https://matrix.example.org; empty: https:// and user_id's server.
	Homeserver string `yaml:"homeserver"`
	// UserID is the bot's MXID, @bot:example.org.
	UserID string `yaml:"user_id"`
	// AccessToken is the bot's token; or Password logs in once and the
	// token and device are kept in the store.
	AccessToken string `yaml:"access_token" secret:"true" env:"MATRIX_ACCESS_TOKEN"`
	Password    string `yaml:"password" secret:"true" env:"MATRIX_PASSWORD"`
	// DeviceID is the device to log in as, or that the token belongs to.
	DeviceID string `yaml:"device_id"`
	// AllowServers are the homeservers whose users may pair (and invite
	// the bot to pair); empty: any.
	AllowServers []string `yaml:"allow_servers"`
	// Pairing lets an unknown user ask for access in a DM with a one-time
	// code the operator approves.
	Pairing bool `yaml:"pairing" reload:"access"`
	// Encryption reads and answers end-to-end encrypted rooms (Olm/Megolm).
	Encryption bool `yaml:"encryption"`
	// PickleKey encrypts the Olm account and sessions in the state file;
	// empty: a random key made once and kept in the store.
	PickleKey string `yaml:"pickle_key" secret:"true" env:"MATRIX_PICKLE_KEY"`
	// StatePath is the SQLite file of the room and crypto state; empty:
	// matrix-state.db beside the store.
	StatePath string `yaml:"state_path"`
}

// Definition is the Matrix channel for the registry.
var Definition = channels.Definition{
	Name:      Name,
	Title:     "Matrix",
	NewConfig: func() channels.Section { return NewConfig() },
	Build:     build,
	Summary: func(s channels.Section) string {
		c := s.(*Config)
		out := ", " + c.UserID + " on " + c.homeserver()
		if c.Encryption {
			return out + ", end-to-end encryption on"
		}
		return out + ", encryption off (encrypted rooms are not read)"
	},
	Doctor: doctor,
	Init: &channels.Init{
		TokenUsage:    "the bot's Matrix access token (default MATRIX_ACCESS_TOKEN)",
		UserUsage:     "your Matrix ID, @you:example.org",
		APIFlag:       "homeserver",
		APIUsage:      "the homeserver's URL, https://matrix.example.org",
		APIKey:        "homeserver",
		TokenKey:      "access_token",
		TokenQuestion: "Matrix access token of the bot's account (Element: Settings → Help & About → Access Token)",
		UserQuestion:  "Your Matrix ID, @you:example.org",
		UserID:        mxidRE,
		More: []channels.InitSecret{
			{Key: "user_id", Flag: "bot-id", Plain: true,
				Usage:    "the bot's Matrix ID, @bot:example.org",
				Question: "The bot's Matrix ID, @bot:example.org"},
		},
		NextSteps: func(a channels.InitAnswers, arg string) string {
			return "Matrix: invite the bot to a DM from your account; it joins rooms its allowed users invite it to.\n" +
				"  Encrypted rooms work with encryption: true (the default); `switchboard doctor" + arg + "` says\n" +
				"  whether the bot's device is verified and how to verify it.\n"
		},
	},
}

// NewConfig returns the section with its defaults: encryption on.
func NewConfig() *Config {
	return &Config{Common: channels.Common{StreamPreview: true, ShowToolProgress: true}, Encryption: true}
}

// Access is the admission rule from the allowlists. A user is matched by
// MXID: Inbound.UserName is the MXID without its @, which an allow_users
// entry "@alice:example.org" is compared with.
func (c *Config) Access() channels.Access {
	return channels.Access{Users: c.AllowUsers, Admins: c.Admins, Pairing: c.Pairing}
}

var (
	mxidRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^@[a-z0-9._=/+\-]+:[A-Za-z0-9.\-]+(:[0-9]{1,5})?$`) })
	serverRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9.\-]+(:[0-9]{1,5})?$`) })
	deviceRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._\-]{1,255}$`) })
)

// Validate checks an enabled section.
func (c *Config) Validate(key string, v channels.Checker) {
	if !c.Enabled {
		return
	}
	if c.Homeserver != "" {
		v.URL(key+".homeserver", c.Homeserver, []string{"http", "https"}, "https://matrix.example.org")
	}
	if !mxidRE().MatchString(c.UserID) {
		v.AddNear(key+".user_id", key+".enabled", fmt.Sprintf("%q is not a Matrix ID such as \"@bot:example.org\" (the bot's account)", c.UserID))
	}
	if strings.TrimSpace(c.AccessToken) == "" && strings.TrimSpace(c.Password) == "" {
		v.AddNear(key+".access_token", key+".enabled", fmt.Sprintf("required when %s.enabled is true; set it or MATRIX_ACCESS_TOKEN, or set password (MATRIX_PASSWORD) to log in once", key))
	}
	if c.DeviceID != "" && !deviceRE().MatchString(c.DeviceID) {
		v.Add(key+".device_id", fmt.Sprintf("%q is not a device id (letters, digits, . _ -)", c.DeviceID))
	}
	if c.Encryption && !cryptoBuilt {
		v.Add(key+".encryption", "this binary was built without Matrix encryption: build with `go build -tags goolm`, or set channels.matrix.encryption: false")
	}
	mxids(v, key+".allow_users", c.AllowUsers, true)
	mxids(v, key+".admins", c.Admins, false)
	for i, s := range c.AllowServers {
		if !serverRE().MatchString(strings.TrimSpace(s)) {
			v.Add(fmt.Sprintf("%s.allow_servers[%d]", key, i), fmt.Sprintf("%q is not a homeserver name such as \"example.org\" (the part of an MXID after the colon)", s))
		}
	}
}

func mxids(v channels.Checker, key string, list []string, star bool) {
	for i, u := range list {
		if (star && u == "*") || mxidRE().MatchString(strings.TrimSpace(u)) {
			continue
		}
		v.Add(fmt.Sprintf("%s[%d]", key, i), fmt.Sprintf("%q is not a Matrix ID such as \"@alice:example.org\"", u))
	}
}

// Warnings notes an enabled section that admits nobody, and a token and
// a password both set.
func (c *Config) Warnings(key string, note func(key, fallback, msg string)) {
	if !c.Enabled {
		return
	}
	if len(c.AllowUsers) == 0 && len(c.Admins) == 0 && !c.Pairing {
		note(key+".allow_users", key+".enabled", "is empty, so the bot admits nobody on Matrix (and declines every invite); add Matrix IDs or turn pairing on")
	}
	if c.AccessToken != "" && c.Password != "" {
		note(key+".password", key+".access_token", "is not used: access_token is set, and it is used as is")
	}
	if !c.Encryption {
		note(key+".encryption", key+".enabled", "is off: encrypted rooms (Element encrypts new DMs) are not read")
	}
}

// admits reports whether user may reach the bot (and have an invite
// joined): an allowed user or admin, or, with pairing, a user of an
// allowed server.
func (c *Config) admits(user string) bool { return c.admitsBy(c.Access(), user) }

// admitsBy is admits with the allowlists, admins and pairing of access
// (as a reload keeps them) and the section's allow_servers.
func (c *Config) admitsBy(access channels.Access, user string) bool {
	if slices.Contains(access.Users, "*") || slices.Contains(access.Users, user) || slices.Contains(access.Admins, user) {
		return true
	}
	if !access.Pairing {
		return false
	}
	_, server, _ := strings.Cut(user, ":")
	return len(c.AllowServers) == 0 || slices.ContainsFunc(c.AllowServers, func(s string) bool { return strings.EqualFold(strings.TrimSpace(s), server) })
}

// admitter is the Admit of the adapter: over live's access when given
// (BuildEnv.Access: a reload changes who is let in), else the section's.
func (c *Config) admitter(live func() channels.Access) func(string) bool {
	if live == nil {
		return c.admits
	}
	return func(user string) bool { return c.admitsBy(live(), user) }
}

// homeserver is the configured homeserver, or https:// and the server
// name of user_id (no .well-known lookup).
func (c *Config) homeserver() string {
	if c.Homeserver != "" {
		return c.Homeserver
	}
	_, server, _ := strings.Cut(c.UserID, ":")
	return "https://" + server
}

// build prepares the adapter; Launch.Build logs in.
func build(s channels.Section, env channels.BuildEnv) channels.Launch {
	c := s.(*Config)
	path := c.StatePath
	if path == "" {
		path = filepath.Join(env.StateDir, DefaultStateFile)
	}
	o := Options{
		Homeserver: c.homeserver(), UserID: c.UserID, AccessToken: c.AccessToken, Password: c.Password,
		DeviceID: c.DeviceID, Encryption: c.Encryption, PickleKey: c.PickleKey, StatePath: path,
		State: env.State, Admit: c.admitter(env.Access), Logger: env.Logger,
	}
	return channels.Launch{Build: func(ctx context.Context) (channels.Channel, error) {
		a, err := Open(ctx, o)
		if err != nil {
			return nil, err
		}
		return a, nil
	}}
}

// doctor checks the homeserver's versions and the login (whoami), and
// says whether the bot's device is cross-signed and how to verify it.
func doctor(ctx context.Context, s channels.Section, get channels.Getter) channels.Check {
	c := s.(*Config)
	base := strings.TrimSuffix(c.homeserver(), "/")
	var versions struct {
		Versions []string `json:"versions"`
	}
	code, err := get(ctx, base+"/_matrix/client/versions", nil, &versions)
	switch {
	case err != nil:
		return channels.Check{Failed: true, Message: "homeserver: " + err.Error(), Fix: "check that channels.matrix.homeserver (" + c.Homeserver + ") is reachable from this machine"}
	case code != http.StatusOK || len(versions.Versions) == 0:
		return channels.Check{Failed: true, Message: fmt.Sprintf("homeserver: /_matrix/client/versions answered status %d", code), Fix: "set channels.matrix.homeserver to the client-server API's URL (Element: Settings → Help & About → Homeserver)"}
	}
	newest := versions.Versions[len(versions.Versions)-1]
	if c.AccessToken == "" {
		return channels.Check{Message: fmt.Sprintf("homeserver speaks %s; the bot logs in with its password when serve starts and keeps the token and device in the store (doctor cannot check it without logging in)", newest)}
	}
	var who struct {
		UserID   string `json:"user_id"`
		DeviceID string `json:"device_id"`
	}
	code, err = get(ctx, base+"/_matrix/client/v3/account/whoami", http.Header{"Authorization": {"Bearer " + c.AccessToken}}, &who, c.AccessToken, c.Password, c.PickleKey)
	fixToken := "set channels.matrix.access_token or MATRIX_ACCESS_TOKEN to the bot's token (Element: Settings → Help & About → Access Token), or password instead"
	switch {
	case err != nil:
		return channels.Check{Failed: true, Message: "whoami: " + err.Error(), Fix: "check that " + c.Homeserver + " is reachable"}
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return channels.Check{Failed: true, Message: fmt.Sprintf("whoami: the access token was refused (status %d)", code), Fix: fixToken}
	case code != http.StatusOK:
		return channels.Check{Failed: true, Message: fmt.Sprintf("whoami: status %d", code), Fix: "try again later"}
	case who.UserID != c.UserID:
		return channels.Check{Failed: true, Message: fmt.Sprintf("the access token belongs to %s, not to user_id %s", who.UserID, c.UserID), Fix: "set channels.matrix.user_id to " + who.UserID + ", or use the bot's own token"}
	}
	msg := fmt.Sprintf("homeserver speaks %s; the token works: %s, device %s", newest, who.UserID, who.DeviceID)
	if !c.Encryption {
		return channels.Check{Message: msg + "; encryption off"}
	}
	return channels.Check{Message: msg + "; " + deviceTrust(ctx, c, who.DeviceID)}
}

// deviceTrust says whether the device is signed by the account's
// self-signing key (cross-signed, so verified for the account's other
// sessions), and how to verify it when not.
func deviceTrust(ctx context.Context, c *Config, device string) string {
	how := "verify it from your own Element: the bot's profile → Sessions → " + device + " → Verify, or accept its keys as they are (Element shows its messages with a grey shield)"
	cli, err := mautrix.NewClient(c.homeserver(), id.UserID(c.UserID), c.AccessToken)
	if err != nil {
		return "device trust unknown (" + err.Error() + "); " + how
	}
	cli.Client = &http.Client{Timeout: 10 * time.Second}
	cli.DefaultHTTPRetries = 0
	resp, err := cli.QueryKeys(ctx, &mautrix.ReqQueryKeys{DeviceKeys: map[id.UserID]mautrix.DeviceIDList{id.UserID(c.UserID): {id.DeviceID(device)}}})
	if err != nil {
		return "device trust unknown (" + redactURL(err.Error(), c) + "); " + how
	}
	keys, ok := resp.DeviceKeys[id.UserID(c.UserID)][id.DeviceID(device)]
	if !ok {
		return "the device has no keys on the server yet (serve uploads them at its first start)"
	}
	ssk, ok := resp.SelfSigningKeys[id.UserID(c.UserID)]
	if !ok {
		return "the account has no cross-signing keys, so the device is not cross-signed; " + how
	}
	for keyID := range ssk.Keys {
		if _, signed := keys.Signatures[id.UserID(c.UserID)][keyID]; signed {
			return "the device is cross-signed (verified)"
		}
	}
	return "the device is not cross-signed (unverified); " + how
}

// redactURL removes the section's secrets from s.
func redactURL(s string, c *Config) string {
	for _, secret := range []string{c.AccessToken, c.Password, c.PickleKey} {
		if len(secret) >= 6 {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}

// Config is the platform's section of the configuration.
var _ channels.Section = (*Config)(nil)
