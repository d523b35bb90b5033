package router

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/pricing"
	"github.com/switchboard-gateway/switchboard/store"
)

// Days /usage covers: by default, and at most.
const (
	usageDays    = 7
	maxUsageDays = 90
)

// cacheShare is the share of prompt tokens served from the provider's
// cache, in whole percent, rounded down (never 100 % before all is).
func cacheShare(u llm.Usage) int {
	if u.PromptTokens == 0 {
		return 0
	}
	return u.CachedTokens * 100 / u.PromptTokens
}

// tokensLine is how /status and /usage show a usage: "12,345 tokens
// (10,000 prompt, 61% of them cached; 2,345 completion, 120 reasoning)".
func tokensLine(u llm.Usage) string {
	s := fmt.Sprintf("%s tokens (%s prompt", thousands(u.PromptTokens+u.CompletionTokens), thousands(u.PromptTokens))
	if u.PromptTokens > 0 {
		s += fmt.Sprintf(", %d%% of them cached", cacheShare(u))
	}
	s += fmt.Sprintf("; %s completion", thousands(u.CompletionTokens))
	if u.ReasoningTokens > 0 {
		s += fmt.Sprintf(", %s reasoning", thousands(u.ReasoningTokens))
	}
	return s + ")"
}

// thousands writes n with thousands separators.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}

// sessionUsageLine is /status's line of the conversation's tokens, with
// the estimated cost when the model is priced (all of a conversation's
// turns priced at the configured model: /usage prices each turn's).
func (r *Router) sessionUsageLine(ctx context.Context, sessionID int64) string {
	n, u, err := r.cfg.Store.SessionUsage(ctx, sessionID)
	if err != nil || n == 0 || u.PromptTokens+u.CompletionTokens == 0 {
		return ""
	}
	line := "Tokens: " + tokensLine(u)
	if cost, ok := r.cfg.Prices.Cost(r.cfg.ModelName, u); ok {
		line += ", about " + r.cfg.Prices.Format(cost)
	}
	return line + "\n"
}

// usageReport answers /usage: operators only. It lists the tokens of the
// last days (the argument, default 7) by UTC day and user, with costs
// where the models are priced.
func (r *Router) usageReport(ctx context.Context, in channels.Inbound, args string) string {
	if !r.gate.admin(in) {
		return "Only the operator can see the usage of all users."
	}
	days := usageDays
	if args != "" {
		n, err := strconv.Atoi(args)
		if err != nil || n < 1 || n > maxUsageDays {
			return fmt.Sprintf("Usage: /usage [days], days from 1 to %d (default %d).", maxUsageDays, usageDays)
		}
		days = n
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	rows, err := r.cfg.Store.UsageByDay(ctx, today.AddDate(0, 0, 1-days))
	if err != nil {
		r.log.Error("usage report", "err", err)
		return "The usage is unavailable right now (the store did not answer)."
	}
	return formatUsage(rows, days, r.cfg.Prices)
}

// formatUsage writes /usage's report: a line per day with its total, and
// under it a line per user, the most tokens first.
func formatUsage(rows []store.DayUsage, days int, prices *pricing.Table) string {
	type user struct {
		name  string
		turns int
		u     llm.Usage
		cost  float64
	}
	type day struct {
		at       time.Time
		turns    int
		u        llm.Usage
		cost     float64
		unpriced bool
		users    []*user
	}
	var all []*day
	var total day
	for _, row := range rows {
		if len(all) == 0 || !all[len(all)-1].at.Equal(row.Day) {
			all = append(all, &day{at: row.Day})
		}
		d := all[len(all)-1]
		name := row.Channel + " " + row.UserID
		if row.UserID == "" {
			name = row.Channel + " (scheduled jobs)"
		}
		i := slices.IndexFunc(d.users, func(u *user) bool { return u.name == name })
		if i < 0 {
			d.users = append(d.users, &user{name: name})
			i = len(d.users) - 1
		}
		cost, ok := prices.Cost(row.Model, row.Usage)
		for _, x := range []*day{d, &total} {
			x.turns += row.Turns
			x.u = x.u.Add(row.Usage)
			x.cost += cost
			x.unpriced = x.unpriced || !ok
		}
		d.users[i].turns += row.Turns
		d.users[i].u = d.users[i].u.Add(row.Usage)
		d.users[i].cost += cost
	}
	if len(all) == 0 {
		return fmt.Sprintf("No turns in the last %s.", plural(days, "day"))
	}
	costText := func(cost float64, unpriced bool) string {
		switch {
		case !prices.Priced():
			return ""
		case unpriced && cost == 0:
			return ", not priced"
		case unpriced:
			return ", at least " + prices.Format(cost)
		}
		return ", about " + prices.Format(cost)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Usage of the last %s (UTC): %s in %s%s\n", plural(days, "day"), tokensLine(total.u),
		plural(total.turns, "turn"), costText(total.cost, total.unpriced))
	for _, d := range all {
		fmt.Fprintf(&b, "%s: %s in %s%s\n", d.at.Format("2006-01-02"), tokensLine(d.u), plural(d.turns, "turn"),
			costText(d.cost, d.unpriced))
		slices.SortStableFunc(d.users, func(a, b *user) int {
			return (b.u.PromptTokens + b.u.CompletionTokens) - (a.u.PromptTokens + a.u.CompletionTokens)
		})
		for _, u := range d.users {
			fmt.Fprintf(&b, "  %s: %s tokens, %s, %d%% cached", u.name, thousands(u.u.PromptTokens+u.u.CompletionTokens),
				plural(u.turns, "turn"), cacheShare(u.u))
			if prices.Priced() && u.cost > 0 {
				b.WriteString(", " + prices.Format(u.cost))
			}
			b.WriteString("\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
