package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/gateway"
)

// TestDirectDelivery streams a paced run to two clients at once: the first
// takes frames straight from the run as they are produced, the second is
// woken for them as before, and both get the same complete stream.
func TestDirectDelivery(t *testing.T) {
	t.Parallel()
	s := startE2E(t, e2ePaced)
	const n = 40
	before := s.e2eMetrics(t)
	first := s.e2eOpen(t, map[string]any{"prompt": fmt.Sprintf("long:%d", n)})
	id := first.Resp.Header.Get("X-Docstream-Response-Id")
	second := s.e2eReattach(t, id, 0, false)
	a, b := first.Rest(), second.Rest()
	if !slices.Equal(a, b) {
		t.Fatalf("the two streams differ: %d and %d events", len(a), len(b))
	}
	got := fold(t, a) // ids 1..n without gap or repeat, one done, last
	if got.Status != documents.StatusCompleted {
		t.Fatalf("status %s", got.Status)
	}
	e2eCheckParagraphs(t, got, n)
	after := s.e2eMetrics(t)
	direct := after["docstream_stream_direct_frames_total"] - before["docstream_stream_direct_frames_total"]
	if direct <= 0 || direct > float64(len(a)) {
		t.Errorf("%v frames went out directly of the %d of a paced run's first stream; want some, at most all", direct, len(a))
	}
	t.Logf("%v of %d frames written directly", direct, len(a))
}

// TestDirectDeliveryStalledClient stops reading the stream that takes
// frames straight from the run, with a tiny receive buffer: the run must
// not wait for it. A second client gets the whole stream long before the
// stalled one's write timeout, and the stalled one is dropped after it.
func TestDirectDeliveryStalledClient(t *testing.T) {
	t.Parallel()
	// Long, so that a run slowed by a loaded machine is not taken for one
	// that waited: waiting would take the whole timeout.
	const writeTimeout = 60 * time.Second
	s := startE2E(t, "DOCSTREAM_SERVER_WRITE_TIMEOUT="+writeTimeout.String())
	conn, id := hdStalledStream(t, s.Addr, "")
	defer conn.Close()
	start := time.Now()
	all := s.e2eReattach(t, id, 0, false).Rest()
	took := time.Since(start)
	got := fold(t, all)
	if got.Status != documents.StatusCompleted || !strings.Contains(hdText(got), "Paragraph 1500 of 1500") {
		t.Fatalf("the second client's stream ended %s without the last paragraph", got.Status)
	}
	if took > writeTimeout/2 {
		t.Errorf("the run took %v with a stalled client attached; it waited for the client (write timeout %v)", took, writeTimeout)
	}
	t.Logf("the second client had the whole run after %v", took)
}

// TestDirectDeliveryOpenAI streams a paced run as chat.completion.chunk
// frames: they too are written by the run once the stream has caught up,
// and the reply streamed is the reply the run stored.
func TestDirectDeliveryOpenAI(t *testing.T) {
	t.Parallel()
	s := startE2E(t, e2ePaced)
	before := s.e2eMetrics(t)
	const n = 30
	text, id := s.e2eComplete(t, []map[string]any{{"role": "user", "content": fmt.Sprintf("long:%d", n)}}, true)
	if !strings.Contains(text, fmt.Sprintf("Paragraph %d of %d", n, n)) {
		t.Fatalf("the streamed reply lacks the last paragraph: %q", text)
	}
	final := s.e2eWaitFinal(t, id, 10*time.Second)
	if stored := hdText(final); strings.TrimSpace(stored) != strings.TrimSpace(text) {
		t.Errorf("the streamed reply (%d bytes) differs from the run's text (%d bytes)", len(text), len(stored))
	}
	after := s.e2eMetrics(t)
	if direct := after["docstream_stream_direct_frames_total"] - before["docstream_stream_direct_frames_total"]; direct <= 0 {
		t.Errorf("no frame of a paced completion stream was written directly")
	}
}

// TestDirectDeliveryFlushesALineOnce reads a stream's HTTP chunks, one per
// flush: the events one agent line makes go out together. The first delta
// of a text opens its document, so its line makes document_start and
// content_delta; the result line makes document_end and done (with the
// in-memory store, whose final write does not wait).
func TestDirectDeliveryFlushesALineOnce(t *testing.T) {
	t.Parallel()
	s := startE2E(t, "DOCSTREAM_AGENT_BINARY="+gateway.BuiltinBench, "DOCSTREAM_STORE_DRIVER=memory")
	conn, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	body := `{"prompt":"bench:5 every=30ms","stream":true}`
	fmt.Fprintf(conn, "POST /v1/chat HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || len(resp.TransferEncoding) == 0 {
		t.Fatalf("status %d, transfer encoding %v", resp.StatusCode, resp.TransferEncoding)
	}
	// The chunks as they are framed on the wire (resp.Body would join them).
	var chunks []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d chunks: %v", len(chunks), err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(line), 16, 64)
		if err != nil {
			t.Fatalf("chunk size %q: %v", line, err)
		}
		if n == 0 {
			break
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(br, b); err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, string(b[:n]))
	}
	names := func(c string) (ns []string) {
		for _, l := range strings.Split(c, "\n") {
			if n, ok := strings.CutPrefix(strings.TrimSuffix(l, "\r"), "event: "); ok {
				ns = append(ns, n)
			}
		}
		return ns
	}
	var got [][]string
	for _, c := range chunks {
		got = append(got, names(c))
	}
	// Each pair is two events of one line, in the same chunk.
	for _, pair := range [][2]string{{"document_start", "content_delta"}, {"document_end", "done"}} {
		found := false
		for _, ns := range got {
			if i := slices.Index(ns, pair[0]); i >= 0 {
				found = true
				if i+1 >= len(ns) || ns[i+1] != pair[1] {
					t.Errorf("%s and %s went out in different chunks: %q", pair[0], pair[1], got)
				}
			}
		}
		if !found {
			t.Errorf("no %s in %q", pair[0], got)
		}
	}
	// The deltas between, paced, go out one per chunk.
	deltas := 0
	for _, ns := range got {
		if slices.Equal(ns, []string{"content_delta"}) {
			deltas++
		}
	}
	if deltas < 2 {
		t.Errorf("%d chunks of one delta each, want 2 or more: %q", deltas, got)
	}
}
