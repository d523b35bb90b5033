package httpapi

// Search on the dashboard (GET /search?q=TEXT, the box at the top of every
// page): the chats whose key or title contains the text, and the turns a
// message of which (the user's, or the assistant's reply) contains it, as
// store.SearchChats and store.SearchTurns find them.

import (
	"net/http"
	"strings"

	"github.com/switchboard-gateway/switchboard/store"
)

// searchShown caps each list of results.
const searchShown = 50

type searchView struct {
	Title string
	Head  head
	Query string
	Error string
	Chats []chatRow
	Turns []turnRow
}

func (s *Server) searchPage(_ http.ResponseWriter, r *http.Request) (string, any, error) {
	ctx := r.Context()
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	v := &searchView{Title: "Search", Head: s.head(r), Query: q}
	v.Head.Search = q
	switch {
	case q == "":
		v.Error = "Type a word of a message, or part of a chat's name or id."
		return "search.html", v, nil
	case len(q) > store.MaxSearchLen:
		v.Error = "That is too long to search for: use a word or two."
		return "search.html", v, nil
	}
	chats, err := s.opts.Store.SearchChats(ctx, q, searchShown)
	if err != nil {
		return "", nil, err
	}
	for _, c := range chats {
		v.Chats = append(v.Chats, chatRow{ChatSummary: c, label: s.chatLabel(ctx, c.Chat)})
	}
	turns, err := s.opts.Store.SearchTurns(ctx, q, searchShown)
	if err != nil {
		return "", nil, err
	}
	v.Turns, err = s.withTools(ctx, turns)
	return "search.html", v, err
}
