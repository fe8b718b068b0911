package gateway_test

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	gosse "github.com/tmaxmax/go-sse"

	"github.com/docstream/docstream/documents"
)

// Canary secrets: the agent's key and the client's key. Neither may show in
// any log, body or agent command line.
const (
	hdAgentSecret = "sk-secret-marker"
	hdClientKey   = "key-marker"
)

// hdServer is a testServer with both secrets configured, a client without
// keep-alive (so the gateway's descriptors settle) and a record of every
// body the tests read.
type hdServer struct {
	*testServer
	simLog string
	client *http.Client
	seen   *syncBuffer
}

// hdStart starts a hdServer; extra are more KEY=VALUE entries. When the
// test ends, the server is stopped and every output is searched for the
// secrets.
func hdStart(t *testing.T, extra ...string) *hdServer {
	t.Helper()
	h := &hdServer{seen: &syncBuffer{}, client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	env := []string{"DOCSTREAM_AGENT_API_KEY=" + hdAgentSecret,
		"DOCSTREAM_AUTH_API_KEYS=" + hdClientKey, "DOCSTREAM_AUTH_RATE_PER_MINUTE=1000000", "DOCSTREAM_AUTH_BURST=100000"}
	h.testServer = startServer(t, append(env, extra...)...)
	h.simLog = filepath.Join(h.Dir, "sim.log")
	t.Cleanup(func() {
		h.stop(t)
		h.checkSecrets(t)
	})
	return h
}

// checkSecrets fails if a secret shows in the logs, a body or an agent's
// command line, or if the agent's environment is not as configured:
// CURSOR_API_KEY present, no DOCSTREAM_* variable but the simulator's own
// DOCSTREAM_SIM_* settings.
func (h *hdServer) checkSecrets(t *testing.T) {
	t.Helper()
	simLog, _ := os.ReadFile(h.simLog)
	for what, text := range map[string]string{"the gateway's log": h.Logs(), "a response body": h.seen.String(), "the agent's argv": string(simLog)} {
		for _, secret := range []string{hdAgentSecret, hdClientKey} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contains the secret %q", what, secret)
			}
		}
	}
	for _, st := range h.starts(t) {
		argv, _ := st["argv"].([]any)
		for _, a := range argv {
			if a == "--" {
				break // the prompt follows
			}
			if strings.HasPrefix(fmt.Sprint(a), "--api-key") {
				t.Errorf("agent argv has %s: %v", a, argv)
			}
		}
		env, _ := st["env"].([]any)
		hasKey := false
		for _, e := range env {
			name := fmt.Sprint(e)
			if name == "CURSOR_API_KEY" {
				hasKey = true
			}
			if strings.HasPrefix(name, "DOCSTREAM_") && !strings.HasPrefix(name, "DOCSTREAM_SIM_") {
				t.Errorf("the agent's environment has %s", name)
			}
		}
		if !hasKey {
			t.Errorf("the agent's environment has no CURSOR_API_KEY: %v", env)
		}
	}
}

// starts returns the simulator's records of the runs it started.
func (h *hdServer) starts(t *testing.T) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(h.simLog)
	if err != nil {
		return nil
	}
	var out []map[string]any
	for _, line := range bytes.Split(b, []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) == nil && m["prompt"] != nil && m["prompt"] != "" {
			out = append(out, m)
		}
	}
	return out
}

// request sends a request with the client key unless headers set
// Authorization themselves ("" removes it). body is nil, a string, []byte,
// an io.Reader or a value to encode as JSON.
func (h *hdServer) request(t *testing.T, method, path string, body any, headers ...string) *http.Response {
	t.Helper()
	req := newRequest(t, method, h.URL+path, body, append([]string{"Authorization", "Bearer " + hdClientKey}, headers...)...)
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// body reads and closes a response body and records it.
func (h *hdServer) body(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	h.seen.Write(b)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return b
}

// hdAPIError is the gateway's error answer.
type hdAPIError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// expectError checks a response is an error answer with the status (and,
// when set, the code), and returns it.
func (h *hdServer) expectError(t *testing.T, resp *http.Response, status int, code string) hdAPIError {
	t.Helper()
	b := h.body(t, resp)
	var e hdAPIError
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, clip(string(b)))
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error answer with Content-Type %q", ct)
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("not an error answer (%v): %s", err, clip(string(b)))
	}
	if code != "" && e.Error.Code != code {
		t.Fatalf("error code %q (%s), want %q", e.Error.Code, e.Error.Message, code)
	}
	return e
}

// stream posts a streaming /v1/chat request and reads it to the end; each
// event is passed to on (which may be nil) as it arrives.
func (h *hdServer) stream(t *testing.T, body map[string]any, on func(id string, ev event)) (*http.Response, []event) {
	t.Helper()
	body["stream"] = true
	resp := h.request(t, http.MethodPost, "/v1/chat", body)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST /v1/chat: status %d: %s", resp.StatusCode, h.body(t, resp))
	}
	id := resp.Header.Get("X-Docstream-Response-Id")
	var evs []event
	for ev, err := range gosse.Read(io.TeeReader(resp.Body, h.seen), &gosse.ReadConfig{MaxEventSize: 64 << 20}) {
		if err != nil {
			t.Fatalf("reading SSE after %d events: %v", len(evs), err)
		}
		e := event{ID: ev.LastEventID, Name: ev.Type, Data: ev.Data}
		evs = append(evs, e)
		if on != nil {
			on(id, e)
		}
	}
	return resp, evs
}

// chat runs a prompt to its end and returns the folded response.
func (h *hdServer) chat(t *testing.T, prompt string) documents.ChatResponse {
	t.Helper()
	_, evs := h.stream(t, map[string]any{"prompt": prompt}, nil)
	return fold(t, evs)
}

// fds counts the gateway's open file descriptors.
func (h *hdServer) fds() int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", h.cmd.Process.Pid))
	return len(ents)
}

// baseline runs one prompt (so that whatever opens lazily is open) and
// returns the gateway's descriptor count once no agent is left.
func (h *hdServer) baseline(t *testing.T) int {
	t.Helper()
	if cr := h.chat(t, "hello"); cr.Status != documents.StatusCompleted {
		t.Fatalf("warm-up run: status %s", cr.Status)
	}
	h.waitNoAgents(t, 10*time.Second)
	// The warm-up's connection is closed once the listener is the only
	// socket left.
	if !waitFor(5*time.Second, func() bool { return h.sockets() == 1 }) {
		t.Fatalf("the gateway holds %d sockets after the warm-up; want only its listener", h.sockets())
	}
	return h.fds()
}

// sockets counts the gateway's open sockets.
func (h *hdServer) sockets() int {
	dir := fmt.Sprintf("/proc/%d/fd", h.cmd.Process.Pid)
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// checkClean waits for every agent process to be gone and the gateway's
// descriptors to be back to the baseline (with a little slack).
func (h *hdServer) checkClean(t *testing.T, base int, agentsWithin time.Duration) {
	t.Helper()
	h.waitNoAgents(t, agentsWithin)
	const slack = 3
	deadline := time.Now().Add(5 * time.Second)
	for h.fds() > base+slack {
		if time.Now().After(deadline) {
			t.Errorf("the gateway holds %d file descriptors, %d before the fault", h.fds(), base)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// hdErrorDocs returns the error documents' metadata of a response.
func hdErrorDocs(cr documents.ChatResponse) []map[string]any {
	var out []map[string]any
	for _, d := range cr.Documents {
		if d.Type != documents.TypeError {
			continue
		}
		m := map[string]any{}
		_ = json.Unmarshal(d.Metadata, &m)
		m["content"] = str(d.Content)
		out = append(out, m)
	}
	return out
}

// hdExpectErrorDoc checks the response ended in error with exactly one
// error document of the given code, and returns it.
func hdExpectErrorDoc(t *testing.T, cr documents.ChatResponse, code string, stop documents.StopReason) map[string]any {
	t.Helper()
	if cr.Status != documents.StatusError {
		t.Errorf("status %s, want error", cr.Status)
	}
	if stop != "" && cr.Metadata.StopReason != stop {
		t.Errorf("stopReason %q, want %q", cr.Metadata.StopReason, stop)
	}
	var found map[string]any
	for _, m := range hdErrorDocs(cr) {
		if m["errorCode"] == code {
			if found != nil {
				t.Errorf("two %s error documents", code)
			}
			found = m
		}
	}
	if found == nil {
		t.Fatalf("no %s error document; got %v", code, hdErrorDocs(cr))
	}
	return found
}

// hdText joins the content of a response's text documents.
func hdText(cr documents.ChatResponse) string {
	var b strings.Builder
	for _, d := range cr.Documents {
		if d.Type == documents.TypeText {
			b.WriteString(str(d.Content))
		}
	}
	return b.String()
}

// TestFaultMatrix runs each of the simulator's fault modes against its own
// gateway and checks the run ends as it should and leaves nothing behind:
// exactly one done, no agent process, the gateway's descriptors back to
// where they were, and no secret anywhere.
func TestFaultMatrix(t *testing.T) {
	t.Parallel()
	type tc struct {
		name   string
		prompt string
		env    []string
		// during is called for each event as it arrives.
		during func(t *testing.T, h *hdServer, id string, ev event)
		check  func(t *testing.T, h *hdServer, cr documents.ChatResponse, took time.Duration)
		// agents is how long agent processes may outlive the done event.
		agents time.Duration
	}
	// cancelCase cancels the run at its first content_delta with each of
	// bodies, 300 ms apart, and checks that done follows within [minD, maxD]
	// of the last cancel.
	cancelCase := func(name, grace string, minD, maxD time.Duration, bodies ...string) tc {
		var at time.Time
		sent := false
		return tc{name: name, prompt: "fault:ignore-term", env: []string{"DOCSTREAM_AGENT_KILL_GRACE=" + grace}, agents: 2 * time.Second,
			during: func(t *testing.T, h *hdServer, id string, ev event) {
				if sent || ev.Name != documents.EventContentDelta {
					return
				}
				sent = true
				for i, body := range bodies {
					if i > 0 {
						// Nothing shows a SIGTERM the agent ignores: the pause lets it go out first.
						time.Sleep(300 * time.Millisecond)
					}
					at = time.Now()
					resp := h.request(t, http.MethodPost, "/v1/chat/"+id+"/cancel", body)
					b := h.body(t, resp)
					if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
						t.Errorf("cancel %s: status %d: %s", body, resp.StatusCode, b)
					}
				}
			},
			check: func(t *testing.T, h *hdServer, cr documents.ChatResponse, took time.Duration) {
				hdExpectErrorDoc(t, cr, documents.CodeCancelled, documents.StopCancelled)
				if d := time.Since(at); d < minD || d > maxD {
					t.Errorf("done came %s after the cancel; want %s to %s (kill grace %s)", d, minD, maxD, grace)
				}
			}}
	}
	// hangAfter: the agent does not exit after its result. done follows the
	// result at once (not after the 2s linger), and the agent is ended.
	hangAfter := func() tc {
		var last, done time.Time
		return tc{name: "hang-after", prompt: "fault:hang-after", env: []string{"DOCSTREAM_AGENT_LINGER_AFTER_RESULT=2s"},
			agents: 2*time.Second + 2*time.Second + time.Second,
			during: func(t *testing.T, h *hdServer, id string, ev event) {
				if ev.Name == documents.EventDone {
					done = time.Now()
				} else {
					last = time.Now()
				}
			},
			check: func(t *testing.T, h *hdServer, cr documents.ChatResponse, took time.Duration) {
				if cr.Status != documents.StatusCompleted {
					t.Errorf("status %s, want completed (errors %v)", cr.Status, hdErrorDocs(cr))
				}
				if d := done.Sub(last); d >= 1500*time.Millisecond {
					t.Errorf("done came %s after the last document: it waited for the lingering agent (linger 2s)", d)
				}
			}}
	}
	cases := []tc{
		{name: "exit-signal", prompt: "fault:exit-signal", check: func(t *testing.T, h *hdServer, cr documents.ChatResponse, took time.Duration) {
			d := hdExpectErrorDoc(t, cr, documents.CodeAgentExited, documents.StopAgentExit)
			if !strings.Contains(fmt.Sprint(d["content"]), "killed by signal SIGKILL") {
				t.Errorf("the error does not say the agent was killed: %v", d["content"])
			}
			if !strings.Contains(hdText(cr), "Working on it") {
				t.Errorf("the text written before the kill is lost: %q", hdText(cr))
			}
		}},
		{name: "crash", prompt: "fault:crash", check: func(t *testing.T, h *hdServer, cr documents.ChatResponse, took time.Duration) {
			d := hdExpectErrorDoc(t, cr, documents.CodeAgentExited, documents.StopAgentExit)
			if !strings.Contains(fmt.Sprint(d["details"]), "simulated crash") {
				t.Errorf("the stderr tail is not in the error details: %v", d["details"])
			}
		}},
		{name: "hang-mid+idle-timeout", prompt: "fault:hang-mid", env: []string{"DOCSTREAM_AGENT_IDLE_TIMEOUT=1s"},
			check: func(t *testing.T, h *hdServer, cr documents.ChatResponse, took time.Duration) {
				hdExpectErrorDoc(t, cr, documents.CodeTimeout, documents.StopTimeout)
				if took < time.Second || took > 8*time.Second {
					t.Errorf("the idle timeout of 1s ended the run after %s", took)
				}
			}},
		{name: "hang-mid+run-timeout", prompt: "fault:hang-mid", env: []string{"DOCSTREAM_AGENT_RUN_TIMEOUT=1s"},
			check: func(t *testing.T, h *hdServer, cr documents.ChatResponse, took time.Duration) {
				d := hdExpectErrorDoc(t, cr, documents.CodeTimeout, documents.StopTimeout)
				if !strings.Contains(fmt.Sprint(d["content"]), "time limit") {
					t.Errorf("the error does not name the run's time limit: %v", d["content"])
				}
				if took < time.Second || took > 8*time.Second {
					t.Errorf("the run timeout of 1s ended the run after %s", took)
				}
			}},
		hangAfter(),
		{name: "oversize-skipped", prompt: "fault:oversize", env: []string{"DOCSTREAM_AGENT_MAX_LINE_BYTES=1048576"},
			check: func(t *testing.T, h *hdServer, cr documents.ChatResponse, took time.Duration) {
				if cr.Status != documents.StatusCompleted {
					t.Errorf("status %s, want completed", cr.Status)
				}
				var found bool
				for _, m := range hdErrorDocs(cr) {
					if m["errorCode"] == documents.CodeLineTooLong && strings.Contains(fmt.Sprint(m["details"]), "1048576") {
						found = true
					}
				}
				if !found {
					t.Errorf("no LINE_TOO_LONG error document naming the limit: %v", hdErrorDocs(cr))
				}
				if !strings.Contains(hdText(cr), "nothing in it needs to change") {
					t.Errorf("the text after the long line is lost: %q", hdText(cr))
				}
			}},
		{name: "oversize-delivered", prompt: "fault:oversize", env: []string{"DOCSTREAM_AGENT_MAX_LINE_BYTES=16777216"},
			check: func(t *testing.T, h *hdServer, cr documents.ChatResponse, took time.Duration) {
				if cr.Status != documents.StatusCompleted || len(hdErrorDocs(cr)) != 0 {
					t.Errorf("status %s, errors %v; want completed", cr.Status, hdErrorDocs(cr))
				}
				big := 0
				for _, d := range cr.Documents {
					big = max(big, len(d.Metadata))
				}
				if big < 10<<20 {
					t.Errorf("the 10 MiB tool result did not arrive (largest metadata %d bytes)", big)
				}
			}},
		{name: "garbage", prompt: "fault:garbage",
			check: func(t *testing.T, h *hdServer, cr documents.ChatResponse, took time.Duration) {
				if cr.Status != documents.StatusCompleted || len(hdErrorDocs(cr)) != 0 {
					t.Errorf("status %s, errors %v; want completed", cr.Status, hdErrorDocs(cr))
				}
				text := hdText(cr)
				for _, want := range []string{"I'll check the repository status first.", "Everything else is clean."} {
					if strings.Count(text, want) != 1 {
						t.Errorf("%q appears %d times in %q", want, strings.Count(text, want), text)
					}
				}
				// The counters are added when the run has ended.
				deadline := time.Now().Add(5 * time.Second)
				for {
					m := h.metrics(t)
					if strings.Contains(m, `docstream_agent_lines_skipped_total{reason="not_json"} `) &&
						!strings.Contains(m, `docstream_agent_lines_skipped_total{reason="not_json"} 0`) &&
						!strings.Contains(m, `docstream_agent_lines_skipped_total{reason="unknown_type"} 0`) {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("skipped lines are not counted:\n%s", hdGrep(m, "lines_skipped"))
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
			}},
		{name: "stderr-flood", prompt: "fault:stderr-flood",
			check: func(t *testing.T, h *hdServer, cr documents.ChatResponse, took time.Duration) {
				if cr.Status != documents.StatusCompleted || len(hdErrorDocs(cr)) != 0 {
					t.Errorf("status %s, errors %v; want completed", cr.Status, hdErrorDocs(cr))
				}
				if took > 30*time.Second {
					t.Errorf("the run took %s", took)
				}
			}},
		{name: "grandchild", prompt: "fault:grandchild", agents: 2*time.Second + 500*time.Millisecond + 2*time.Second,
			check: func(t *testing.T, h *hdServer, cr documents.ChatResponse, took time.Duration) {
				if cr.Status != documents.StatusCompleted {
					t.Errorf("status %s, want completed (errors %v)", cr.Status, hdErrorDocs(cr))
				}
			}},
		// SIGTERM is ignored: the group is killed after the grace.
		cancelCase("ignore-term+cancel", "3s", 2900*time.Millisecond, 8*time.Second, ""),
		// KILL skips the grace, also after a SIGTERM cancel.
		cancelCase("ignore-term+cancel-kill", "3s", 0, 2500*time.Millisecond, `{"signal":"KILL"}`),
		cancelCase("ignore-term+cancel-then-kill", "20s", 0, 2500*time.Millisecond, "", `{"signal":"KILL"}`),
		{name: "no-result", prompt: "fault:no-result", check: func(t *testing.T, h *hdServer, cr documents.ChatResponse, took time.Duration) {
			hdExpectErrorDoc(t, cr, documents.CodeNoResult, documents.StopAgentExit)
		}},
		{name: "is-error", prompt: "fault:is-error", check: func(t *testing.T, h *hdServer, cr documents.ChatResponse, took time.Duration) {
			d := hdExpectErrorDoc(t, cr, documents.CodeAgentError, "")
			if !strings.Contains(fmt.Sprint(d["content"]), "simulated agent error") {
				t.Errorf("the agent's error text is lost: %v", d["content"])
			}
		}},
		{name: "auth", prompt: "fault:auth", check: func(t *testing.T, h *hdServer, cr documents.ChatResponse, took time.Duration) {
			d := hdExpectErrorDoc(t, cr, documents.CodeAgentExited, documents.StopAgentExit)
			if !strings.Contains(fmt.Sprint(d["details"]), "Authentication required") {
				t.Errorf("the CLI's message is not in the details: %v", d["details"])
			}
		}},
	}
	// Cases with the same configuration share a gateway, one after the
	// other; the gateways run in parallel.
	groups := map[string][]tc{}
	var order []string
	for _, c := range cases {
		k := strings.Join(c.env, " ")
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], c)
	}
	for _, k := range order {
		cs := groups[k]
		t.Run(strings.NewReplacer("DOCSTREAM_", "", " ", "+").Replace(cmp.Or(k, "defaults")), func(t *testing.T) {
			t.Parallel()
			h := hdStart(t, cs[0].env...)
			base := h.baseline(t)
			for _, c := range cs {
				t.Run(c.name, func(t *testing.T) {
					start := time.Now()
					var on func(id string, ev event)
					if c.during != nil {
						on = func(id string, ev event) { c.during(t, h, id, ev) }
					}
					_, evs := h.stream(t, map[string]any{"prompt": c.prompt}, on)
					took := time.Since(start)
					cr := fold(t, evs)
					c.check(t, h, cr, took)
					h.checkClean(t, base, cmp.Or(c.agents, 2*time.Second))
				})
			}
		})
	}
}

func hdGrep(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// waitStatus polls GET /v1/chat/{id} until the response is no longer
// streaming.
func (h *hdServer) waitStatus(t *testing.T, id string, within time.Duration) documents.ChatResponse {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		resp := h.request(t, http.MethodGet, "/v1/chat/"+id, nil)
		b := h.body(t, resp)
		var cr documents.ChatResponse
		if resp.StatusCode == 200 {
			if err := json.Unmarshal(b, &cr); err != nil {
				t.Fatalf("GET /v1/chat/%s: %v", id, err)
			}
			if cr.Status != documents.StatusStreaming {
				return cr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v1/chat/%s: still %d %s after %s", id, resp.StatusCode, cr.Status, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// replay reads a finished run's whole stream again.
func (h *hdServer) replay(t *testing.T, id string) []event {
	t.Helper()
	resp := h.request(t, http.MethodGet, "/v1/chat/"+id+"/stream", nil)
	b := h.body(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/chat/%s/stream: %d %s", id, resp.StatusCode, clip(string(b)))
	}
	return readEvents(t, bytes.NewReader(b))
}

// TestClientDisconnect drops the client mid-run: after the detach grace
// the agent is ended, the run is recorded as cancelled with one done.
func TestClientDisconnect(t *testing.T) {
	t.Parallel()
	h := hdStart(t, "DOCSTREAM_RUNS_DETACH_GRACE=300ms")
	base := h.baseline(t)
	resp := h.request(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": "fault:hang-mid", "stream": true})
	id := resp.Header.Get("X-Docstream-Response-Id")
	for ev, err := range gosse.Read(resp.Body, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == documents.EventContentDelta {
			break
		}
	}
	resp.Body.Close()
	cr := h.waitStatus(t, id, 10*time.Second)
	hdExpectErrorDoc(t, cr, documents.CodeCancelled, documents.StopCancelled)
	fold(t, h.replay(t, id))
	h.checkClean(t, base, 5*time.Second)
}

// TestSlowClient stops reading a large stream: with a write timeout of 1s
// the stalled reader is dropped, and the run still completes.
func TestSlowClient(t *testing.T) {
	t.Parallel()
	h := hdStart(t, "DOCSTREAM_SERVER_WRITE_TIMEOUT=1s")
	base := h.baseline(t)
	conn, id := hdStalledStream(t, h.Addr, "Authorization: Bearer "+hdClientKey+"\r\n")
	defer conn.Close()
	// Stop reading. The gateway must give up on this client after its
	// write timeout while the run goes on.
	cr := h.waitStatus(t, id, 60*time.Second)
	if cr.Status != documents.StatusCompleted {
		t.Fatalf("the run ended %s (%v); a stalled reader must not stop it", cr.Status, hdErrorDocs(cr))
	}
	if !strings.Contains(hdText(cr), "Paragraph 1500 of 1500") {
		t.Errorf("the run's text is incomplete")
	}
	// The connection was dropped: once the gateway has let go of the
	// stalled client, reading what is buffered reaches the end without the
	// done event.
	if !waitFor(20*time.Second, func() bool { return h.metricValue(t, "docstream_stream_subscribers") == 0 }) {
		t.Fatalf("the gateway still streams to the stalled client 20 s after its run ended")
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	rest, err := io.ReadAll(conn)
	if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
		t.Fatalf("the gateway kept the stalled connection open (%d bytes read)", len(rest))
	}
	if bytes.Contains(rest, []byte("event: done")) {
		t.Errorf("the stalled client got the whole stream; it was not dropped")
	}
	h.checkClean(t, base, 2*time.Second)
}

// TestShutdownMidStream sends SIGTERM to the gateway during a long run: the
// client's stream ends with a SHUTDOWN error document and one done, the
// gateway exits 0 and no agent is left.
func TestShutdownMidStream(t *testing.T) {
	t.Parallel()
	h := hdStart(t, "DOCSTREAM_SERVER_SHUTDOWN_TIMEOUT=2s")
	hdShutdownAtText(t, h, "fault:hang-mid", func() {
		// New connections are refused once the drain begins.
		if !waitFor(5*time.Second, func() bool { return strings.Contains(h.Logs(), "shutting down: draining streams") }) {
			t.Fatalf("the gateway did not begin its drain after SIGTERM:\n%s", h.Logs())
		}
		if !waitFor(200*time.Millisecond, func() bool { return !h.accepts() }) {
			t.Errorf("the gateway still accepts connections while it shuts down")
		}
	})
	if code := h.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the gateway exited with %d:\n%s", code, h.Logs())
	}
}

// TestShutdownIgnoringAgent sends SIGTERM to the gateway while an agent
// that ignores SIGTERM runs, with a kill grace (20s) longer than the
// shutdown timeout: the stream still ends at the shutdown timeout, since
// agents still running then are killed without the grace.
func TestShutdownIgnoringAgent(t *testing.T) {
	t.Parallel()
	h := hdStart(t, "DOCSTREAM_SERVER_SHUTDOWN_TIMEOUT=2s", "DOCSTREAM_AGENT_KILL_GRACE=20s")
	hdShutdownAtText(t, h, "fault:ignore-term", nil)
}

// hdShutdownAtText streams prompt on h, whose shutdown timeout is 2s, and
// sends the gateway SIGTERM at the first content_delta (then calls during,
// when not nil). It checks that the stream ends about 2s later with a
// SHUTDOWN error document and done, that the gateway exits and that no
// agent is left.
func hdShutdownAtText(t *testing.T, h *hdServer, prompt string, during func()) {
	t.Helper()
	var termAt time.Time
	_, evs := h.stream(t, map[string]any{"prompt": prompt}, func(id string, ev event) {
		if ev.Name == documents.EventContentDelta && termAt.IsZero() {
			termAt = time.Now()
			if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if during != nil {
				during()
			}
		}
	})
	cr := fold(t, evs)
	hdExpectErrorDoc(t, cr, documents.CodeShutdown, documents.StopShutdown)
	if d := time.Since(termAt); d < 1500*time.Millisecond || d > 10*time.Second {
		t.Errorf("the stream ended %s after SIGTERM; want the shutdown timeout of 2s", d)
	}
	select {
	case <-h.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the gateway did not exit within 10s of SIGTERM")
	}
	h.waitNoAgents(t, 2*time.Second)
}

// hdDial connects with a small receive buffer, so that a client that stops
// reading stalls the sender quickly.
func hdDial(addr string) (net.Conn, error) {
	d := net.Dialer{Control: func(network, address string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}}
	return d.Dial("tcp", addr)
}

// hdStalledStream starts a long:1500 stream on a connection with a small
// receive buffer (extra holds more header lines), reads the response's head
// and returns the connection, no longer read, and the response id.
func hdStalledStream(t *testing.T, addr, extra string) (net.Conn, string) {
	t.Helper()
	conn, err := hdDial(addr)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"prompt":"long:1500","stream":true}`
	fmt.Fprintf(conn, "POST /v1/chat HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", extra, len(body), body)
	head := make([]byte, 1024)
	n, err := conn.Read(head)
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	id := hdHeader(string(head[:n]), "X-Docstream-Response-Id")
	if id == "" {
		conn.Close()
		t.Fatalf("no response id in %q", head[:n])
	}
	return conn, id
}

// hdHeader finds a header in the head of a raw HTTP response.
func hdHeader(head, name string) string {
	for _, line := range strings.Split(head, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(k), name) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestShutdownSignals: SIGHUP drains like SIGTERM (it ended the process at
// once, leaving its clients without done), and a second signal during the
// drain ends the runs at once instead of after the shutdown timeout.
func TestShutdownSignals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		sigs  []syscall.Signal
		least time.Duration // the stream lasts at least this long after the first signal
		most  time.Duration // and at most this long
	}{
		{"SIGHUP", []syscall.Signal{syscall.SIGHUP}, 1500 * time.Millisecond, 10 * time.Second},
		{"twice", []syscall.Signal{syscall.SIGTERM, syscall.SIGINT}, 0, 8 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			timeout := "2s"
			if len(c.sigs) > 1 {
				timeout = "60s"
			}
			h := hdStart(t, "DOCSTREAM_SERVER_SHUTDOWN_TIMEOUT="+timeout)
			var first time.Time
			_, evs := h.stream(t, map[string]any{"prompt": "fault:hang-mid"}, func(id string, ev event) {
				if ev.Name != documents.EventContentDelta || !first.IsZero() {
					return
				}
				first = time.Now()
				for i, sig := range c.sigs {
					if i > 0 {
						// The drain closes the listener once it listens
						// for a second signal.
						if !waitFor(10*time.Second, func() bool { return !h.accepts() }) {
							t.Fatalf("the gateway still accepts connections 10 s after %s", c.sigs[i-1])
						}
					}
					if err := h.cmd.Process.Signal(sig); err != nil {
						t.Fatal(err)
					}
				}
			})
			hdExpectErrorDoc(t, fold(t, evs), documents.CodeShutdown, documents.StopShutdown)
			if d := time.Since(first); d < c.least || d > c.most {
				t.Errorf("the stream ended %s after the first signal; want %s to %s", d, c.least, c.most)
			}
			select {
			case <-h.exited:
			case <-time.After(10 * time.Second):
				t.Fatalf("the gateway did not exit within 10s")
			}
			if code := h.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("the gateway exited with %d:\n%s", code, h.Logs())
			}
			h.waitNoAgents(t, 2*time.Second)
		})
	}
}
