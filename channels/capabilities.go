package channels

import (
	"net/http"

	"github.com/switchboard-gateway/switchboard/agent"
)

// The optional capabilities the router and the gateway discover on an
// adapter by type assertion, beside the ones in channels.go (Typer,
// Editor, Asker, …). Each adapter that has one says so with an interface
// guard (var _ channels.X = (*Adapter)(nil)).

// TurnWatcher is a channel that follows the turns of its own messages as
// they run: the terminal shows the streamed reply, tool activity and
// failures; the chat API streams the reply to the waiting request and
// answers it when the turn ends. The router calls TurnEvent for every event
// of a turn on this channel, in order, from the turn's goroutine; in is
// the message the turn is for (a job's made-up Inbound has no MessageID).
type TurnWatcher interface {
	TurnEvent(in Inbound, ev agent.Event)
}

// InProcessReplier is a channel whose replies must be sent by the process
// that took the message in: the HTTP API answers on the request's open
// connection, the console on its terminal. Among replicas, such a message
// waits for its chat's lease before it is stored, so no other replica
// answers it.
type InProcessReplier interface {
	RepliesInProcess() bool
}

// Connecter is a channel that knows whether its connection is up right
// now; the supervisor reports a running channel that is not connected as
// starting (in /readyz and the dashboard).
type Connecter interface {
	Connected() bool
}

// Standbyer is a channel that may wait, while it runs, for a part another
// replica serves (a Discord shard); the supervisor reports it as on
// standby rather than starting while it is not connected.
type Standbyer interface {
	Standby() bool
}

// HTTPHandler is a channel that takes its platform's events by HTTP on the
// gateway's own server (http.listen), such as Slack's Events API. Handler
// returns the path and the handler, or a nil handler when the channel
// takes none (Slack in Socket Mode). The gateway serves POST requests to
// that path with it (and GET requests, for a handshake such as
// WhatsApp's), without http.token: the handler authenticates its
// platform's requests itself (a signature), and answers 2xx only once
// what came in is stored.
type HTTPHandler interface {
	Handler() (path string, h http.Handler)
}
