// Package sandbox runs a command tool's program confined, and makes the
// gateway itself harder to read from a child.
//
// Run does not start the program directly: it starts the gateway's own
// binary again as a small launcher (the init function of this package
// recognises it by an environment variable and never returns to main).
// The launcher, on Linux:
//   - becomes a child subreaper (PR_SET_CHILD_SUBREAPER), so every process
//     the program starts stays its descendant, even one that calls setsid
//     or double-forks; when the program ends, or the gateway asks it to
//     stop (or dies), it kills every descendant and reaps them, then
//     reports what it stopped;
//   - on a thread of its own, sets no_new_privs and a Landlock domain
//     (when the kernel has Landlock): the system folders readable, the
//     working folder and a private home writable, nothing else; signals
//     and abstract sockets scoped to the domain (Landlock ABI 6);
//   - starts the program from that thread with the given environment
//     only, and, when the gateway runs as root, as uid/gid 65534 (nobody)
//     with no supplementary groups.
//
// HardenGateway makes the gateway process non-dumpable, so a process of
// the same uid cannot read its environment or memory through /proc.
package sandbox

import (
	"fmt"
	"strings"
)

// SandboxUID is the uid (and gid) commands run as when the gateway runs as
// root: nobody.
const SandboxUID = 65534

// envSpec carries the launcher's Spec; with argv[0] launcherName it makes
// a process the launcher.
const (
	envSpec      = "SWITCHBOARD_SANDBOX_SPEC"
	launcherName = "switchboard-sandbox"
)

// Spec is one confined run.
type Spec struct {
	Program string   `json:"program"` // the program, an absolute path
	Args    []string `json:"args"`    // its argv, Args[0] as the program should see it
	Dir     string   `json:"dir"`     // the working folder: where it runs and may write
	Env     []string `json:"env"`     // its whole environment; Run sets HOME and TMPDIR
	// ReadOnly lists more files or folders it may read (and execute)
	// beyond the system's: those the command line names.
	ReadOnly []string `json:"read_only,omitempty"`
	// ConnectPorts are the TCP ports it may connect to (Landlock ABI 4+);
	// none: it opens no TCP connection and binds no TCP port, so it cannot
	// reach the gateway's own HTTP API or any other service.
	ConnectPorts []uint16 `json:"connect_ports,omitempty"`

	// Set by Run.
	Home string `json:"home"` // the private home: HOME and TMPDIR (its tmp)
	UID  int    `json:"uid"`  // -1: the gateway's own
}

// Outcome is what happened to a run.
type Outcome struct {
	// Confirmed: the launcher reported that every process of the run has
	// ended. False when the launcher itself had to be killed.
	Confirmed bool
	ExitCode  int    // the program's exit code; -1 when a signal ended it
	Signal    string // the signal that ended it, if any
	// ProgramStopped: the program was still running when the run was
	// stopped (a timeout, a cancelled turn) and was killed.
	ProgramStopped bool
	// Leftovers is how many other processes it started were still running
	// and were killed (background jobs, daemons, setsid children).
	Leftovers int
	// Landlock is the Landlock ABI version the run was confined with
	// (0: none).
	Landlock int
}

// report is what the launcher writes back, as JSON.
type report struct {
	Error          string `json:"error,omitempty"`
	ExitCode       int    `json:"exit_code"`
	Signal         string `json:"signal,omitempty"`
	ProgramStopped bool   `json:"program_stopped,omitempty"`
	Leftovers      int    `json:"leftovers"`
	AllEnded       bool   `json:"all_ended"`
	Landlock       int    `json:"landlock"`
}

// Protection is one protection and whether this host has it, for doctor.
type Protection struct {
	Name   string
	Active bool
	Detail string
}

func (p Protection) String() string {
	state := "active"
	if !p.Active {
		state = "NOT active"
	}
	return fmt.Sprintf("%s: %s (%s)", p.Name, state, p.Detail)
}

// withHome returns env without HOME and TMPDIR, then those two for home.
func withHome(env []string, home string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "TMPDIR=") {
			out = append(out, kv)
		}
	}
	return append(out, "HOME="+home, "TMPDIR="+home+"/tmp")
}
