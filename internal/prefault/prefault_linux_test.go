package prefault

import (
	"bufio"
	"fmt"
	"os"
	"syscall"
	"testing"
	"unsafe"
)

// resident counts the pages of [start, end) backed by memory (mincore).
func resident(t *testing.T, start, end uintptr) int {
	t.Helper()
	page := uintptr(syscall.Getpagesize())
	vec := make([]byte, (end-start+page-1)/page)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, start, end-start, uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// populate backs every page of a fresh mapping, which no page of was
// before, and leaves its contents zero.
func TestPopulateBacksEveryPage(t *testing.T) {
	const pages = 64
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, pages*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	start := uintptr(unsafe.Pointer(&mem[0]))
	end := start + uintptr(len(mem))
	if n := resident(t, start, end); n != 0 {
		t.Fatalf("a fresh mapping has %d of %d pages resident before populate", n, pages)
	}
	if err := populate(start, end); err != nil {
		t.Fatalf("populate: %v (MADV_POPULATE_WRITE needs Linux 5.14)", err)
	}
	if n := resident(t, start, end); n != pages {
		t.Errorf("after populate %d of %d pages are resident", n, pages)
	}
	for i, b := range mem {
		if b != 0 {
			t.Fatalf("byte %d is %d after populate, want 0", i, b)
		}
	}
}

// The init filled the rest of the heap chunk it allocates from: one
// read-write anonymous mapping holds the whole range, which ends on a
// chunk boundary.
func TestInitFilledTheRestOfItsHeapChunk(t *testing.T) {
	if done.Err != nil {
		t.Fatalf("the init's populate failed: %v (MADV_POPULATE_WRITE needs Linux 5.14)", done.Err)
	}
	page := uintptr(syscall.Getpagesize())
	if done.End <= done.Start || done.End-done.Start > chunk || done.End%chunk != 0 || done.Start%page != 0 {
		t.Fatalf("the init filled [%#x, %#x): want a page-aligned start, at most %d bytes, up to a chunk boundary", done.Start, done.End, chunk)
	}
	probe := uintptr(unsafe.Pointer(held))
	if probe < done.Start || probe >= done.End {
		t.Errorf("the probe allocation %#x is outside the filled range [%#x, %#x)", probe, done.Start, done.End)
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var lo, hi uintptr
		var perms string
		if _, err := fmt.Sscanf(sc.Text(), "%x-%x %s", &lo, &hi, &perms); err != nil {
			t.Fatalf("/proc/self/maps line %q: %v", sc.Text(), err)
		}
		if lo <= done.Start && done.Start < hi {
			if done.End > hi || perms[:2] != "rw" {
				t.Errorf("the filled range [%#x, %#x) is not inside one read-write mapping: %s", done.Start, done.End, sc.Text())
			}
			return
		}
	}
	t.Errorf("no mapping holds the filled range [%#x, %#x)", done.Start, done.End)
}
