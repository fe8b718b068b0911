package gateway

import (
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/translate"
)

// pumpRun reads a pipe into a segmenter through an outputPump and folds
// what it emits.
type pumpRun struct {
	mu    sync.Mutex
	b     documents.Builder
	w     *os.File
	pump  *outputPump
	ended chan error
}

func startPumpRun(t *testing.T, pk parker) *pumpRun {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pr := &pumpRun{w: w, ended: make(chan error, 1)}
	seg := translate.NewSegmenter(translate.Options{ResponseID: "chat_test"}, func(ev documents.Event) {
		pr.mu.Lock()
		pr.b.Add(ev)
		pr.mu.Unlock()
	})
	pr.pump = newOutputPump(r, seg, 0, time.Now(), pk, nil, func(err error) {
		seg.Close(translate.End{})
		pr.ended <- err
	})
	t.Cleanup(func() { w.Close(); pr.pump.close() })
	return pr
}

func (pr *pumpRun) write(t *testing.T, s string) {
	t.Helper()
	if _, err := pr.w.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

func (pr *pumpRun) text() string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []string
	for _, d := range pr.b.Response().Documents {
		if d.Content != nil {
			out = append(out, *d.Content)
		}
	}
	return strings.Join(out, "|")
}

const (
	pumpInit   = `{"type":"system","subtype":"init","session_id":"s1","model":"m"}` + "\n"
	pumpDelta  = `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Hello, parked world."}]},"session_id":"s1","timestamp_ms":1}` + "\n"
	pumpResult = `{"type":"result","subtype":"success","is_error":false,"result":"Hello, parked world.","session_id":"s1"}` + "\n"
)

// TestPumpParksAndResumes: a quiet agent's pump returns (it holds no
// goroutine), keeps the half-written line, and the parker runs it again
// when the agent writes the rest.
func TestPumpParksAndResumes(t *testing.T) {
	pk := defaultParker()
	if pk == nil {
		t.Skip("no epoll here")
	}
	pr := startPumpRun(t, pk)
	pr.write(t, pumpInit+pumpDelta[:40])
	returned := make(chan struct{})
	go func() { pr.pump.run(); close(returned) }()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("the pump of a quiet agent did not park")
	}
	pr.pump.mu.Lock()
	parked := pr.pump.parked != 0
	pr.pump.mu.Unlock()
	if !parked {
		t.Fatal("the pump returned without parking")
	}
	// Quiet for several windows: still parked, nothing ended.
	time.Sleep(3 * quietAfter)
	select {
	case err := <-pr.ended:
		t.Fatalf("the run ended while the agent was quiet: %v", err)
	default:
	}
	pr.write(t, pumpDelta[40:])
	time.Sleep(3 * quietAfter) // parks again after the delta
	pr.write(t, pumpResult)
	select {
	case err := <-pr.ended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the parked pump was not woken by the agent's output")
	}
	if got := pr.text(); got != "Hello, parked world." {
		t.Errorf("documents %q, want the delta once", got)
	}
}

// TestPumpCloseWhileParked: closing the output of a parked run (a cancel,
// a watchdog) runs it to its end at once.
func TestPumpCloseWhileParked(t *testing.T) {
	pk := defaultParker()
	if pk == nil {
		t.Skip("no epoll here")
	}
	pr := startPumpRun(t, pk)
	pr.write(t, pumpInit)
	pr.pump.run() // returns once parked
	pr.pump.close()
	select {
	case err := <-pr.ended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("closing a parked pump did not end it")
	}
}

// TestPumpWithoutParker: with no parker a read blocks as before and the
// output is read to its end on the calling goroutine.
func TestPumpWithoutParker(t *testing.T) {
	pr := startPumpRun(t, nil)
	go func() {
		pr.write(t, pumpInit)
		time.Sleep(2 * quietAfter)
		pr.write(t, pumpDelta+pumpResult)
	}()
	pr.pump.run()
	if err := <-pr.ended; err != nil {
		t.Fatal(err)
	}
	if got := pr.text(); got != "Hello, parked world." {
		t.Errorf("documents %q", got)
	}
}

// TestQuietWatch: a read blocked for the quiet time ends with
// translate.ErrPending, the next read waits for input as before (the
// deadline is cleared), a read that gets input in time is left alone, and
// the watch's goroutine stops once it watches nothing.
func TestQuietWatch(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	watch := &quietWatch{readers: map[*outputReader]struct{}{}}
	o := &outputReader{f: r, quiet: quietAfter}
	watch.add(o)
	buf := make([]byte, 16)
	start := time.Now()
	if _, err := o.Read(buf); !errors.Is(err, translate.ErrPending) {
		t.Fatalf("a read blocked past the quiet time: %v, want ErrPending", err)
	}
	if d := time.Since(start); d < quietAfter || d > 20*quietAfter {
		t.Errorf("the blocked read ended after %v, want about %v", d, quietAfter)
	}
	// The ended read's deadline is cleared: input already there is read.
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if n, err := o.Read(buf); err != nil || n != 1 {
		t.Fatalf("the read after ErrPending: %d bytes, %v", n, err)
	}
	// Input that comes within the quiet time is read. A read may end with
	// ErrPending only after waiting the whole quiet time (a writer held up
	// that long on a loaded machine); the input is then read next.
	for i := 0; i < 5; i++ {
		go func() {
			time.Sleep(quietAfter / 2)
			_, _ = w.Write([]byte("x"))
		}()
		for {
			start := time.Now()
			n, err := o.Read(buf)
			if errors.Is(err, translate.ErrPending) {
				if d := time.Since(start); d < quietAfter {
					t.Fatalf("read %d ended after %v, before the quiet time", i, d)
				}
				continue
			}
			if err != nil || n != 1 {
				t.Fatalf("read %d: %d bytes, %v", i, n, err)
			}
			break
		}
	}
	watch.remove(o)
	deadline := time.Now().Add(5 * time.Second)
	for {
		watch.mu.Lock()
		running := watch.running
		watch.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the quiet watch still runs with nothing to watch")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
