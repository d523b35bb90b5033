package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Memory is a process's memory as /proc reports it, in kB (KiB).
type Memory struct {
	RSS  int // resident: anonymous memory plus the file pages mapped (the binary's own)
	Anon int // RssAnon: heap, stacks, the C allocator's; what the process itself holds
	PSS  int // proportional: file pages shared with other processes counted in part
}

// ReadMemory reads the memory of process pid: Rss and Pss from
// /proc/PID/smaps_rollup, RssAnon from /proc/PID/status.
func ReadMemory(pid int) (Memory, error) {
	var m Memory
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return m, err
	}
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) < 2 {
			continue
		}
		var dst *int
		switch string(f[0]) {
		case "Rss:":
			dst = &m.RSS
		case "Pss:":
			dst = &m.PSS
		default:
			continue
		}
		if *dst, err = strconv.Atoi(string(f[1])); err != nil {
			return m, fmt.Errorf("/proc/%d/smaps_rollup: %s: %w", pid, f[0], err)
		}
		found++
	}
	if found != 2 {
		return m, fmt.Errorf("/proc/%d/smaps_rollup: no Rss or Pss line", pid)
	}
	m.Anon, err = StatusKB(pid, "RssAnon")
	return m, err
}

// Memory reads the process's memory (see ReadMemory).
func (p *Process) Memory() (Memory, error) { return ReadMemory(p.Pid()) }

// Deploy copies the binary bin into dir as a fresh deploy or a reboot has
// it: written, synced, and then its pages dropped from the page cache, so
// that the process started from it reads in only the pages it touches. A
// freshly linked binary is different: the linker's writes leave the whole
// file in the cache, on some kernels in large folios that a process maps
// whole, which counts tens of megabytes of it in the process's RSS. It
// checks with mincore that no page of the copy is left in the cache.
func Deploy(bin, dir string) (string, error) {
	dst := filepath.Join(dir, filepath.Base(bin))
	if err := copyFile(bin, dst); err != nil {
		return "", fmt.Errorf("deploy: %w", err)
	}
	f, err := os.Open(dst)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return "", fmt.Errorf("deploy: drop %s from the page cache: %w", dst, err)
	}
	cached, total, err := residentPages(f)
	if err != nil {
		return "", fmt.Errorf("deploy: %w", err)
	}
	if cached > 0 {
		return "", fmt.Errorf("deploy: %d of %d pages of %s still in the page cache", cached, total, dst)
	}
	return dst, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil { // dirty pages cannot be dropped
		out.Close()
		return err
	}
	return out.Close()
}

// residentPages counts the pages of f in the page cache (mincore on a
// read-only mapping of it).
func residentPages(f *os.File) (cached, total int, err error) {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return 0, 0, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, 0, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	// x/sys/unix has no Mincore on Linux.
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return 0, 0, fmt.Errorf("mincore %s: %w", f.Name(), errno)
	}
	for _, v := range vec {
		if v&1 != 0 {
			cached++
		}
	}
	return cached, len(vec), nil
}
