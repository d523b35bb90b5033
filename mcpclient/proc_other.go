//go:build !unix

package mcpclient

import "os/exec"

// ownProcessGroup is a no-op where process groups are not available.
func ownProcessGroup(*exec.Cmd) {}

// killGroup is a no-op where process groups are not available.
func killGroup(int) {}
