package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestVersion checks that --version prints the module version, the VCS
// revision the binary was built from and the Go version.
func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, func(string) string { return "" }, strings.NewReader(""), &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "docstream ") || !strings.Contains(out.String(), runtime.Version()) {
		t.Errorf("--version printed %q", out.String())
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skip("no git checkout: the revision is not checked")
	}
	bin := filepath.Join(t.TempDir(), "docstream")
	if b, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	got, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), "revision unknown") {
		// A linked worktree, or a git the go command cannot use, stamps
		// no revision; a clone does.
		if info, err := exec.Command("go", "version", "-m", bin).Output(); err == nil && !strings.Contains(string(info), "vcs.revision") {
			t.Skipf("the go command stamped no VCS revision here: %s", got)
		}
	}
	if !strings.Contains(string(got), "revision "+strings.TrimSpace(string(head))) {
		t.Errorf("--version printed %q, want the revision %s", got, head)
	}
}
