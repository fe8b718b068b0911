package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The log bounds: a run keeps at most runs.log_max_events events for
// re-attaching clients. What its log drops must not reach a client as a
// shorter answer that looks complete.

// TestLogBoundsAnswers checks that the non-streaming answers of a run with
// more events than its log keeps hold all of them.
func TestLogBoundsAnswers(t *testing.T) {
	t.Parallel()
	s := startServer(t, "DOCSTREAM_RUNS_LOG_MAX_EVENTS=40")
	const n = 300
	resp, m := s.completionJSON(t, map[string]any{"messages": []any{userMsg(fmt.Sprintf("bench:%d", n))}})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, m)
	}
	content, _ := m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	if got := strings.Count(content, "[ts:"); got != n {
		t.Errorf("the completion holds %d of %d deltas: %s", got, n, oaClip(content))
	}
	cr := s.chatJSON(t, map[string]any{"prompt": fmt.Sprintf("bench:%d", n)})
	if len(cr.Documents) != 1 || cr.Documents[0].Content == nil || strings.Count(*cr.Documents[0].Content, "[ts:") != n {
		t.Errorf("the ChatResponse does not hold the %d deltas: %+v", n, cr.Documents)
	}
}

// TestLogBoundsReattach checks that a re-attach after events the log no
// longer holds is refused before the stream starts, and one within it is
// served.
func TestLogBoundsReattach(t *testing.T) {
	t.Parallel()
	s := startServer(t, "DOCSTREAM_RUNS_LOG_MAX_EVENTS=40")
	// The run is made without a stream, which could itself fall behind
	// the small log while the simulator writes at full speed.
	cr := s.chatJSON(t, map[string]any{"prompt": "bench:200"})
	id := cr.ID
	last := 200 + 4 // response_start, document_start, the deltas, document_end, done
	r := s.e2eDo(t, http.MethodGet, fmt.Sprintf("/v1/chat/%s/stream?lastEventId=1", id), nil)
	b := readAll(t, r)
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if r.StatusCode != http.StatusGone || json.Unmarshal(b, &e) != nil || e.Error.Code != "events_dropped" || !strings.Contains(e.Error.Message, id) {
		t.Errorf("re-attach after event 1 of %d with 40 kept: %d %s", last, r.StatusCode, b)
	}
	r = s.e2eDo(t, http.MethodGet, fmt.Sprintf("/v1/chat/%s/stream?lastEventId=%d", id, last-3), nil)
	defer r.Body.Close()
	if r.StatusCode != 200 {
		t.Fatalf("re-attach within the log: %d %s", r.StatusCode, readAll(t, r))
	}
	tail := readEvents(t, r.Body)
	if len(tail) != 3 || tail[0].ID != fmt.Sprint(last-2) || tail[2].Name != "done" {
		t.Errorf("re-attach after %d: %+v", last-3, tail)
	}
}

// slowClient is an HTTP client whose connections have a small receive
// buffer: what a client that does not read can leave queued in the kernel
// is then far less than what a run of 100,000 events writes.
func slowClient() *http.Client {
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// runWait bounds the wait for a run of 100,000 events, which can take
// minutes on a loaded machine under the race detector.
const runWait = 5 * time.Minute

// waitRuns waits until the server has finished n runs (of any outcome).
func (s *testServer) waitRuns(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(runWait)
	for {
		done := 0
		for _, line := range strings.Split(s.metrics(t), "\n") {
			if strings.HasPrefix(line, "docstream_runs_total{") {
				var v float64
				fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
				done += int(v)
			}
		}
		if done >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs finished within %v", done, n, runWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLogBoundsSlowClient checks that a client that falls further behind
// than the log keeps gets every event up to where it fell behind, in order,
// and then an error, never a clean end: on /v1/chat an error event and no
// done, on the OpenAI route an error object and no stop chunk.
func TestLogBoundsSlowClient(t *testing.T) {
	t.Parallel()
	s := startServer(t, "DOCSTREAM_RUNS_LOG_MAX_EVENTS=1000", "DOCSTREAM_SERVER_WRITE_TIMEOUT=0s") // the client reads only once the run is over
	client := slowClient()
	for i, route := range []string{"/v1/chat?stream=true", "/v1/chat/completions"} {
		body := map[string]any{"prompt": "bench:100000"}
		if strings.HasPrefix(route, "/v1/chat/completions") {
			body = map[string]any{"stream": true, "messages": []any{userMsg("bench:100000")}}
		}
		resp, err := client.Do(newRequest(t, http.MethodPost, s.URL+route, body))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", route, resp.StatusCode, readAll(t, resp))
		}
		// Read nothing until the run is over: it wrote far more than the
		// socket buffers and the log hold.
		s.waitRuns(t, i+1)
		br := bufio.NewReaderSize(resp.Body, 1<<20)
		var lines []string
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				lines = append(lines, strings.TrimRight(line, "\r\n"))
			}
			if err != nil {
				break
			}
		}
		resp.Body.Close()
		text := strings.Join(lines, "\n")
		if strings.HasPrefix(route, "/v1/chat?") {
			ids := 0
			for _, l := range lines {
				if strings.HasPrefix(l, "id: ") {
					ids++
					if l != fmt.Sprintf("id: %d", ids) {
						t.Fatalf("%s: event %d has %q: the events before the gap are not all there", route, ids, l)
					}
				}
			}
			if strings.Contains(text, "event: done") || !strings.Contains(text, "event: error\ndata: {\"code\":\"events_dropped\"") {
				t.Errorf("%s: after %d events, the end: %q", route, ids, oaTail(text, 400))
			}
			if ids >= 100000 {
				t.Errorf("%s: every event arrived; the test did not make the client fall behind", route)
			}
			continue
		}
		if strings.Contains(text, `"finish_reason":"stop"`) || !strings.Contains(text, `"code":"events_dropped"`) || !strings.HasSuffix(text, "data: [DONE]\n") {
			t.Errorf("%s: the end: %q", route, oaTail(text, 400))
		}
	}
}

// TestLogBoundsSlowWebSocket is TestLogBoundsSlowClient on /v1/chat/ws:
// the turn ends with an error message, after every event up to the gap.
func TestLogBoundsSlowWebSocket(t *testing.T) {
	t.Parallel()
	s := startServer(t, "DOCSTREAM_RUNS_LOG_MAX_EVENTS=1000", "DOCSTREAM_SERVER_WRITE_TIMEOUT=0s") // the client reads only once the run is over
	// The socket's reads wait for the run, then for what it queued.
	ctx, cancel := context.WithTimeout(context.Background(), runWait+time.Minute)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws://"+s.Addr+"/v1/chat/ws", &websocket.DialOptions{HTTPClient: slowClient()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)
	c := &wsClient{t: t, conn: conn, ctx: ctx}
	c.send(map[string]any{"type": "chat", "prompt": "bench:100000"})
	s.waitRuns(t, 1)
	c.accepted()
	for n := 1; ; n++ {
		m := c.read()
		if m.Type == "error" {
			if code, status := wsError(t, m); code != "events_dropped" || status != http.StatusGone {
				t.Errorf("error %s %d, want events_dropped 410", code, status)
			}
			if n > 100000 {
				t.Errorf("every event arrived; the test did not make the client fall behind")
			}
			return
		}
		if m.ID != n || m.Type == "done" {
			t.Fatalf("message %d: %s id %d; want event %d and, after the gap, an error", n, m.Type, m.ID, n)
		}
	}
}
