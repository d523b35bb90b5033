package gateway

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/switchboard-gateway/switchboard/channels/console"
	"github.com/switchboard-gateway/switchboard/router"
)

// ChatOptions are the terminal of a chat.
type ChatOptions struct {
	In  io.Reader
	Out io.Writer
	// Logs says where the log lines go, for the banner ("" says nothing).
	Logs string
	// Verbose shows the error of a failed turn in the chat, not just that
	// it failed.
	Verbose bool
}

// Chat runs a terminal conversation through the same router and loop as
// every other channel. It ends at end of input or when ctx ends.
func (g *Gateway) Chat(ctx context.Context, o ChatOptions) error {
	cfg := g.cfg
	color := false
	if f, ok := o.Out.(*os.File); ok {
		color = console.IsTerminal(f)
	}
	con := console.New(console.Options{In: o.In, Out: o.Out, User: cfg.Channels.Console.User, Color: color, Verbose: o.Verbose,
		Whole:  !cfg.Channels.Console.StreamPreview,
		Logger: g.log.With("channel", "console")})
	g.router.AddChannel(con, router.Access{AllowAll: true, AllAdmins: true}) // the local operator
	if g.replica != nil {
		if err := g.replica.Start(ctx); err != nil {
			return err
		}
		defer g.leave()
	}
	if err := g.router.Start(ctx); err != nil {
		return err
	}
	stopWaiting := g.startScheduler(ctx)
	if color {
		fmt.Fprintf(o.Out, "Switchboard chat with %s (model %s). /help for commands, Ctrl-D to quit.\n", cfg.Agent.Name, cfg.LLM.Model)
		if o.Logs != "" {
			fmt.Fprintf(o.Out, "Logs: %s\n", o.Logs)
		}
	}
	runErr := con.Run(ctx, g.router)
	// End of input: let the last message be answered, unless interrupted.
	drainCtx, cancel := context.WithTimeout(ctx, cfg.Agent.TurnTimeout)
	defer cancel()
	stopWaiting()
	_ = g.sched.Stop(drainCtx)
	_ = g.router.Drain(drainCtx)
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer scancel()
	_ = g.router.Shutdown(sctx)
	return runErr
}
