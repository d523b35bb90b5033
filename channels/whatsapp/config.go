package whatsapp

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/switchboard-gateway/switchboard/channels"
)

// Name is the channel's name: its configuration key and stored name.
const Name = "whatsapp"

// Defaults of the section.
const (
	// DefaultAPIBase is Meta's Graph API.
	DefaultAPIBase = "https://graph.facebook.com"
	// DefaultAPIVersion is the Graph API version the adapter was written
	// against; Meta keeps a version for about two years.
	DefaultAPIVersion = "v23.0"
	// DefaultWebhookPath is where Meta posts, on http.listen.
	DefaultWebhookPath = "/whatsapp/webhook"
)

// What to do with a message outside the 24-hour customer-service window
// (Config.OutsideWindow).
const (
	OutsideTemplate = "template" // send templates.reminder with the text as its parameter
	OutsideDrop     = "drop"     // do not send it: an ERROR and a failed send
)

// ReminderTemplate is the key in templates of the template sent outside
// the 24-hour window.
const ReminderTemplate = "reminder"

// Config is the channels.whatsapp section.
type Config struct {
	// allow_users and admins: phone numbers in E.164, with or without the
	// leading +.
	channels.Common `yaml:",inline"`

	// PhoneNumberID is the id of the business phone number (WhatsApp →
	// API Setup in the Meta app), not the number itself.
	PhoneNumberID string `yaml:"phone_number_id"`
	// AccessToken calls the Graph API: a System User's permanent token with
	// whatsapp_business_messaging (a temporary one lasts 24 hours).
	AccessToken string `yaml:"access_token" secret:"true" env:"WHATSAPP_ACCESS_TOKEN"`
	// AppSecret checks the X-Hub-Signature-256 of every webhook delivery.
	AppSecret string `yaml:"app_secret" secret:"true" env:"WHATSAPP_APP_SECRET"`
	// VerifyToken answers Meta's GET handshake when the webhook is set up.
	VerifyToken string `yaml:"verify_token" secret:"true" env:"WHATSAPP_VERIFY_TOKEN"`
	APIBase     string `yaml:"api_base" secret:"url"`
	APIVersion  string `yaml:"api_version"`
	// WebhookPath is the path of http.listen Meta posts to.
	WebhookPath string `yaml:"webhook_path"`
	// Templates are approved message templates by purpose: reminder is
	// sent in place of a message outside the 24-hour window.
	Templates map[string]Template `yaml:"templates"`
	// OutsideWindow is OutsideTemplate or OutsideDrop.
	OutsideWindow string `yaml:"outside_window"`
	// Pairing lets an unknown number ask for access with a one-time code
	// that the operator approves.
	Pairing bool `yaml:"pairing" reload:"access"`
}

// Template is an approved message template: its name and language code.
type Template struct {
	Name     string `yaml:"name"`
	Language string `yaml:"language"`
}

// Definition is the WhatsApp channel for the registry.
var Definition = channels.Definition{
	Name:      Name,
	Title:     "WhatsApp",
	NewConfig: func() channels.Section { return NewConfig() },
	Build:     build,
	Summary: func(s channels.Section) string {
		c := s.(*Config)
		out := ", webhook at " + c.WebhookPath + " (register https://YOUR-HOST" + c.WebhookPath + " with Meta)"
		if t, ok := c.Templates[ReminderTemplate]; ok && c.OutsideWindow == OutsideTemplate && t.Name != "" {
			out += ", template " + t.Name + " outside the 24-hour window"
		} else {
			out += ", messages outside the 24-hour window dropped"
		}
		return out + "; no live previews (WhatsApp has no edits)"
	},
	Doctor: doctor,
	Init: &channels.Init{
		TokenUsage:    "the WhatsApp access token of a System User (default WHATSAPP_ACCESS_TOKEN)",
		UserUsage:     "your WhatsApp number in E.164, +15551234567",
		APIFlag:       "api-base",
		APIUsage:      "another Graph API base URL",
		APIKey:        "api_base",
		TokenKey:      "access_token",
		TokenQuestion: "WhatsApp access token (a System User's, with whatsapp_business_messaging)",
		UserQuestion:  "Your WhatsApp number in E.164, +15551234567 (Enter: pairing codes instead)",
		UserID:        numberRE,
		More: []channels.InitSecret{
			{Key: "phone_number_id", Flag: "phone-number-id", Plain: true,
				Usage:    "the WhatsApp phone number id (WhatsApp → API Setup), not the number",
				Question: "WhatsApp phone number id (digits, under WhatsApp → API Setup; not the number)"},
			{Key: "app_secret", Flag: "app-secret",
				Usage:    "the Meta app's App Secret, which signs the webhook (default WHATSAPP_APP_SECRET)",
				Question: "Meta App Secret (App settings → Basic), which signs the webhook"},
			{Key: "verify_token", Flag: "verify-token",
				Usage:    "a random string for the webhook's Verify token (default WHATSAPP_VERIFY_TOKEN)",
				Question: "Webhook verify token (a random string you also enter with Meta)"},
		},
		Apply: func(s channels.Section, a channels.InitAnswers) {
			s.(*Config).Pairing = len(a.Users) == 0
		},
		Extra: func(a channels.InitAnswers) string {
			if len(a.Users) > 0 {
				return ""
			}
			return "    # A stranger writing to the number gets a one-time code for\n    # `switchboard pairing approve CODE`.\n    pairing: true\n"
		},
		NextSteps: func(a channels.InitAnswers, arg string) string {
			s := "WhatsApp: Meta posts to " + DefaultWebhookPath + " on http.listen; put an HTTPS reverse proxy\n" +
				"  in front of it and register https://YOUR-HOST" + DefaultWebhookPath + " as the webhook's Callback\n" +
				"  URL with the verify token, subscribed to messages (docs/operations.md, \"WhatsApp\").\n"
			if len(a.Users) == 0 {
				s += fmt.Sprintf("  Write to the number; it answers with a pairing code. Admit yourself\n  with: switchboard pairing approve CODE%s\n", arg)
			}
			return s
		},
	},
}

// NewConfig returns the section with its defaults: Meta's Graph API, the
// webhook at /whatsapp/webhook, the reminder template outside the window,
// and no previews or progress line (WhatsApp cannot edit a message).
func NewConfig() *Config {
	return &Config{APIBase: DefaultAPIBase, APIVersion: DefaultAPIVersion, WebhookPath: DefaultWebhookPath,
		OutsideWindow: OutsideTemplate, Templates: map[string]Template{}}
}

// Access is the admission rule from the allowlists, the numbers without
// their leading +: WhatsApp names a user by wa_id, digits only.
func (c *Config) Access() channels.Access {
	return channels.Access{Users: numbers(c.AllowUsers), Pairing: c.Pairing, Admins: numbers(c.Admins)}
}

// numbers returns list with each phone number's + and spaces removed.
func numbers(list []string) []string {
	out := make([]string, 0, len(list))
	for _, n := range list {
		out = append(out, normalNumber(n))
	}
	return out
}

// normalNumber is a number as WhatsApp's wa_id writes it: "+49 151 2345"
// is "491512345". "*" stays.
func normalNumber(n string) string {
	n = strings.TrimSpace(n)
	if n == "*" {
		return n
	}
	n = strings.TrimPrefix(n, "+")
	return strings.NewReplacer(" ", "", "-", "").Replace(n)
}

var (
	numberRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\+?[1-9][0-9]{6,14}$`) })
	idRE      = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{5,30}$`) })
	versionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^v[0-9]+\.[0-9]+$`) })
	pathRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^/[A-Za-z0-9._~/-]*$`) })
	langRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z]{2,3}(_[A-Za-z]{2,4})?$`) })
)

// Validate checks an enabled section.
func (c *Config) Validate(key string, v channels.Checker) {
	if !c.Enabled {
		return
	}
	if !idRE().MatchString(c.PhoneNumberID) {
		v.AddNear(key+".phone_number_id", key+".enabled", fmt.Sprintf("%q is not a phone number id: the digits Meta shows under WhatsApp → API Setup (not the phone number)", c.PhoneNumberID))
	}
	for _, s := range []struct{ key, val, env, what string }{
		{"access_token", c.AccessToken, "WHATSAPP_ACCESS_TOKEN", "a System User's access token with whatsapp_business_messaging"},
		{"app_secret", c.AppSecret, "WHATSAPP_APP_SECRET", "the Meta app's App Secret (App settings → Basic), which signs the webhook"},
		{"verify_token", c.VerifyToken, "WHATSAPP_VERIFY_TOKEN", "a random string you also enter as the webhook's Verify token"},
	} {
		if strings.TrimSpace(s.val) == "" {
			v.AddNear(key+"."+s.key, key+".enabled", fmt.Sprintf("required when %s.enabled is true; set it or %s (%s)", key, s.env, s.what))
		}
	}
	v.URL(key+".api_base", c.APIBase, []string{"http", "https"}, DefaultAPIBase)
	if !versionRE().MatchString(c.APIVersion) {
		v.Add(key+".api_version", fmt.Sprintf("%q is not a Graph API version such as %s", c.APIVersion, DefaultAPIVersion))
	}
	switch {
	case !pathRE().MatchString(c.WebhookPath) || c.WebhookPath == "/":
		v.Add(key+".webhook_path", fmt.Sprintf("%q must be a path below the root of http.listen, such as %s", c.WebhookPath, DefaultWebhookPath))
	case strings.HasPrefix(c.WebhookPath, "/v1/") || slices.Contains([]string{"/healthz", "/readyz", "/metrics", "/login"}, c.WebhookPath):
		v.Add(key+".webhook_path", fmt.Sprintf("%q is one of the gateway's own routes; use another path, such as %s", c.WebhookPath, DefaultWebhookPath))
	}
	if !v.HTTPServed() {
		v.AddNear(key+".webhook_path", "http.listen", "needs http.listen: Meta posts WhatsApp messages to this path on the gateway's HTTP server; set http.listen (behind an HTTPS reverse proxy, see docs/operations.md)")
	}
	if c.OutsideWindow != OutsideTemplate && c.OutsideWindow != OutsideDrop {
		v.Add(key+".outside_window", fmt.Sprintf("%q must be %q or %q", c.OutsideWindow, OutsideTemplate, OutsideDrop))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Templates)) {
		t := c.Templates[name]
		if strings.TrimSpace(t.Name) == "" {
			v.Add(key+".templates."+name+".name", "required: the template's name as approved in WhatsApp Manager")
		}
		if !langRE().MatchString(t.Language) {
			v.Add(key+".templates."+name+".language", fmt.Sprintf("%q is not a template language code such as en or en_US", t.Language))
		}
	}
	phones(v, key+".allow_users", c.AllowUsers, true)
	phones(v, key+".admins", c.Admins, false)
}

func phones(v channels.Checker, key string, list []string, star bool) {
	for i, n := range list {
		if (star && n == "*") || numberRE().MatchString(normalNumber(n)) || numberRE().MatchString(strings.TrimSpace(n)) {
			continue
		}
		v.Add(fmt.Sprintf("%s[%d]", key, i), fmt.Sprintf("%q is not a phone number in E.164, such as \"+15551234567\" (country code, then the number)", n))
	}
}

// Warnings notes an enabled section that admits nobody, previews that
// cannot apply, and a window without a template.
func (c *Config) Warnings(key string, note func(key, fallback, msg string)) {
	if !c.Enabled {
		return
	}
	if len(c.AllowUsers) == 0 && len(c.Admins) == 0 && !c.Pairing {
		note(key+".allow_users", key+".enabled", "is empty, so the bot admits nobody on WhatsApp; add phone numbers in E.164 or turn pairing on")
	}
	if c.StreamPreview || c.ShowToolProgress {
		note(key+".stream_preview", key+".enabled", "does not apply: WhatsApp cannot edit a message, so replies arrive whole and no progress line is shown")
	}
	if t := c.Templates[ReminderTemplate]; c.OutsideWindow == OutsideTemplate && t.Name == "" {
		note(key+".templates", key+".outside_window", "has no reminder template: a reply or job outside the 24-hour window is dropped with an ERROR; set templates.reminder, or outside_window: drop to say so")
	}
}

// build prepares the adapter.
func build(s channels.Section, env channels.BuildEnv) channels.Launch {
	c := s.(*Config)
	o := Options{
		PhoneNumberID: c.PhoneNumberID, AccessToken: c.AccessToken, AppSecret: c.AppSecret, VerifyToken: c.VerifyToken,
		APIBase: c.APIBase, APIVersion: c.APIVersion, WebhookPath: c.WebhookPath, Logger: env.Logger,
		LatestInboundAt: env.LatestInboundAt, OnStatus: env.OnDeliveryStatus, RecordStatus: env.RecordDeliveryStatus,
	}
	if t, ok := c.Templates[ReminderTemplate]; ok && c.OutsideWindow == OutsideTemplate && t.Name != "" {
		o.Reminder = &t
	}
	if env.DownloadTransport != nil {
		o.DownloadTransport = env.DownloadTransport(c.APIBase, DefaultAPIBase)
	}
	return channels.Launch{Build: func(context.Context) (channels.Channel, error) { return newChannel(o) }}
}

// newChannel is New as a channels.Channel (nil, not a nil *Adapter, on
// an error).
func newChannel(o Options) (channels.Channel, error) {
	if a, err := New(o); err == nil {
		return a, nil
	} else {
		return nil, err
	}
}

// doctor tries the access token on the phone number id, and says which
// URL to register as the webhook.
func doctor(ctx context.Context, s channels.Section, get channels.Getter) channels.Check {
	c := s.(*Config)
	u, err := url.JoinPath(c.APIBase, c.APIVersion, c.PhoneNumberID)
	if err != nil {
		return channels.Check{Failed: true, Message: "phone number: " + err.Error(), Fix: "check channels.whatsapp.api_base"}
	}
	u += "?fields=display_phone_number,verified_name,quality_rating"
	var phone struct {
		DisplayPhoneNumber string `json:"display_phone_number"`
		VerifiedName       string `json:"verified_name"`
		QualityRating      string `json:"quality_rating"`
	}
	code, err := get(ctx, u, http.Header{"Authorization": {"Bearer " + c.AccessToken}}, &phone, c.AccessToken, c.AppSecret)
	fixToken := "set channels.whatsapp.access_token or WHATSAPP_ACCESS_TOKEN to a System User token with whatsapp_business_messaging (Business settings → System users → Generate new token)"
	switch {
	case err != nil:
		return channels.Check{Failed: true, Message: "phone number: " + err.Error(), Fix: "check that " + c.APIBase + " is reachable from this machine"}
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return channels.Check{Failed: true, Message: fmt.Sprintf("phone number: the access token was refused (status %d)", code), Fix: fixToken}
	case code == http.StatusBadRequest || code == http.StatusNotFound:
		return channels.Check{Failed: true, Message: fmt.Sprintf("phone number %s: not found for this token (status %d)", c.PhoneNumberID, code),
			Fix: "set channels.whatsapp.phone_number_id to the Phone number ID under WhatsApp → API Setup, and give the token's System User that WhatsApp account"}
	case code != http.StatusOK:
		return channels.Check{Failed: true, Message: fmt.Sprintf("phone number: status %d", code), Fix: "try again later; if it persists, check channels.whatsapp.api_base"}
	}
	msg := fmt.Sprintf("access token works: %s (%s", phone.DisplayPhoneNumber, phone.VerifiedName)
	if phone.QualityRating != "" {
		msg += ", quality " + phone.QualityRating
	}
	msg += "); register https://YOUR-HOST" + c.WebhookPath + " as the webhook's Callback URL (a public HTTPS name of a reverse proxy in front of http.listen; see docs/operations.md), with the verify token, and subscribe to the messages field"
	return channels.Check{Message: msg}
}

// Config is the platform's section of the configuration.
var _ channels.Section = (*Config)(nil)
