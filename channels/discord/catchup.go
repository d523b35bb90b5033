package discord

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/switchboard-gateway/switchboard/channels"
)

// A new gateway session (the first READY of a process, or one after an
// invalid session) receives no events from before it: Discord replays
// missed events only on RESUME. So on each READY the adapter asks REST for
// the messages posted after the newest one it already took in, in every chat
// it has talked in, and hands them to the sink like live ones. The router's
// intake stores a message once, so one already taken in is not repeated.
//
// With shards, the store lists the chats of every shard. The catch-up needs
// each chat's guild anyway (REST messages carry none), from the gateway's
// state or one GET /channels/{id}; a chat whose guild belongs to another
// shard (a DM: to any shard but 0) is then left to that shard, before its
// history is fetched. So each shard fetches only its own chats' messages,
// as the gateway sends it only their live ones; a chat whose guild cannot
// be read is fetched as before (a failure is logged), and were one fetched
// twice, the intake would still take each message in once.

const (
	// defaultCatchUpLimit caps the messages recovered per chat: enough for a
	// long outage of a busy channel, few enough that a restart does not
	// flood the model with stale questions.
	defaultCatchUpLimit = 500
	// defaultCatchUpMaxAge: an older message is likely to be stale, and
	// its author has moved on.
	defaultCatchUpMaxAge = 24 * time.Hour
	// catchUpPage is Discord's largest page of GET /channels/{id}/messages.
	catchUpPage = 100
	// catchUpWorkers fetch chats at once: a chat's live messages wait for
	// its catch-up, so a restart with many chats should not take them one
	// by one, nor burst past Discord's global limit of 50 requests a second.
	catchUpWorkers = 4
	// catchUpChatTimeout bounds one chat's catch-up, retries included.
	catchUpChatTimeout = time.Minute
	// lastSeenTimeout bounds the LastSeen call, which runs while the gateway
	// reader waits (so that no live message overtakes a recovered one).
	lastSeenTimeout = 5 * time.Second
	// discordEpoch is the first millisecond of a snowflake, Unix time.
	discordEpoch = 1420070400000
)

// catchUp is a chat's recovered messages, oldest first, or why there are
// none.
type catchUp struct {
	msgs []*discordgo.Message
	err  error
}

// startCatchUp runs on READY, on the gateway reader: it reads where each
// chat stands and queues, first in each chat's queue, a step that waits
// for the chat's missed messages and delivers them; live messages of the
// chat queue behind it and so reach the sink after the older ones. A few
// goroutines then fetch the chats, the most recently active first.
func (a *Adapter) startCatchUp(ctx context.Context, sink channels.Sink, botID string) {
	if a.lastSeen == nil {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, lastSeenTimeout)
	seen, err := a.lastSeen(qctx)
	cancel()
	if err != nil {
		a.log.Warn("discord: catch-up skipped: read the last messages taken in", "err", err)
		return
	}
	if len(seen) == 0 {
		return
	}
	chats := make([]string, 0, len(seen))
	for chat := range seen {
		chats = append(chats, chat)
	}
	slices.SortFunc(chats, func(x, y string) int { return compareIDs(seen[y], seen[x]) })

	results := make(map[string]chan catchUp, len(chats))
	for _, chat := range chats {
		r := make(chan catchUp, 1)
		results[chat] = r
		a.queues.push(chat, func() { a.deliverCaughtUp(ctx, sink, chat, botID, <-r) })
	}
	floor := snowflakeAt(time.Now().Add(-a.catchUpAge))
	start := time.Now()
	todo := make(chan string, len(chats))
	for _, chat := range chats {
		todo <- chat
	}
	close(todo)
	var mu sync.Mutex
	found, failed, others := 0, 0, 0
	var workers sync.WaitGroup
	for range min(catchUpWorkers, len(chats)) {
		workers.Go(func() {
			for chat := range todo {
				after := seen[chat]
				if compareIDs(floor, after) > 0 {
					after = floor
				}
				cctx, cancel := context.WithTimeout(ctx, catchUpChatTimeout)
				msgs, err := a.missed(cctx, chat, after)
				cancel()
				other := errors.Is(err, errOtherShard)
				if other {
					err = nil
				}
				mu.Lock()
				found += len(msgs)
				switch {
				case other:
					others++
				case err != nil:
					failed++
				}
				mu.Unlock()
				results[chat] <- catchUp{msgs: msgs, err: err}
			}
		})
	}
	a.bg.Go(func() {
		workers.Wait()
		attrs := []any{"chats", len(chats), "messages", found, "chats_failed", failed}
		if sh := a.shardLogAttrs(); sh != nil {
			attrs = append(append(attrs, "chats_other_shards", others), sh...)
		}
		a.log.Info("discord: caught up on messages sent before this gateway session",
			append(attrs, "took", time.Since(start).Round(time.Millisecond))...)
	})
}

// deliverCaughtUp hands a chat's recovered messages to the sink, filtered
// and normalised as live ones are.
func (a *Adapter) deliverCaughtUp(ctx context.Context, sink channels.Sink, chat, botID string, r catchUp) {
	if r.err != nil && ctx.Err() == nil {
		a.log.Warn("discord: catch-up of a chat failed; messages sent to it while disconnected are not recovered",
			"chat", chat, "recovered", len(r.msgs), "err", a.redact.string(r.err.Error()))
	}
	n := 0
	for _, m := range r.msgs {
		if ctx.Err() != nil {
			return
		}
		if a.accept(m, botID) {
			a.handleMessage(ctx, sink, m, botID)
			n++
		}
	}
	if n > 0 {
		// Some may have come live as well, right after READY; the sink
		// takes each in once.
		a.log.Info("discord: delivered the messages the catch-up found", "chat", chat, "messages", n)
	}
}

// errOtherShard: the chat's events go to another shard, which catches up
// on it.
var errOtherShard = errors.New("discord: the chat belongs to another gateway shard")

// missed fetches the messages of a chat after the message id after, oldest
// first, at most catchUpLimit. REST message objects carry no guild_id, so
// it is filled in from the channel: without it a guild message would pass
// for a DM, which needs no mention. A chat of another shard is not fetched
// (errOtherShard).
func (a *Adapter) missed(ctx context.Context, chat, after string) ([]*discordgo.Message, error) {
	guildID, err := a.channelGuild(ctx, chat)
	if err != nil {
		return nil, err
	}
	if !a.ownsGuild(guildID) {
		return nil, errOtherShard
	}
	var out []*discordgo.Message
	for {
		var page []*discordgo.Message
		err := a.retry(ctx, "catch up", func(opts ...discordgo.RequestOption) error {
			var err error
			page, err = a.s.ChannelMessages(chat, catchUpPage, "", after, "", opts...)
			return err
		})
		if err != nil {
			return out, a.redact.wrap(err, "discord: fetch missed messages")
		}
		slices.SortFunc(page, func(x, y *discordgo.Message) int { return compareIDs(x.ID, y.ID) })
		for _, m := range page {
			if compareIDs(m.ID, after) <= 0 {
				continue
			}
			if len(out) == a.catchUpMax {
				a.log.Warn("discord: catch-up stopped at its limit; newer messages sent while disconnected are not recovered",
					"chat", chat, "limit", a.catchUpMax)
				return out, nil
			}
			if m.GuildID == "" {
				m.GuildID = guildID
			}
			if m.ChannelID == "" {
				m.ChannelID = chat
			}
			out = append(out, m)
		}
		if len(page) < catchUpPage {
			return out, nil
		}
		after = page[len(page)-1].ID
	}
}

// channelGuild is the guild of a channel ("" for a DM), from the gateway's
// state or REST.
func (a *Adapter) channelGuild(ctx context.Context, chat string) (string, error) {
	if c, err := a.s.State.Channel(chat); err == nil {
		return c.GuildID, nil
	}
	var c *discordgo.Channel
	err := a.retry(ctx, "look up channel", func(opts ...discordgo.RequestOption) error {
		var err error
		c, err = a.s.Channel(chat, opts...)
		return err
	})
	if err != nil {
		return "", a.redact.wrap(err, "discord: look up channel %s", chat)
	}
	return c.GuildID, nil
}

// compareIDs orders snowflakes as numbers: the longer one is larger, and
// ones of a length compare as text.
func compareIDs(x, y string) int {
	if c := cmp.Compare(len(x), len(y)); c != 0 {
		return c
	}
	return cmp.Compare(x, y)
}

// snowflakeAt is the smallest snowflake of t's millisecond, as an "after"
// bound.
func snowflakeAt(t time.Time) string {
	ms := max(t.UnixMilli()-discordEpoch, 0)
	return strconv.FormatUint(uint64(ms)<<22, 10)
}
