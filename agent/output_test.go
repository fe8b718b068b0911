package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/docstream/docstream/agent"
	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/metrics"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/translate"
)

// TestSlowReaderGetsTheResult has the run take its time over the first
// text, while the agent writes the rest of its output and exits: the result
// it wrote before exiting still arrives, however long the linger and the
// drain after the exit are.
func TestSlowReaderGetsTheResult(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "agent")
	script := `#!/bin/sh
echo '{"type":"system","subtype":"init","cwd":"/w","session_id":"s-1","model":"auto"}'
echo '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"first"}]}}'
i=0; while [ $i -lt 200 ]; do echo '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"more"}]},"timestamp_ms":1}'; i=$((i+1)); done
echo '{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s-1"}'
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	b := agent.New(agent.Config{Binary: bin, KillGrace: time.Second, LingerAfterResult: 200 * time.Millisecond}, os.Environ(), metrics.New())
	var bld documents.Builder
	slow := true
	seg := translate.NewSegmenter(translate.Options{ResponseID: "chat_1"}, func(ev documents.Event) {
		if _, ok := ev.(documents.ContentDelta); ok && slow {
			slow = false
			time.Sleep(4 * time.Second) // past the linger and the drain after the agent's exit
		}
		bld.Add(ev)
	})
	seg.Start()
	end := b.Run(context.Background(), &runs.Spec{ResponseID: "chat_1", Prompt: "go", Workspace: dir}, seg)
	seg.Close(end)
	if resp := bld.Response(); resp.Status != documents.StatusCompleted {
		t.Fatalf("status %s, documents %+v; want completed", resp.Status, resp.Documents)
	}
}
