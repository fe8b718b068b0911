package gateway_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docstream/docstream/documents"
)

// deltaLoop is shell that writes, every interval (a sleep(1) argument), an
// assistant delta "<word><n> " for n = 0, 1, …, until a write fails.
func deltaLoop(word, interval string) string {
	return `i=0
while :; do
  echo "{\"type\":\"assistant\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"` + word + `$i \"}]},\"timestamp_ms\":$((i+1))}" || exit 1
  i=$((i+1)); sleep ` + interval + `
done`
}

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
	if m[`docstream_tokens_total{kind="completion",model="auto"}`] != 14 || m[`docstream_tokens_total{kind="prompt",model="auto"}`] != 0 {
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

// TestEscapedWriterRunEnds runs an agent that exits at once, leaving a
// process outside its group (setsid) that writes a line every 50 ms for a
// minute. The run used to wait for the pipe to fall quiet before closing
// it, so that it lasted as long as the writer: the linger after the agent's
// exit, the run timeout, a cancel and the shutdown could not end it. Now
// the output of a stopped agent is read for at most 2 s more.
func TestEscapedWriterRunEnds(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid is not installed")
	}
	agent := scriptAgent(t, `echo '{"type":"system","subtype":"init","cwd":"/w","session_id":"s-2","model":"auto"}'
setsid sh -c 'i=0; while [ $i -lt 1200 ]; do echo "{\"type\":\"assistant\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"g$i \"}]},\"timestamp_ms\":$((i+1))}" || exit 0; i=$((i+1)); sleep 0.05; done' &
exit 0`)
	s := startServer(t, "DOCSTREAM_AGENT_BINARY="+agent, "DOCSTREAM_AGENT_LINGER_AFTER_RESULT=500ms", "DOCSTREAM_AGENT_KILL_GRACE=1s")
	start := time.Now()
	_, evs := s.chatStream(t, map[string]any{"prompt": "hi", "workspace": "main"})
	took := time.Since(start)
	if len(evs) == 0 || evs[len(evs)-1].Name != "done" {
		t.Fatalf("the stream did not end with done: %v", evs)
	}
	// 0.5 s of linger, up to 2 s of kill grace and 2 s of draining.
	if took > 15*time.Second {
		t.Errorf("the run lasted %s; the writer outside the agent's group kept it open", took)
	}
}

// TestRestartReapsEscapedTools kills the gateway while its agent runs a
// tool in the agent's process group and another in a session of its own
// (setsid). The agent dies on its next write to the closed pipe; the
// tools live on. The restarted gateway used to look only for the agent's
// group leader, which was gone, and left both running; it now ends every
// process that carries its run's mark.
func TestRestartReapsEscapedTools(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid is not installed")
	}
	agent := scriptAgent(t, `sleep 300 &
setsid sleep 301 &
echo '{"type":"system","subtype":"init","cwd":"/w","session_id":"s-3","model":"auto"}'
`+deltaLoop("t", "0.1"))
	s := startE2E(t, "DOCSTREAM_AGENT_BINARY="+agent)
	s.e2eKillAgentsAtCleanup(t)
	st := s.e2eOpen(t, map[string]any{"prompt": "hi", "workspace": "main"})
	st.Until(documents.EventContentDelta)
	deadline := time.Now().Add(10 * time.Second)
	for len(s.agentProcesses()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the agent and its two tools are not all running: %v", s.agentProcesses())
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.kill()
	st.Close()
	// The agent's leader dies writing to the pipe nobody reads; its tools
	// do not.
	deadline = time.Now().Add(10 * time.Second)
	for len(s.agentProcesses()) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("after the crash: %d agent processes, want the 2 tools", len(s.agentProcesses()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.start(t)
	s.waitNoAgents(t, 10*time.Second)
	if !strings.Contains(s.Logs(), "ended agents left running by the last crash") {
		t.Errorf("the restart did not say it ended the agents' tools")
	}
}

// TestRunEndsEscapedTools checks that a tool the agent started in a
// session of its own (setsid), outside its process group, ends with the
// run: it used to live on, with PID 1 as its parent, until it exited.
func TestRunEndsEscapedTools(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid is not installed")
	}
	agent := scriptAgent(t, `setsid sleep 302 >/dev/null 2>&1 </dev/null &
echo '{"type":"system","subtype":"init","cwd":"/w","session_id":"s-5","model":"auto"}'
echo '{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s-5"}'
`)
	s := startE2E(t, "DOCSTREAM_AGENT_BINARY="+agent)
	s.e2eKillAgentsAtCleanup(t)
	if cr := s.chatJSON(t, map[string]any{"prompt": "hi", "workspace": "main"}); cr.Status != documents.StatusCompleted {
		t.Fatalf("status %s", cr.Status)
	}
	s.waitNoAgents(t, 10*time.Second)
}

// TestCrashKeepsOpenDocument kills the gateway while one text document has
// been streaming for longer than a snapshot interval. The response used to
// be saved only as documents ended, so the restarted gateway had only the
// INTERRUPTED error; now it keeps the text streamed up to the last save.
func TestCrashKeepsOpenDocument(t *testing.T) {
	t.Parallel()
	agent := scriptAgent(t, `echo '{"type":"system","subtype":"init","cwd":"/w","session_id":"s-4","model":"auto"}'
`+deltaLoop("w", "0.05"))
	s := startE2E(t, "DOCSTREAM_AGENT_BINARY="+agent)
	s.e2eKillAgentsAtCleanup(t)
	st := s.e2eOpen(t, map[string]any{"prompt": "hi", "workspace": "main"})
	id := st.Resp.Header.Get("X-Docstream-Response-Id")
	start := time.Now()
	for time.Since(start) < 6500*time.Millisecond {
		st.Until(documents.EventContentDelta)
	}
	s.kill()
	st.Close()
	s.start(t)
	cr := s.e2eGetChat(t, id)
	e2eCheckInterrupted(t, id, cr)
	if len(cr.Documents) < 2 || cr.Documents[0].Type != documents.TypeText || !strings.HasPrefix(str(cr.Documents[0].Content), "w0 w1 w2") {
		t.Errorf("the text streamed before the crash is lost: %+v", cr.Documents)
	}
}

// TestAgentExitsStoppedBy checks that docstream_agent_exits_total tells an
// agent the gateway stopped (a linger after the result, a cancel) from one
// that ended by itself, so that the crash alert counts only the latter.
func TestAgentExitsStoppedBy(t *testing.T) {
	t.Parallel()
	s := startE2E(t, "DOCSTREAM_AGENT_LINGER_AFTER_RESULT=200ms", "DOCSTREAM_AGENT_KILL_GRACE=1s")
	// exits sums the abnormal exits the gateway caused, and the others.
	exits := func(m map[string]float64) (stopped, crashed float64) {
		for k, v := range m {
			switch {
			case !strings.HasPrefix(k, "docstream_agent_exits_total{"), strings.Contains(k, `code="0"`):
			case strings.Contains(k, `stopped_by="gateway"`):
				stopped += v
			default:
				crashed += v
			}
		}
		return stopped, crashed
	}
	wait := func(stopped, crashed float64) {
		t.Helper()
		m := s.e2eWaitMetrics(t, func(m map[string]float64) bool {
			a, b := exits(m)
			return a >= stopped && b >= crashed
		})
		if a, b := exits(m); a != stopped || b != crashed {
			t.Fatalf("abnormal exits: %v stopped by the gateway and %v by themselves, want %v and %v", a, b, stopped, crashed)
		}
	}
	if cr := s.chatJSON(t, map[string]any{"prompt": "fault:crash"}); cr.Status != documents.StatusError {
		t.Fatalf("fault:crash: status %s", cr.Status)
	}
	wait(0, 1)
	// A completed run whose agent lingers after its result is stopped.
	if cr := s.chatJSON(t, map[string]any{"prompt": "fault:hang-after"}); cr.Status != documents.StatusCompleted {
		t.Fatalf("fault:hang-after: status %s", cr.Status)
	}
	wait(1, 1)
	st := s.e2eOpen(t, map[string]any{"prompt": "fault:hang-mid", "stream": true})
	st.Until("response_start")
	resp := s.post(t, "/v1/chat/"+st.Resp.Header.Get("X-Docstream-Response-Id")+"/cancel", nil)
	resp.Body.Close()
	st.Rest()
	wait(2, 1)
}

// TestRestartReapsUnrecordedAgent: the running agent's record cannot be
// written (its folder is gone: a full or read-only disk fails alike), and
// the gateway crashes. The run starts all the same, the failed writes are
// counted, and the restarted gateway ends what the agent left by the mark
// its data directory gives every agent, without the record.
func TestRestartReapsUnrecordedAgent(t *testing.T) {
	t.Parallel()
	agent := scriptAgent(t, `sleep 303 &
echo '{"type":"system","subtype":"init","cwd":"/w","session_id":"s-6","model":"auto"}'
`+deltaLoop("u", "0.1"))
	s := startE2E(t, "DOCSTREAM_AGENT_BINARY="+agent)
	s.e2eKillAgentsAtCleanup(t)
	records := filepath.Join(s.Dir, "data", "agents")
	if err := os.RemoveAll(records); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(records, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	st := s.e2eOpen(t, map[string]any{"prompt": "hi", "workspace": "main"})
	st.Until(documents.EventContentDelta)
	s.e2eWaitMetrics(t, func(m map[string]float64) bool { return m["docstream_agent_record_failures_total"] >= 1 })
	if !waitFor(10*time.Second, func() bool { return len(s.agentProcesses()) >= 2 }) {
		t.Fatalf("the agent and its tool are not both running: %v", s.agentProcesses())
	}
	s.kill()
	st.Close()
	if err := os.Remove(records); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(records, 0o755); err != nil {
		t.Fatal(err)
	}
	s.start(t)
	s.waitNoAgents(t, 10*time.Second)
	if !strings.Contains(s.Logs(), "ended agents left running by the last crash") {
		t.Errorf("the restart did not say it ended the agent's processes")
	}
}
