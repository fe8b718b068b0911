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

// TestCancelDuringSpawn cancels runs while their agents start: the signal
// goes to the agent's process group, never to the gateway's own (whose
// signal would end this test).
func TestCancelDuringSpawn(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "agent")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := agent.New(agent.Config{Binary: bin, KillGrace: time.Second}, os.Environ(), metrics.New())
	for i := range 60 {
		ctx, cancel := context.WithCancelCause(context.Background())
		// From 0 to about 3 ms: some cancels land while the process starts.
		go func() {
			time.Sleep(time.Duration(i) * 50 * time.Microsecond)
			cancel(&runs.Stop{Reason: documents.StopCancelled, Msg: "cancelled"})
		}()
		seg := translate.NewSegmenter(translate.Options{ResponseID: "chat_1"}, func(documents.Event) {})
		seg.Start()
		end := b.Run(ctx, &runs.Spec{ResponseID: "chat_1", Prompt: "go", Workspace: dir}, seg)
		if end.Reason != documents.StopCancelled && end.Err == nil {
			t.Fatalf("run %d: %+v, want cancelled", i, end)
		}
	}
}
