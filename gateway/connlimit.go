package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/docstream/docstream/runs"
)

// fdsPerRun is what one agent run can hold in file descriptors: its stdin,
// stdout and stderr pipes and its process handle.
const fdsPerRun = 4

// fdsSpare are descriptors kept for everything else: the store, the
// listener, the cloud client's connections, the agent binary's probes.
const fdsSpare = 64

// maxRefusing bounds the refused connections left open for their clients
// to read the answer; past it the one refused longest ago is closed.
const maxRefusing = 32

// refuseLinger is how long a refused connection may take to read its answer.
const refuseLinger = time.Second

// ConnectionLimit is the number of connections the gateway serves at once:
// configured, else what the open-file limit leaves once every run has its descriptors.
func ConnectionLimit(configured int, limits runs.Limits) int {
	if configured > 0 {
		return configured
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 1 << 20
	}
	return connectionsFor(lim.Cur, limits.MaxConcurrentRuns)
}

// connectionsFor is the connection limit for nofile descriptors and runs
// concurrent runs: at least half the descriptors, at most 1<<20.
func connectionsFor(nofile uint64, runs int) int {
	n := int(min(nofile, 1<<20))
	return max(n-fdsSpare-fdsPerRun*runs, n/2, 1)
}

// connLimiter is a listener that serves at most max connections at once;
// past it, probes are still answered and other requests get a 503.
type connLimiter struct {
	net.Listener
	max     int64
	open    *atomic.Int64
	answer  []byte
	refused func()
	probes  http.Handler

	mu        sync.Mutex
	lingering []net.Conn // refused connections still open, oldest first
}

// limitConnections wraps ln so that it serves at most limit connections,
// counting them in open; probes may be nil.
func limitConnections(ln net.Listener, limit int, open *atomic.Int64, refused func(), probes http.Handler) *connLimiter {
	body := fmt.Sprintf(`{"error":{"code":"too_many_connections","message":"the gateway is serving its limit of %d connections; try again shortly"}}`, limit)
	answer := fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	return &connLimiter{Listener: ln, max: int64(limit), open: open, answer: []byte(answer), refused: refused, probes: probes}
}

// Accept returns the next connection within the limit, refusing those past it.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			release := sync.OnceFunc(func() { l.open.Add(-1) })
			if tc, ok := c.(*net.TCPConn); ok {
				return &countedTCPConn{TCPConn: tc, release: release}, nil
			}
			return &countedConn{Conn: c, release: release}, nil
		}
		l.open.Add(-1)
		l.refuse(c)
	}
}

// refuse answers c's request with the 503 once its head has arrived, then
// reads until the client closes, all within refuseLinger.
func (l *connLimiter) refuse(c net.Conn) {
	c.SetDeadline(time.Now().Add(refuseLinger))
	l.mu.Lock()
	if len(l.lingering) >= maxRefusing {
		l.lingering[0].SetReadDeadline(time.Now())
		l.lingering = slices.Delete(l.lingering, 0, 1)
	}
	l.lingering = append(l.lingering, c)
	l.mu.Unlock()
	go func() {
		br := bufio.NewReader(io.LimitReader(c, 64<<10))
		var probe *http.Request
		_, err := br.Peek(1) // the client sent something to answer
		if err == nil {
			probe = probeRequest(br) // once the head is in
		}
		answer := l.answer
		if probe != nil && l.probes != nil {
			answer = serveProbe(l.probes, probe, c)
			c.SetDeadline(time.Now().Add(refuseLinger))
		} else {
			l.refused()
		}
		if err == nil {
			if _, err := c.Write(answer); err == nil {
				if cw, ok := c.(interface{ CloseWrite() error }); ok {
					cw.CloseWrite()
				}
				io.Copy(io.Discard, io.LimitReader(c, 64<<10))
			}
		}
		l.mu.Lock()
		l.lingering = slices.DeleteFunc(l.lingering, func(o net.Conn) bool { return o == c })
		l.mu.Unlock()
		c.Close()
	}()
}

// probeRequest reads a request's head from br and returns the request when
// it is a probe: a GET of /healthz, /readyz or /metrics without a body.
func probeRequest(br *bufio.Reader) *http.Request {
	r, err := http.ReadRequest(br)
	if err != nil || r.Method != http.MethodGet || r.ContentLength > 0 || len(r.TransferEncoding) > 0 {
		return nil
	}
	switch r.URL.Path {
	case "/healthz", "/readyz", "/metrics":
		return r
	}
	return nil
}

// serveProbe answers a probe from c with h and returns the whole response,
// which closes the connection.
func serveProbe(h http.Handler, r *http.Request, c net.Conn) []byte {
	r.RemoteAddr = c.RemoteAddr().String()
	w := &probeWriter{header: http.Header{}}
	h.ServeHTTP(w, r)
	res := &http.Response{StatusCode: w.status, ProtoMajor: 1, ProtoMinor: 1, Header: w.header,
		Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()), Close: true}
	if res.StatusCode == 0 {
		res.StatusCode = http.StatusOK
	}
	var out bytes.Buffer
	_ = res.Write(&out)
	return out.Bytes()
}

// probeWriter records the answer to a probe past the connection limit.
type probeWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *probeWriter) Header() http.Header { return w.header }

func (w *probeWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *probeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// countedTCPConn is a served TCP connection that gives its place in the
// count back when closed, keeping the methods of *net.TCPConn.
type countedTCPConn struct {
	*net.TCPConn
	release func() // gives the place back, once
}

func (c *countedTCPConn) Close() error {
	defer c.release()
	return c.TCPConn.Close()
}

// NetConn returns the TCP connection itself.
func (c *countedTCPConn) NetConn() net.Conn { return c.TCPConn }

// countedConn is countedTCPConn for other kinds of connection.
type countedConn struct {
	net.Conn
	release func()
}

func (c *countedConn) Close() error {
	defer c.release()
	return c.Conn.Close()
}

// NetConn returns the connection itself.
func (c *countedConn) NetConn() net.Conn { return c.Conn }

// Limit wraps ln so that it serves at most server.max_connections
// connections (see ConnectionLimit); it returns the listener and the limit.
func (s *Server) Limit(ln net.Listener, limits runs.Limits) (net.Listener, int) {
	n := ConnectionLimit(s.cfg.Server.MaxConnections, limits)
	s.metrics.ConnectionLimit.Set(float64(n))
	return limitConnections(ln, n, &s.metrics.Connections, s.metrics.Rejected.WithLabelValues("connections").Inc, s), n
}
