package runs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/docstream/docstream/metrics"
	"github.com/docstream/docstream/store"
	"github.com/docstream/docstream/translate"
)

// linesBackend feeds the segmenter the agent lines of a bench run: the
// init and user lines, Spec.Prompt's number of assistant deltas, and the
// result, decoded from a reader as an agent's output is.
type linesBackend struct{}

func (linesBackend) Run(_ context.Context, spec *Spec, seg *translate.Segmenter) translate.End {
	n, _ := strconv.Atoi(spec.Prompt)
	dec := translate.NewDecoder(&benchLines{n: n}, 0)
	for !seg.Done() {
		ev, err := dec.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return translate.End{Err: err}
		}
		seg.Feed(ev)
	}
	return translate.End{Exited: true}
}

// benchLines reads as the in-process source of cmd/docstream-bench writes:
// one line per Read.
type benchLines struct {
	n, i int
	buf  []byte
}

func (l *benchLines) Read(p []byte) (int, error) {
	b := l.buf[:0]
	switch {
	case l.i == 0:
		b = append(b, `{"type":"system","subtype":"init","apiKeySource":"login","cwd":"/w","session_id":"5e2c1a3b-0d1e-4f2a-9b3c-7d8e9f0a1b2c","model":"Auto","permissionMode":"default"}`...)
	case l.i == 1:
		b = append(b, `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"bench"}]},"session_id":"5e2c1a3b-0d1e-4f2a-9b3c-7d8e9f0a1b2c"}`...)
	case l.i < l.n+2:
		b = append(b, `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"[ts:`...)
		b = strconv.AppendInt(b, 1764400000000000000+int64(l.i), 10)
		b = append(b, `] "}]},"session_id":"5e2c1a3b-0d1e-4f2a-9b3c-7d8e9f0a1b2c","timestamp_ms":1764400000000}`...)
	case l.i == l.n+2:
		b = append(b, `{"type":"result","subtype":"success","duration_ms":1000,"duration_api_ms":1000,"is_error":false,"result":"done","session_id":"5e2c1a3b-0d1e-4f2a-9b3c-7d8e9f0a1b2c","request_id":"r1"}`...)
	default:
		return 0, io.EOF
	}
	l.i++
	l.buf = append(b, '\n')
	return copy(p, l.buf), nil
}

// BenchmarkRunDeltas drives runs of 200 deltas end to end, from the agent's
// lines through the run's steps and log to a reader that writes the frames
// as a stream does; an op is one delta, the run's other events and its
// setup included.
func BenchmarkRunDeltas(b *testing.B) {
	for _, name := range []string{"plain", "redacting"} {
		b.Run(name, func(b *testing.B) {
			var red *Redactor
			if name == "redacting" {
				red = NewRedactor("sk-secret-key-0123456789")
			}
			limits := Limits{MaxConcurrentRuns: 4, QueueSize: 4, QueueTimeout: time.Minute}
			g := NewRegistry(Config{KeepFinished: time.Minute, KeepFinishedBytes: 1, LogMaxEvents: 200000, LogMaxBytes: 128 << 20}, limits,
				Deps{Backends: map[string]Backend{"cli": linesBackend{}}, Store: store.NewMemoryStore(), Metrics: metrics.New(), Log: zerolog.Nop(), Redactor: red})
			defer g.Shutdown(context.Background())
			w := bufio.NewWriterSize(io.Discard, 4096)
			var sent bytes.Buffer
			b.ReportAllocs()
			for i := 0; i < b.N; i += 200 {
				n := min(200, b.N-i)
				r, err := g.Prepare(&Spec{ResponseID: NewResponseID(), Prompt: strconv.Itoa(n), Backend: "cli", Mode: "agent", Model: "auto"})
				if err != nil {
					b.Fatal(err)
				}
				r.Launch()
				wake, stop := r.Log.Watch()
				last, unflushed := 0, false
				for {
					f, closed, _ := r.Log.Next(last)
					if f.ID != 0 {
						last = f.ID
						if _, err := f.WriteTo(w); err != nil {
							b.Fatal(err)
						}
						unflushed = true
						continue
					}
					if unflushed {
						w.Flush()
						unflushed = false
					}
					if closed {
						break
					}
					<-wake
				}
				stop()
				if i == 0 {
					f, _, _ := r.Log.Next(last - 1)
					f.WriteTo(&sent)
				}
				<-r.Done()
			}
			if !bytes.HasPrefix(sent.Bytes(), []byte("id: ")) {
				b.Fatalf("the last frame: %q", sent.Bytes())
			}
		})
	}
}
