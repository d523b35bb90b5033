package channels

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"time"
)

// Definition is what a chat platform's package exports (telegram.Definition,
// discord.Definition) so that the rest of Switchboard can range over the
// platforms instead of naming them: its configuration section, how to build
// the adapter, and optionally its doctor check and init questions. The list
// of definitions is package channels/registry.
type Definition struct {
	// Name is the channel's name: its configuration key (channels.NAME),
	// Inbound.Channel and the name stored with its chats.
	Name string
	// Title is the platform's name in messages ("Telegram").
	Title string
	// NewConfig returns the section with its built-in defaults: a pointer
	// to the package's Config struct, which embeds Common inline. Its
	// fields carry the YAML keys, and tags for secrets (`secret:"true"`,
	// or `secret:"url"` for a URL that may carry a password), for the
	// environment variable an empty value falls back to (`env:"NAME"`),
	// and for the allowlists Access reads, which a reload applies
	// (`reload:"access"`).
	NewConfig func() Section
	// Build prepares the adapter of an enabled section; nothing is
	// contacted until Launch.Build runs.
	Build func(s Section, env BuildEnv) Launch
	// Summary (optional) adds details to `check`'s line about the enabled
	// channel, after "enabled, N allowed users" (", webhook URL").
	Summary func(s Section) string
	// Doctor (optional) tries the section's token against the platform,
	// for `switchboard doctor` and `switchboard init`.
	Doctor func(ctx context.Context, s Section, get Getter) Check
	// Init (optional) are the questions `switchboard init` asks for the
	// channel, and its flags.
	Init *Init
}

// Section is a platform's configuration section, channels.NAME: a pointer
// to the package's Config struct.
type Section interface {
	// Settings returns the settings every platform has (promoted from the
	// embedded Common).
	Settings() *Common
	// Access is the admission rule from the section's allowlists.
	Access() Access
	// Validate reports the section's problems; key is "channels.NAME". A
	// disabled section is not checked, except what applies to it anyway.
	Validate(key string, v Checker)
	// Warnings reports settings that are valid but probably not meant
	// (an enabled channel that admits nobody).
	Warnings(key string, note func(key, fallback, msg string))
}

// Common are the settings every chat platform's section has, embedded in
// it with `yaml:",inline"`.
type Common struct {
	Enabled bool `yaml:"enabled"`
	// AllowUsers are the platform's user ids (and, where the platform
	// has them, @usernames); empty admits nobody.
	AllowUsers []string `yaml:"allow_users" reload:"access"`
	// Admins are the operators' user ids: admitted like allow_users, and
	// the only ones whom /status shows operator matters (skill errors,
	// channels and MCP servers that are down). Empty: nobody here.
	Admins []string `yaml:"admins" reload:"access"`
	// StreamPreview shows the reply as it is written.
	StreamPreview bool `yaml:"stream_preview"`
	// ShowToolProgress shows one line saying what the tools do while they
	// run longer than a moment.
	ShowToolProgress bool `yaml:"show_tool_progress"`
}

// Settings returns c; it makes every section that embeds Common a source
// of the common settings.
func (c *Common) Settings() *Common { return c }

// Checker collects a section's validation problems, positioned at the
// file and line of their key (package config implements it).
type Checker interface {
	// Add records a problem with key; msg says what is wrong and what to do.
	Add(key, msg string)
	// AddNear is Add for a key that may be missing from the file: the
	// problem is then placed at near.
	AddNear(key, near, msg string)
	NotEmpty(key, val, what string)
	PositiveDuration(key string, d time.Duration, example string)
	// URL checks that val is a URL with one of schemes and a host.
	URL(key, val string, schemes []string, example string)
	// SharedStore reports whether replicas may share the store (PostgreSQL).
	SharedStore() bool
	// HTTPServed reports whether http.listen is set: a channel that takes
	// its events by HTTP (HTTPHandler) needs it.
	HTTPServed() bool
}

// RequireToken reports an empty token of an enabled section.
func RequireToken(v Checker, key, token, env string) {
	if token == "" {
		v.Add(key+".token", fmt.Sprintf("required when %s.enabled is true; set it or %s", key, env))
	}
}

// BuildEnv is what the gateway gives a definition's Build.
type BuildEnv struct {
	Logger *slog.Logger
	// LatestInbound returns this channel's newest stored inbound message id
	// per chat, for a catch-up after a reconnect.
	LatestInbound func(ctx context.Context) (map[string]string, error)
	// LatestInboundAt returns when the newest inbound message of chatID
	// on this channel was stored (zero when there is none), for a
	// platform that may write freely only within a time of the user's
	// last message (WhatsApp's 24-hour window).
	LatestInboundAt func(ctx context.Context, chatID string) (time.Time, error)
	// OnDeliveryStatus (nil: none) counts the delivery statuses the
	// platform reports for sent messages ("sent", "delivered", "read",
	// "failed").
	OnDeliveryStatus func(status string)
	// RecordDeliveryStatus (nil: none) keeps a status with the delivery of
	// the platform's message msgID in the store, with the reason of a
	// failure (errText: the platform's words, never a secret) and when the
	// platform saw it (zero: now). It reports whether a delivery took it:
	// false when the store has no delivery of msgID (yet: a status can come
	// before the send's record is committed), holds a later status, or
	// failed (logged).
	RecordDeliveryStatus func(ctx context.Context, msgID, status, errText string, at time.Time) bool
	// Access (nil: the section's own Access()) is the channel's admission
	// rule as it stands now: a reload (SIGHUP) changes it. An adapter that
	// filters strangers itself (before Sink.Deliver) asks it each time.
	Access func() Access
	// Roles is the replica when replicas share the store, else nil.
	Roles RoleHolder
	// OnPaced (nil: none) counts the calls outbound pacing held back.
	OnPaced func(outcome string)
	// DownloadTransport returns a transport through the outbound guard of
	// web_fetch for attachments, that also reaches apiBase's host when it
	// is not the platform's own (platformBase): a fake, a local server.
	DownloadTransport func(apiBase, platformBase string) http.RoundTripper
	// State (nil: none) is the channel's own durable state in the store
	// (a sync token, a kept login).
	State State
	// StateDir is the directory beside the store for a channel's own
	// files (the SQLite store's directory; "" is the working directory).
	StateDir string
}

// RoleHolder claims one of several roles among replicas (cluster.Replica).
type RoleHolder interface {
	HoldAny(ctx context.Context, roles []string) (int, error)
}

// Launch is a prepared adapter: the supervisor runs Gate (if any) and then
// Build, and retries them when they fail.
type Launch struct {
	// Build makes the adapter; it may contact the platform.
	Build func(ctx context.Context) (Channel, error)
	// Gate, if not nil, waits until this process may run the adapter (a
	// role among replicas).
	Gate func(ctx context.Context) error
}

// Getter does one GET of url and decodes a 200 answer's JSON into v,
// returning the status; secrets are removed from the error.
type Getter func(ctx context.Context, url string, header http.Header, v any, secrets ...string) (int, error)

// Check is the outcome of a definition's Doctor.
type Check struct {
	Failed  bool
	Message string
	Fix     string // what to do, when Failed
}

// Init is what `switchboard init` asks and accepts for one channel. Its
// flags are --NAME-token, --NAME-user and --NAME-APIFlag.
type Init struct {
	TokenUsage string // the --NAME-token flag's help
	UserUsage  string // the --NAME-user flag's help
	APIFlag    string // the API address flag after "NAME-", such as "api-endpoint"
	APIUsage   string // its help
	APIKey     string // the section's key it sets, such as "api_endpoint"
	// UsageNote follows the title in the usage text ("(no ID: pairing)").
	UsageNote string

	// TokenKey is the section's key the token goes to; "" is "token".
	TokenKey string
	// UserID (optional) is what one user id looks like; nil: digits. A
	// function, so that the expression is compiled only by init.
	UserID func() *regexp.Regexp

	TokenQuestion string // the question for the token
	UserQuestion  string // the question for the user ids
	// More are further secrets init asks for after the token, such as
	// Slack's app-level token (or identifiers, InitSecret.Plain): each has
	// a flag --NAME-Flag and falls back to its field's environment
	// variable (the env tag).
	More []InitSecret
	// Apply (optional) sets more of the section from the answers; init
	// has set enabled, token, allow_users and admins (the operator's own
	// ids) and, when given, APIKey.
	Apply func(s Section, a InitAnswers)
	// Extra (optional) returns more lines of the section init writes,
	// indented by four spaces.
	Extra func(a InitAnswers) string
	// NextSteps (optional) says what to do once the file is written;
	// configArg is " --config PATH" or "".
	NextSteps func(a InitAnswers, configArg string) string
}

// Token is the section's key the token goes to.
func (i *Init) Token() string {
	if i.TokenKey == "" {
		return "token"
	}
	return i.TokenKey
}

// InitSecret is one more secret init asks for (Init.More).
type InitSecret struct {
	Key      string // the section's key it sets, such as "app_token"
	Flag     string // its flag after "NAME-", such as "app-token"
	Usage    string // the flag's help
	Question string // the question (Enter skips it)
	// Plain marks an identifier, not a secret: asked with echo and
	// written as given (WhatsApp's phone_number_id).
	Plain bool
}

// InitAnswers are the answers init collected for one channel.
type InitAnswers struct {
	Token string
	API   string            // the API address; empty: the default
	Users []string          // the operator's user ids
	More  map[string]string // Init.More's answers by key; empty: skipped
}

// SectionOf returns the section of type T in sections, or a zero T.
func SectionOf[T Section](sections map[string]Section) T {
	for _, s := range sections {
		if t, ok := s.(T); ok {
			return t
		}
	}
	var zero T
	return zero
}

// SectionType is the struct type a definition's sections have.
func (d Definition) SectionType() reflect.Type {
	return reflect.TypeOf(d.NewConfig()).Elem()
}

// CopyAccess copies the access settings (the fields tagged
// `reload:"access"`, which Access reads and a reload applies) from src to
// dst, two sections of one type.
func CopyAccess(dst, src Section) {
	var cp func(d, s reflect.Value)
	cp = func(d, s reflect.Value) {
		for i := range d.NumField() {
			f := d.Type().Field(i)
			switch {
			case f.Anonymous && f.Type.Kind() == reflect.Struct:
				cp(d.Field(i), s.Field(i))
			case f.Tag.Get("reload") == "access":
				d.Field(i).Set(s.Field(i))
			}
		}
	}
	cp(reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem())
}

// SetString sets the string field of s whose YAML key is key, and reports
// whether there is one.
func SetString(s Section, key, value string) bool {
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key && f.Type.Kind() == reflect.String {
			v.Field(i).SetString(value)
			return true
		}
	}
	return false
}
