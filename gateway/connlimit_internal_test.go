package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/docstream/docstream/runs"
)

func TestConnectionsFor(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		runs   int
		want   int
	}{
		{20000, 16, 20000 - 64 - 64},
		{1024, 16, 896},
		{256, 16, 128},
		{200, 16, 100}, // never less than half
		{1, 16, 1},
		{0, 16, 1},
		{1 << 40, 16, 1<<20 - 64 - 64},
	} {
		if got := connectionsFor(c.nofile, c.runs); got != c.want {
			t.Errorf("connectionsFor(%d, %d) = %d, want %d", c.nofile, c.runs, got, c.want)
		}
	}
	if got := ConnectionLimit(7, runs.Limits{MaxConcurrentRuns: 16}); got != 7 {
		t.Errorf("a configured limit of 7 gave %d", got)
	}
}

// TestConnLimiterCounts checks that a served connection holds its place
// until its first Close, however often it is closed, and is still a
// *net.TCPConn underneath; and that a connection past the limit is
// answered 503 while the next Accept waits for a free place.
func TestConnLimiterCounts(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var open atomic.Int64
	var refused atomic.Int64
	ln := limitConnections(inner, 2, &open, func() { refused.Add(1) }, nil)
	defer ln.Close()
	var served []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		served = append(served, s)
	}
	if open.Load() != 2 {
		t.Fatalf("%d open, want 2", open.Load())
	}
	if u, ok := served[0].(interface{ NetConn() net.Conn }); !ok {
		t.Errorf("a served connection does not give its own")
	} else if _, ok := u.NetConn().(*net.TCPConn); !ok {
		t.Errorf("a served connection is a %T underneath", u.NetConn())
	}
	served[0].Close()
	served[0].Close()
	if open.Load() != 1 {
		t.Fatalf("after closing one twice, %d open, want 1", open.Load())
	}
	// A third is served now; then a fourth is answered 503 and closed,
	// and a fifth waits until a place is free.
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	s3, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		if s, err := ln.Accept(); err == nil {
			accepted <- s
		}
	}()
	c4 := dial()
	io.WriteString(c4, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c4), nil)
	if err != nil {
		t.Fatalf("the connection past the limit: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || !strings.Contains(string(body), `"too_many_connections"`) {
		t.Errorf("the connection past the limit: %d %s", resp.StatusCode, body)
	}
	if refused.Load() != 1 || open.Load() != 2 {
		t.Errorf("refused %d, open %d; want 1 and 2", refused.Load(), open.Load())
	}
	s3.Close()
	dial()
	s5 := <-accepted
	defer s5.Close()
	if open.Load() != 2 {
		t.Errorf("open %d, want 2", open.Load())
	}
}
