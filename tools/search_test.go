package tools_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/tools"
)

// search runs web_search configured with sc.
func search(t *testing.T, sc tools.SearchConfig, args string) (string, error) {
	t.Helper()
	ws := tool(tools.Web(tools.WebConfig{Enabled: true, Search: sc}), tools.WebSearchTool)
	if ws == nil {
		t.Fatalf("web_search is missing with provider %q", sc.Provider)
	}
	return ws.Fn(t.Context(), json.RawMessage(args))
}

const wantResults = `Results for "go generics":

1. Tutorial: Getting started with generics
   https://go.dev/doc/tutorial/generics
   Go 1.18 & later support type parameters.

2. Go generics explained
   https://example.com/generics`

func TestSearchSearXNG(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path+" q="+r.URL.Query().Get("q")+" format="+r.URL.Query().Get("format"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"query":"go generics","results":[
			{"title":"Tutorial: Getting started with generics","url":"https://go.dev/doc/tutorial/generics","content":"Go 1.18 &amp; later support <b>type parameters</b>."},
			{"title":"Go generics explained","url":"https://example.com/generics","content":""},
			{"title":"no url","url":"","content":"skipped"},
			{"title":"Third","url":"https://example.org/3","content":"beyond the count"}]}`)
	}))
	defer srv.Close()
	// The provider's address is the operator's: web_search reaches it on
	// loopback without an allowlist.
	out, err := search(t, tools.SearchConfig{Provider: tools.SearXNG, URL: srv.URL + "/"}, `{"query":"go generics","count":2}`)
	if err != nil {
		t.Fatal(err)
	}
	if out != wantResults {
		t.Errorf("result:\n%s\nwant:\n%s", out, wantResults)
	}
	if want := []string{"GET /search q=go generics format=json"}; !slices.Equal(got, want) {
		t.Errorf("requests = %q, want %q", got, want)
	}
}

func TestSearchBrave(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, fmt.Sprintf("%s %s q=%s count=%s token=%s accept=%s", r.Method, r.URL.Path,
			r.URL.Query().Get("q"), r.URL.Query().Get("count"), r.Header.Get("X-Subscription-Token"), r.Header.Get("Accept")))
		if r.Header.Get("X-Subscription-Token") != "brave-key" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, `{"type":"search","web":{"results":[
			{"title":"Tutorial: Getting started with <strong>generics</strong>","url":"https://go.dev/doc/tutorial/generics","description":"Go 1.18 &amp; later support <strong>type parameters</strong>."},
			{"title":"Go generics explained","url":"https://example.com/generics"}]}}`)
	}))
	defer srv.Close()
	sc := tools.SearchConfig{Provider: tools.Brave, URL: srv.URL + "/res/v1/web/search", APIKey: "brave-key"}
	out, err := search(t, sc, `{"query":"go generics"}`)
	if err != nil {
		t.Fatal(err)
	}
	if out != wantResults {
		t.Errorf("result:\n%s\nwant:\n%s", out, wantResults)
	}
	if want := []string{"GET /res/v1/web/search q=go generics count=5 token=brave-key accept=application/json"}; !slices.Equal(got, want) {
		t.Errorf("requests = %q, want %q", got, want)
	}
	sc.APIKey = "wrong"
	if _, err := search(t, sc, `{"query":"x"}`); err == nil || !strings.Contains(err.Error(), "refused the request (HTTP 401): its API key") {
		t.Errorf("wrong key: err = %v", err)
	}
}

func TestSearchTavily(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+string(body))
		fmt.Fprint(w, `{"query":"go generics","results":[
			{"title":"Tutorial: Getting started with generics","url":"https://go.dev/doc/tutorial/generics","content":"Go 1.18 & later support type parameters.","score":0.9},
			{"title":"Go generics explained","url":"https://example.com/generics","content":"","score":0.5}]}`)
	}))
	defer srv.Close()
	out, err := search(t, tools.SearchConfig{Provider: tools.Tavily, URL: srv.URL + "/search", APIKey: "tvly-key"}, `{"query":"go generics","count":3}`)
	if err != nil {
		t.Fatal(err)
	}
	if out != wantResults {
		t.Errorf("result:\n%s\nwant:\n%s", out, wantResults)
	}
	if want := []string{`POST /search Bearer tvly-key {"max_results":3,"query":"go generics"}`}; !slices.Equal(got, want) {
		t.Errorf("requests = %q, want %q", got, want)
	}
}

func TestSearchErrorsAndEmptyResults(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		fmt.Fprint(w, `{"results":[]}`)
	}))
	defer srv.Close()
	sc := tools.SearchConfig{Provider: tools.SearXNG, URL: srv.URL}
	if out, err := search(t, sc, `{"query":"nothing at all"}`); err != nil || out != `No results for "nothing at all".` {
		t.Errorf("no results: %q, %v", out, err)
	}
	for code, want := range map[int]string{
		http.StatusTooManyRequests:     "rate limiting (HTTP 429)",
		http.StatusForbidden:           "refused the request (HTTP 403)",
		http.StatusInternalServerError: "answered HTTP 500",
	} {
		status = code
		if _, err := search(t, sc, `{"query":"q"}`); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("HTTP %d: err = %v; want %q", code, err, want)
		}
	}
	if _, err := search(t, sc, `{"query":"  "}`); err == nil || !strings.Contains(err.Error(), "query must not be empty") {
		t.Errorf("blank query: err = %v", err)
	}
}

func TestSearchIsAbsentWithoutProvider(t *testing.T) {
	tests := []struct {
		name string
		sc   tools.SearchConfig
		want []string
	}{
		{"no provider", tools.SearchConfig{}, []string{tools.WebFetchTool}},
		{"searxng without url", tools.SearchConfig{Provider: tools.SearXNG}, []string{tools.WebFetchTool}},
		{"unknown provider", tools.SearchConfig{Provider: "altavista", URL: "http://x"}, []string{tools.WebFetchTool}},
		{"searxng", tools.SearchConfig{Provider: tools.SearXNG, URL: "http://search.local"}, []string{tools.WebFetchTool, tools.WebSearchTool}},
		{"brave", tools.SearchConfig{Provider: tools.Brave, APIKey: "k"}, []string{tools.WebFetchTool, tools.WebSearchTool}},
	}
	for _, tt := range tests {
		got := names(tools.Web(tools.WebConfig{Enabled: true, Search: tt.sc}), agent.TurnInfo{})
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: tools %q, want %q", tt.name, got, tt.want)
		}
	}
	ws := tool(tools.Web(tools.WebConfig{Enabled: true, Search: tools.SearchConfig{Provider: tools.Brave, APIKey: "k"}}), tools.WebSearchTool)
	if !ws.Untrusted || !ws.ConcurrencySafe || ws.Source != "web" {
		t.Errorf("web_search: Untrusted %v, ConcurrencySafe %v, Source %q", ws.Untrusted, ws.ConcurrencySafe, ws.Source)
	}
}
