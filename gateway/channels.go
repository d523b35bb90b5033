package gateway

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/registry"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/router"
	"github.com/switchboard-gateway/switchboard/tools"
)

// ownAPIHost is the outbound guard's allowance for a channel's configured
// API base: its host and port exactly when it is not the platform's own
// (a fake on loopback in tests, a local Bot API server), else none.
func ownAPIHost(base, platform string) []string {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || base == platform {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return []string{net.JoinHostPort(u.Hostname(), port)}
}

// inboxReader is what a channel's catch-up reads from the store, and
// where its delivery statuses go.
type inboxReader interface {
	LatestInbound(ctx context.Context, channel string) (map[string]string, error)
	LatestInboundAt(ctx context.Context, channel, chat string) (time.Time, error)
	SetDeliveryStatus(ctx context.Context, channel, platformMsgID, status, errText string, at time.Time) (bool, error)
}

// channelStater keeps the channels' own state (channels.State) in the
// store.
type channelStater interface {
	ChannelState(ctx context.Context, channel, key string) (string, bool, error)
	SetChannelState(ctx context.Context, channel, key, value string) error
	DeleteChannelState(ctx context.Context, channel, key string) error
}

// scopedState is one channel's part of a channelStater.
type scopedState struct {
	st      channelStater
	channel string
}

func (s scopedState) GetState(ctx context.Context, key string) (string, bool, error) {
	return s.st.ChannelState(ctx, s.channel, key)
}
func (s scopedState) SetState(ctx context.Context, key, value string) error {
	return s.st.SetChannelState(ctx, s.channel, key, value)
}
func (s scopedState) DeleteState(ctx context.Context, key string) error {
	return s.st.DeleteChannelState(ctx, s.channel, key)
}

// roleHolder claims one of several roles among replicas (cluster.Replica).
type roleHolder = channels.RoleHolder

// channelSpecs describes the chat adapters enabled in the configuration,
// one per enabled platform of channels/registry, in its order. Access
// rules come from each channel's allowlists (empty admits nobody).
// Nothing is contacted here: the supervisor builds and runs each channel,
// and retries one that fails while the others serve. A channel that catches
// up after a reconnect reads its newest stored messages from inbox.
//
// roles is the replica when replicas share the store (nil otherwise): a
// channel may wait for a role (Telegram long polling for the poller role)
// or claim one (a Discord gateway split into shards without a configured
// shard_id claims a free one).
//
// onPaced (nil: none) counts the calls an adapter's outbound pacing held
// back, for the metrics; onStatus (nil: none) the delivery statuses a
// platform reports.
func channelSpecs(cfg *config.Config, log *slog.Logger, inbox inboxReader, roles roleHolder, onPaced, onStatus func(channel, s string)) []channelSpec {
	var out []channelSpec
	for _, d := range registry.All {
		sec := cfg.Channels.Section(d.Name)
		if sec == nil || !sec.Settings().Enabled {
			continue
		}
		name := d.Name
		env := channels.BuildEnv{Logger: log,
			LatestInbound: func(ctx context.Context) (map[string]string, error) {
				return inbox.LatestInbound(ctx, name)
			},
			LatestInboundAt: func(ctx context.Context, chat string) (time.Time, error) {
				return inbox.LatestInboundAt(ctx, name, chat)
			},
			RecordDeliveryStatus: func(ctx context.Context, msgID, status, errText string, at time.Time) bool {
				if at.IsZero() {
					at = time.Now()
				}
				taken, err := inbox.SetDeliveryStatus(ctx, name, msgID, status, errText, at)
				if err != nil {
					log.Warn("delivery status not stored", "channel", name, "message_id", msgID, "status", status, "err", err)
				}
				return taken
			},
			// Attachments through web_fetch's outbound guard; a configured
			// API base other than the platform's (a fake) is the one exception.
			DownloadTransport: func(apiBase, platformBase string) http.RoundTripper {
				return tools.GuardedTransport(ownAPIHost(apiBase, platformBase), nil, nil)
			},
		}
		if roles != nil {
			env.Roles = roles
		}
		if st, ok := inbox.(channelStater); ok {
			env.State = scopedState{st: st, channel: name}
		}
		if cfg.Store.Driver == config.StoreSQLite {
			env.StateDir = filepath.Dir(cfg.Store.Path)
		}
		if onPaced != nil {
			env.OnPaced = func(outcome string) { onPaced(name, outcome) }
		}
		if onStatus != nil {
			env.OnDeliveryStatus = func(status string) { onStatus(name, status) }
		}
		access := channelAccess(cfg, name)
		live := new(atomic.Pointer[router.Access])
		live.Store(&access)
		env.Access = func() channels.Access { return *live.Load() }
		l := d.Build(sec, env)
		out = append(out, channelSpec{name: name, access: access, live: live, build: l.Build, gate: l.Gate})
	}
	return out
}

// channelAccess is a chat channel's admission rule from its allowlists.
func channelAccess(cfg *config.Config, name string) router.Access {
	if sec := cfg.Channels.Section(name); sec != nil {
		return sec.Access()
	}
	return router.Access{}
}

// channelSwitch is one of the platforms' common switches (stream_preview,
// show_tool_progress) by channel name.
func channelSwitch(cfg *config.Config, on func(*channels.Common) bool) map[string]bool {
	out := map[string]bool{}
	for _, d := range registry.All {
		if sec := cfg.Channels.Section(d.Name); sec != nil {
			out[d.Name] = on(sec.Settings())
		}
	}
	return out
}
