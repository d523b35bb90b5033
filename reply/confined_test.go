package reply

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// send_file takes a path relative to the files root, or an absolute one
// inside it; it refuses what leaves the root, what is missing, folders.
func TestConfined(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(ws, "report.txt"), filepath.Join(base, "secret.txt")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(base, "secret.txt"), filepath.Join(ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ws, filepath.Join(base, "ws-link")); err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(ws, "report.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		root, ref, want, wantErr string
	}{
		{root: ws, ref: "report.txt", want: real},
		{root: ws, ref: "sub/../report.txt", want: real},
		{root: ws, ref: filepath.Join(ws, "report.txt"), want: real},
		{root: filepath.Join(base, "ws-link"), ref: "report.txt", want: real},
		{root: ws, ref: "../secret.txt", wantErr: "is outside the workspace"},
		{root: ws, ref: filepath.Join(base, "secret.txt"), wantErr: "is outside the workspace"},
		{root: ws, ref: "link.txt", wantErr: "is outside the workspace"},
		{root: ws, ref: "missing.txt", wantErr: `no file "missing.txt" in the workspace`},
		{root: ws, ref: "sub", wantErr: `"sub" is not a file`},
		{root: "", ref: "report.txt", wantErr: "sending local files is off"},
	}
	for _, tc := range tests {
		got, err := confined(tc.root, tc.ref)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("confined(%q, %q) = %q, %v; want an error containing %q", tc.root, tc.ref, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("confined(%q, %q) = %q, %v; want %q", tc.root, tc.ref, got, err, tc.want)
		}
	}
}
