package gateway

import (
	"strings"
	"testing"

	"github.com/docstream/docstream/agent"
)

// TestWorkspaceEmptyDirectory: a workspace configured with no directory is
// refused at start instead of meaning the current directory.
func TestWorkspaceEmptyDirectory(t *testing.T) {
	t.Parallel()
	if _, _, err := resolveWorkspaces(agent.Config{Workspaces: map[string]string{"a": " "}}); err == nil || !strings.Contains(err.Error(), "workspace a") {
		t.Fatalf("err = %v", err)
	}
}
