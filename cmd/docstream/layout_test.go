package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayout checks the packages' dependency rules: documents imports no
// project package, translate and sse import only documents, responses and
// anthropic only documents and openai, and only cmd/... imports gateway.
func TestLayout(t *testing.T) {
	const mod = "github.com/docstream/docstream/"
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, ok := strings.CutPrefix(f[0], mod)
		if !ok {
			continue
		}
		for _, imp := range f[1:] {
			dep, ok := strings.CutPrefix(imp, mod)
			if !ok {
				continue
			}
			switch {
			case pkg == "documents":
				t.Errorf("documents imports %s", dep)
			case (pkg == "translate" || pkg == "sse") && dep != "documents":
				t.Errorf("%s imports %s", pkg, dep)
			case (pkg == "responses" || pkg == "anthropic") && dep != "documents" && dep != "openai":
				t.Errorf("%s imports %s", pkg, dep)
			case (dep == "gateway" || strings.HasPrefix(dep, "gateway/")) && !strings.HasPrefix(pkg, "cmd/") && !strings.HasPrefix(pkg, "gateway"):
				t.Errorf("%s imports %s", pkg, dep)
			}
		}
	}
}
