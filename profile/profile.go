// Package profile owns what the bot learns about the people it talks to:
// per user, a few dimensions (name, language, time zone, preferences,
// communication style), each a series of dated entries of which the newest
// is in force. A background job updates them from what the user says; the
// summary enters the prompt of the user's private chats, and the time zone
// feeds scheduling (ZoneFor).
package profile

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/learning"
	"github.com/switchboard-gateway/switchboard/store"
)

// Store is the part of the store profiles need.
type Store interface {
	Profile(ctx context.Context, userKey string) ([]store.ProfileEntry, error)
	ProfileUsers(ctx context.Context, userID, dimension string) ([]string, error)
	ForgetProfile(ctx context.Context, userKey, dimension string) (int64, error)
	learning.PassStore // Learn
}

// Config wires a Service.
type Config struct {
	Store  Store
	Model  learning.Model // for the update job; may be nil when Learn is not used
	Logger *slog.Logger
}

// Service reads and learns profiles. It is safe for concurrent use.
type Service struct {
	cfg Config
	log *slog.Logger
}

// New returns a Service.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, log: cfg.Logger.With("component", "profile")}
}

// Labels of the dimensions, for people.
var labels = map[string]string{
	store.ProfileName:        "Name",
	store.ProfileLanguage:    "Language",
	store.ProfileTimezone:    "Time zone",
	store.ProfilePreferences: "Preferences",
	store.ProfileStyle:       "Communication style",
}

// Label names a dimension for people ("Time zone").
func Label(dimension string) string {
	if l, ok := labels[dimension]; ok {
		return l
	}
	return dimension
}

// Get returns the user's entries in force (userKey is store.UserKey).
func (p *Service) Get(ctx context.Context, userKey string) ([]store.ProfileEntry, error) {
	return p.cfg.Store.Profile(ctx, userKey)
}

// Forget deletes a dimension ("" for all) of the user's profile.
func (p *Service) Forget(ctx context.Context, userKey, dimension string) (int64, error) {
	if dimension != "" && !slices.Contains(store.ProfileDimensions, dimension) {
		return 0, fmt.Errorf("profile: no dimension %q; use one of %s", dimension, strings.Join(store.ProfileDimensions, ", "))
	}
	return p.cfg.Store.ForgetProfile(ctx, userKey, dimension)
}

// zoneTimeout bounds ZoneFor's store read.
const zoneTimeout = 5 * time.Second

// ZoneFor returns the time zone the user said they live in, or nil when it
// is not known (or the store cannot be read). user is a store.UserKey
// ("telegram:42"); a bare platform user id ("42"), as the scheduler has it,
// is resolved when exactly one user on any channel with that id has a zone.
func (p *Service) ZoneFor(user string) *time.Location {
	ctx, cancel := context.WithTimeout(context.Background(), zoneTimeout)
	defer cancel()
	key := user
	if !strings.Contains(user, ":") {
		keys, err := p.cfg.Store.ProfileUsers(ctx, user, store.ProfileTimezone)
		if err != nil || len(keys) != 1 {
			if err != nil {
				p.log.Warn("cannot read the user's time zone", "user_id", user, "err", err)
			}
			return nil // unknown, or ambiguous across channels
		}
		key = keys[0]
	}
	es, err := p.cfg.Store.Profile(ctx, key)
	if err != nil {
		p.log.Warn("cannot read the user's time zone", "user", key, "err", err)
		return nil
	}
	for _, e := range es {
		if e.Dimension != store.ProfileTimezone {
			continue
		}
		if loc, err := time.LoadLocation(e.Value); err == nil {
			return loc
		}
	}
	return nil
}

// Section renders the user's profile for the dynamic prompt tail; ok is
// false when there is nothing to say. now gives the user's local time when
// their zone is known.
func (p *Service) Section(ctx context.Context, userKey string, now time.Time) (agent.Section, bool) {
	es, err := p.cfg.Store.Profile(ctx, userKey)
	if err != nil {
		p.log.Warn("profile unavailable; the turn goes on without it", "err", err)
		return agent.Section{}, false
	}
	if len(es) == 0 {
		return agent.Section{}, false
	}
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "- %s: %s", Label(e.Dimension), oneLine(e.Value))
		if e.Dimension == store.ProfileTimezone {
			if loc, err := time.LoadLocation(e.Value); err == nil {
				fmt.Fprintf(&b, " (it is %s there now)", now.In(loc).Format("Mon 15:04"))
			}
		}
		b.WriteString("\n")
	}
	return agent.Section{Title: "About the user (their profile)", Body: b.String()}, true
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Limits of the profile's part of a learning pass.
const maxValueRunes = 300

// ProfileArg is the profile's argument of the learning pass's call.
const ProfileArg = "profile"

var profileSchema = json.RawMessage(`{"type":"array","items":{"type":"object","properties":{` +
	`"dimension":{"type":"string","enum":["name","language","timezone","preferences","style"]},` +
	`"value":{"type":"string","description":"the new value in full; for timezone an IANA name such as Europe/Berlin"},` +
	`"source":{"type":"integer","description":"the number of the USER line it comes from"}},` +
	`"required":["dimension","value","source"],"additionalProperties":false}}`)

const profileRules = `The user's profile, with these dimensions:
- name: what the user wants to be called
- language: the language they write in or asked for
- timezone: where they live or are, as an IANA zone name (Europe/Berlin, America/New_York)
- preferences: lasting likes, dislikes and needs that should shape answers (units, diet, formats…)
- style: how they want the assistant to talk to them (brief, detailed, formal, playful…)
Record a dimension only when the user states or clearly shows something new or changed; give the complete new value (for preferences, the full updated list).`

// Part is the profile's share of the learning pass (learning.Pass): it
// shows the model the current profile and checks the updates it records.
func (p *Service) Part() learning.Part { return profilePart{p} }

// Learn runs a learning pass with the profile alone (learning.RunPass) for
// the user and chat c names.
func (p *Service) Learn(ctx context.Context, c store.Cursor) error {
	return learning.RunPass(ctx, learning.PassConfig{Store: p.cfg.Store, Model: p.cfg.Model, Parts: []learning.Part{p.Part()},
		Logger: p.cfg.Logger}, learning.Trigger{Channel: c.Channel, UserID: c.UserID, ChatID: c.ChatID})
}

type profilePart struct{ p *Service }

func (profilePart) Property() string        { return ProfileArg }
func (profilePart) Schema() json.RawMessage { return profileSchema }
func (profilePart) Rules() string           { return profileRules }

func (pp profilePart) Prepare(ctx context.Context, t learning.Trigger, lines []learning.Line) (learning.Prepared, error) {
	p := pp.p
	userKey := store.UserKey(t.Channel, t.UserID)
	cur, err := p.cfg.Store.Profile(ctx, userKey)
	if err != nil {
		return learning.Prepared{}, err
	}
	var b strings.Builder
	b.WriteString("Current profile:\n")
	if len(cur) == 0 {
		b.WriteString("(empty)\n")
	}
	for _, e := range cur {
		fmt.Fprintf(&b, "- %s: %s\n", e.Dimension, oneLine(e.Value))
	}
	decode := func(arg json.RawMessage, into *store.Learned) error {
		if arg == nil {
			return nil
		}
		var updates []struct {
			Dimension string `json:"dimension"`
			Value     string `json:"value"`
			Source    int    `json:"source"`
		}
		if err := json.Unmarshal(arg, &updates); err != nil {
			return fmt.Errorf("profile: the updates are not valid: %w", err)
		}
		for _, u := range updates {
			value := oneLine(u.Value)
			src, ok := learning.UserLine(lines, u.Source)
			switch {
			case !ok || value == "" || !slices.Contains(store.ProfileDimensions, u.Dimension):
				p.log.Info("profile update dropped", "dimension", u.Dimension, "source", u.Source)
				continue
			case u.Dimension == store.ProfileTimezone:
				loc, err := time.LoadLocation(value)
				if err != nil || value == "Local" {
					p.log.Info("profile update dropped: not an IANA time zone", "value", value)
					continue
				}
				value = loc.String()
			}
			if r := []rune(value); len(r) > maxValueRunes {
				value = string(r[:maxValueRunes-1]) + "…"
			}
			into.Profile = append(into.Profile, store.ProfileEntry{UserKey: userKey, Dimension: u.Dimension, Value: value,
				SourceTurnID: src.TurnID})
		}
		return nil
	}
	return learning.Prepared{Context: b.String(), Decode: decode}, nil
}
