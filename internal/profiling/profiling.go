// Package profiling writes the profiles a developer asks for in the
// environment, for the benchmarks: SWITCHBOARD_CPUPROFILE (a CPU profile of
// the whole run) and SWITCHBOARD_MEMPROFILE (a heap profile at the end). In
// both paths, %p is the process id.
package profiling

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
)

// Start starts the CPU profile, if asked for; stop ends it and writes the
// heap profile, if asked for. Failures are reported on errw; the run goes
// on without that profile.
func Start(errw io.Writer) (stop func()) {
	stopCPU := cpuProfile(os.Getenv("SWITCHBOARD_CPUPROFILE"), errw)
	return func() {
		stopCPU()
		memProfile(os.Getenv("SWITCHBOARD_MEMPROFILE"), errw)
	}
}

// memProfile writes a heap profile to path, if path is set: its
// alloc_space and alloc_objects views are where the run allocated.
func memProfile(path string, errw io.Writer) {
	if path == "" {
		return
	}
	f, err := os.Create(expand(path))
	if err == nil {
		err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
	}
	if err != nil {
		fmt.Fprintf(errw, "switchboard: SWITCHBOARD_MEMPROFILE: %v\n", err)
	}
}

// cpuProfile writes a CPU profile of the whole run to path (for `go tool
// pprof`), if path is set.
func cpuProfile(path string, errw io.Writer) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(expand(path))
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(errw, "switchboard: SWITCHBOARD_CPUPROFILE: %v\n", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

func expand(path string) string { return strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid())) }
