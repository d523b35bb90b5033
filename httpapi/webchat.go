package httpapi

// The web chat: the dashboard's page for talking to the agent from the
// browser. It is not a second way into the agent: the page's script posts
// each message to POST /webchat/messages, which hands it, as a streamed
// chat completion asking for tool progress, to the chat API's own handler
// (channels/chatapi), so it goes through the router and the agent loop as
// every channel's messages do and streams back as the chat API streams.
// The session is the signed-in operator's: the chat API's user is set
// here, from the sign-in (Server.operator), never from the browser. An
// approval question comes with the final chunk (chatapi.ApprovalField);
// the page shows it with Approve and Deny buttons, which send "yes" or
// "no" as the chat API's clients do.
//
// POST /webchat/messages takes {"text": "..."} as JSON, behind the
// dashboard's sign-in, with the page's CSRF token in X-Switchboard-CSRF,
// and, like every state-changing request, only from the server's own
// origin (guard.go).

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/switchboard-gateway/switchboard/internal/httpjson"
	"github.com/switchboard-gateway/switchboard/llm"
	"github.com/switchboard-gateway/switchboard/store"
)

const (
	// completionsRoute is the chat API's route the web chat posts through.
	completionsRoute = "POST /v1/chat/completions"
	// webChatBody caps a web chat message's request body; the chat API
	// applies channels.max_input_chars to the text itself.
	webChatBody = 4 << 20
)

type webChatView struct {
	Title    string
	Head     head
	CSRF     string
	Off      bool   // no chat API in this process
	Operator string // the session's user in the chat API
	ChatID   int64  // the operator's chat, once it has one
	// Earlier are the last messages of the operator's current session,
	// shown again when the page is opened.
	Earlier []chatLine
}

// chatLine is a message as the web chat shows it: the operator's, or what
// the agent sent.
type chatLine struct{ Role, Text string }

// webChatEarlier caps the messages shown again.
const webChatEarlier = 40

// transcript returns what was said in a session: the user's messages and
// what the agent sent (send_message texts, and plain answers; not the
// text beside tool calls, which is never sent), the last n.
func transcript(msgs []store.Message, n int) []chatLine {
	var out []chatLine
	for _, m := range msgs {
		if m.Hidden {
			continue
		}
		switch {
		case m.Role == llm.RoleUser && m.Content != "":
			out = append(out, chatLine{Role: "user", Text: m.Content})
		case m.Role == llm.RoleAssistant && len(m.ToolCalls) == 0 && m.Content != "":
			out = append(out, chatLine{Role: "assistant", Text: m.Content})
		case m.Role == llm.RoleAssistant:
			for _, c := range m.ToolCalls {
				var args struct {
					Text string `json:"text"`
				}
				if c.Name == "send_message" && json.Unmarshal([]byte(c.Arguments), &args) == nil && args.Text != "" {
					out = append(out, chatLine{Role: "assistant", Text: args.Text})
				}
			}
		}
	}
	return out[max(len(out)-n, 0):]
}

func (s *Server) webChatPage(w http.ResponseWriter, r *http.Request) (string, any, error) {
	v := &webChatView{Title: "Web chat", Head: s.head(r), CSRF: csrfToken(w, r), Off: s.completions == nil,
		Operator: s.operator(r)}
	if !v.Off {
		chats, err := s.opts.Store.SearchChats(r.Context(), v.Operator, 5)
		if err != nil {
			return "", nil, err
		}
		for _, c := range chats {
			if c.Channel == webChatChannel && c.Key == v.Operator {
				v.ChatID = c.ID
			}
		}
	}
	if v.ChatID != 0 {
		sessions, err := s.opts.Store.Sessions(r.Context(), v.ChatID) // newest first
		if err != nil {
			return "", nil, err
		}
		if len(sessions) > 0 && sessions[0].EndedAt == nil {
			msgs, err := s.opts.Store.Messages(r.Context(), sessions[0].ID)
			if err != nil {
				return "", nil, err
			}
			v.Earlier = transcript(msgs, webChatEarlier)
		}
	}
	return "webchat.html", v, nil
}

// webChatChannel is the chat API's channel name (chatapi.ChannelName),
// under which the operator's chat is stored.
const webChatChannel = "http"

// webChatSend hands a web chat message to the chat API as the operator's
// streamed chat completion.
func (s *Server) webChatSend(w http.ResponseWriter, r *http.Request) {
	if s.completions == nil {
		httpjson.Error(w, http.StatusNotFound, "invalid_request_error", "no_chat_api",
			"the chat API is not part of this process, so there is no web chat")
		return
	}
	if !csrfHeaderOK(r) {
		s.log.Warn("web chat message refused: missing or wrong form token (csrf)", "remote", r.RemoteAddr)
		httpjson.Error(w, http.StatusForbidden, "invalid_request_error", "csrf",
			"the page expired or the request did not come from it; reload the web chat and send again")
		return
	}
	var msg struct {
		Text string `json:"text"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, webChatBody)).Decode(&msg); err != nil {
		code, why := http.StatusBadRequest, "the body is not {\"text\": \"...\"}: "+err.Error()
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			code, why = http.StatusRequestEntityTooLarge, "the message is too large; send it in parts"
		}
		httpjson.Error(w, code, "invalid_request_error", "invalid_message", why)
		return
	}
	if strings.TrimSpace(msg.Text) == "" {
		httpjson.Error(w, http.StatusBadRequest, "invalid_request_error", "empty_message", "the message is empty")
		return
	}
	body, err := json.Marshal(map[string]any{
		"stream": true, "user": s.operator(r), "switchboard_progress": true,
		"messages": []map[string]string{{"role": "user", "content": msg.Text}},
	})
	if err != nil {
		httpjson.Error(w, http.StatusInternalServerError, "server_error", "encode", "the message could not be encoded")
		return
	}
	in := r.Clone(r.Context())
	in.Body, in.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	in.Header.Set("Content-Type", "application/json")
	in.Header.Del("X-Switchboard-User") // the operator is the user; nothing from the browser chooses it
	in.URL.Path = "/v1/chat/completions"
	s.completions.ServeHTTP(w, in)
}
