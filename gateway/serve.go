package gateway

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/chatapi"
	"github.com/switchboard-gateway/switchboard/channels/registry"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/httpapi"
	"github.com/switchboard-gateway/switchboard/router"
)

// httpShutdownGrace bounds the wait for open HTTP requests after the router
// has stopped: their turns are finished or checkpointed by then.
const httpShutdownGrace = 5 * time.Second

// ErrNoChannel is why `serve` refuses a configuration: it has nothing to
// serve on.
var ErrNoChannel = errors.New("no channel is enabled: set " + EnableChannelKeys() + ", set http.listen for the OpenAI-compatible API, or talk in the terminal with `switchboard chat`")

// EnableChannelKeys names the keys that enable a chat platform:
// "channels.telegram.enabled or channels.discord.enabled".
func EnableChannelKeys() string {
	keys := make([]string, len(registry.All))
	for i, d := range registry.All {
		keys[i] = "channels." + d.Name + ".enabled"
	}
	return strings.Join(keys, " or ")
}

// CheckServable returns ErrNoChannel when cfg enables no channel that serve
// runs (no chat platform, nor the HTTP API).
func CheckServable(cfg *config.Config) error {
	for _, d := range registry.All {
		if cfg.Channels.Enabled(d.Name) {
			return nil
		}
	}
	if cfg.HTTP.Listen == "" {
		return ErrNoChannel
	}
	return nil
}

// Serve runs every enabled channel and the HTTP server until ctx ends
// (SIGINT, SIGTERM), calling Reload on every value from hup (SIGHUP). Each
// channel runs on its own: one that fails to start or drops is retried
// with a capped backoff while the others serve. Then it shuts down
// gracefully: no new messages, running turns get shutdown_timeout to finish
// (the rest are checkpointed and resume after a restart), and background
// work is drained; Close closes the store.
//
// Serve logs what fails and returns it; a stop asked for while starting is
// a clean stop (nil).
func (g *Gateway) Serve(ctx context.Context, hup <-chan os.Signal) error {
	cfg, log := g.cfg, g.log
	sup := newSupervisor(g.router, log)
	g.sup = sup
	sup.onRestart = g.mon.metrics.ChannelRestarted
	g.mon.metrics.JobSource("learning", g.learningOutcomes)
	g.mon.metrics.Channels(sup.up)
	var roles roleHolder // nil unless replicas share the store
	if g.replica != nil {
		roles = g.replica
	}
	var specs []channelSpec
	if g.early != nil {
		specs = g.early.specs // building since before the store opened
	} else {
		specs = channelSpecs(cfg, log, g.store, roles, g.mon.metrics.Paced, g.mon.metrics.DeliveryStatus)
	}
	var hooked hooks
	srv, err := g.startHTTP(sup, hooked.handler)
	if err != nil {
		log.Error("start the HTTP server", "err", err)
		return err
	}
	for i := range specs {
		specs[i] = hooked.wrap(specs[i], srv != nil, log)
	}
	if srv != nil {
		// The chat API authenticates with http.token, so whoever gets in
		// may talk to the agent.
		specs = append(specs, channelSpec{name: chatapi.ChannelName, access: router.Access{AllowAll: true},
			build: func(context.Context) (channels.Channel, error) { return g.mon.api, nil }})
	}
	st := &stopping{sup: sup, srv: srv, stopChannels: func() {}}
	if g.replica != nil {
		// Before any chat is taken: a lease lives by its owner's heartbeat.
		if err := g.replica.Start(ctx); err != nil {
			log.Error("join the replicas on the store", "err", err)
			g.stop(ctx, st)
			return err
		}
		defer g.leave() // after the router and channels have stopped
	}
	run := make(chan struct{})
	chctx, stopChannels := context.WithCancel(ctx) // channels end with ctx, or if the router cannot start
	defer stopChannels()
	st.stopChannels, st.run, st.channels = stopChannels, run, true
	sup.start(chctx, specs, run)
	if g.opts.BeforeRouterStart != nil {
		g.opts.BeforeRouterStart()
	}
	if err := g.router.Start(ctx); err != nil {
		// Asked to stop while starting (the router's reads end with ctx):
		// not a failure.
		if ctx.Err() != nil {
			log.Info("stopped while starting")
			err = nil
		} else {
			log.Error("start router", "err", err)
		}
		st.router = true
		g.stop(ctx, st)
		return err
	}
	g.serving.Store(true)
	close(run)
	st.run = nil
	st.stopScheduler = g.startScheduler(ctx)
	defer g.startGreeter(ctx)() // before the store closes (Close)
	st.router, st.serving = true, true
	log.Info("switchboard serving", "version", g.opts.Version, "model", cfg.LLM.Model, "channels", len(specs))
	go func() { // what start-up left for later: the built-in tools' schemas (agent.CompileLater)
		if err := agent.ResolveDeferred(); err != nil {
			log.Error("a built-in tool's parameter schema is invalid", "err", err)
		}
	}()
	for ctx.Err() == nil {
		select {
		case <-hup:
			log.Info("SIGHUP: reloading the configuration")
			g.Reload()
		case <-ctx.Done():
		}
	}
	log.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	g.stop(ctx, st)
	log.Info("stopped")
	return nil
}

// stopping is what Serve has started so far, for stop.
type stopping struct {
	sup           *supervisor
	srv           *httpapi.Server // nil without http.listen
	channels      bool            // the supervisor started the channels
	stopChannels  func()
	run           chan struct{} // lets the channels run; nil once closed
	router        bool          // the router was started (or tried to)
	stopScheduler func()        // stops waiting for the scheduler role; nil before serving
	serving       bool          // the router had started: failures to stop are logged
}

// stop is Serve's one shutdown sequence: the HTTP server stops being ready,
// the scheduler stops, the router gets shutdown_timeout for its turns, the
// channels end (their sends are done once the router is), and the HTTP
// server waits a moment for its open requests.
func (g *Gateway) stop(ctx context.Context, st *stopping) {
	warn := func(msg string, err error) {
		if err != nil && st.serving {
			g.log.Warn(msg, "err", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.cfg.ShutdownTimeout)
	defer cancel()
	if st.serving && st.srv != nil {
		st.srv.Drain() // /readyz fails from now on
	}
	if st.stopScheduler != nil {
		st.stopScheduler()
		warn("scheduled runs cut short resume after a restart", g.sched.Stop(sctx))
	}
	if st.router {
		warn("turns still running at the deadline were checkpointed; they resume after a restart", g.router.Shutdown(sctx))
	}
	if st.channels {
		st.stopChannels()
		if g.early != nil {
			g.early.cancel()
		}
		if st.run != nil {
			close(st.run) // the channels never ran: they see the end at once
		}
		st.sup.stopped()
	}
	if st.srv != nil {
		hctx, hcancel := context.WithTimeout(context.WithoutCancel(ctx), httpShutdownGrace)
		defer hcancel()
		warn("http server", st.srv.Shutdown(hctx))
	}
}
