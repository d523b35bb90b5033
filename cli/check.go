package cli

import (
	"fmt"
	"io"

	"github.com/switchboard-gateway/switchboard/config"
)

// check validates the configuration, the store's path and the skills
// without the network, and prints what would run (secrets redacted): the
// same findings, severities and exit code as doctor's first part.
func check(cfg *config.Config, cfgPath string, out io.Writer) int {
	found := offlineFindings(cfg, cfgPath)
	for _, f := range found {
		printFinding(out, f)
	}
	if n := countFailed(found); n > 0 {
		fmt.Fprintf(out, "\n%d problem(s) to fix.\n", n)
	} else {
		fmt.Fprintln(out, "\nconfiguration OK (`switchboard doctor` also tries the store, the model server and the channels' tokens)")
	}
	return exitCode(found)
}
