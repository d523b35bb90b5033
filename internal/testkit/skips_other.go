//go:build !linux

package testkit

import "os"

// parentStdout finds the go command's stdout on Linux only; elsewhere the
// skip lines show with go test -v.
func parentStdout() *os.File { return nil }
