// Package prefault faults in, with one system call, the heap pages the
// program's start is about to touch one by one. main imports it for that
// side effect alone; it has nothing to call.
//
// Every page of memory a process touches for the first time costs a page
// fault. Where faults are expensive (a virtual machine that traps each of
// them: about 11 µs a fault on the machine switchboard is developed on,
// against about 1 µs a page when the kernel is asked to fill a range at
// once), the few hundred heap pages that the libraries' package
// initialisers (regular expressions, entity tables, metric descriptions)
// and the start touch cost several milliseconds before the first poll.
//
// Its init, which Go runs before the initialisers of those libraries (the
// binary's test in e2e checks the order), asks the kernel
// (MADV_POPULATE_WRITE, Linux 5.14) to fill the rest of the heap chunk that
// Go is allocating from: from the page of a fresh allocation to the end of
// its 4 MiB chunk, the unit in which Go's heap grows. The heap fills a chunk
// from its lowest free page up, so those are the pages it uses next; a serve
// uses more heap than that, so nothing filled stays unused. On other
// systems, or a kernel without MADV_POPULATE_WRITE, it does nothing.
package prefault

// chunk is the size of the heap chunks Go maps and fills in order
// (pallocChunkBytes in the runtime).
const chunk = 4 << 20

// span is the heap range the init filled, and the error it met (nil, or
// the kernel's refusal: nothing is filled then).
type span struct {
	Start, End uintptr
	Err        error
}

// done is what the init did.
var done span
