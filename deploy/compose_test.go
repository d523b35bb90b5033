// Package deploy holds no code: its tests check the deployment files
// (compose.yaml here) with the parsers that read them.
package deploy

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// documentedEnv is the .env compose.yaml's header tells the operator to
// write for the single instance: its "#   NAME=value" lines before
// "then: docker compose up -d".
func documentedEnv(t *testing.T, compose []byte) []string {
	t.Helper()
	line := regexp.MustCompile(`^#\s+([A-Z][A-Z0-9_]*)=`)
	var env []string
	sc := bufio.NewScanner(strings.NewReader(string(compose)))
	for sc.Scan() {
		if strings.Contains(sc.Text(), "docker compose up -d") {
			break
		}
		if m := line.FindStringSubmatch(sc.Text()); m != nil {
			env = append(env, m[1]+"=x-"+strings.ToLower(m[1]))
		}
	}
	if !slices.ContainsFunc(env, func(s string) bool { return strings.HasPrefix(s, "SWITCHBOARD_HTTP_TOKEN=") }) {
		t.Fatalf("compose.yaml's header documents no SWITCHBOARD_HTTP_TOKEN in .env; found %v", env)
	}
	return env
}

// loadCompose loads compose.yaml as `docker compose [--profile P] config`
// does: copied beside a .env of the given lines (Compose reads the .env of
// the project directory), interpolated with the reference implementation's
// rules (github.com/compose-spec/compose-go, which Docker Compose v2 uses),
// with no variable from this process's environment.
func loadCompose(t *testing.T, env []string, profiles ...string) (*types.Project, error) {
	t.Helper()
	src, err := os.ReadFile("../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte(strings.Join(env, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(dir, "compose.yaml")},
		cli.WithName("switchboard"), cli.WithWorkingDirectory(dir), cli.WithEnvFiles(), cli.WithDotEnv, cli.WithProfiles(profiles))
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

// TestComposeSingleInstance: `docker compose up -d` with only the .env the
// header documents resolves, and starts the gateway alone. Compose
// interpolates the whole file before it applies profiles, so a required
// variable (${X:?…}) anywhere, even in a service of a profile not asked
// for, would stop it.
func TestComposeSingleInstance(t *testing.T) {
	src, err := os.ReadFile("../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := loadCompose(t, documentedEnv(t, src))
	if err != nil {
		t.Fatalf("docker compose up -d with the documented .env fails: %v", err)
	}
	if got := p.ServiceNames(); !slices.Equal(got, []string{"switchboard"}) {
		t.Errorf("services started = %v, want [switchboard]", got)
	}
	sb, err := p.GetService("switchboard")
	if err != nil {
		t.Fatal(err)
	}
	if tok := sb.Environment["SWITCHBOARD_HTTP_TOKEN"]; tok == nil || *tok != "x-switchboard_http_token" {
		t.Errorf("SWITCHBOARD_HTTP_TOKEN in the container = %v, want the .env's", tok)
	}
	if len(sb.Ports) != 1 || sb.Ports[0].HostIP != "127.0.0.1" || sb.Ports[0].Published != "8080" {
		t.Errorf("ports = %+v, want 127.0.0.1:8080 only", sb.Ports)
	}
}

// TestComposeNeedsHTTPToken: without SWITCHBOARD_HTTP_TOKEN Compose
// refuses with the message that names it (the gateway listens on every
// address inside the container).
func TestComposeNeedsHTTPToken(t *testing.T) {
	_, err := loadCompose(t, []string{"OPENAI_API_KEY=sk-x", "OPENAI_MODEL=m"})
	if err == nil || !strings.Contains(err.Error(), "set SWITCHBOARD_HTTP_TOKEN in .env") {
		t.Fatalf("err = %v, want the required SWITCHBOARD_HTTP_TOKEN named", err)
	}
}

// TestComposeReplicas: the replicas profile with the .env lines the header
// adds starts PostgreSQL with the password and the gateway on three ports.
func TestComposeReplicas(t *testing.T) {
	src, err := os.ReadFile("../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := append(documentedEnv(t, src), "SWITCHBOARD_STORE_DRIVER=postgres", "SWITCHBOARD_DB_PASSWORD=abc123", "SWITCHBOARD_HTTP_PORTS=8080-8082")
	p, err := loadCompose(t, env, "replicas")
	if err != nil {
		t.Fatalf("docker compose --profile replicas: %v", err)
	}
	if got := p.ServiceNames(); !slices.Equal(got, []string{"postgres", "switchboard"}) {
		t.Errorf("services = %v, want postgres and switchboard", got)
	}
	pg, err := p.GetService("postgres")
	if err != nil {
		t.Fatal(err)
	}
	if pw := pg.Environment["POSTGRES_PASSWORD"]; pw == nil || *pw != "abc123" {
		t.Errorf("POSTGRES_PASSWORD = %v, want the .env's", pw)
	}
	sb, _ := p.GetService("switchboard")
	if len(sb.Ports) != 1 || sb.Ports[0].Published != "8080-8082" {
		t.Errorf("ports = %+v, want 8080-8082", sb.Ports)
	}
}
