package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/agent"
	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/metrics"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/translate"
)

// acpScript is an agent that speaks ACP from a script: no authentication,
// two ACP plan updates, a file request and a Cursor request the gateway
// does not serve, then a turn that stops at its token limit. It writes the
// gateway's answers to those requests to stderr.
const acpScript = `#!/bin/sh
read l; echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}'
read l; echo '{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}'
read l
echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"plan","entries":[{"content":"A","status":"pending"},{"content":"B","status":"pending"}]}}}'
echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"plan","entries":[{"content":"A","status":"completed"},{"content":"B","status":"in_progress"}]}}}'
echo '{"jsonrpc":"2.0","id":"x","method":"fs/read_text_file","params":{"sessionId":"s1","path":"/etc/passwd"}}'
read l; echo "$l" >&2
echo '{"jsonrpc":"2.0","id":"y","method":"cursor/task","params":{"toolCallId":"t"}}'
read l; echo "$l" >&2
echo '{"jsonrpc":"2.0","id":3,"result":{"stopReason":"max_tokens"}}'
read l
`

// TestACPScript drives a scripted ACP agent: plans become a plan and a
// todo_update, every request is answered, and an abnormal stop reason is
// an error.
func TestACPScript(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "agent")
	if err := os.WriteFile(bin, []byte(acpScript), 0o755); err != nil {
		t.Fatal(err)
	}
	b := agent.New(agent.Config{Binary: bin, Protocol: "acp", KillGrace: time.Second, LingerAfterResult: time.Second}, os.Environ(), metrics.New())
	var bld documents.Builder
	seg := translate.NewSegmenter(translate.Options{ResponseID: "chat_1"}, bld.Add)
	seg.Start()
	end := b.Run(context.Background(), &runs.Spec{ResponseID: "chat_1", Prompt: "go", Workspace: dir}, seg)
	seg.Close(end)
	resp := bld.Response()
	var types []string
	for _, d := range resp.Documents {
		types = append(types, string(d.Type))
	}
	if got := strings.Join(types, " "); got != "plan todo_update error" {
		t.Fatalf("documents %s", got)
	}
	var todos documents.TodoUpdateMeta
	_ = json.Unmarshal(resp.Documents[1].Metadata, &todos)
	if len(todos.Todos) != 2 || todos.Todos[0].ID != "plan-1" || todos.Todos[0].Status != "completed" {
		t.Fatalf("todo update %+v", todos)
	}
	if resp.Status != documents.StatusError || !strings.Contains(*resp.Documents[2].Content, "max_tokens") {
		t.Fatalf("status %s: %s", resp.Status, *resp.Documents[2].Content)
	}
	if !strings.Contains(end.Stderr, `"code":-32601`) || !strings.Contains(end.Stderr, `"outcome":"cancelled"`) {
		t.Fatalf("the agent's requests were answered: %s", end.Stderr)
	}
}

// TestACPFailedToolWithoutOutput has a tool call fail with content but no
// rawOutput: its document ends in error with the content's text.
func TestACPFailedToolWithoutOutput(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "agent")
	script := `#!/bin/sh
read l; echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}'
read l; echo '{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}'
read l
echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"t1","title":"` + "`ls /nowhere`" + `","kind":"execute","status":"pending","rawInput":{"command":"ls /nowhere"}}}}'
echo '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"failed","content":[{"type":"content","content":{"type":"text","text":"no such directory"}}]}}}'
echo '{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}'
read l
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	b := agent.New(agent.Config{Binary: bin, Protocol: "acp", KillGrace: time.Second, LingerAfterResult: time.Second}, os.Environ(), metrics.New())
	var bld documents.Builder
	seg := translate.NewSegmenter(translate.Options{ResponseID: "chat_1"}, bld.Add)
	seg.Start()
	seg.Close(b.Run(context.Background(), &runs.Spec{ResponseID: "chat_1", Prompt: "go", Workspace: dir}, seg))
	resp := bld.Response()
	if len(resp.Documents) != 1 {
		t.Fatalf("documents %+v", resp.Documents)
	}
	if d := resp.Documents[0]; !strings.Contains(string(d.Metadata), `"error":"no such directory"`) {
		t.Fatalf("the failed tool's document: %s %s", d.Type, d.Metadata)
	}
}
