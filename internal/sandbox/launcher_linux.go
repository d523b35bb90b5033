package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The launcher: a process started by Run (argv[0] launcherName, envSpec
// set) runs launch and exits, before main (or a test binary's TestMain)
// ever runs. Package init order puts this before every package that
// imports sandbox.
func init() {
	if raw, ok := os.LookupEnv(envSpec); ok && len(os.Args) == 1 && os.Args[0] == launcherName {
		os.Exit(launch(raw))
	}
}

// sweepLimit bounds how long the launcher keeps killing descendants that
// keep appearing (a fork bomb) before it gives up and says so.
const sweepLimit = 3 * time.Second

// launch is the launcher's main: it starts the program confined, waits for
// it or for a stop, kills every descendant, and reports on fd 3.
func launch(raw string) int {
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	out := os.NewFile(3, "report")
	life := os.NewFile(4, "lifeline")
	var r report
	send := func(code int) int {
		b, _ := json.Marshal(r)
		_, _ = out.Write(b)
		out.Close()
		return code
	}
	var s Spec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		r.Error = "sandbox: launcher: bad spec: " + err.Error()
		return send(125)
	}
	stop := make(chan struct{}, 3)
	go func() { // the gateway closed the lifeline, or died
		_, _ = io.Copy(io.Discard, life)
		stop <- struct{}{}
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		<-sigs
		stop <- struct{}{}
	}()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		r.Error = "sandbox: launcher: become a subreaper: " + err.Error()
		return send(125)
	}
	// The program starts in the working folder: entered here, as the
	// gateway's uid, so a folder the command's uid could not reach through
	// its parents still works.
	if err := os.Chdir(s.Dir); err != nil {
		r.Error = "sandbox: launcher: " + err.Error()
		return send(125)
	}
	pid, abi, err := startConfined(s)
	r.Landlock = abi
	if err != nil {
		r.Error = err.Error()
		return send(125)
	}

	exited := make(chan syscall.WaitStatus, 1)
	go func() {
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(pid, &ws, 0, nil)
			if !errors.Is(err, syscall.EINTR) {
				break
			}
		}
		exited <- ws
	}()
	var ws syscall.WaitStatus
	var killed map[int]bool
	select {
	case ws = <-exited:
		killed, r.AllEnded = sweep()
	case <-stop:
		killed, r.AllEnded = sweep()
		ws = <-exited
	}
	reapAll()
	r.ProgramStopped = killed[pid]
	r.Leftovers = len(killed)
	if r.ProgramStopped {
		r.Leftovers--
	}
	r.ExitCode = ws.ExitStatus()
	if ws.Signaled() {
		r.ExitCode, r.Signal = -1, unix.SignalName(ws.Signal())
	}
	return send(0)
}

// startConfined starts s's program from a locked thread that it first
// confines (no_new_privs, Landlock): the program inherits that thread's
// confinement; the launcher's other threads keep theirs, to sweep. The
// thread ends with its goroutine, never serving another.
func startConfined(s Spec) (pid, abi int, err error) {
	type started struct {
		pid, abi int
		err      error
	}
	ch := make(chan started, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		abi, err := confineThread(s)
		if err != nil {
			ch <- started{abi: abi, err: err}
			return
		}
		attr := &syscall.ProcAttr{Env: s.Env, Files: []uintptr{0, 1, 2}, Sys: &syscall.SysProcAttr{}}
		if s.UID >= 0 {
			attr.Sys.Credential = &syscall.Credential{Uid: uint32(s.UID), Gid: uint32(s.UID), Groups: []uint32{}}
		}
		// A program in the working folder is run by its path from there:
		// the command's uid may not be able to pass the folder's parents.
		prog := s.Program
		if rel, err := filepath.Rel(s.Dir, prog); err == nil && filepath.IsLocal(rel) {
			prog = "./" + rel
		}
		pid, err := syscall.ForkExec(prog, s.Args, attr)
		if err != nil {
			err = fmt.Errorf("start %s: %w", s.Args[0], err)
		}
		ch <- started{pid, abi, err}
	}()
	st := <-ch
	return st.pid, st.abi, st.err
}

// sweep kills every live descendant of the launcher (the program among
// them, if alive) until none is left, and returns the processes it killed
// and whether none is left. The dead stay zombies until reapAll; the
// program's waiter reaps the program.
func sweep() (killed map[int]bool, allEnded bool) {
	self := os.Getpid()
	killed = map[int]bool{}
	deadline := time.Now().Add(sweepLimit)
	for {
		live := liveDescendants(self)
		if len(live) == 0 {
			return killed, true
		}
		for _, p := range live {
			_ = unix.Kill(p, unix.SIGKILL)
			killed[p] = true
		}
		if time.Now().After(deadline) {
			return killed, false
		}
		// A killed process dies within microseconds; its children, if it
		// had any, are ours then and are found by the next pass.
		time.Sleep(time.Millisecond)
	}
}

// reapAll reaps every dead child left; after a sweep no live one is left.
func reapAll() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// liveDescendants lists the processes below pid that are not zombies,
// from /proc.
func liveDescendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		f := bytes.Fields(b[i+2:])
		if len(f) < 2 || f[0][0] == 'Z' || f[0][0] == 'X' {
			continue
		}
		ppid, err := strconv.Atoi(string(f[1]))
		if err != nil {
			continue
		}
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
