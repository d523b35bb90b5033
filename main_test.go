package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// mainChildEnv makes the test binary run main itself (with the arguments
// after "--"), so the test sees the process as the binary runs it.
const mainChildEnv = "SWITCHBOARD_MAIN_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(mainChildEnv) != "" {
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{os.Args[0]}, os.Args[i+1:]...)
				break
			}
		}
		main()
		return
	}
	os.Exit(m.Run())
}

// The binary hands its arguments and version to the command line and
// exits with its code.
func TestMainRunsTheCommandLine(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"version"}, 0, "switchboard dev\n"},
		{[]string{"--config"}, 2, ""},
		{[]string{"fly"}, 2, ""},
	} {
		cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, tt.args...)...)
		cmd.Env = append(os.Environ(), mainChildEnv+"=1")
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tt.code || !strings.HasPrefix(string(out), tt.out) {
			t.Errorf("switchboard %v: exit %d, stdout %q; want %d, %q", tt.args, code, out, tt.code, tt.out)
		}
	}
}
