package email

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
)

// Name is the channel's name: its configuration key and stored name.
const Name = "email"

// DefaultPollInterval is how often a mailbox is scanned when the server
// has no IDLE, and how often an IDLE is renewed: a minute keeps replies
// prompt without loading the server.
const DefaultPollInterval = time.Minute

// Config is the channels.email section.
type Config struct {
	// allow_users (like allow_senders) and admins: mail addresses.
	channels.Common `yaml:",inline"`

	IMAP Server `yaml:"imap"`
	SMTP Server `yaml:"smtp"`
	// Username and Password log in to both servers.
	Username string `yaml:"username"`
	Password string `yaml:"password" secret:"true" env:"EMAIL_PASSWORD"`
	// Address is the bot's own address (From: of its replies).
	Address string `yaml:"address"`
	// Mailbox is the folder read; INBOX by default.
	Mailbox string `yaml:"mailbox"`
	// AllowSenders are addresses, or @domain for a whole domain.
	AllowSenders []string `yaml:"allow_senders" reload:"access"`
	// RequireAuthenticatedSender admits only mail whose From: domain
	// vouches for it (DKIM, or the trusted server's Authentication-Results).
	RequireAuthenticatedSender bool `yaml:"require_authenticated_sender"`
	// TrustedAuthservID is the authserv-id of the receiving server whose
	// Authentication-Results are believed (the first word of the header).
	TrustedAuthservID string `yaml:"trusted_authserv_id"`
	// DKIMResolver is a DNS server (host:port) for DKIM keys; empty: the
	// system's resolver.
	DKIMResolver string        `yaml:"dkim_resolver"`
	PollInterval time.Duration `yaml:"poll_interval"`
	// Pairing lets a proven stranger ask for access with a one-time code.
	Pairing bool `yaml:"pairing" reload:"access"`
}

// Server is a mail server's address and TLS mode.
type Server struct {
	Address string `yaml:"address"` // host:port
	TLS     string `yaml:"tls"`     // tls, starttls or none
}

// Definition is the email channel for the registry.
var Definition = channels.Definition{
	Name:      Name,
	Title:     "Email",
	NewConfig: func() channels.Section { return NewConfig() },
	Build:     build,
	Summary: func(s channels.Section) string {
		c := s.(*Config)
		out := ", mailbox " + c.Mailbox + " of " + c.Address
		if c.RequireAuthenticatedSender {
			out += ", senders proven by DKIM"
			if c.TrustedAuthservID != "" {
				out += " or " + c.TrustedAuthservID + "'s Authentication-Results"
			}
		} else {
			out += ", senders NOT proven (anyone can write any From:)"
		}
		return out + "; no live previews (mail cannot be edited)"
	},
	Doctor: doctor,
}

// NewConfig returns the section with its defaults: implicit TLS on both
// servers, INBOX, proven senders only, a poll every minute.
func NewConfig() *Config {
	return &Config{IMAP: Server{TLS: TLSImplicit}, SMTP: Server{TLS: TLSImplicit}, Mailbox: "INBOX",
		RequireAuthenticatedSender: true, PollInterval: DefaultPollInterval}
}

// Access is the admission rule: addresses in lower case, and "@domain"
// entries, which match the sender's domain (Inbound.UserName).
func (c *Config) Access() channels.Access {
	return channels.Access{Users: lower(append(append([]string(nil), c.AllowUsers...), c.AllowSenders...)),
		Pairing: c.Pairing, Admins: lower(c.Admins)}
}

func lower(list []string) []string {
	out := make([]string, 0, len(list))
	for _, s := range list {
		out = append(out, strings.ToLower(strings.TrimSpace(s)))
	}
	return out
}

// Validate checks an enabled section.
func (c *Config) Validate(key string, v channels.Checker) {
	if !c.Enabled {
		return
	}
	for _, s := range []struct {
		name string
		srv  Server
		eg   string
	}{{"imap", c.IMAP, "mail.example.org:993"}, {"smtp", c.SMTP, "mail.example.org:465"}} {
		if strings.TrimSpace(s.srv.Address) == "" {
			v.AddNear(key+"."+s.name+".address", key+".enabled", fmt.Sprintf("required when %s.enabled is true: the %s server as host:port, such as %s", key, strings.ToUpper(s.name), s.eg))
		} else if err := checkServer(s.srv.Address, s.srv.TLS); err != nil {
			k := ".address"
			if strings.Contains(err.Error(), "TLS mode") {
				k = ".tls"
			}
			v.Add(key+"."+s.name+k, err.Error())
		}
	}
	v.NotEmpty(key+".username", c.Username, "the login of the bot's mailbox")
	if c.Password == "" {
		v.AddNear(key+".password", key+".enabled", fmt.Sprintf("required when %s.enabled is true; set it or EMAIL_PASSWORD", key))
	}
	if !validAddress(c.Address) {
		v.AddNear(key+".address", key+".enabled", fmt.Sprintf("%q is not the bot's mail address, such as bot@example.org", c.Address))
	}
	v.NotEmpty(key+".mailbox", c.Mailbox, "the folder read, such as INBOX")
	v.PositiveDuration(key+".poll_interval", c.PollInterval, "1m")
	if c.DKIMResolver != "" {
		if err := checkServer(c.DKIMResolver, TLSImplicit); err != nil {
			v.Add(key+".dkim_resolver", fmt.Sprintf("%q is not a DNS server as host:port, such as 127.0.0.1:53", c.DKIMResolver))
		}
	}
	for _, l := range []struct {
		key  string
		list []string
	}{{"allow_users", c.AllowUsers}, {"allow_senders", c.AllowSenders}, {"admins", c.Admins}} {
		for i, s := range l.list {
			s = strings.TrimSpace(s)
			domain, isDomain := strings.CutPrefix(s, "@")
			switch {
			case s == "*" && l.key != "admins":
			case isDomain && l.key != "admins" && strings.Contains(domain, ".") && !strings.Contains(domain, "@"):
			case validAddress(s) && strings.Count(s, "@") == 1:
			default:
				v.Add(fmt.Sprintf("%s.%s[%d]", key, l.key, i), fmt.Sprintf("%q is not a mail address (alice@example.org) or, except in admins, a domain (@example.org)", s))
			}
		}
	}
}

// Warnings notes an enabled section that admits nobody, senders that are
// not proven, and previews that cannot apply.
func (c *Config) Warnings(key string, note func(key, fallback, msg string)) {
	if !c.Enabled {
		return
	}
	if len(c.AllowUsers)+len(c.AllowSenders)+len(c.Admins) == 0 && !c.Pairing {
		note(key+".allow_senders", key+".enabled", "is empty, so the bot answers no mail; add addresses or @domain, or turn pairing on")
	}
	if !c.RequireAuthenticatedSender {
		note(key+".require_authenticated_sender", key+".enabled", "is false: anyone can write any From: address, so allow_senders admits whoever types one of them")
	}
	if c.StreamPreview || c.ShowToolProgress {
		note(key+".stream_preview", key+".enabled", "does not apply: a mail cannot be edited, so replies arrive whole and no progress line is shown")
	}
}

// options are the adapter's options from the section.
func (c *Config) options(env channels.BuildEnv) Options {
	return Options{IMAPAddr: c.IMAP.Address, IMAPTLS: c.IMAP.TLS, SMTPAddr: c.SMTP.Address, SMTPTLS: c.SMTP.TLS,
		Username: c.Username, Password: c.Password, Address: c.Address, Mailbox: c.Mailbox,
		AllowUnauthenticated: !c.RequireAuthenticatedSender, TrustedAuthservID: c.TrustedAuthservID,
		DKIMResolver: c.DKIMResolver, PollInterval: c.PollInterval, Logger: env.Logger}
}

// build prepares the adapter.
func build(s channels.Section, env channels.BuildEnv) channels.Launch {
	o := s.(*Config).options(env)
	return channels.Launch{Build: func(context.Context) (channels.Channel, error) {
		if a, err := New(o); err == nil {
			return a, nil
		} else {
			return nil, err
		}
	}}
}

// doctor logs in to both servers and names the one that fails.
func doctor(ctx context.Context, s channels.Section, _ channels.Getter) channels.Check {
	c := s.(*Config)
	a, err := New(c.options(channels.BuildEnv{}))
	if err != nil {
		return channels.Check{Failed: true, Message: err.Error(), Fix: "check channels.email"}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ic, err := a.dialIMAP(ctx)
	if err != nil {
		return channels.Check{Failed: true, Message: "IMAP: " + err.Error(),
			Fix: "check channels.email.imap (address and tls), username and password (or EMAIL_PASSWORD)"}
	}
	_, err = ic.Select(c.Mailbox, true)
	ic.Logout() //nolint:errcheck // leaving anyway
	if err != nil {
		return channels.Check{Failed: true, Message: fmt.Sprintf("IMAP: mailbox %s: %v", c.Mailbox, err), Fix: "set channels.email.mailbox to a folder of the account"}
	}
	sc, err := a.dialSMTP(ctx)
	if err != nil {
		return channels.Check{Failed: true, Message: "SMTP: " + err.Error(),
			Fix: "check channels.email.smtp (address and tls), username and password (or EMAIL_PASSWORD)"}
	}
	sc.Quit() //nolint:errcheck // only a check
	return channels.Check{Message: fmt.Sprintf("logged in to IMAP %s (mailbox %s) and SMTP %s as %s", c.IMAP.Address, c.Mailbox, c.SMTP.Address, c.Username)}
}

// Config is the platform's section of the configuration.
var _ channels.Section = (*Config)(nil)
