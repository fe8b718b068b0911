package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// limitClient is a client with one kept-alive connection to s.
func limitClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
}

// metricsVia scrapes s's /metrics through client.
func metricsVia(t *testing.T, s *testServer, client *http.Client) map[string]float64 {
	t.Helper()
	resp, err := client.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatalf("scraping /metrics: %v", err)
	}
	return parseMetrics(t, string(readAll(t, resp)))
}

// expectRefused checks that a new connection's request is answered at once
// with the 503 too_many_connections, and a probe's with its answer.
func expectRefused(t *testing.T, s *testServer) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, probe := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := client.Get(s.URL + probe)
		if err != nil {
			t.Fatalf("a probe past the connection limit got no answer: %v", err)
		}
		if b := readAll(t, resp); resp.StatusCode != http.StatusOK || !resp.Close || len(b) == 0 {
			t.Fatalf("%s past the connection limit: %d (close %v) %.200s, want it answered", probe, resp.StatusCode, resp.Close, b)
		}
	}
	resp, err := client.Get(s.URL + "/v1/workspaces")
	if err != nil {
		t.Fatalf("a request past the connection limit got no answer: %v", err)
	}
	body := readAll(t, resp)
	var e struct {
		Error struct{ Code, Message string }
	}
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &e) != nil || e.Error.Code != "too_many_connections" || e.Error.Message == "" {
		t.Fatalf("past the connection limit: %d %s, want 503 too_many_connections", resp.StatusCode, body)
	}
	if resp.Header.Get("Retry-After") != "1" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("past the connection limit: headers %v", resp.Header)
	}
}

// expectServed waits until a new connection's request is served.
func expectServed(t *testing.T, s *testServer) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get(s.URL + "/v1/workspaces")
		if err == nil {
			readAll(t, resp)
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("connections closed, yet a new one is not served: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestConnectionLimit holds more connections than the gateway has file
// descriptors for. Those past its limit (by default what the open-file
// limit leaves after every run's pipes) are answered 503 at once, a client
// already connected still runs the agent, and new connections are served
// again once the held ones close.
func TestConnectionLimit(t *testing.T) {
	t.Parallel()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit is not installed")
	}
	const nofile = 256
	s := startServerVia(t, []string{prlimit, fmt.Sprintf("--nofile=%d:%d", nofile, nofile)})
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	// 64 spare and 4 for each of the 16 runs the default limits allow.
	limit := nofile - 64 - 4*16
	if !strings.Contains(s.out.String(), fmt.Sprintf(`"max_connections":%d`, limit)) {
		t.Errorf("the start log does not give max_connections %d:\n%s", limit, s.out.String())
	}

	a := limitClient()
	if m := metricsVia(t, s, a); m["docstream_connections_limit"] != float64(limit) {
		t.Errorf("docstream_connections_limit %v, want %d", m["docstream_connections_limit"], limit)
	}
	// More connections than the process has descriptors: without a limit
	// the gateway could then accept nothing and spawn nothing.
	held := make([]net.Conn, 0, nofile+20)
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range cap(held) {
		c, err := net.Dial("tcp", s.Addr)
		if err != nil {
			t.Fatalf("dialing: %v", err)
		}
		held = append(held, c)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := metricsVia(t, s, a)
		if m["docstream_connections_open"] == float64(limit) && m[`docstream_rejected_requests_total{reason="connections"}`] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with %d connections held: open %v, refused %v (limit %d)", len(held),
				m["docstream_connections_open"], m[`docstream_rejected_requests_total{reason="connections"}`], limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
	expectRefused(t, s)

	// The connection already open still runs the agent.
	resp, err := a.Post(s.URL+"/v1/chat", "application/json", strings.NewReader(`{"prompt":"hello","workspace":"main"}`))
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"status":"completed"`) {
		t.Fatalf("a run at the connection limit: %d %s", resp.StatusCode, body)
	}

	for _, c := range held {
		c.Close()
	}
	held = held[:0]
	expectServed(t, s)
	deadline = time.Now().Add(10 * time.Second)
	for {
		// a's connection and at most the one that just closed.
		m := metricsVia(t, s, a)
		if n := m["docstream_connections_open"]; n >= 1 && n <= 2 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("all held connections closed, yet %v are counted open", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestConnectionLimitCountsWebSockets checks that a WebSocket, which
// leaves net/http's hands once it is upgraded, holds its place under
// server.max_connections until it closes.
func TestConnectionLimitCountsWebSockets(t *testing.T) {
	t.Parallel()
	s := startServer(t, "DOCSTREAM_SERVER_MAX_CONNECTIONS=2")
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	a := limitClient()
	expectServed(t, s) // the start's connections have closed
	if m := metricsVia(t, s, a); m["docstream_connections_limit"] != 2 {
		t.Errorf("docstream_connections_limit %v, want 2", m["docstream_connections_limit"])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+s.Addr+"/v1/chat/ws", nil)
	if err != nil {
		t.Fatalf("dialing /v1/chat/ws: %v", err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"chat","prompt":"hello","workspace":"main"}`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ws.Read(ctx); err != nil {
		t.Fatalf("reading the WebSocket: %v", err)
	}
	expectRefused(t, s)
	if m := metricsVia(t, s, a); m["docstream_connections_open"] != 2 {
		t.Errorf("with a client and a WebSocket open, docstream_connections_open is %v", m["docstream_connections_open"])
	}
	ws.Close(websocket.StatusNormalClosure, "")
	a.CloseIdleConnections()
	expectServed(t, s)
}
