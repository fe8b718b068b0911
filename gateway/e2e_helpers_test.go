package gateway_test

import (
	"crypto/rand"
	"encoding/hex"
	"iter"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	gosse "github.com/tmaxmax/go-sse"

	"github.com/docstream/docstream/documents"
)

// e2eSimLogDeny is the agent environment deny list of the defaults with
// DOCSTREAM_SIM_* let through, so that DOCSTREAM_SIM_LOG reaches the
// simulator (every other DOCSTREAM_* variable stays out of its environment).
const e2eSimLogDeny = "DOCSTREAM_AGENT_ENV_DENY=DOCSTREAM_[^S]*,DOCSTREAM_S[^I]*,DOCSTREAM_SI[^M]*,DOCSTREAM_SIM[^_]*," +
	"*KEY*,*TOKEN*,*SECRET*,*PASSWORD*,*PASSWD*,*CREDENTIAL*,*COOKIE*,*_AUTH,*_AUTH_*,AWS_*,AZURE_*,GOOGLE_APPLICATION_CREDENTIALS"

// startE2E starts a server as startServer does, with the simulator log
// reaching the agent and a short shutdown drain. extra wins over both.
func startE2E(t testing.TB, extra ...string) *testServer {
	t.Helper()
	return startServer(t, append([]string{e2eSimLogDeny, "DOCSTREAM_SERVER_SHUTDOWN_TIMEOUT=3s"}, extra...)...)
}

// e2eClient bounds every request of these tests, streams included.
var e2eClient = &http.Client{Timeout: 60 * time.Second}

// e2eMarker returns a unique word for finding one request in logs.
func e2eMarker(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// e2eDo sends a request with an optional JSON body and headers (name, value, …).
func (s *testServer) e2eDo(t testing.TB, method, path string, body any, headers ...string) *http.Response {
	t.Helper()
	req := newRequest(t, method, s.URL+path, body, headers...)
	resp, err := e2eClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// e2eGetJSON fetches path, checks the status and decodes the body into v.
func (s *testServer) e2eGetJSON(t testing.TB, path string, want int, v any) []byte {
	t.Helper()
	resp := s.e2eDo(t, http.MethodGet, path, nil)
	b := readAll(t, resp)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: status %d, want %d: %s", path, resp.StatusCode, want, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: decoding %s: %v", path, b, err)
		}
	}
	return b
}

// e2eGetChat returns GET /v1/chat/{id}.
func (s *testServer) e2eGetChat(t testing.TB, id string) documents.ChatResponse {
	t.Helper()
	var cr documents.ChatResponse
	s.e2eGetJSON(t, "/v1/chat/"+id, 200, &cr)
	return cr
}

// e2eWaitFinal polls GET /v1/chat/{id} until the response is no longer streaming.
func (s *testServer) e2eWaitFinal(t testing.TB, id string, within time.Duration) documents.ChatResponse {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		cr := s.e2eGetChat(t, id)
		if cr.Status != documents.StatusStreaming {
			return cr
		}
		if time.Now().After(deadline) {
			t.Fatalf("response %s is still streaming after %s", id, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFor polls cond every 20 ms until it holds, for at most within, and
// reports whether it came to hold.
func waitFor(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// e2eWaitDetached waits until no client is attached to a run's stream: the
// gateway has seen the last one leave.
func (s *testServer) e2eWaitDetached(t testing.TB) {
	t.Helper()
	if !waitFor(10*time.Second, func() bool { return s.e2eMetrics(t)["docstream_stream_subscribers"] == 0 }) {
		t.Fatalf("a client is still attached to a stream 10 s after the last one left")
	}
}

// accepts reports whether the server accepts a new connection; it no
// longer does once its shutdown has begun.
func (s *testServer) accepts() bool {
	c, err := net.Dial("tcp", s.Addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// e2eStream is an SSE response read one event at a time.
type e2eStream struct {
	t    testing.TB
	Resp *http.Response
	next func() (gosse.Event, error, bool)
	stop func()
}

func e2eNewStream(t testing.TB, resp *http.Response) *e2eStream {
	t.Helper()
	if resp.StatusCode != 200 {
		t.Fatalf("stream: status %d: %s", resp.StatusCode, readAll(t, resp))
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("stream: Content-Type %q", ct)
	}
	next, stop := iter.Pull2(iter.Seq2[gosse.Event, error](gosse.Read(resp.Body, &gosse.ReadConfig{MaxEventSize: 64 << 20})))
	return &e2eStream{t: t, Resp: resp, next: next, stop: stop}
}

// e2eOpen posts a streaming /v1/chat request and returns the open stream.
func (s *testServer) e2eOpen(t testing.TB, body map[string]any) *e2eStream {
	t.Helper()
	body["stream"] = true
	return e2eNewStream(t, s.e2eDo(t, http.MethodPost, "/v1/chat", body))
}

// e2eReattach opens GET /v1/chat/{id}/stream after the event last, given as
// the Last-Event-ID header or, with query, as ?lastEventId=.
func (s *testServer) e2eReattach(t testing.TB, id string, last int, query bool) *e2eStream {
	t.Helper()
	if query {
		return e2eNewStream(t, s.e2eDo(t, http.MethodGet, "/v1/chat/"+id+"/stream?lastEventId="+strconv.Itoa(last), nil))
	}
	return e2eNewStream(t, s.e2eDo(t, http.MethodGet, "/v1/chat/"+id+"/stream", nil, "Last-Event-ID", strconv.Itoa(last)))
}

// Next returns the next event; false at the end of the stream.
func (st *e2eStream) Next() (event, bool) {
	st.t.Helper()
	ev, err, ok := st.next()
	if !ok {
		return event{}, false
	}
	if err != nil {
		st.t.Fatalf("reading SSE: %v", err)
	}
	return event{ID: ev.LastEventID, Name: ev.Type, Data: ev.Data}, true
}

// Until reads events up to and including the first one named name.
func (st *e2eStream) Until(name string) []event {
	st.t.Helper()
	var evs []event
	for {
		e, ok := st.Next()
		if !ok {
			st.t.Fatalf("the stream ended before a %s event; got %d events", name, len(evs))
		}
		evs = append(evs, e)
		if e.Name == name {
			return evs
		}
	}
}

// Take reads at most n events.
func (st *e2eStream) Take(n int) []event {
	st.t.Helper()
	var evs []event
	for len(evs) < n {
		e, ok := st.Next()
		if !ok {
			break
		}
		evs = append(evs, e)
	}
	return evs
}

// Rest reads the stream to its end and closes it.
func (st *e2eStream) Rest() []event {
	st.t.Helper()
	var evs []event
	for {
		e, ok := st.Next()
		if !ok {
			st.Close()
			return evs
		}
		evs = append(evs, e)
	}
}

// Close drops the connection.
func (st *e2eStream) Close() {
	st.stop()
	st.Resp.Body.Close()
}

// e2eData decodes an event's data into a generic map.
func e2eData(t testing.TB, e event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(e.Data), &m); err != nil {
		t.Fatalf("event %s %s: %v: %s", e.ID, e.Name, err, e.Data)
	}
	return m
}

// e2eMeta decodes a document's metadata into a generic map.
func e2eMeta(t testing.TB, d documents.Document) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(d.Metadata, &m); err != nil {
		t.Fatalf("%s metadata: %v: %s", d.ID, err, d.Metadata)
	}
	return m
}

// e2eErrorDocs returns the error documents of a response with their metadata.
func e2eErrorDocs(t testing.TB, cr documents.ChatResponse) ([]documents.Document, []documents.ErrorMeta) {
	t.Helper()
	var ds []documents.Document
	var ms []documents.ErrorMeta
	for _, d := range cr.Documents {
		if d.Type != documents.TypeError {
			continue
		}
		var m documents.ErrorMeta
		if err := json.Unmarshal(d.Metadata, &m); err != nil {
			t.Fatalf("%s metadata: %v", d.ID, err)
		}
		ds, ms = append(ds, d), append(ms, m)
	}
	return ds, ms
}

// e2eSameJSON reports whether a and b encode to the same JSON value.
func e2eSameJSON(t testing.TB, a, b any) bool {
	t.Helper()
	return reflect.DeepEqual(e2eGeneric(t, a), e2eGeneric(t, b))
}

func e2eGeneric(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var g any
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// e2eSimStart returns the one simulator start whose prompt satisfies match.
func (s *testServer) e2eSimStart(t testing.TB, match func(prompt string) bool) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, st := range s.simStarts(t) {
		if p, _ := st["prompt"].(string); match(p) {
			found = append(found, st)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one simulator start for the prompt, found %d (of %d starts)", len(found), len(s.simStarts(t)))
	}
	return found[0]
}

// e2eArgv returns a simulator start's arguments.
func e2eArgv(st map[string]any) []string {
	var out []string
	for _, a := range st["argv"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

// e2eResume returns the value of --resume in args, "" when absent.
func e2eResume(args []string) string {
	if i := slices.Index(args, "--resume"); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// e2eKillAgentsAtCleanup ends, at the end of the test, the agent processes the
// server leaves behind when it is killed itself (they run in their own
// process groups and outlive it).
func (s *testServer) e2eKillAgentsAtCleanup(t testing.TB) {
	t.Cleanup(func() {
		for _, pid := range s.agentProcesses() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// e2eMetrics parses /metrics into series → value.
func (s *testServer) e2eMetrics(t testing.TB) map[string]float64 {
	t.Helper()
	return parseMetrics(t, s.metrics(t))
}

// parseMetrics parses a /metrics answer into series → value.
func parseMetrics(t testing.TB, text string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// e2eWaitMetrics polls /metrics until ok accepts them, for at most 5 s
// (some series are updated just after a run's done event goes out), and
// returns the last scrape.
func (s *testServer) e2eWaitMetrics(t testing.TB, ok func(m map[string]float64) bool) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m := s.e2eMetrics(t)
		if ok(m) || time.Now().After(deadline) {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// e2eWaitMetric polls /metrics until series reaches at least want.
func (s *testServer) e2eWaitMetric(t testing.TB, series string, want float64) map[string]float64 {
	t.Helper()
	m := s.e2eWaitMetrics(t, func(m map[string]float64) bool { return m[series] >= want })
	if m[series] < want {
		t.Fatalf("metric %s is %v, want at least %v", series, m[series], want)
	}
	return m
}

// e2eProcName returns the command name of a process ("" when gone).
func e2eProcName(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	return strings.TrimSpace(string(b))
}

// e2eErrorBody checks an error answer: the status, JSON, and
// {"error":{"code","message"}}; it returns code and message.
func e2eErrorBody(t testing.TB, resp *http.Response, want int) (string, string) {
	t.Helper()
	b := readAll(t, resp)
	if resp.StatusCode != want {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, want, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error answer has Content-Type %q", ct)
	}
	var body struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &body); err != nil || body.Error == nil || body.Error.Code == "" || body.Error.Message == "" {
		t.Fatalf("not an error body {\"error\":{\"code\",\"message\"}}: %s (%v)", b, err)
	}
	return body.Error.Code, body.Error.Message
}
