// Package httpjson writes the JSON answers of Switchboard's HTTP routes:
// a value, or an error in the OpenAI API's shape. Both the HTTP server
// (httpapi: health, readiness, its token check) and the OpenAI-compatible
// chat API (channels/chatapi) answer with it, so every error a client sees
// has one shape.
package httpjson

import (
	"encoding/json"
	"net/http"
)

// Write answers with v as indented JSON and status code, never cached.
func Write(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Error answers with an error in the OpenAI API's shape:
// {"error": {"message", "type", "code", "param"}}.
func Error(w http.ResponseWriter, code int, typ, errCode, msg string) {
	body := map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": errCode, "param": nil}}
	Write(w, code, body)
}
