// Package report holds what the benchmark programs' reports share: the
// machine they ran on, and how they print times.
package report

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
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

// MS prints d in milliseconds, to a tenth.
func MS(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}

// Secs prints d in seconds, to a hundredth.
func Secs(d time.Duration) string {
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// Timeline shows when the first, 10 %, 50 %, 90 % and last of ts (sorted)
// happened.
func Timeline(ts []time.Duration) string {
	if len(ts) == 0 {
		return "none"
	}
	var parts []string
	for _, p := range []float64{0, 10, 50, 90, 100} {
		k := max(int(p/100*float64(len(ts))), 1)
		parts = append(parts, fmt.Sprintf("%d: %s", k, MS(ts[k-1])))
	}
	return strings.Join(parts, ", ")
}
