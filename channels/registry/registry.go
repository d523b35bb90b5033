// Package registry is the list of chat platforms: the one place that names
// them. Configuration, validation, secrets, the gateway's wiring, reload,
// skills' and jobs' channel names, check, doctor, init and the usage text
// range over All. A new platform's package exports a channels.Definition
// and adds one line here.
package registry

import (
	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/discord"
	"github.com/switchboard-gateway/switchboard/channels/email"
	"github.com/switchboard-gateway/switchboard/channels/matrix"
	"github.com/switchboard-gateway/switchboard/channels/slack"
	"github.com/switchboard-gateway/switchboard/channels/telegram"
	"github.com/switchboard-gateway/switchboard/channels/whatsapp"
)

// All are the chat platforms, in the order they appear in the
// configuration, check's output and init's questions.
var All = []channels.Definition{
	telegram.Definition,
	discord.Definition,
	slack.Definition,
	whatsapp.Definition,
	email.Definition,
	matrix.Definition,
}

// Names returns the platforms' names, in order.
func Names() []string {
	out := make([]string, len(All))
	for i, d := range All {
		out[i] = d.Name
	}
	return out
}

// Lookup returns the platform called name.
func Lookup(name string) (channels.Definition, bool) {
	for _, d := range All {
		if d.Name == name {
			return d, true
		}
	}
	return channels.Definition{}, false
}
