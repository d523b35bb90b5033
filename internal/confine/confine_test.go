package confine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// tree makes, in a temporary directory:
//
//	outside/secret.txt
//	real/ws/                 the workspace
//	real/ws/notes/todo.md
//	real/ws/in-link -> notes/todo.md        (relative, stays inside)
//	real/ws/loop -> ../ws/notes             (leaves by name, comes back in)
//	real/ws/out -> <base>/outside           (a folder outside)
//	real/ws/leak.txt -> <base>/outside/secret.txt
//	real/ws/rel-leak.txt -> ../../outside/secret.txt
//	real/ws/broken -> nowhere
//	ws-link -> real/ws                      (the workspace through a link)
func tree(t *testing.T) (base string) {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "real", "ws")
	for _, d := range []string{filepath.Join(base, "outside"), filepath.Join(ws, "notes")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{
		filepath.Join(base, "outside", "secret.txt"): "top secret",
		filepath.Join(ws, "notes", "todo.md"):        "todo",
	} {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		filepath.Join(ws, "in-link"):      "notes/todo.md",
		filepath.Join(ws, "loop"):         "../ws/notes",
		filepath.Join(ws, "out"):          filepath.Join(base, "outside"),
		filepath.Join(ws, "leak.txt"):     filepath.Join(base, "outside", "secret.txt"),
		filepath.Join(ws, "rel-leak.txt"): "../../outside/secret.txt",
		filepath.Join(ws, "broken"):       "nowhere",
		filepath.Join(base, "ws-link"):    filepath.Join(base, "real", "ws"),
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

func TestRelative(t *testing.T) {
	tests := []struct {
		path string
		want error
	}{
		{"notes/todo.md", nil},
		{".", nil},
		{"", nil}, // the directory itself; callers refuse empty paths in their own words
		{"..b", nil},
		{"a..", nil},
		{"...", nil},
		{"a/..b/c", nil},
		{`\etc\passwd`, nil}, // a file name on Unix; the file tools refuse it themselves
		{"-rf", nil},
		{"..", ErrDotDot},
		{"../secret.txt", ErrDotDot},
		{"notes/../../secret.txt", ErrDotDot},
		{"notes/..", ErrDotDot},
		{"/etc/passwd", ErrAbsolute},
		{"/", ErrAbsolute},
		{"x\x00-rf", ErrNUL},
		{"/x\x00", ErrNUL},
	}
	for _, tc := range tests {
		if got := Relative(tc.path); !errors.Is(got, tc.want) {
			t.Errorf("Relative(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}

func TestResolve(t *testing.T) {
	base := tree(t)
	ws := filepath.Join(base, "real", "ws")
	tests := []struct {
		name, path string
		want       string // the resolved path, relative to base
		wantErr    error
	}{
		{name: "a file", path: "notes/todo.md", want: "real/ws/notes/todo.md"},
		{name: "the directory itself", path: ".", want: "real/ws"},
		{name: "empty is the directory", path: "", want: "real/ws"},
		{name: "a link that stays inside", path: "in-link", want: "real/ws/notes/todo.md"},
		{name: "a link out and back in", path: "loop/todo.md", want: "real/ws/notes/todo.md"},
		{name: "a new file for a write", path: "notes/new.md", want: "real/ws/notes/new.md"},
		{name: "a new file in new folders", path: "a/b/c.txt", want: "real/ws/a/b/c.txt"},
		{name: "a new file under a file", path: "notes/todo.md/x", want: "real/ws/notes/todo.md/x"},
		{name: "a space and unicode", path: "my notes/çà 日本.md", want: "real/ws/my notes/çà 日本.md"},
		{name: "a newline and a percent", path: "a\nb%2e%2e", want: "real/ws/a\nb%2e%2e"},
		{name: "dots that are names", path: "..b/...", want: "real/ws/..b/..."},
		{name: "a leading dash", path: "-rf", want: "real/ws/-rf"},
		{name: "a backslash", path: `..\x`, want: `real/ws/..\x`},
		{name: "absolute inside", path: filepath.Join(ws, "notes", "todo.md"), want: "real/ws/notes/todo.md"},
		{name: "absolute through the linked root", path: filepath.Join(base, "ws-link", "notes", "todo.md"), want: "real/ws/notes/todo.md"},
		{name: "absolute outside", path: filepath.Join(base, "outside", "secret.txt"), wantErr: ErrOutside},
		{name: "absolute, missing and outside", path: "/nonexistent/file", wantErr: ErrOutside},
		{name: "dot-dot out", path: "../../outside/secret.txt", wantErr: ErrOutside},
		{name: "dot-dot to the parent", path: "..", wantErr: ErrOutside},
		{name: "dot-dot out and back in", path: "../ws/notes/todo.md", want: "real/ws/notes/todo.md"},
		{name: "a link to a file outside", path: "leak.txt", wantErr: ErrOutside},
		{name: "a relative link outside", path: "rel-leak.txt", wantErr: ErrOutside},
		{name: "a linked folder outside", path: "out", wantErr: ErrOutside},
		{name: "a file in a linked folder outside", path: "out/secret.txt", wantErr: ErrOutside},
		{name: "a new file in a linked folder outside", path: "out/new/file.txt", wantErr: ErrOutside},
		{name: "a broken link", path: "broken", wantErr: ErrBroken},
		{name: "under a broken link", path: "broken/x", wantErr: ErrBroken},
	}
	for _, root := range []string{ws, filepath.Join(base, "ws-link")} {
		d, err := At(root)
		if err != nil {
			t.Fatal(err)
		}
		if d.Path() != ws {
			t.Fatalf("At(%q).Path() = %q, want %q", root, d.Path(), ws)
		}
		for _, tc := range tests {
			t.Run(filepath.Base(root)+"/"+tc.name, func(t *testing.T) {
				got, err := d.Resolve(tc.path)
				if tc.wantErr != nil {
					if !errors.Is(err, tc.wantErr) {
						t.Fatalf("Resolve(%q) = %q, %v; want %v", tc.path, got, err, tc.wantErr)
					}
					return
				}
				if want := filepath.Join(base, tc.want); err != nil || got != want {
					t.Fatalf("Resolve(%q) = %q, %v; want %q", tc.path, got, err, want)
				}
			})
		}
	}
}

func TestCheck(t *testing.T) {
	base := tree(t)
	d, err := At(filepath.Join(base, "ws-link"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want error
	}{
		{"notes/todo.md", nil},
		{"notes/new/file.md", nil},
		{"in-link", nil},
		{"../ws/notes/todo.md", ErrDotDot}, // inside, but refused by its text
		{filepath.Join(base, "real", "ws", "notes", "todo.md"), ErrAbsolute},
		{"leak.txt", ErrOutside},
		{"out/new.txt", ErrOutside},
		{"broken", ErrBroken},
		{"x\x00", ErrNUL},
	}
	for _, tc := range tests {
		if got := d.Check(tc.path); !errors.Is(got, tc.want) {
			t.Errorf("Check(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}

// A directory that does not exist yet confines like the one it will be,
// its existing part resolved; one behind a broken link cannot be used.
func TestAtMissingDirectory(t *testing.T) {
	base := tree(t)
	d, err := At(filepath.Join(base, "ws-link", "per-chat", "c1"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(base, "real", "ws", "per-chat", "c1"); d.Path() != want {
		t.Fatalf("Path() = %q, want %q", d.Path(), want)
	}
	if got, err := d.Resolve("notes/a.md"); err != nil || got != filepath.Join(d.Path(), "notes", "a.md") {
		t.Errorf("Resolve in a missing directory = %q, %v", got, err)
	}
	if _, err := d.Resolve("../../leak.txt"); !errors.Is(err, ErrOutside) {
		t.Errorf("Resolve out of a missing directory: %v, want ErrOutside", err)
	}
	if _, err := At(filepath.Join(base, "real", "ws", "broken", "ws")); !errors.Is(err, ErrBroken) {
		t.Errorf("At behind a broken link: %v, want ErrBroken", err)
	}
}

// Relative directories are taken from the working directory.
func TestAtRelative(t *testing.T) {
	base := tree(t)
	t.Chdir(base)
	d, err := At("ws-link")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(base, "real", "ws"); d.Path() != want {
		t.Fatalf("Path() = %q, want %q", d.Path(), want)
	}
}

// The os.Root it opens enforces the same rule when a file is opened.
func TestOpenRoot(t *testing.T) {
	base := tree(t)
	d, err := At(filepath.Join(base, "ws-link"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := d.OpenRoot()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if b, err := r.ReadFile("in-link"); err != nil || string(b) != "todo" {
		t.Errorf("ReadFile(in-link) = %q, %v", b, err)
	}
	for _, name := range []string{"leak.txt", "rel-leak.txt", "out/secret.txt", "../../outside/secret.txt"} {
		if b, err := r.ReadFile(name); err == nil {
			t.Errorf("ReadFile(%q) = %q through the root", name, b)
		}
	}
}
