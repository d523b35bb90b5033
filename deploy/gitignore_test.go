package deploy

import (
	"os/exec"
	"strings"
	"testing"
)

// TestGitIgnoresOperatorFiles: what an operator leaves in a clone (the .env
// with the keys, the terminal chat's log, the database and its backups,
// the skills and workspace folders) is ignored by git, so `git add -A`
// commits no secret and the build stays clean; the source is not.
func TestGitIgnoresOperatorFiles(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git is needed to check .gitignore: %v", err)
	}
	ignored := []string{".env", "switchboard-chat.log", "switchboard.db", "switchboard.db-wal", "switchboard.db.lock",
		"switchboard.db.backup-20261206-084500", "config.yaml", "switchboard-skills/greet.yaml", "workspace/notes.txt"}
	out, err := exec.Command(git, append([]string{"-C", "..", "check-ignore", "--no-index", "--"}, ignored...)...).CombinedOutput()
	if err != nil {
		t.Errorf("git check-ignore %v: %v\n%s", ignored, err, out)
	}
	if got := strings.Fields(string(out)); len(got) != len(ignored) {
		t.Errorf("ignored %v, want all of %v", got, ignored)
	}
	kept := []string{"compose.yaml", "skills/skills.go", "deploy/config.yaml", ".env.example"}
	out, err = exec.Command(git, append([]string{"-C", "..", "check-ignore", "--no-index", "--"}, kept...)...).CombinedOutput()
	if err == nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("git ignores source files: %s", out)
	}
}
