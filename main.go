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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopProfiles := profiling.Start(os.Stderr)
	code := cli.Run(ctx, buildinfo.Version(version), os.Args[1:], cli.Stdio{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stopProfiles()
	os.Exit(code)
}
