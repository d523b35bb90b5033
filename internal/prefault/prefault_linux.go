package prefault

import (
	"syscall"
	"unsafe"
)

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14), which the
// syscall package does not name: fault in a range as if each page were
// written to, without writing.
const madvPopulateWrite = 23

// held keeps the probe allocation on the heap.
var held *[16]byte

func init() {
	held = new([16]byte)
	start := uintptr(unsafe.Pointer(held)) &^ (uintptr(syscall.Getpagesize()) - 1)
	end := (start + chunk) &^ (chunk - 1)
	done = span{Start: start, End: end, Err: populate(start, end)}
}

// populate faults in [start, end) for writing in one system call.
func populate(start, end uintptr) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, start, end-start, madvPopulateWrite); errno != 0 {
		return errno
	}
	return nil
}
