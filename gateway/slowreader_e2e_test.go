package gateway_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
)

// slowRate is how fast the slow readers of these tests read: about 1 MB/s.
const slowRate = 1 << 20

// smallReadBuffer is the socket receive buffer of the slow readers, so that
// the kernel on their side does not read the stream for them.
const smallReadBuffer = 32 << 10

// slowConn reads its connection at most rate bytes a second on average.
type slowConn struct {
	net.Conn
	rate  int64
	mu    sync.Mutex
	start time.Time
	n     int64
}

func (c *slowConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(p) > 16<<10 {
		p = p[:16<<10]
	}
	n, err := c.Conn.Read(p)
	c.n += int64(n)
	time.Sleep(time.Until(c.start.Add(time.Duration(c.n * int64(time.Second) / c.rate))))
	return n, err
}

// smallBufferDialer dials TCP with a small receive buffer.
var smallBufferDialer = &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, smallReadBuffer)
	})
	if err != nil {
		return err
	}
	return serr
}}

// slowTransport dials connections with a small receive buffer that read at
// rate bytes a second (rate 0: as fast as the caller reads).
func slowTransport(rate int64) *http.Transport {
	return &http.Transport{DisableKeepAlives: true, DisableCompression: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := smallBufferDialer.DialContext(ctx, network, addr)
			if err != nil || rate == 0 {
				return c, err
			}
			return &slowConn{Conn: c, rate: rate, start: time.Now()}, nil
		}}
}

// wantLargeResult checks a run of fault:oversize completed with its 10 MiB
// tool result whole.
func wantLargeResult(t *testing.T, cr documents.ChatResponse) {
	t.Helper()
	n := 0
	for _, d := range cr.Documents {
		n = max(n, len(d.Metadata))
		if d.Type == documents.TypeError {
			t.Errorf("error document: %.300s", d.Metadata)
		}
	}
	if cr.Status != documents.StatusCompleted {
		t.Fatalf("status %s, want completed", cr.Status)
	}
	if n < 10<<20 {
		t.Fatalf("the 10 MiB tool result did not arrive whole (largest metadata %d bytes)", n)
	}
}

// slowEnv are the settings of these tests' servers: a short write timeout
// and, as reading a 10 MiB line takes a while under load, a linger long
// enough for the agent's output to be read after it exits.
var slowEnv = []string{"DOCSTREAM_SERVER_WRITE_TIMEOUT=3s", "DOCSTREAM_AGENT_LINGER_AFTER_RESULT=5s",
	"DOCSTREAM_AGENT_MAX_LINE_BYTES=16777216"} // the 10 MiB line is over the default

// TestSlowReaderGetsLargeEvent: a client reading at about 1 MB/s receives
// the 10.5 MB event of a 10 MiB tool result whole, with a write timeout of
// 3s: the timeout measures a stall, not the time one event takes to send.
func TestSlowReaderGetsLargeEvent(t *testing.T) {
	t.Parallel()
	s := startServer(t, slowEnv...)
	client := &http.Client{Transport: slowTransport(slowRate), Timeout: 2 * time.Minute}
	req := newRequest(t, http.MethodPost, s.URL+"/v1/chat", map[string]any{"prompt": "fault:oversize", "stream": true})
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, readAll(t, resp))
	}
	cr := fold(t, readEvents(t, resp.Body))
	wantLargeResult(t, cr)
}

// TestStalledReaderReattaches: a client that stops reading in front of a
// large event is still dropped after the write timeout; it re-attaches
// with Last-Event-ID and gets the rest of the run.
func TestStalledReaderReattaches(t *testing.T) {
	t.Parallel()
	s := startServer(t, slowEnv...)
	client := &http.Client{Transport: slowTransport(0)}
	req := newRequest(t, http.MethodPost, s.URL+"/v1/chat", map[string]any{"prompt": "fault:oversize", "stream": true})
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	st := e2eNewStream(t, resp)
	defer st.Close()
	id := resp.Header.Get("X-Docstream-Response-Id")
	first := st.Until(documents.EventToolCallStart)
	// The next event is the 10 MiB result: stop reading. The gateway gives
	// up on this client after its write timeout while the run goes on.
	if !waitFor(30*time.Second, func() bool { return s.e2eMetrics(t)["docstream_stream_subscribers"] == 0 }) {
		t.Fatalf("the gateway still writes to a client that has read nothing for 30 s, with a write timeout of 3s")
	}
	st.Close()
	last, err := strconv.Atoi(first[len(first)-1].ID)
	if err != nil {
		t.Fatal(err)
	}
	rest := s.e2eReattach(t, id, last, false).Rest()
	cr := fold(t, append(first, rest...))
	wantLargeResult(t, cr)
}

// TestWSSlowReaderGetsLargeMessage: a WebSocket client reading at about
// 1 MB/s receives the 10.5 MB message of a 10 MiB tool result whole, with a
// write timeout of 3s; one that then stops reading is dropped.
func TestWSSlowReaderGetsLargeMessage(t *testing.T) {
	t.Parallel()
	s := startServer(t, slowEnv...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws://"+s.Addr+"/v1/chat/ws",
		&websocket.DialOptions{HTTPClient: &http.Client{Transport: slowTransport(slowRate)}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(64 << 20)
	c := &wsClient{t: t, conn: conn, ctx: ctx, pings: make(chan struct{}, 16)}
	c.send(map[string]any{"type": "chat", "prompt": "fault:oversize"})
	cr := wsFold(t, c.turn())
	wantLargeResult(t, cr)

	// The next turn's reader stops in front of the large message.
	c.send(map[string]any{"type": "chat", "prompt": "fault:oversize"})
	c.accepted()
	for m := c.read(); m.Type != documents.EventToolCallStart; m = c.read() {
	}
	if !waitFor(30*time.Second, func() bool { return s.e2eMetrics(t)["docstream_stream_subscribers"] == 0 }) {
		t.Fatalf("the gateway still writes to a socket that has read nothing for 30 s, with a write timeout of 3s")
	}
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	for {
		_, b, err := conn.Read(rctx)
		if err != nil {
			if rctx.Err() != nil {
				t.Fatalf("the gateway kept the stalled socket open")
			}
			break
		}
		var m wsMsg
		if json.Unmarshal(b, &m) == nil && m.Type == documents.EventDone {
			t.Fatalf("the stalled socket got the whole turn; it was not dropped")
		}
	}
}
