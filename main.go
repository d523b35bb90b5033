// Command switchboard is a chat-channel gateway to one AI agent: people talk
// to it from Telegram, Discord or a terminal; it answers through any
// OpenAI-compatible model server and remembers conversations in SQLite.
// The commands are in package cli; `switchboard help` lists them.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"switchboard/cli"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopProfile := cpuProfile(os.Getenv("SWITCHBOARD_CPUPROFILE"))
	code := cli.Run(ctx, version, os.Args[1:], cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stopProfile()
	memProfile(os.Getenv("SWITCHBOARD_MEMPROFILE"))
	os.Exit(code)
}

// memProfile writes a heap profile to path (%p: the process id), if path is
// set: its alloc_space and alloc_objects views are where the run allocated.
func memProfile(path string) {
	if path == "" {
		return
	}
	f, err := os.Create(strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid())))
	if err == nil {
		err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "switchboard: SWITCHBOARD_MEMPROFILE: %v\n", err)
	}
}

// cpuProfile writes a CPU profile of the whole run to path (for `go tool
// pprof`), if path is set: a developer's tool for the benchmarks.
func cpuProfile(path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid())))
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "switchboard: SWITCHBOARD_CPUPROFILE: %v\n", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
