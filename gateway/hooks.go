package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	"github.com/switchboard-gateway/switchboard/channels"
)

// hooks are the HTTP endpoints of the channels that take their platform's
// events on the gateway's server (channels.HTTPHandler): path → the
// handler of the channel built last, so that a rebuilt adapter takes over
// its path.
type hooks struct {
	mu sync.Mutex
	m  map[string]http.Handler
}

// handler returns the handler for path, or nil.
func (h *hooks) handler(path string) http.Handler {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[path]
}

// wrap makes build record the handler of the channel it builds. Without
// an HTTP server (no http.listen) such a channel would never hear from its
// platform: that is logged.
func (h *hooks) wrap(spec channelSpec, serving bool, log *slog.Logger) channelSpec {
	build := spec.build
	spec.build = func(ctx context.Context) (channels.Channel, error) {
		ch, err := build(ctx)
		if err != nil {
			return ch, err
		}
		if hh, ok := ch.(channels.HTTPHandler); ok {
			if path, handler := hh.Handler(); handler != nil {
				if !serving {
					log.Error("this channel takes its events by HTTP, but http.listen is not set: nothing will arrive", "channel", spec.name, "path", path)
				}
				h.mu.Lock()
				if h.m == nil {
					h.m = map[string]http.Handler{}
				}
				h.m[path] = handler
				h.mu.Unlock()
			}
		}
		return ch, nil
	}
	return spec
}
