package matrix

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// get is a channels.Getter as doctor's: one GET, a 200's JSON decoded.
func get(ctx context.Context, url string, header http.Header, v any, _ ...string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		err = json.NewDecoder(resp.Body).Decode(v)
	}
	return resp.StatusCode, err
}

func TestDoctor(t *testing.T) {
	f := newFakeHS(t)
	device := map[string]any{"user_id": bot, "device_id": "DEV1", "keys": map[string]any{"ed25519:DEV1": "devkey"}}
	signed := map[string]any{"user_id": bot, "device_id": "DEV1", "keys": map[string]any{"ed25519:DEV1": "devkey"},
		"signatures": map[string]any{bot: map[string]any{"ed25519:sskpub": "sig"}}}
	ssk := map[string]any{bot: map[string]any{"user_id": bot, "usage": []string{"self_signing"}, "keys": map[string]any{"ed25519:sskpub": "sskpub"}}}
	for _, tc := range []struct {
		name      string
		token     string
		enc       bool
		keys      map[string]any
		failed    bool
		want, not string
	}{
		{"token refused", "nope-123456", true, nil, true, "refused", "nope-123456"},
		{"encryption off", "tok-123456", false, nil, false, "device DEV1; encryption off", ""},
		{"no cross-signing", "tok-123456", true, map[string]any{"device_keys": map[string]any{bot: map[string]any{"DEV1": device}}}, false, "no cross-signing keys", ""},
		{"not signed", "tok-123456", true, map[string]any{"device_keys": map[string]any{bot: map[string]any{"DEV1": device}}, "self_signing_keys": ssk}, false, "not cross-signed (unverified); verify it", ""},
		{"signed", "tok-123456", true, map[string]any{"device_keys": map[string]any{bot: map[string]any{"DEV1": signed}}, "self_signing_keys": ssk}, false, "is cross-signed (verified)", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.mu.Lock()
			f.keys = tc.keys
			f.mu.Unlock()
			c := NewConfig()
			c.Enabled, c.Homeserver, c.UserID, c.AccessToken, c.Encryption = true, f.URL(), bot, tc.token, tc.enc
			chk := doctor(t.Context(), c, get)
			if chk.Failed != tc.failed || !strings.Contains(chk.Message, tc.want) || (tc.not != "" && strings.Contains(chk.Message+chk.Fix, tc.not)) {
				t.Fatalf("got %+v, want failed %v and %q", chk, tc.failed, tc.want)
			}
		})
	}
	c := NewConfig()
	c.Enabled, c.Homeserver, c.UserID, c.Password = true, f.URL(), bot, "pw-123456"
	if chk := doctor(t.Context(), c, get); chk.Failed || !strings.Contains(chk.Message, "logs in with its password") {
		t.Fatalf("password login: %+v", chk)
	}
}
