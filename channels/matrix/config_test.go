package matrix_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/channels/matrix"
	"github.com/switchboard-gateway/switchboard/config"
)

// validate loads a configuration whose channels.matrix section is section
// and validates it.
func validate(t *testing.T, section string) error {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "llm: {base_url: \"http://127.0.0.1:1/v1\", api_key: sk-test-0123456789, model: m}\n")
	fmt.Fprintf(&b, "store: {path: %q}\n", filepath.Join(dir, "sb.db"))
	b.WriteString("channels:\n  matrix:\n" + section)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	return cfg.Validate()
}

const okSection = "    enabled: true\n    homeserver: https://matrix.example.org\n    user_id: \"@bot:example.org\"\n    access_token: syt_abc\n    encryption: false\n    allow_users: [\"@alice:example.org\"]\n"

func TestConfigValidate(t *testing.T) {
	for _, env := range []string{"MATRIX_ACCESS_TOKEN", "MATRIX_PASSWORD", "MATRIX_PICKLE_KEY"} {
		t.Setenv(env, "")
	}
	for _, tc := range []struct {
		name, section string
		want          []string // substrings of the error; none: valid
	}{
		{"valid", okSection, nil},
		{"password instead of a token", strings.Replace(okSection, "access_token: syt_abc", "password: hunter22", 1), nil},
		{"with a port and pairing servers", okSection + "    admins: [\"@op:localhost:8448\"]\n    pairing: true\n    allow_servers: [example.org, \"localhost:8448\"]\n", nil},
		{"disabled is not checked", "    enabled: false\n    user_id: nonsense\n", nil},
		{"no login", strings.Replace(okSection, "    access_token: syt_abc\n", "", 1), []string{"channels.matrix.access_token", "MATRIX_ACCESS_TOKEN", "password"}},
		{"bad user id", strings.Replace(okSection, `"@bot:example.org"`, "bot", 1), []string{"channels.matrix.user_id", "@bot:example.org"}},
		{"bad homeserver", strings.Replace(okSection, "https://matrix.example.org", "matrix.example.org", 1), []string{"channels.matrix.homeserver"}},
		{"bad allowlists", okSection + "    admins: [alice]\n    allow_servers: [\"https://x\"]\n", []string{"admins[0]", "allow_servers[0]"}},
		{"bad device", okSection + "    device_id: \"a b\"\n", []string{"device_id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validate(t, tc.section)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %v", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// Encryption (the default) is refused by a binary without the goolm tag,
// at validation, with the fix; with the tag it is valid.
func TestEncryptionNeedsTheBuildTag(t *testing.T) {
	t.Setenv("MATRIX_ACCESS_TOKEN", "")
	err := validate(t, strings.Replace(okSection, "    encryption: false\n", "", 1))
	switch {
	case matrix.CryptoBuilt && err != nil:
		t.Fatalf("built with goolm: %v", err)
	case !matrix.CryptoBuilt && (err == nil || !strings.Contains(err.Error(), "-tags goolm") || !strings.Contains(err.Error(), "encryption: false")):
		t.Fatalf("built without goolm: err = %v, want the fix", err)
	}
}
