package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// placeConfig writes a configuration with model name at path.
func placeConfig(t *testing.T, path, model string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("llm:\n  model: "+model+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// lookupDirs sets up a home, an XDG_CONFIG_HOME (if xdg), a system
// configuration path and a working directory, all empty, and returns them.
func lookupDirs(t *testing.T, xdg bool) (home, userFile, sysFile, cwd string) {
	t.Helper()
	root := t.TempDir()
	home, cwd = filepath.Join(root, "home"), filepath.Join(root, "work")
	for _, d := range []string{home, cwd} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	userFile = filepath.Join(home, ".config", "switchboard", "config.yaml")
	t.Setenv("XDG_CONFIG_HOME", "")
	if xdg {
		t.Setenv("XDG_CONFIG_HOME", filepath.Join(root, "xdg"))
		userFile = filepath.Join(root, "xdg", "switchboard", "config.yaml")
	}
	old := systemConfig
	systemConfig = filepath.Join(root, "etc", "switchboard", "config.yaml")
	t.Cleanup(func() { systemConfig = old })
	t.Chdir(cwd)
	return home, userFile, systemConfig, cwd
}

// Without --config: ./config.yaml, then the user's configuration
// directory, then /etc/switchboard; none: no file.
func TestLookupOrder(t *testing.T) {
	tests := []struct {
		name           string
		xdg            bool
		cwd, user, sys bool
		want           string // "cwd", "user", "sys" or ""
	}{
		{"nothing", false, false, false, false, ""},
		{"system only", false, false, false, true, "sys"},
		{"user (~/.config) before system", false, false, true, true, "user"},
		{"user ($XDG_CONFIG_HOME) before system", true, false, true, true, "user"},
		{"working directory first", true, true, true, true, "cwd"},
		{"working directory before system", false, true, false, true, "cwd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, userFile, sysFile, _ := lookupDirs(t, tt.xdg)
			files := map[string]string{"cwd": "config.yaml", "user": userFile, "sys": sysFile}
			for name, on := range map[string]bool{"cwd": tt.cwd, "user": tt.user, "sys": tt.sys} {
				if on {
					placeConfig(t, files[name], name)
				}
			}
			if got := lookupConfig(); got != files[tt.want] {
				t.Errorf("lookupConfig() = %q, want %q", got, files[tt.want])
			}
		})
	}
}

// The commands use what the lookup finds, with the database beside it; an
// explicit --config (even "") is not looked up; init writes ./config.yaml.
func TestLookupCommands(t *testing.T) {
	for _, k := range []string{"OPENAI_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"} {
		t.Setenv(k, "")
	}
	_, userFile, _, cwd := lookupDirs(t, false)
	placeConfig(t, userFile, "from-user-dir")

	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"check"}, strings.NewReader(""), &out, &errb); code != ExitOK ||
		!strings.Contains(out.String(), "model     from-user-dir at") ||
		!strings.Contains(out.String(), "store     "+filepath.Join(filepath.Dir(userFile), "switchboard.db")+" will be created") {
		t.Fatalf("check without --config: exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}

	out.Reset()
	t.Setenv("OPENAI_MODEL", "from-env")
	if code := run(t.Context(), []string{"check", "--config", ""}, strings.NewReader(""), &out, &errb); code != ExitOK ||
		!strings.Contains(out.String(), "model     from-env at") || !strings.Contains(out.String(), "store     switchboard.db will be created") {
		t.Fatalf("check --config '': exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}

	out.Reset()
	if code := run(t.Context(), []string{"init", "--non-interactive", "--no-check", "--model", "m"}, strings.NewReader(""), &out, &errb); code != ExitOK {
		t.Fatalf("init: exit %d\nstderr: %s", code, errb.String())
	}
	if _, err := os.Stat(filepath.Join(cwd, "config.yaml")); err != nil {
		t.Fatalf("init did not write ./config.yaml: %v", err)
	}
	out.Reset()
	if code := run(t.Context(), []string{"check"}, strings.NewReader(""), &out, &errb); code != ExitOK ||
		!strings.Contains(out.String(), "model     m at ") {
		t.Fatalf("check after init: exit %d\nstdout: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "store     switchboard.db will be created") {
		t.Errorf("a configuration in the working directory keeps its database there as before:\n%s", out.String())
	}
}

// With no file anywhere, check and doctor say so and where they looked,
// rather than naming a ./config.yaml that does not exist.
func TestNoConfigFileSaysWhereItLooked(t *testing.T) {
	_, userFile, sysFile, _ := lookupDirs(t, false)
	t.Setenv("OPENAI_MODEL", "m")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1") // doctor's probe stays on this machine
	for _, cmd := range []string{"check", "doctor"} {
		var out, errb bytes.Buffer
		run(t.Context(), []string{cmd}, strings.NewReader(""), &out, &errb)
		first, _, _ := strings.Cut(out.String(), "\n")
		if !strings.Contains(first, "no configuration file (looked for config.yaml, "+userFile+", "+sysFile+")") {
			t.Errorf("%s's first line = %q; want where it looked", cmd, first)
		}
	}
}
