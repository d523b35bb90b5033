package gateway

import (
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-gateway/switchboard/httpapi"
	"github.com/switchboard-gateway/switchboard/mcpclient"
	"github.com/switchboard-gateway/switchboard/metrics"
	"github.com/switchboard-gateway/switchboard/skills"
)

// statusNotes is the router's StatusNotes hook, the operator's lines of
// /status (shown to admins only): the skill problems, the channels that
// failed and are retried (chans; nil outside serve), and the MCP servers
// that are not connected (and whether they are being retried).
func statusNotes(watcher *skills.Watcher, mcp *mcpclient.Manager, chans func() []httpapi.ChannelStatus) func() []string {
	return func() []string {
		var notes []string
		reg := watcher.Current()
		for _, p := range reg.Problems() {
			notes = append(notes, "Skill problem: "+p.Error())
		}
		for _, w := range reg.Withheld() {
			notes = append(notes, withheldNote(w))
		}
		if chans != nil {
			for _, c := range chans() {
				if c.State == httpapi.StateRetrying {
					notes = append(notes, fmt.Sprintf("Channel %s failed and is retried (%d restarts so far, next %s): %s",
						c.Name, c.Restarts, nextRetry(c.NextRetry), c.LastError))
				}
			}
		}
		for _, m := range mcp.Status() {
			switch {
			case m.Connected:
			case m.Retrying:
				notes = append(notes, fmt.Sprintf("MCP server %s is down and retried in the background (%d retries so far, next %s): %s",
					m.Name, m.Attempts, nextRetry(m.NextRetry), m.LastError))
			default:
				notes = append(notes, fmt.Sprintf("MCP server %s is not connected: %s", m.Name, m.LastError))
			}
		}
		return notes
	}
}

// nextRetry says when the next retry starts, to the second.
func nextRetry(at time.Time) string {
	d := time.Until(at).Round(time.Second)
	if at.IsZero() || d <= 0 {
		return "now"
	}
	return "in " + d.String()
}

// withheldNote says that a skill is not offered for lack of a grant, and
// what it lacks.
func withheldNote(w skills.Withheld) string {
	lacks := make([]string, len(w.Lacks))
	for i, p := range w.Lacks {
		lacks[i] = p.Error()
	}
	return fmt.Sprintf("Skill %s is not offered: it asks for more than skills.grants.%s gives it: %s", w.Skill.Name, w.Skill.Name, strings.Join(lacks, "; "))
}

// modelDown is the router's ModelWait.Down for /status: why the model
// server is not answering, from the calls in a row that found it
// unavailable; "" while it answers.
func modelDown(health func() metrics.ModelHealth) func() string {
	return func() string {
		h := health()
		if h.Unavailable == 0 || h.LastFailure.IsZero() {
			return ""
		}
		msg := h.LastError
		if r := []rune(msg); len(r) > 200 {
			msg = string(r[:200]) + "…"
		}
		calls := "1 call"
		if h.Unavailable != 1 {
			calls = fmt.Sprintf("%d calls", h.Unavailable)
		}
		return fmt.Sprintf("%s in a row failed, the last at %s: %s", calls, h.LastFailure.UTC().Format("15:04:05 UTC"), msg)
	}
}
