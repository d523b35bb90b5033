// Command switchboard is a chat-channel gateway to one AI agent: people talk
// to it from Telegram, Discord or a terminal; it answers through any
// OpenAI-compatible model server and remembers conversations in SQLite.
//
// The command line is package cli (`switchboard help` lists the commands);
// the gateway it runs is package gateway.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchboard-gateway/switchboard/cli"
	"github.com/switchboard-gateway/switchboard/internal/buildinfo"
	// Faults in the heap the libraries' initialisers and the start touch,
	// in one system call, before those initialisers run (package prefault).
	_ "github.com/switchboard-gateway/switchboard/internal/prefault"
	"github.com/switchboard-gateway/switchboard/internal/profiling"
)

// version is set at build time with -ldflags "-X main.version=…"; without
// it the version comes from the build (see package buildinfo).
var version string

func main() {
	ctx := stopOnSignal(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopProfiles := profiling.Start(os.Stderr)
	code := cli.Run(ctx, buildinfo.Version(version), os.Args[1:], cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stopProfiles()
	os.Exit(code)
}

// stopOnSignal returns a context that ends at the first of sigs; later ones
// are ignored while the gateway stops. It asks for the signals from a
// goroutine: the first signal.Notify starts the runtime's signal thread,
// about 0.4 ms on this project's machine, which the start does not wait
// for. A signal before that ends the process, as one before main does.
func stopOnSignal(parent context.Context, sigs ...os.Signal) context.Context {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		c := make(chan os.Signal, 1)
		signal.Notify(c, sigs...)
		<-c
		cancel()
	}()
	return ctx
}
