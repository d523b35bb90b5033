package gcpace

import (
	"bufio"
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pageOutBinary hands the pages of the executable's read-only mappings
// (code, read-only data) back to the kernel (madvise MADV_PAGEOUT). At
// start the kernel reads the binary in large windows around each first
// touch, and package initialisation touches code all over it: 20 MB of a
// 40 MB binary stayed mapped, most of it never used again. Paged out when
// the gateway first goes quiet, only what an idle gateway and its turns
// run comes back, read again from the disk at its first use (a few
// milliseconds on the first reply), and stays. Pages that another process
// maps too are left alone by the kernel.
func pageOutBinary() {
	adviseBinary(unix.MADV_PAGEOUT, unix.MADV_RANDOM)
}

// readAheadBinary undoes pageOutBinary's MADV_RANDOM. While the gateway is
// idle after the page-out, what its long polls and timers run comes back a
// page at a time (MADV_RANDOM), not with the kernel's read-around of each
// fault: that read-around had brought back 6 MB within a minute of idling.
// At the first turn the read-around is back, so that the code of a reply
// comes in large reads (a page at a time, the first reply after a deploy
// took a second on a busy disk).
func readAheadBinary() {
	adviseBinary(unix.MADV_NORMAL)
}

// adviseBinary gives each advice in turn for the executable's read-only
// mappings.
func adviseBinary(advice ...int) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	for lo, hi := range readOnlyMappings(maps, exe) {
		for _, a := range advice {
			// The range is the kernel's, not Go memory: a raw system
			// call rather than a slice over it.
			_, _, _ = unix.Syscall(unix.SYS_MADVISE, uintptr(lo), uintptr(hi-lo), uintptr(a))
		}
	}
}

// readOnlyMappings yields the address ranges of path's mappings that are
// not writable, from the text of /proc/self/maps.
func readOnlyMappings(maps []byte, path string) func(yield func(lo, hi uint64) bool) {
	return func(yield func(lo, hi uint64) bool) {
		sc := bufio.NewScanner(bytes.NewReader(maps))
		for sc.Scan() {
			// 00400000-00ff9000 r-xp 00000000 fe:00 1234   /path/to/binary
			f := bytes.Fields(sc.Bytes())
			if len(f) < 6 || string(f[5]) != path || len(f[1]) < 2 || f[1][1] == 'w' {
				continue
			}
			a, b, ok := bytes.Cut(f[0], []byte("-"))
			if !ok {
				continue
			}
			lo, err1 := strconv.ParseUint(string(a), 16, 64)
			hi, err2 := strconv.ParseUint(string(b), 16, 64)
			if err1 != nil || err2 != nil || hi <= lo {
				continue
			}
			if !yield(lo, hi) {
				return
			}
		}
	}
}
