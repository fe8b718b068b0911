package gateway_test

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	gosse "github.com/tmaxmax/go-sse"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/sse"
)

// binary is the docstream binary built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	worker, run := flag.Lookup("test.fuzzworker"), flag.Lookup("test.run")
	if (worker != nil && worker.Value.String() == "true") || (run != nil && run.Value.String() == "^$") {
		// Fuzzing (-run='^$'): only fuzz targets run, and they start no server.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "docstream-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "docstream")
	build := exec.Command("go", "build", "-race", "-o", binary, "../cmd/docstream")
	if os.Getenv("DOCSTREAM_TEST_NORACE") != "" {
		build = exec.Command("go", "build", "-o", binary, "../cmd/docstream")
	}
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building docstream:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testServer is a docstream process serving on a free loopback port, with
// the simulator (speed 0) as its agent, its own store and workspace.
type testServer struct {
	URL       string
	Addr      string
	Dir       string // holds data/, the workspace and sim.log
	Workspace string
	cmd       *exec.Cmd
	out       *syncBuffer
	env       []string
	launch    []string
	exited    chan struct{}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startServer starts docstream with the simulator at zero delay. extra are
// more KEY=VALUE environment entries (they win over the defaults).
func startServer(t testing.TB, extra ...string) *testServer {
	t.Helper()
	return startServerVia(t, nil, extra...)
}

// startServerVia is startServer with the binary run by launch, a command
// that runs the one named after its arguments (prlimit, say), when launch
// is not empty.
func startServerVia(t testing.TB, launch []string, extra ...string) *testServer {
	t.Helper()
	s := newTestServer(t, launch)
	s.env = append(s.env, extra...)
	s.start(t)
	t.Cleanup(func() { s.stop(t) })
	return s
}

// newTestServer prepares what startServerVia starts: the folders, the
// address and the environment.
func newTestServer(t testing.TB, launch []string) *testServer {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &testServer{Dir: dir, Workspace: ws, Addr: freeAddr(t), launch: launch}
	s.URL = "http://" + s.Addr
	s.env = append(os.Environ(),
		"DOCSTREAM_SERVER_ADDR="+s.Addr,
		"DOCSTREAM_AGENT_BINARY="+binary,
		"DOCSTREAM_AGENT_ARGS_PREFIX=agent-sim,--sim-speed=0",
		"DOCSTREAM_AGENT_WORKSPACES=main="+ws,
		"DOCSTREAM_AGENT_KILL_GRACE=2s",
		"DOCSTREAM_AGENT_LINGER_AFTER_RESULT=500ms",
		"DOCSTREAM_STORE_PATH="+filepath.Join(dir, "data", "docstream.db"),
		"DOCSTREAM_SIM_LOG="+filepath.Join(dir, "sim.log"),
		"DOCSTREAM_LOG_FORMAT=json",
	)
	return s
}

func (s *testServer) start(t testing.TB) {
	t.Helper()
	s.out = &syncBuffer{}
	argv := append(append([]string{}, s.launch...), binary)
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Dir = s.Dir
	s.cmd.Env = s.env
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.exited = make(chan struct{})
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(s.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-s.exited:
			t.Fatalf("docstream exited at start:\n%s", s.out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("docstream did not answer /healthz:\n%s", s.out.String())
}

// stop ends the server with SIGTERM (SIGKILL after 20 s).
func (s *testServer) stop(t testing.TB) {
	t.Helper()
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
		t.Errorf("docstream did not stop within 20s of SIGTERM")
	}
}

// kill ends the server with SIGKILL, as a crash would.
func (s *testServer) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// Logs returns what the server has logged.
func (s *testServer) Logs() string { return s.out.String() }

// newRequest builds a request whose body is nil, a string, []byte, an
// io.Reader or a value encoded as JSON; headers are name, value pairs, and
// an empty value removes the header.
func newRequest(t testing.TB, method, url string, body any, headers ...string) *http.Request {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	case io.Reader:
		r = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		switch {
		case headers[i+1] == "":
			req.Header.Del(headers[i])
		case strings.EqualFold(headers[i], "Host"):
			req.Host = headers[i+1]
		default:
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	return req
}

// post sends a JSON body and returns the response.
func (s *testServer) post(t testing.TB, path string, body any, headers ...string) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(newRequest(t, http.MethodPost, s.URL+path, body, headers...))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}

// readAll returns a response's body and closes it.
func readAll(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// event is one SSE event as a client parses it.
type event struct {
	ID   string
	Name string
	Data string
}

// readEvents parses an SSE body with go-sse's parser until it ends.
func readEvents(t testing.TB, r io.Reader) []event {
	t.Helper()
	var evs []event
	for ev, err := range gosse.Read(r, &gosse.ReadConfig{MaxEventSize: 64 << 20}) {
		if err != nil {
			t.Fatalf("reading SSE: %v", err)
		}
		evs = append(evs, event{ID: ev.LastEventID, Name: ev.Type, Data: ev.Data})
	}
	return evs
}

// chatStream posts a streaming /v1/chat request and returns its events.
func (s *testServer) chatStream(t testing.TB, body map[string]any) (*http.Response, []event) {
	t.Helper()
	body["stream"] = true
	resp := s.post(t, "/v1/chat", body)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST /v1/chat: status %d: %s", resp.StatusCode, readAll(t, resp))
	}
	return resp, readEvents(t, resp.Body)
}

// chatJSON posts a non-streaming /v1/chat request and returns its response.
func (s *testServer) chatJSON(t testing.TB, body map[string]any) documents.ChatResponse {
	t.Helper()
	resp := s.post(t, "/v1/chat", body)
	b := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("POST /v1/chat: status %d: %s", resp.StatusCode, b)
	}
	var cr documents.ChatResponse
	if err := json.Unmarshal(b, &cr); err != nil {
		t.Fatalf("decoding the ChatResponse: %v\n%s", err, b)
	}
	return cr
}

// fold checks the stream invariants and folds the events into a response.
func fold(t testing.TB, evs []event) documents.ChatResponse {
	t.Helper()
	var b documents.Builder
	dones := 0
	for i, e := range evs {
		if e.ID != fmt.Sprint(i+1) {
			t.Fatalf("event %d has id %q, want %d", i, e.ID, i+1)
		}
		ev, err := sse.DecodeFrame(sse.Frame{Name: e.Name, Data: []byte(e.Data)})
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if e.Name == documents.EventDone {
			dones++
		}
		b.Add(ev)
	}
	if len(evs) == 0 || evs[0].Name != documents.EventResponseStart {
		t.Fatalf("the stream does not start with response_start")
	}
	if dones != 1 || evs[len(evs)-1].Name != documents.EventDone {
		t.Fatalf("want exactly one done, last; got %d", dones)
	}
	return b.Response()
}

// simStarts returns the simulator's log lines: one per agent start.
func (s *testServer) simStarts(t testing.TB) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(s.Dir, "sim.log"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// agentProcesses lists the pids of processes that run in the server's
// workspace or name it: the agents it started and their children.
func (s *testServer) agentProcesses() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == os.Getpid() {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if bytes.Contains(b, []byte(s.Workspace)) || cwd == s.Workspace {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && bytes.Contains(st, []byte(") Z ")) {
				continue
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitNoAgents fails the test if agent processes remain after d.
func (s *testServer) waitNoAgents(t testing.TB, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		p := s.agentProcesses()
		if len(p) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent processes left behind: %v", p)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metric returns the text of /metrics.
func (s *testServer) metrics(t testing.TB) string {
	t.Helper()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return string(readAll(t, resp))
}
