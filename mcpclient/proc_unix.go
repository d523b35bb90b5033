//go:build unix

package mcpclient

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts the server in a process group of its own: a Ctrl-C
// in our terminal then does not kill it before Close can stop it gracefully,
// and killGroup can reach the helpers it spawned (npx, node, uv…).
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills whatever is left of the server's process group once the
// server itself has exited.
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}
