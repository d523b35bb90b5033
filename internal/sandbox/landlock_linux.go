package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The Landlock system calls are made here, on one thread, rather than
// through github.com/landlock-lsm/go-landlock: that library confines every
// thread of the process (through libpsx, which wraps pthread_create in a
// cgo binary such as the gateway), and only the launcher's starting
// thread, hence the program it starts, is meant to be confined.

// Landlock access rights (see landlock(7)), by the ABI that added them.
const (
	llRead = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	llV1   = 1<<13 - 1 // EXECUTE … MAKE_SYM
	// llFile are the rights that apply to a file (not a folder).
	llFile = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	llAll = llV1 | unix.LANDLOCK_ACCESS_FS_REFER | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// systemRead are the folders and files every command may read and run:
// programs, libraries, configuration, /proc (another uid's secrets there
// are closed by the uid and by Landlock's ptrace rule), the CPU count.
var systemRead = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix/store",
	"/etc/resolv.conf", "/etc/hosts", // links into /run on some systems
	"/proc", "/sys/devices/system/cpu", "/dev/urandom", "/dev/random",
}

// systemWrite are the device files every command may write.
var systemWrite = []string{"/dev/null", "/dev/zero", "/dev/full"}

// rulesetAttr is struct landlock_ruleset_attr as of ABI 6, kept here: the
// kernel accepts it whole from ABI 1 on (the fields it does not know are
// zero), and x/sys's copy grows and renames fields with new ABIs.
type rulesetAttr struct {
	handledFS, handledNet, scoped uint64
}

// landlockABI is the kernel's Landlock ABI version, 0 without Landlock.
func landlockABI() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}

// handled is every filesystem right the ABI knows: all are denied but
// where a rule grants them.
func handled(abi int) uint64 {
	h := uint64(llV1)
	if abi >= 2 {
		h |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		h |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		h |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return h
}

// confineThread sets no_new_privs and, where the kernel has Landlock,
// restricts the calling thread (and what it starts) to reading the
// system and s.ReadOnly and writing s.Dir and s.Home. It returns the ABI
// used (0: no Landlock).
func confineThread(s Spec) (int, error) {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, fmt.Errorf("sandbox: no_new_privs: %w", err)
	}
	abi := landlockABI()
	if abi == 0 {
		return 0, nil
	}
	h := handled(abi)
	attr := rulesetAttr{handledFS: h}
	if abi >= 4 {
		attr.handledNet = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	if abi >= 6 {
		attr.scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if e != 0 {
		return abi, fmt.Errorf("sandbox: landlock_create_ruleset: %w", e)
	}
	defer unix.Close(int(fd))
	var errs []error
	add := func(paths []string, access uint64, required bool) {
		for _, p := range paths {
			if err := addRule(int(fd), p, access&h); err != nil && (required || !errors.Is(err, unix.ENOENT)) {
				errs = append(errs, err)
			}
		}
	}
	add(systemRead, llRead, false)
	add(systemWrite, llAll, false)
	add(s.ReadOnly, llRead, false)
	add([]string{s.Program}, llRead, true)
	add([]string{s.Dir, s.Home}, llAll, true)
	if attr.handledNet != 0 {
		for _, port := range s.ConnectPorts {
			if err := addPortRule(int(fd), port); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return abi, err
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); e != 0 {
		return abi, fmt.Errorf("sandbox: landlock_restrict_self: %w", e)
	}
	return abi, nil
}

// addRule lets the ruleset's domain have access beneath path (a folder)
// or to it (a file: only the rights files have).
func addRule(ruleset int, path string, access uint64) error {
	fd, err := unix.Open(filepath.Clean(path), unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sandbox: landlock rule for %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("sandbox: landlock rule for %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= llFile
	}
	rule := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&rule)), 0, 0, 0); e != 0 {
		return fmt.Errorf("sandbox: landlock rule for %s: %w", path, e)
	}
	return nil
}

// landlockRuleNetPort is LANDLOCK_RULE_NET_PORT (linux/landlock.h), which
// x/sys does not define.
const landlockRuleNetPort = 2

// netPortAttr is struct landlock_net_port_attr (Landlock ABI 4).
type netPortAttr struct {
	allowed uint64
	port    uint64
}

// addPortRule lets the ruleset's domain connect to TCP port.
func addPortRule(ruleset int, port uint16) error {
	rule := netPortAttr{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(port)}
	if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), landlockRuleNetPort,
		uintptr(unsafe.Pointer(&rule)), 0, 0, 0); e != 0 {
		return fmt.Errorf("sandbox: landlock rule for TCP port %d: %w", port, e)
	}
	return nil
}
