//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// HardenGateway does nothing off Linux.
func HardenGateway() error { return nil }

// Protections: off Linux there are none.
func Protections() []Protection {
	return []Protection{{"sandbox", false, "commands are confined only on Linux: here they run as the gateway's user, in a process group of their own"}}
}

// Run runs s in a process group of its own, killed when ctx is done; off
// Linux nothing else confines it.
func Run(ctx context.Context, s Spec, stdout, stderr io.Writer) (Outcome, error) {
	home, err := os.MkdirTemp("", "switchboard-cmd-")
	if err != nil {
		return Outcome{}, err
	}
	defer os.RemoveAll(home)
	if err := os.Mkdir(filepath.Join(home, "tmp"), 0o700); err != nil {
		return Outcome{}, err
	}
	cmd := exec.CommandContext(ctx, s.Program, s.Args[1:]...)
	cmd.Args[0] = s.Args[0]
	cmd.Dir, cmd.Env = s.Dir, withHome(s.Env, home)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// Without a subreaper, a process that left the group cannot be
	// confirmed stopped; one holding the output is known to be there.
	confirmed := !errors.Is(err, exec.ErrWaitDelay)
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return Outcome{Confirmed: confirmed, ExitCode: ee.ExitCode(), ProgramStopped: ctx.Err() != nil}, nil
	case err != nil && confirmed:
		return Outcome{}, err
	}
	return Outcome{Confirmed: confirmed, ProgramStopped: ctx.Err() != nil}, nil
}

// LandlockABI is 0: Landlock is Linux's.
func LandlockABI() int { return 0 }

// Reachable is nil: commands run as the gateway's user here.
func Reachable(string) error { return nil }
