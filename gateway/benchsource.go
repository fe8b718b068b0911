package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/translate"
)

// BuiltinBench is a hidden agent.binary value for benchmarks. Instead of
// spawning a process, a run writes the lines of the simulator's bench:<n>
// scenario into an os.Pipe from a goroutine, and the gateway reads that pipe
// exactly as it reads an agent's stdout. It measures the gateway's own cost
// without the CPU and memory of child processes.
const BuiltinBench = "builtin:bench"

// startBuiltin is Start for BuiltinBench: the same pump, decoder and
// segmenter, fed by WriteBenchLines through a pipe. ctx ends the run as it
// ends an agent.
func (b *CLIBackend) startBuiltin(ctx context.Context, spec *RunSpec, seg *translate.Segmenter, start time.Time, done func(translate.End)) {
	r, w, err := os.Pipe()
	if err != nil {
		done(translate.End{Err: fmt.Errorf("creating a pipe: %w", err)})
		return
	}
	stopGen, genDone := StartBenchSource(w, spec.Prompt, spec.Workspace)
	var unhook func() bool
	var pump *outputPump
	pump = newOutputPump(r, seg, b.cfg.MaxLineBytes, start, b.parker, spec.Hold, func(error) {
		unhook()
		stopGen()
		pump.close()
		<-genDone
		end := translate.End{Elapsed: time.Since(start).Milliseconds(), Exited: true}
		if !seg.Done() && ctx.Err() != nil {
			end.Reason, end.Message, _ = stopCause(ctx)
		}
		done(end)
	})
	unhook = context.AfterFunc(ctx, pump.close)
	pump.run()
}

// WriteBenchLines writes what `docstream agent-sim` writes for the prompt
// "bench:<n>" with --stream-partial-output: system/init, the user echo, n
// assistant deltas whose text is exactly "[ts:<unix nanoseconds at emit>] ",
// the final flush and result/success, one write per line. A prompt word
// "every=<duration>" spaces the deltas (default: as fast as w takes them);
// the first delta follows the user echo at once. It stops early when ctx
// ends or a write fails.
func WriteBenchLines(ctx context.Context, w io.Writer, prompt, cwd string) error {
	src := newBenchSource(w, prompt, cwd)
	var timer *time.Timer
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if d := time.Until(src.next); d > 0 {
			if timer == nil {
				timer = time.NewTimer(d)
				defer timer.Stop()
			} else {
				timer.Reset(d)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-timer.C:
			}
		}
		more, err := src.step()
		if err != nil || !more {
			return err
		}
	}
}

// StartBenchSource writes the lines of WriteBenchLines into w and closes
// it, in the background, until stop is called or a write fails; done is
// closed when it has ended. Paced sources (every=…) are all written by one
// goroutine, so that the in-process agents of the no-child mode cost the
// server a pipe and a little state each, as a child process would cost it
// nothing; unpaced ones get a goroutine each.
func StartBenchSource(w io.WriteCloser, prompt, cwd string) (stop func(), done <-chan struct{}) {
	ch := make(chan struct{})
	if _, every := parseBenchPrompt(prompt); every <= 0 {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			defer close(ch)
			_ = WriteBenchLines(ctx, w, prompt, cwd)
			w.Close()
		}()
		return cancel, ch
	}
	benchClockOnce.Do(func() {
		benchClock = &clock{add: make(chan *benchSource, 64)}
		go benchClock.run()
	})
	src := newBenchSource(w, prompt, cwd)
	src.done = ch
	benchClock.add <- src
	var once sync.Once
	return func() {
		once.Do(func() {
			src.cancelled.Store(true)
			benchClock.add <- src
		})
	}, ch
}

// benchSource is the state of one bench transcript being written.
type benchSource struct {
	w                io.Writer
	prompt, cwd      string
	n                int
	every            time.Duration
	session, request string
	start, next      time.Time
	i                int    // deltas written
	deltaEnd         string // what follows a delta's text up to its timestamp_ms
	text             strings.Builder
	buf              []byte
	done             chan struct{}
	cancelled        atomic.Bool
	queued           bool // in its queue of the clock
	ended            bool // the clock closed it
}

func newBenchSource(w io.Writer, prompt, cwd string) *benchSource {
	s := &benchSource{w: w, prompt: prompt, cwd: cwd, session: benchID(), request: benchID(), start: time.Now()}
	s.n, s.every = parseBenchPrompt(prompt)
	s.next = s.start
	s.deltaEnd = `"}]},"session_id":"` + s.session + `","timestamp_ms":`
	s.text.Grow(min(s.n, 1024) * len("[ts:1764000000000000000] "))
	return s
}

// step writes what is due: the head first, then one delta at a time, the
// tail after the last; more is false once the tail is written.
func (s *benchSource) step() (more bool, err error) {
	if s.i == 0 {
		return s.head()
	}
	return s.delta()
}

func (s *benchSource) write() error {
	s.buf = append(s.buf, '\n')
	_, err := s.w.Write(s.buf)
	s.buf = s.buf[:0]
	return err
}

func (s *benchSource) quote(v string) {
	s.buf, _ = jsontext.AppendQuote(s.buf, v)
}

// head writes system/init, the user echo and the first delta.
func (s *benchSource) head() (bool, error) {
	s.buf = append(s.buf, `{"type":"system","subtype":"init","apiKeySource":"login","cwd":`...)
	s.quote(s.cwd)
	s.buf = append(s.buf, `,"session_id":"`+s.session+`","model":"Auto","permissionMode":"default"}`...)
	if err := s.write(); err != nil {
		return false, err
	}
	s.buf = append(s.buf, `{"type":"user","message":{"role":"user","content":[{"type":"text","text":`...)
	s.quote(s.prompt)
	s.buf = append(s.buf, `}]},"session_id":"`+s.session+`"}`...)
	if err := s.write(); err != nil {
		return false, err
	}
	return s.delta()
}

// delta writes the next timestamped delta, or the tail after the last.
func (s *benchSource) delta() (bool, error) {
	if s.i >= s.n {
		return s.tail()
	}
	now := time.Now()
	s.buf = append(s.buf, `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"[ts:`...)
	mark := len(s.buf) - len("[ts:")
	s.buf = strconv.AppendInt(s.buf, now.UnixNano(), 10)
	s.buf = append(s.buf, "] "...)
	s.text.Write(s.buf[mark:])
	s.buf = append(s.buf, s.deltaEnd...)
	s.buf = strconv.AppendInt(s.buf, now.UnixMilli(), 10)
	s.buf = append(s.buf, '}')
	if err := s.write(); err != nil {
		return false, err
	}
	s.i++
	if s.every > 0 {
		s.next = s.start.Add(time.Duration(s.i) * s.every)
	}
	if s.i >= s.n {
		return s.tail()
	}
	return true, nil
}

// tail writes the final flush and the result.
func (s *benchSource) tail() (bool, error) {
	all := s.text.String()
	if all != "" {
		s.buf = append(s.buf, `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":`...)
		s.quote(all)
		s.buf = append(s.buf, `}]},"session_id":"`+s.session+`"}`...)
		if err := s.write(); err != nil {
			return false, err
		}
	}
	ms := strconv.FormatInt(time.Since(s.start).Milliseconds(), 10)
	s.buf = append(s.buf, `{"type":"result","subtype":"success","duration_ms":`+ms+`,"duration_api_ms":`+ms+`,"is_error":false,"result":`...)
	s.quote(all)
	s.buf = append(s.buf, `,"session_id":"`+s.session+`","request_id":"`+s.request+`","usage":{"inputTokens":`...)
	s.buf = strconv.AppendInt(s.buf, int64(8192+(len(s.prompt)+3)/4), 10)
	s.buf = append(s.buf, `,"outputTokens":`...)
	s.buf = strconv.AppendInt(s.buf, int64((len(all)+3)/4), 10)
	s.buf = append(s.buf, `,"cacheReadTokens":4096,"cacheWriteTokens":0}}`...)
	return false, s.write()
}

var (
	benchClockOnce sync.Once
	benchClock     *clock
)

// clock writes every paced bench source from one goroutine, each line at
// its time. The sources of one period wait in a queue in the order of
// their next line: a line moves its source one period on, which is the back
// of its queue unless the clock runs late, so that keeping the order costs
// next to nothing where a heap would compare and swap sources cold in the
// cache at every line.
type clock struct {
	add    chan *benchSource
	queues []*sourceQueue // one per period
}

func (c *clock) run() {
	timer := time.NewTimer(time.Hour)
	var scratch []byte
	for {
		var wake <-chan time.Time
		if q := c.soonest(); q != nil {
			timer.Reset(time.Until(q.srcs[0].next))
			wake = timer.C
		}
		select {
		case src := <-c.add:
			switch {
			case src.ended:
			case src.cancelled.Load():
				if src.queued {
					c.queue(src.every).remove(src)
				}
				c.end(src)
			case !src.queued:
				c.queue(src.every).insert(src)
			}
		case <-wake:
		}
		now := time.Now()
		for q := c.soonest(); q != nil && !q.srcs[0].next.After(now); q = c.soonest() {
			src := q.pop()
			src.buf = scratch[:0]
			more, err := src.step()
			scratch, src.buf = src.buf, nil
			if err != nil || !more {
				c.end(src)
				continue
			}
			q.insert(src)
		}
	}
}

// queue returns the queue of the sources of a period, made when needed.
func (c *clock) queue(every time.Duration) *sourceQueue {
	for _, q := range c.queues {
		if q.every == every {
			return q
		}
	}
	q := &sourceQueue{every: every}
	c.queues = append(c.queues, q)
	return q
}

// soonest returns the queue whose first source is due first, nil when no
// source waits.
func (c *clock) soonest() *sourceQueue {
	var best *sourceQueue
	for _, q := range c.queues {
		if len(q.srcs) > 0 && (best == nil || q.srcs[0].next.Before(best.srcs[0].next)) {
			best = q
		}
	}
	return best
}

// end closes a finished or cancelled source.
func (c *clock) end(src *benchSource) {
	src.ended = true
	if wc, ok := src.w.(io.Closer); ok {
		wc.Close()
	}
	close(src.done)
}

// sourceQueue holds the sources of one period in the order of their next
// line.
type sourceQueue struct {
	every time.Duration
	srcs  []*benchSource
}

// insert puts src in its place, looking from the back.
func (q *sourceQueue) insert(src *benchSource) {
	q.srcs = append(q.srcs, src)
	i := len(q.srcs) - 1
	for i > 0 && q.srcs[i-1].next.After(src.next) {
		q.srcs[i] = q.srcs[i-1]
		i--
	}
	q.srcs[i] = src
	src.queued = true
}

// pop takes the first source off the queue.
func (q *sourceQueue) pop() *benchSource {
	src := q.srcs[0]
	q.srcs[0] = nil
	q.srcs = q.srcs[1:]
	src.queued = false
	return src
}

// remove takes src off the queue.
func (q *sourceQueue) remove(src *benchSource) {
	if i := slices.Index(q.srcs, src); i >= 0 {
		q.srcs = slices.Delete(q.srcs, i, i+1)
	}
	src.queued = false
}

// parseBenchPrompt reads "bench:<n>" (default 100) and "every=<duration>"
// from a prompt.
func parseBenchPrompt(prompt string) (n int, every time.Duration) {
	n = 100
	for i, f := range strings.Fields(prompt) {
		if s, ok := strings.CutPrefix(strings.ToLower(f), "bench:"); ok && i == 0 {
			if v, err := strconv.Atoi(s); err == nil && v >= 0 {
				n = min(v, 10_000_000)
			}
		}
		if s, ok := strings.CutPrefix(f, "every="); ok {
			if d, err := time.ParseDuration(s); err == nil && d > 0 {
				every = d
			}
		}
	}
	return n, every
}

// benchID returns a random UUID-shaped id.
func benchID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
