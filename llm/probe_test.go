package llm_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-gateway/switchboard/internal/testkit"
	"github.com/switchboard-gateway/switchboard/llm"
)

func TestProbeAndModels(t *testing.T) {
	fake := testkit.NewFakeLLM(t)
	c, err := llm.New(llm.Config{BaseURL: fake.URL, APIKey: "sk-probe-secret", Model: "fake-model"})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := c.Models(t.Context())
	if err != nil || !slices.Contains(ids, "fake-model") {
		t.Fatalf("Models = %v, %v; want fake-model listed", ids, err)
	}
	if err := c.Probe(t.Context()); err != nil {
		t.Fatalf("Probe = %v", err)
	}

	// A server without /models is reachable; one that rejects the key is not.
	for _, tt := range []struct {
		status int
		ok     bool
	}{{http.StatusNotFound, true}, {http.StatusUnauthorized, false}, {http.StatusBadGateway, false}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tt.status)
			_, _ = w.Write([]byte(`{"error":{"message":"nope sk-probe-secret","type":"x"}}`))
		}))
		c, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1", APIKey: "sk-probe-secret", Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		err = c.Probe(t.Context())
		srv.Close()
		if (err == nil) != tt.ok {
			t.Fatalf("status %d: Probe = %v, want ok=%v", tt.status, err, tt.ok)
		}
		if err != nil {
			var le *llm.Error
			if !errors.As(err, &le) || le.Status != tt.status {
				t.Fatalf("status %d: error %v is not an *llm.Error with that status", tt.status, err)
			}
			if strings.Contains(err.Error(), "sk-probe-secret") {
				t.Fatalf("the key leaked: %v", err)
			}
		}
	}
}
