package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HardenGateway makes this process non-dumpable: a process of the same
// uid can no longer read /proc/<pid>/environ or mem, nor ptrace it. serve
// and chat call it first.
func HardenGateway() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: make the gateway non-dumpable: %w", err)
	}
	return nil
}

// Protections says which protections commands get on this host, one each:
// Landlock, the gateway non-dumpable, a separate uid, the descendant sweep.
func Protections() []Protection {
	var out []Protection
	if abi := landlockABI(); abi > 0 {
		out = append(out, Protection{"landlock", true, fmt.Sprintf("ABI %d: commands read the system folders and write only their working folder and a private home", abi)})
		if abi >= 4 {
			out = append(out, Protection{"network", true, "commands open TCP connections only to tools.command.connect_ports (none by default) and bind no TCP port"})
		} else {
			out = append(out, Protection{"network", false, fmt.Sprintf("Landlock ABI %d has no network rules (4+): commands may connect anywhere, the gateway's HTTP API on loopback included", abi)})
		}
	} else {
		out = append(out, Protection{"landlock", false, "this kernel has no Landlock (Linux 5.13+ with lsm=landlock): commands may read and write whatever their uid may"})
	}
	// What serve and chat do first; doctor needs no dumpability either.
	if err := HardenGateway(); err != nil {
		out = append(out, Protection{"non-dumpable", false, err.Error()})
	} else {
		out = append(out, Protection{"non-dumpable", true, "serve and chat set PR_SET_DUMPABLE 0: a same-uid process cannot read the gateway's /proc environ or memory"})
	}
	if os.Geteuid() == 0 {
		out = append(out, Protection{"separate uid", true, fmt.Sprintf("the gateway runs as root; commands run as uid/gid %d (nobody) without supplementary groups", SandboxUID)})
	} else {
		out = append(out, Protection{"separate uid", false, fmt.Sprintf("commands run as the gateway's uid %d (it is not root); Landlock and non-dumpable keep them out of the gateway", os.Geteuid())})
	}
	var reaper int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&reaper)), 0, 0, 0); err != nil {
		out = append(out, Protection{"descendant sweep", false, "prctl(PR_GET_CHILD_SUBREAPER): " + err.Error() + "; only the process group is killed"})
	} else {
		out = append(out, Protection{"descendant sweep", true, "a subreaper launcher kills every process a command started, setsid ones included"})
	}
	return out
}

// stopGrace is how long the launcher has to stop everything once asked
// before it is killed itself (then the outcome is not Confirmed).
const stopGrace = 5 * time.Second

// Run runs s confined, its output to stdout and stderr, until it ends or
// ctx is done; then every process it started is stopped. The error is for
// a run that could not start (or whose launcher failed); how the program
// ended is in the Outcome.
func Run(ctx context.Context, s Spec, stdout, stderr io.Writer) (Outcome, error) {
	exe, err := os.Executable()
	if err != nil {
		return Outcome{}, fmt.Errorf("sandbox: find the launcher (this binary): %w", err)
	}
	s.UID = -1
	if os.Geteuid() == 0 {
		s.UID = SandboxUID
	}
	home, err := os.MkdirTemp("", "switchboard-cmd-")
	if err != nil {
		return Outcome{}, fmt.Errorf("sandbox: private home: %w", err)
	}
	defer os.RemoveAll(home)
	if err := os.Mkdir(filepath.Join(home, "tmp"), 0o700); err != nil {
		return Outcome{}, fmt.Errorf("sandbox: private tmp: %w", err)
	}
	if s.UID >= 0 {
		// The working folder and the home belong to the uid commands run
		// as; the files in the folder keep their owners.
		for _, d := range []string{home, filepath.Join(home, "tmp"), s.Dir} {
			if err := os.Lchown(d, s.UID, s.UID); err != nil {
				return Outcome{}, fmt.Errorf("sandbox: give %s to uid %d: %w", d, s.UID, err)
			}
		}
	}
	s.Home = home
	s.Env = withHome(s.Env, home)
	raw, err := json.Marshal(s)
	if err != nil {
		return Outcome{}, fmt.Errorf("sandbox: %w", err)
	}

	// fd 3: the launcher's report. fd 4: the lifeline; when the gateway
	// closes it (a stop) or dies, the launcher stops everything.
	repR, repW, err := os.Pipe()
	if err != nil {
		return Outcome{}, fmt.Errorf("sandbox: %w", err)
	}
	defer repR.Close()
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		repW.Close()
		return Outcome{}, fmt.Errorf("sandbox: %w", err)
	}
	defer lifeW.Close()

	cmd := exec.CommandContext(ctx, exe)
	cmd.Args = []string{launcherName}
	cmd.Env = []string{envSpec + "=" + string(raw)}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.ExtraFiles = []*os.File{repW, lifeR}
	// A process group of its own: the terminal's Ctrl-C is the gateway's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return lifeW.Close() }
	cmd.WaitDelay = stopGrace
	err = cmd.Start()
	repW.Close()
	lifeR.Close()
	if err != nil && ctx.Err() != nil {
		return Outcome{Confirmed: true}, nil // stopped before it started: nothing ran
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("sandbox: start the launcher: %w", err)
	}
	rep := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(repR, 1<<16))
		rep <- b
	}()
	waitErr := cmd.Wait()
	var r report
	b := <-rep
	if len(b) == 0 || json.Unmarshal(b, &r) != nil {
		// The launcher did not report: it was killed after stopGrace, or
		// crashed. Its processes may live on.
		return Outcome{ExitCode: -1, ProgramStopped: ctx.Err() != nil}, nil
	}
	if r.Error != "" {
		return Outcome{Landlock: r.Landlock}, errors.New(r.Error)
	}
	_ = waitErr // the report says how the program ended
	return Outcome{Confirmed: r.AllEnded, ExitCode: r.ExitCode, Signal: r.Signal, ProgramStopped: r.ProgramStopped,
		Leftovers: r.Leftovers, Landlock: r.Landlock}, nil
}

// Reachable says whether commands can reach dir by its full path: when
// the gateway runs as root they run as nobody, and a parent of dir that
// others may not pass (/root is 0700) leaves them only relative paths
// (they start inside dir): python3 and git, which look at their folder by
// its full path, fail there. nil when it is reachable or the gateway is
// not root.
func Reachable(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("commands run as uid %d (nobody) since the gateway runs as root, and %s (mode %04o) does not let them reach %s by its full path; "+
				"allow others through it (chmod o+x %s), move the workspace, or run the gateway as another user", SandboxUID, p, fi.Mode().Perm(), abs, p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// LandlockABI is this kernel's Landlock ABI version, 0 without Landlock.
func LandlockABI() int { return landlockABI() }
