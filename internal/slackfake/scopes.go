package slackfake

import (
	"slices"
	"strings"
)

// DefaultScopes are the bot token's scopes in a new fake: what a Slack
// chat bot with DMs, mentions, threads, files, reactions and assistant
// status asks for.
var DefaultScopes = []string{
	"app_mentions:read", "assistant:write", "channels:history", "channels:read", "chat:write",
	"files:read", "files:write", "groups:history", "groups:read", "im:history", "im:read", "im:write",
	"mpim:history", "mpim:read", "reactions:write", "users:read",
}

// methodScope is the bot scope a method needs, "" for none. A method
// whose scope depends on the conversation is in conversationScope.
var methodScope = map[string]string{
	"chat.postMessage":             "chat:write",
	"chat.update":                  "chat:write",
	"chat.delete":                  "chat:write",
	"reactions.add":                "reactions:write",
	"users.info":                   "users:read",
	"files.getUploadURLExternal":   "files:write",
	"files.completeUploadExternal": "files:write",
	"assistant.threads.setStatus":  "assistant:write",
}

// conversationScope is the read scope for a conversation id, for
// conversations.info.
func conversationScope(id string) string {
	switch channelType(id) {
	case "im":
		return "im:read"
	case "group":
		return "groups:read"
	}
	return "channels:read"
}

// SetScopes replaces the bot token's scopes. A method whose scope is
// missing answers missing_scope with needed and provided, as Slack does;
// url_private without files:read answers the sign-in page.
func (f *Fake) SetScopes(scopes ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scopes = slices.Clone(scopes)
}

// missingScopeLocked returns the scope a bot call lacks, or ""; f.mu
// must be held.
func (f *Fake) missingScopeLocked(method string, p params) string {
	need := methodScope[method]
	if method == "conversations.info" {
		need = conversationScope(p["channel"])
	}
	if need == "" || slices.Contains(f.scopes, need) {
		return ""
	}
	return need
}

func (f *Fake) scopeHeaderLocked() string { return strings.Join(f.scopes, ",") }
