package simulator

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeProcess records the process-level effects a scenario asked for.
type fakeProcess struct {
	mu          sync.Mutex
	ignoredTerm bool
	killed      bool
	children    int
}

// simRun is the outcome of one in-process simulator run.
type simRun struct {
	code   int
	stdout string
	stderr string
	proc   *fakeProcess
}

// runConfig tweaks one in-process run.
type runConfig struct {
	env     map[string]string
	stdin   io.Reader
	ctx     context.Context
	environ []string
	stderr  io.Writer
}

// runSim runs the simulator in-process at speed 0 with fake process effects.
func runSim(t *testing.T, args []string, rc runConfig) simRun {
	t.Helper()
	env := map[string]string{SpeedEnv: "0"}
	for k, v := range rc.env {
		env[k] = v
	}
	ctx := rc.ctx
	if ctx == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
	}
	proc := &fakeProcess{}
	environ := rc.environ
	if environ == nil {
		environ = []string{"PATH=/usr/bin", "HOME=/home/sim"}
	}
	opts := options{
		environ: func() []string { return environ },
		getwd:   func() (string, error) { return "/work/sim", nil },
		now:     time.Now,
		ignoreTerm: func() {
			proc.mu.Lock()
			proc.ignoredTerm = true
			proc.mu.Unlock()
		},
		killSelf: func() {
			proc.mu.Lock()
			proc.killed = true
			proc.mu.Unlock()
		},
		startChild: func(io.Writer, io.Writer) error {
			proc.mu.Lock()
			proc.children++
			proc.mu.Unlock()
			return nil
		},
	}
	var stdout, stderr bytes.Buffer
	var errW io.Writer = &stderr
	if rc.stderr != nil {
		errW = rc.stderr
	}
	code := mainWith(ctx, args, rc.stdin, &stdout, errW, func(k string) string { return env[k] }, opts)
	return simRun{code: code, stdout: stdout.String(), stderr: stderr.String(), proc: proc}
}

// streamArgs is the gateway's usual command line for a prompt.
func streamArgs(partial bool, extra ...string) []string {
	args := []string{"--print", "--output-format", "stream-json"}
	if partial {
		args = append(args, "--stream-partial-output")
	}
	args = append(args, "--trust", "--workspace", "/tmp")
	return append(args, extra...)
}

// event is one decoded stdout line.
type event map[string]any

func (e event) typ() string     { s, _ := e["type"].(string); return s }
func (e event) subtype() string { s, _ := e["subtype"].(string); return s }
func (e event) has(k string) bool {
	_, ok := e[k]
	return ok
}

// text returns an assistant event's text.
func (e event) text() string {
	msg, _ := e["message"].(map[string]any)
	parts, _ := msg["content"].([]any)
	var sb strings.Builder
	for _, p := range parts {
		pm, _ := p.(map[string]any)
		s, _ := pm["text"].(string)
		sb.WriteString(s)
	}
	return sb.String()
}

// tool returns the tool kind and its inner object of a tool_call event.
func (e event) tool() (string, map[string]any) {
	tc, _ := e["tool_call"].(map[string]any)
	for k, v := range tc {
		if strings.HasSuffix(k, "ToolCall") {
			m, _ := v.(map[string]any)
			return k, m
		}
	}
	return "", nil
}

// isDelta reports whether an assistant event is a partial-output delta.
func (e event) isDelta() bool {
	return e.typ() == "assistant" && e.has("timestamp_ms") && !e.has("model_call_id")
}

// decode parses stdout into events. Lines in allowed are skipped; any other
// line that is not a JSON object fails the test.
func decode(t *testing.T, stdout string, allowed ...string) []event {
	t.Helper()
	if stdout == "" {
		return nil
	}
	if !strings.HasSuffix(stdout, "\n") {
		t.Fatalf("stdout does not end with a newline")
	}
	var out []event
	for i, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var e event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			ok := false
			for _, a := range allowed {
				if line == a {
					ok = true
				}
			}
			if !ok {
				t.Fatalf("line %d is not JSON: %v: %.200s", i+1, err, line)
			}
			continue
		}
		out = append(out, e)
	}
	return out
}
