package tools_test

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-gateway/switchboard/agent"
	"github.com/switchboard-gateway/switchboard/tools"
)

// workspace is a files source on a fresh folder, with a sibling folder
// outside it that the tests try to reach.
type workspace struct {
	t       *testing.T
	root    string
	outside string
	src     agent.Source
}

func newWorkspace(t *testing.T, cfg tools.FilesConfig) *workspace {
	t.Helper()
	dir := t.TempDir()
	w := &workspace{t: t, root: filepath.Join(dir, "workspace"), outside: filepath.Join(dir, "outside")}
	if err := os.MkdirAll(w.outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.outside, "secret.txt"), []byte("top secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Enabled, cfg.Root = true, w.root
	w.src = tools.Files(cfg)
	return w
}

// call runs a file tool for a turn in chat "c1" on channel "test".
func (w *workspace) call(name string, args any) (string, error) {
	w.t.Helper()
	return w.callIn(agent.TurnInfo{Channel: "test", ChatKey: "c1"}, name, args)
}

func (w *workspace) callIn(info agent.TurnInfo, name string, args any) (string, error) {
	w.t.Helper()
	for _, t := range w.src.Tools(info) {
		if t.Name == name {
			b, err := json.Marshal(args)
			if err != nil {
				w.t.Fatal(err)
			}
			return t.Fn(w.t.Context(), b)
		}
	}
	w.t.Fatalf("no tool %s in %q", name, names(w.src, info))
	return "", nil
}

func (w *workspace) mustCall(name string, args any) string {
	w.t.Helper()
	out, err := w.call(name, args)
	if err != nil {
		w.t.Fatalf("%s(%v): %v", name, args, err)
	}
	return out
}

type m = map[string]any

func TestFileToolsWriteReadListEdit(t *testing.T) {
	w := newWorkspace(t, tools.FilesConfig{})
	if out := w.mustCall(tools.FileListTool, m{}); out != "The workspace is empty." {
		t.Errorf("list of a new workspace = %q", out)
	}
	if out := w.mustCall(tools.FileWriteTool, m{"path": "notes/groceries.md", "content": "- milk\n- eggs\n- milk chocolate\n"}); out != "Wrote 31 bytes to notes/groceries.md (created)." {
		t.Errorf("write = %q", out)
	}
	if out := w.mustCall(tools.FileReadTool, m{"path": "notes/groceries.md"}); out != "- milk\n- eggs\n- milk chocolate\n" {
		t.Errorf("read = %q", out)
	}
	w.mustCall(tools.FileWriteTool, m{"path": "todo.txt", "content": ""})
	if out := w.mustCall(tools.FileListTool, m{"path": ""}); out != "notes/\ntodo.txt (0 bytes)" {
		t.Errorf("list = %q", out)
	}
	if out := w.mustCall(tools.FileListTool, m{"path": "notes"}); out != "groceries.md (31 bytes)" {
		t.Errorf("list notes = %q", out)
	}
	if out := w.mustCall(tools.FileReadTool, m{"path": "./todo.txt"}); out != "(the file is empty)" {
		t.Errorf("read empty = %q", out)
	}

	// file_edit: exactly one match, or an error saying how many.
	for _, tt := range []struct{ old, want string }{
		{"milk", `old_text matches 2 times in "notes/groceries.md"; include more of the surrounding text`},
		{"bread", `old_text was not found in "notes/groceries.md"; read the file with file_read`},
		{"", "old_text must not be empty"},
	} {
		_, err := w.call(tools.FileEditTool, m{"path": "notes/groceries.md", "old_text": tt.old, "new_text": "x"})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("edit %q: err = %v; want %q", tt.old, err, tt.want)
		}
	}
	if out := w.mustCall(tools.FileEditTool, m{"path": "notes/groceries.md", "old_text": "- milk\n", "new_text": "- oat milk\n"}); out != "Edited notes/groceries.md: replaced 1 occurrence (35 bytes now)." {
		t.Errorf("edit = %q", out)
	}
	if got, _ := os.ReadFile(filepath.Join(w.root, "notes", "groceries.md")); string(got) != "- oat milk\n- eggs\n- milk chocolate\n" {
		t.Errorf("file after edit = %q", got)
	}
	if out := w.mustCall(tools.FileWriteTool, m{"path": "todo.txt", "content": "call mum"}); !strings.HasSuffix(out, "(replaced).") {
		t.Errorf("overwrite = %q", out)
	}

	for _, tt := range []struct{ tool, path, want string }{
		{tools.FileReadTool, "nope.txt", `there is no "nope.txt" in the workspace; file_list shows what is there`},
		{tools.FileReadTool, "notes", `"notes" is a folder; use file_list`},
		{tools.FileListTool, "todo.txt", `"todo.txt" is not a folder`},
		{tools.FileWriteTool, "notes", `"notes" is a folder; choose a file name`},
		{tools.FileReadTool, "", "path must not be empty"},
	} {
		_, err := w.call(tt.tool, m{"path": tt.path, "content": "x"})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %q: err = %v; want %q", tt.tool, tt.path, err, tt.want)
		}
	}
}

func TestFileToolsRefuseEscapes(t *testing.T) {
	w := newWorkspace(t, tools.FilesConfig{})
	w.mustCall(tools.FileWriteTool, m{"path": "inside.txt", "content": "fine"})
	// Links planted in the workspace (by a command tool, say) that lead out.
	if err := os.Symlink(w.outside, filepath.Join(w.root, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(w.outside, "secret.txt"), filepath.Join(w.root, "leak.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../outside/secret.txt", filepath.Join(w.root, "rel-leak.txt")); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(w.root, "inside.txt")
	tests := []struct{ path, want string }{
		{"../outside/secret.txt", `contains ".."`},
		{"notes/../../outside/secret.txt", `contains ".."`},
		{"..", `contains ".."`},
		{filepath.Join(w.outside, "secret.txt"), "is an absolute path"},
		{abs, "is an absolute path"}, // even one inside the workspace
		{"out/secret.txt", "leads outside the workspace through a symbolic link"},
		{"out/new.txt", "leads outside the workspace through a symbolic link"},
		{"out", "leads outside the workspace through a symbolic link"},
		{"leak.txt", "leads outside the workspace through a symbolic link"},
		{"rel-leak.txt", "leads outside the workspace through a symbolic link"},
	}
	for _, tt := range tests {
		for _, name := range []string{tools.FileReadTool, tools.FileWriteTool, tools.FileEditTool, tools.FileListTool} {
			out, err := w.call(name, m{"path": tt.path, "content": "pwned", "old_text": "top secret", "new_text": "pwned"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s %q = %q, %v; want an error with %q", name, tt.path, out, err, tt.want)
			}
			if strings.Contains(out, "top secret") {
				t.Errorf("%s %q leaked the outside file", name, tt.path)
			}
		}
	}
	if got, _ := os.ReadFile(filepath.Join(w.outside, "secret.txt")); string(got) != "top secret" {
		t.Errorf("the outside file now holds %q", got)
	}
	if entries, _ := os.ReadDir(w.outside); len(entries) != 1 {
		t.Errorf("files appeared outside the workspace: %v", entries)
	}
	// A link that stays inside is fine.
	if err := os.Symlink("inside.txt", filepath.Join(w.root, "alias.txt")); err != nil {
		t.Fatal(err)
	}
	if out := w.mustCall(tools.FileReadTool, m{"path": "alias.txt"}); out != "fine" {
		t.Errorf("read through an inside link = %q", out)
	}
}

// file_write replaces a file by renaming a complete new one over it: a
// reader that opened the old file still reads all of the old content, no
// temporary file is left behind, and concurrent readers never see a part.
func TestFileWriteIsAtomic(t *testing.T) {
	w := newWorkspace(t, tools.FilesConfig{})
	oldText, newText := strings.Repeat("old ", 50_000), strings.Repeat("new ", 60_000)
	w.mustCall(tools.FileWriteTool, m{"path": "doc.txt", "content": oldText})
	path := filepath.Join(w.root, "doc.txt")
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	var wg sync.WaitGroup
	stop := make(chan struct{})
	torn := make(chan string, 1)
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				b, err := os.ReadFile(path)
				if err == nil && string(b) != oldText && string(b) != newText {
					select {
					case torn <- string(b[:min(len(b), 40)]):
					default:
					}
					return
				}
			}
		})
	}
	for i := range 20 {
		text := newText
		if i%2 == 1 {
			text = oldText
		}
		w.mustCall(tools.FileWriteTool, m{"path": "doc.txt", "content": text})
	}
	w.mustCall(tools.FileWriteTool, m{"path": "doc.txt", "content": newText})
	close(stop)
	wg.Wait()
	select {
	case s := <-torn:
		t.Errorf("a reader saw a partly written file starting %q", s)
	default:
	}

	if b, _ := io.ReadAll(held); string(b) != oldText {
		t.Errorf("the reader of the old file got %d bytes of something else; the file was rewritten in place", len(b))
	}
	if b, _ := os.ReadFile(path); string(b) != newText {
		t.Errorf("the file holds %d bytes, want the new text", len(b))
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want the file's own 0600 kept", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(w.root)
	if len(entries) != 1 {
		t.Errorf("the workspace holds %v; want only doc.txt (no temporary files)", entries)
	}
}

func TestFileToolsSizeCaps(t *testing.T) {
	w := newWorkspace(t, tools.FilesConfig{MaxBytes: 100})
	_, err := w.call(tools.FileWriteTool, m{"path": "big.txt", "content": strings.Repeat("x", 101)})
	if err == nil || !strings.Contains(err.Error(), "the content is 101 bytes, more than the 100 bytes a file may have (tools.files.max_bytes)") {
		t.Errorf("oversized write: err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.root, "big.txt")); !os.IsNotExist(err) {
		t.Errorf("an oversized write left a file: %v", err)
	}
	w.mustCall(tools.FileWriteTool, m{"path": "full.txt", "content": strings.Repeat("y", 100)})
	if _, err := w.call(tools.FileEditTool, m{"path": "full.txt", "old_text": "yy", "new_text": "zzz"}); err == nil {
		t.Error("an edit past the cap succeeded")
	}
	// A larger file put there by someone else is read up to the cap, on a
	// character boundary.
	big := strings.Repeat("é", 80) // 160 bytes
	if err := os.WriteFile(filepath.Join(w.root, "large.txt"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	out := w.mustCall(tools.FileReadTool, m{"path": "large.txt"})
	if want := strings.Repeat("é", 50) + "\n\n[only the first 100 bytes of 160 bytes were read (tools.files.max_bytes)]"; out != want {
		t.Errorf("read past the cap = %q, want %q", out, want)
	}
	if _, err := w.call(tools.FileEditTool, m{"path": "large.txt", "old_text": "é", "new_text": "e"}); err == nil || !strings.Contains(err.Error(), "more than the 100 bytes the file tools handle") {
		t.Errorf("edit of a file past the cap: err = %v", err)
	}
	if err := os.WriteFile(filepath.Join(w.root, "blob.bin"), []byte{0x7f, 'E', 'L', 'F', 0, 0, 1}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := w.call(tools.FileReadTool, m{"path": "blob.bin"}); err == nil || !strings.Contains(err.Error(), "is not a text file") {
		t.Errorf("binary read: err = %v", err)
	}
}

func TestFileToolsPerChat(t *testing.T) {
	w := newWorkspace(t, tools.FilesConfig{PerChat: true})
	alice := agent.TurnInfo{Channel: "telegram", ChatKey: "-100123"}
	bob := agent.TurnInfo{Channel: "discord", ChatKey: "../../etc"}
	if _, err := w.callIn(alice, tools.FileWriteTool, m{"path": "note.txt", "content": "alice's"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.callIn(bob, tools.FileWriteTool, m{"path": "note.txt", "content": "bob's"}); err != nil {
		t.Fatal(err)
	}
	if out, _ := w.callIn(alice, tools.FileReadTool, m{"path": "note.txt"}); out != "alice's" {
		t.Errorf("alice reads %q", out)
	}
	if out, _ := w.callIn(bob, tools.FileReadTool, m{"path": "note.txt"}); out != "bob's" {
		t.Errorf("bob reads %q", out)
	}
	for path, want := range map[string]string{
		"telegram/-100123/note.txt":              "alice's",
		"discord/%2E%2E%2F%2E%2E%2Fetc/note.txt": "bob's",
	} {
		if b, err := os.ReadFile(filepath.Join(w.root, filepath.FromSlash(path))); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", path, b, err, want)
		}
	}
	if got := names(w.src, agent.TurnInfo{}); len(got) != 0 {
		t.Errorf("per-chat tools without a chat: %q, want none", got)
	}
}

func TestFileToolsOffByDefaultAndConcurrency(t *testing.T) {
	if got := names(tools.Files(tools.FilesConfig{Root: t.TempDir()}), agent.TurnInfo{ChatKey: "c"}); len(got) != 0 {
		t.Errorf("disabled file tools offer %q", got)
	}
	w := newWorkspace(t, tools.FilesConfig{})
	got := map[string]bool{}
	for _, tl := range w.src.Tools(agent.TurnInfo{}) {
		got[tl.Name] = tl.ConcurrencySafe
	}
	want := map[string]bool{tools.FileReadTool: true, tools.FileListTool: true, tools.FileWriteTool: false, tools.FileEditTool: false}
	if len(got) != len(want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	for name, safe := range want {
		if got[name] != safe {
			t.Errorf("%s ConcurrencySafe = %v, want %v", name, got[name], safe)
		}
	}
	if !slices.Equal(names(w.src, agent.TurnInfo{}), []string{"file_edit", "file_list", "file_read", "file_write"}) {
		t.Errorf("names = %q", names(w.src, agent.TurnInfo{}))
	}
}

// A hard link already in the workspace (made by a command, or present
// before) may name a file outside it: the file tools do not read, edit or
// write through a file with more than one link. Issue 29, finding 8.
func TestFileToolsRefuseHardLinks(t *testing.T) {
	w := newWorkspace(t, tools.FilesConfig{})
	w.mustCall(tools.FileWriteTool, m{"path": "inside.txt", "content": "fine"})
	if err := os.Link(filepath.Join(w.outside, "secret.txt"), filepath.Join(w.root, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{tools.FileReadTool, tools.FileEditTool, tools.FileWriteTool} {
		out, err := w.call(name, m{"path": "notes.txt", "content": "pwned", "old_text": "top", "new_text": "pwned"})
		if err == nil || !strings.Contains(err.Error(), "has 2 hard links") || strings.Contains(out, "top secret") {
			t.Errorf("%s of a hard link = %q, %v; want it refused", name, out, err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(w.outside, "secret.txt")); string(got) != "top secret" {
		t.Errorf("the outside file now holds %q", got)
	}
	if out := w.mustCall(tools.FileReadTool, m{"path": "inside.txt"}); out != "fine" {
		t.Errorf("a file with one link: %q", out)
	}
}

// Dotfiles and dot-folders are programs' configuration (git reads
// .git/config and, with HOME there, .gitconfig; curl .curlrc; npm .npmrc):
// the file tools read them but never write them. Issue 29, finding 3.
func TestFileToolsRefuseDotfiles(t *testing.T) {
	w := newWorkspace(t, tools.FilesConfig{})
	for _, p := range []string{".gitconfig", ".git/config", ".git/hooks/pre-commit", "repo/.git/config", ".curlrc", ".npmrc", ".bashrc", ".config/git/config"} {
		for _, name := range []string{tools.FileWriteTool, tools.FileEditTool} {
			out, err := w.call(name, m{"path": p, "content": "[core]\n\tfsmonitor = touch pwned\n", "old_text": "a", "new_text": "b"})
			if err == nil || !strings.Contains(err.Error(), "dotfile or in a dot-folder") {
				t.Errorf("%s %s = %q, %v; want it refused", name, p, out, err)
			}
		}
		if _, err := os.Lstat(filepath.Join(w.root, p)); !os.IsNotExist(err) {
			t.Errorf("%s was written: %v", p, err)
		}
	}
	if err := os.MkdirAll(w.root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.root, ".gitignore"), []byte("*.log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := w.mustCall(tools.FileReadTool, m{"path": ".gitignore"}); out != "*.log\n" {
		t.Errorf("reading a dotfile: %q", out)
	}
	w.mustCall(tools.FileWriteTool, m{"path": "notes/v1.2.txt", "content": "dots inside a name are fine"})
}

// Finding 4: the file tools that change the workspace act beyond the
// reply (asked about or withdrawn after untrusted content); reading and
// listing do not.
func TestFileToolsDeclareActs(t *testing.T) {
	w := newWorkspace(t, tools.FilesConfig{})
	for _, tl := range w.src.Tools(agent.TurnInfo{Channel: "test", ChatKey: "c1"}) {
		want := tl.Name == tools.FileWriteTool || tl.Name == tools.FileEditTool
		if tl.Acts != want {
			t.Errorf("%s: Acts = %v, want %v", tl.Name, tl.Acts, want)
		}
	}
}
