// Package host describes the machine a benchmark runs on, for its report.
package host

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// Machine is `uname -m`, the CPU model, the number of cores and the Go
// version.
func Machine() string {
	arch := runtime.GOARCH
	if b, err := exec.Command("uname", "-m").Output(); err == nil {
		arch = strings.TrimSpace(string(b))
	}
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.Join(strings.Fields(v), " ")
				break
			}
		}
	}
	return fmt.Sprintf("%s, %s, %d cores, %s", arch, cpu, runtime.NumCPU(), runtime.Version())
}

// LoadAverage is the first three fields of /proc/loadavg.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
