package cli

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/switchboard-gateway/switchboard/config"
)

// systemConfig is the last place lookupConfig looks (a variable so that
// tests can move it).
var systemConfig = "/etc/switchboard/config.yaml"

// configCandidates lists, in order, where a configuration is looked for
// when --config is not given: ./config.yaml, the user's configuration
// directory (os.UserConfigDir: $XDG_CONFIG_HOME or ~/.config on Linux,
// ~/Library/Application Support on macOS), then /etc/switchboard.
func configCandidates() []string {
	list := []string{config.DefaultPath}
	if dir, err := os.UserConfigDir(); err == nil {
		list = append(list, filepath.Join(dir, "switchboard", config.DefaultPath))
	}
	return append(list, systemConfig)
}

// lookupConfig returns the first candidate that exists (one that cannot be
// read counts: loading it then says why), or "" when there is none, which
// config.Load takes as the built-in defaults and the environment.
func lookupConfig() string {
	for _, p := range configCandidates() {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			return p
		}
	}
	return ""
}

// configGiven reports whether the command line set --config (an empty
// --config "" means ./config.yaml if it exists, else no file: no lookup).
func configGiven(fs *flag.FlagSet) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "config" })
	return given
}
