package whatsapp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/whatsapp"
	"github.com/switchboard-gateway/switchboard/config"
)

// validate loads a configuration whose channels.whatsapp section is
// section (and whose http.listen is listen) and validates it.
func validate(t *testing.T, listen, section string) (*config.Config, error) {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "llm: {base_url: \"http://127.0.0.1:1/v1\", api_key: sk-test-0123456789, model: m}\n")
	fmt.Fprintf(&b, "store: {path: %q}\nhttp: {listen: %q}\n", filepath.Join(dir, "sb.db"), listen)
	b.WriteString("channels:\n  whatsapp:\n" + section)
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

const okSection = "    enabled: true\n    phone_number_id: \"1000000001\"\n    access_token: EAAx\n    app_secret: s\n    verify_token: v\n    allow_users: [\"+15551234567\"]\n"

func TestConfigValidate(t *testing.T) {
	for _, env := range []string{"WHATSAPP_ACCESS_TOKEN", "WHATSAPP_APP_SECRET", "WHATSAPP_VERIFY_TOKEN"} {
		t.Setenv(env, "")
	}
	for _, tc := range []struct {
		name, listen, section string
		want                  []string // substrings of the error; none: valid
	}{
		{"valid", "127.0.0.1:8080", okSection, nil},
		{"disabled is not checked", "", "    enabled: false\n    api_version: nonsense\n", nil},
		{"no http.listen", "", okSection, []string{"channels.whatsapp.webhook_path", "needs http.listen"}},
		{"no secrets", "127.0.0.1:8080", "    enabled: true\n    phone_number_id: \"1000000001\"\n",
			[]string{"access_token", "WHATSAPP_ACCESS_TOKEN", "app_secret", "WHATSAPP_APP_SECRET", "verify_token", "WHATSAPP_VERIFY_TOKEN"}},
		{"a number as phone number id", "127.0.0.1:8080", strings.Replace(okSection, `"1000000001"`, `"+1 555 000"`, 1), []string{"phone_number_id", "API Setup"}},
		{"bad numbers", "127.0.0.1:8080", okSection + "    admins: [\"ann\", \"+0123\"]\n", []string{"admins[0]", "admins[1]", "E.164"}},
		{"bad version", "127.0.0.1:8080", okSection + "    api_version: \"23\"\n", []string{"api_version"}},
		{"bad base", "127.0.0.1:8080", okSection + "    api_base: graph.facebook.com\n", []string{"api_base"}},
		{"path on the chat API", "127.0.0.1:8080", okSection + "    webhook_path: /v1/chat/completions\n", []string{"gateway's own routes"}},
		{"path not a path", "127.0.0.1:8080", okSection + "    webhook_path: hook\n", []string{"webhook_path"}},
		{"unknown outside_window", "127.0.0.1:8080", okSection + "    outside_window: queue\n", []string{"outside_window", `"template" or "drop"`}},
		{"template without a name", "127.0.0.1:8080", okSection + "    templates: {reminder: {language: english}}\n",
			[]string{"templates.reminder.name", "templates.reminder.language"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := validate(t, tc.listen, tc.section)
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
}

func TestConfigAccessAndSecrets(t *testing.T) {
	t.Setenv("WHATSAPP_ACCESS_TOKEN", "EAA-from-env-0123456789")
	t.Setenv("WHATSAPP_APP_SECRET", "")
	t.Setenv("WHATSAPP_VERIFY_TOKEN", "")
	cfg, err := validate(t, "127.0.0.1:8080", "    enabled: true\n    phone_number_id: \"1000000001\"\n    app_secret: app-s3cret-0123\n    verify_token: verify-0123\n"+
		"    allow_users: [\"+15551234567\", \"4915112345678\"]\n    admins: [\"+44 7700 900123\"]\n    templates: {reminder: {name: reminder, language: en}}\n")
	if err != nil {
		t.Fatal(err)
	}
	sec := config.Section[*whatsapp.Config](cfg)
	if sec.AccessToken != "EAA-from-env-0123456789" {
		t.Errorf("access_token %q; want it from WHATSAPP_ACCESS_TOKEN", sec.AccessToken)
	}
	for _, s := range []string{"EAA-from-env-0123456789", "app-s3cret-0123", "verify-0123"} {
		if !slices.Contains(cfg.Secrets(), s) {
			t.Errorf("%q is not among the secrets the logs hide", s)
		}
	}
	acc := sec.Access()
	for _, tc := range []struct {
		user  string
		ok    bool
		admin bool
	}{{"15551234567", true, false}, {"4915112345678", true, false}, {"447700900123", true, true}, {"15550000000", false, false}} {
		in := channels.Inbound{Channel: whatsapp.Name, ChatID: tc.user, UserID: tc.user, ChatType: channels.DM}
		if acc.Allows(in) != tc.ok || acc.IsAdmin(in) != tc.admin {
			t.Errorf("%s: allowed %v admin %v; want %v %v", tc.user, acc.Allows(in), acc.IsAdmin(in), tc.ok, tc.admin)
		}
	}
	sum := whatsapp.Definition.Summary(sec)
	for _, w := range []string{"/whatsapp/webhook", "template reminder", "no live previews"} {
		if !strings.Contains(sum, w) {
			t.Errorf("summary %q does not say %q", sum, w)
		}
	}
}

// TestDoctor: the token is tried on the phone number id, and the answer
// names the webhook URL to register; a refused token says what to do.
func TestDoctor(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") != "Bearer EAA-good":
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"message":"Invalid OAuth access token","code":190}}`))
		case r.URL.Path != "/v23.0/1000000001" || r.URL.Query().Get("fields") == "":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"message":"Unsupported get request","code":100}}`))
		default:
			_, _ = w.Write([]byte(`{"display_phone_number":"+1 555-000-1111","verified_name":"Test Bot","quality_rating":"GREEN"}`))
		}
	}))
	t.Cleanup(srv.Close)
	get := func(ctx context.Context, u string, h http.Header, v any, secrets ...string) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return resp.StatusCode, json.NewDecoder(resp.Body).Decode(v)
		}
		return resp.StatusCode, nil
	}
	for _, tc := range []struct {
		name, token, phone string
		failed             bool
		want               string
	}{
		{"works", "EAA-good", "1000000001", false, "https://YOUR-HOST/whatsapp/webhook"},
		{"refused token", "EAA-bad", "1000000001", true, "System User token"},
		{"unknown phone id", "EAA-good", "999999999", true, "Phone number ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := whatsapp.NewConfig()
			c.Enabled, c.AccessToken, c.PhoneNumberID, c.APIBase = true, tc.token, tc.phone, srv.URL
			chk := whatsapp.Definition.Doctor(t.Context(), c, get)
			if chk.Failed != tc.failed || !strings.Contains(chk.Message+" "+chk.Fix, tc.want) {
				t.Errorf("check %+v; want failed=%v and %q", chk, tc.failed, tc.want)
			}
			if strings.Contains(chk.Message+chk.Fix, tc.token) {
				t.Errorf("the check shows the token: %+v", chk)
			}
		})
	}
}

func TestConfigWarnings(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*whatsapp.Config)
		want []string // keys noted
	}{
		{"defaults", func(*whatsapp.Config) {}, []string{"channels.whatsapp.allow_users", "channels.whatsapp.templates"}},
		{"previews asked for", func(c *whatsapp.Config) {
			c.AllowUsers, c.OutsideWindow, c.StreamPreview = []string{"+15551234567"}, whatsapp.OutsideDrop, true
		}, []string{"channels.whatsapp.stream_preview"}},
		{"all set", func(c *whatsapp.Config) {
			c.AllowUsers, c.Templates = []string{"+15551234567"}, map[string]whatsapp.Template{"reminder": {Name: "reminder", Language: "en"}}
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := whatsapp.NewConfig()
			c.Enabled = true
			tc.mod(c)
			var got []string
			c.Warnings("channels.whatsapp", func(key, _, _ string) { got = append(got, key) })
			if !slices.Equal(got, tc.want) {
				t.Errorf("noted %v, want %v", got, tc.want)
			}
		})
	}
}
