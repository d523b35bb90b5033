//go:build unix

package tools

import (
	"io/fs"
	"syscall"
)

// links is how many names (hard links) the file has; 1 when unknown.
func links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
