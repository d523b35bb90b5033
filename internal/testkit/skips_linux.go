package testkit

import (
	"fmt"
	"os"
	"syscall"
)

// parentStdout opens the go command's stdout when this test binary runs
// under `go test` with its output captured (package list mode, as in
// `go test ./...`): there go prints a passing package's output only with
// -v, and the skip lines must be seen. It returns nil when the parent is
// not the go command, when the binary's own stdout already is go's (go
// test in a package directory streams it), or when go's stdout is a
// regular file: a file opened again has its own offset, and go's next
// line would overwrite ours; a terminal or a pipe (CI's `| tee`) has none.
// syscall.Open, not os.OpenFile: go test records the files a test opens
// to decide whether a cached result still holds, and /proc/PID changes
// every run.
func parentStdout() *os.File {
	ppid := os.Getppid()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", ppid))
	if err != nil || !isGoCommand(exe) {
		return nil
	}
	path := fmt.Sprintf("/proc/%d/fd/1", ppid)
	var theirs, ours syscall.Stat_t
	if syscall.Stat(path, &theirs) != nil || syscall.Fstat(1, &ours) != nil {
		return nil
	}
	if theirs.Dev == ours.Dev && theirs.Ino == ours.Ino {
		return nil
	}
	switch theirs.Mode & syscall.S_IFMT {
	case syscall.S_IFIFO, syscall.S_IFCHR:
	default:
		return nil
	}
	fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_CLOEXEC|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), path)
}
