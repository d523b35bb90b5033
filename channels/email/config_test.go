package email_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/email"
	"github.com/switchboard-gateway/switchboard/config"
)

// validate loads a configuration whose channels.email section is section
// and validates it.
func validate(t *testing.T, section string) (*config.Config, error) {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "llm: {base_url: \"http://127.0.0.1:1/v1\", api_key: sk-test-0123456789, model: m}\n")
	fmt.Fprintf(&b, "store: {path: %q}\n", filepath.Join(dir, "sb.db"))
	b.WriteString("channels:\n  email:\n" + section)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	return cfg, cfg.Validate()
}

const okSection = "    enabled: true\n    imap: {address: \"mail.example.org:993\"}\n    smtp: {address: \"mail.example.org:587\", tls: starttls}\n" +
	"    username: bot\n    password: pw\n    address: bot@example.org\n    allow_senders: [\"alice@example.org\", \"@example.com\"]\n"

// with is okSection with key's line replaced by (or added as) "key: value".
func with(kv ...string) string {
	lines := strings.SplitAfter(okSection, "\n")
	for i := 0; i+1 < len(kv); i += 2 {
		line := "    " + kv[i] + ": " + kv[i+1] + "\n"
		found := false
		for j, l := range lines {
			if strings.HasPrefix(l, "    "+kv[i]+":") {
				lines[j], found = line, true
				if kv[i+1] == "" {
					lines[j] = ""
				}
			}
		}
		if !found {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "")
}

func TestConfigValidate(t *testing.T) {
	t.Setenv("EMAIL_PASSWORD", "")
	for _, tc := range []struct {
		name, section string
		want          []string // substrings of the error; none: valid
	}{
		{"valid", okSection, nil},
		{"disabled is not checked", "    enabled: false\n    imap: {tls: nonsense}\n", nil},
		{"nothing set", "    enabled: true\n", []string{"imap.address", "smtp.address", "username", "password", "EMAIL_PASSWORD", "channels.email.address"}},
		{"plain text to another host", with("imap", `{address: "mail.example.org:143", tls: none}`), []string{"imap.tls", "loopback"}},
		{"unknown tls mode", with("smtp", `{address: "mail.example.org:25", tls: ssl}`), []string{"smtp.tls", "tls, starttls or none"}},
		{"no port", with("imap", `{address: "mail.example.org"}`), []string{"imap.address", "host:port"}},
		{"bad senders", with("allow_senders", `["alice", "@localhost"]`, "admins", `["@example.org"]`),
			[]string{"allow_senders[0]", "allow_senders[1]", "admins[0]"}},
		{"bad resolver", okSection + "    dkim_resolver: \"8.8.8.8\"\n", []string{"dkim_resolver"}},
		{"bad poll interval", okSection + "    poll_interval: 0s\n", []string{"poll_interval"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := validate(t, tc.section)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	// The loopback exception, and the password from the environment.
	t.Setenv("EMAIL_PASSWORD", "from-env")
	cfg, err := validate(t, with("password", "", "imap", `{address: "127.0.0.1:1143", tls: none}`))
	if err != nil {
		t.Fatal(err)
	}
	c := channels.SectionOf[*email.Config](cfg.Channels.Sections)
	if c.Password != "from-env" || !c.RequireAuthenticatedSender || c.Mailbox != "INBOX" {
		t.Errorf("password %q, require_authenticated_sender %v, mailbox %q", c.Password, c.RequireAuthenticatedSender, c.Mailbox)
	}
}

// allow_senders admits addresses in any case and whole domains.
func TestAccess(t *testing.T) {
	c := email.NewConfig()
	c.AllowSenders = []string{"Alice@Example.org", "@example.com"}
	c.Admins = []string{"root@example.net"}
	acc := c.Access()
	for _, tc := range []struct {
		user, domain string
		want         bool
	}{
		{"alice@example.org", "example.org", true},
		{"bob@example.org", "example.org", false},
		{"carol@example.com", "example.com", true},
		{"carol@sub.example.com", "sub.example.com", false},
		{"root@example.net", "example.net", true},
	} {
		in := channels.Inbound{Channel: "email", ChatType: channels.DM, UserID: tc.user, UserName: tc.domain}
		if got := acc.Allows(in); got != tc.want {
			t.Errorf("Allows(%s) = %v, want %v", tc.user, got, tc.want)
		}
	}
}
