package httpjson

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestError(t *testing.T) {
	rec := httptest.NewRecorder()
	Error(rec, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "no token")
	if rec.Code != http.StatusUnauthorized || rec.Header().Get("Content-Type") != "application/json" ||
		rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("status %d, headers %v", rec.Code, rec.Header())
	}
	var body struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"message": "no token", "type": "invalid_request_error", "code": "invalid_api_key", "param": nil}
	for k, v := range want {
		if got, ok := body.Error[k]; !ok || got != v {
			t.Errorf("error.%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
}
