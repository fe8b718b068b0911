package gateway_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scriptAgent writes an executable shell script that stands in for the
// agent and returns its path. The script gets the agent's command line
// and ignores it.
func scriptAgent(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAgentUsageNotCounts runs an agent whose result reports a negative
// token count. The gateway used to add it to a Prometheus counter, which
// panics: the process died with every run in it. A member that is not a
// count counts 0 and the others are kept.
func TestAgentUsageNotCounts(t *testing.T) {
	t.Parallel()
	agent := scriptAgent(t, `cat <<'EOF'
{"type":"system","subtype":"init","cwd":"/w","session_id":"s-1","model":"auto","permissionMode":"default"}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Done."}]},"session_id":"s-1"}
{"type":"result","subtype":"success","duration_ms":5,"is_error":false,"result":"Done.","session_id":"s-1","usage":{"inputTokens":-1,"outputTokens":7,"cacheReadTokens":0,"cacheWriteTokens":9223372036854775807}}
EOF`)
	s := startServer(t, "DOCSTREAM_AGENT_BINARY="+agent)
	for range 2 {
		cr := s.chatJSON(t, map[string]any{"prompt": "hi", "workspace": "main"})
		u := cr.Usage
		if cr.Status != "completed" || !u.Reported || u.PromptTokens != 0 || u.CompletionTokens != 7 || u.TotalTokens != 7 ||
			u.CacheReadTokens != 0 || u.CacheWriteTokens != 0 {
			t.Fatalf("status %s, usage %+v; want completed with 7 completion tokens and the rest 0", cr.Status, u)
		}
	}
	m := s.e2eMetrics(t)
	if m[`docstream_tokens_total{kind="completion"}`] != 14 || m[`docstream_tokens_total{kind="prompt"}`] != 0 {
		t.Errorf("token counters: %v", filterPrefix(m, "docstream_tokens_total"))
	}
}

// filterPrefix returns the series of m whose names start with prefix.
func filterPrefix(m map[string]float64, prefix string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}
