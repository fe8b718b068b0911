package gateway_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docstream/docstream/documents"
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
