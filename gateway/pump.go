package gateway

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docstream/docstream/translate"
)

// quietAfter is how long an agent's output may be silent before its run
// stops holding a goroutine and a read buffer: agents stream in bursts and
// then think or run tools for seconds, and a parked run costs a registration
// instead of a goroutine stack.
const quietAfter = 100 * time.Millisecond

// parker waits for the files of quiet runs without a goroutine per file.
type parker interface {
	// park calls wake, from the parker's goroutine, once f is readable,
	// unless cancel(tok) comes first; wake must return at once.
	park(f *os.File, wake func()) (tok uint32, err error)
	// cancel forgets tok and reports whether its wake was still to come.
	cancel(tok uint32) bool
}

// outputReader reads an agent's output pipe. While lines keep coming a read
// blocks as usual; once a read has waited for quiet (see quietWatch), it
// returns translate.ErrPending so that the reader can park. It tracks
// whether a read is waiting for input.
type outputReader struct {
	f     *os.File
	quiet time.Duration // 0: reads block until there is input
	// began is when the read now blocked began (monotonic), 0 when no read
	// is blocked or it has been told to end.
	began   atomic.Int64
	expired bool // the last read ended at its deadline: clear it first
	waiting atomic.Bool
	reads   atomic.Int64
}

func (o *outputReader) Read(b []byte) (int, error) {
	if o.expired {
		o.expired = false
		_ = o.f.SetReadDeadline(time.Time{})
	}
	var began int64
	if o.quiet > 0 {
		began = mono()
		o.began.Store(began)
	}
	o.waiting.Store(true)
	n, err := o.f.Read(b)
	if !o.began.CompareAndSwap(began, 0) {
		// The watch ended this read as it returned with input: its past
		// deadline is set, and the next read clears it instead of failing.
		o.expired = true
	}
	o.waiting.Store(false)
	o.reads.Add(1)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		o.expired = true
		o.waiting.Store(true) // parked: still waiting for input
		return n, translate.ErrPending
	}
	return n, err
}

// interrupt ends a read that has been blocked since began, if it still is.
func (o *outputReader) interrupt(began int64) {
	if o.began.CompareAndSwap(began, 0) {
		_ = o.f.SetReadDeadline(time.Unix(1, 0))
	}
}

// monoBase is the origin of mono.
var monoBase = time.Now()

// mono is the monotonic clock, in nanoseconds.
func mono() int64 { return int64(time.Since(monoBase)) }

// quietWatch ends the reads that have been blocked for their reader's
// quiet time, checking every quarter of quietAfter. A read deadline per
// read would cost a timer update for each; a reader costs the watch one
// atomic load per check instead.
type quietWatch struct {
	mu      sync.Mutex
	readers map[*outputReader]struct{}
	running bool
}

var quietReads = &quietWatch{readers: map[*outputReader]struct{}{}}

// add watches o; the watch's goroutine runs while it watches any reader.
func (w *quietWatch) add(o *outputReader) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.readers[o] = struct{}{}
	if !w.running {
		w.running = true
		go w.loop()
	}
}

// remove stops watching o.
func (w *quietWatch) remove(o *outputReader) {
	w.mu.Lock()
	delete(w.readers, o)
	w.mu.Unlock()
}

func (w *quietWatch) loop() {
	t := time.NewTicker(quietAfter / 4)
	defer t.Stop()
	for range t.C {
		now := mono()
		w.mu.Lock()
		if len(w.readers) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		for o := range w.readers {
			if b := o.began.Load(); b != 0 && now-b >= int64(o.quiet) {
				o.interrupt(b)
			}
		}
		w.mu.Unlock()
	}
}

// waitBlocked returns once one Read has waited for at least d and nothing
// is left in the pipe (it is empty and still held open), when done is
// closed, or after limit however the pipe is used. A reader that was woken
// but has not run yet does not count as blocked: what the agent wrote is
// read before the pipe is closed, unless a writer keeps writing for all of
// limit.
func (o *outputReader) waitBlocked(d, limit time.Duration, done <-chan struct{}) {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		w, n := o.waiting.Load(), o.reads.Load()
		select {
		case <-done:
			return
		case <-deadline.C:
			return
		case <-time.After(d):
		}
		if w && o.waiting.Load() && o.reads.Load() == n && pipeEmpty(o.f) {
			return
		}
	}
}

// outputPump feeds an agent's output to its segmenter on whichever
// goroutine has input for it: the run's own goroutine while the agent
// writes, none while it is quiet (the parker wakes it), so that a quiet
// run holds neither a goroutine nor a read buffer.
type outputPump struct {
	out   outputReader // in the pump, not beside it: one object less to reach per line
	dec   *translate.Decoder
	seg   *translate.Segmenter
	start time.Time
	// lastLine is when the last line was read, as time since start.
	lastLine atomic.Int64
	parker   parker
	// hold is told before each line whether another whole line is
	// already read. An interface rather than a func value: the call then
	// reads nothing that is not already at hand.
	hold Holder
	// ended is called once, on the goroutine that read the end of the
	// output (or the result), with the read error, if any.
	ended func(err error)

	mu     sync.Mutex
	parked uint32 // the parker's token while parked
	closed bool
}

// noHold is the Holder of a pump that has none.
type noHold struct{}

func (noHold) Hold(bool)  {}
func (noHold) Batch(bool) {}

// newOutputPump returns a pump reading f into seg. With no parker the pump
// keeps its goroutine while the agent is quiet.
func newOutputPump(f *os.File, seg *translate.Segmenter, maxLine int, start time.Time, pk parker, hold Holder, ended func(error)) *outputPump {
	if hold == nil {
		hold = noHold{}
	}
	p := &outputPump{out: outputReader{f: f}, seg: seg, start: start, parker: pk, hold: hold, ended: ended}
	p.dec = translate.NewDecoder(&p.out, maxLine)
	if pk != nil {
		p.out.quiet = quietAfter
		quietReads.add(&p.out)
	}
	p.lastLine.Store(int64(time.Since(start)))
	return p
}

// run reads until the output ends or the agent goes quiet; then it parks
// and returns, and the parker runs it again when there is input.
func (p *outputPump) run() {
	for {
		err := p.feed()
		if !errors.Is(err, translate.ErrPending) {
			quietReads.remove(&p.out)
			p.ended(err)
			return
		}
		p.dec.Idle()
		if p.park() {
			return
		}
	}
}

// feed hands lines to the segmenter until the output ends, the segmenter
// has the result, or there is no input for now (translate.ErrPending). It
// returns read errors other than the end of the output.
func (p *outputPump) feed() error {
	defer p.hold.Hold(false)
	for !p.seg.Done() {
		ev, err := p.dec.Next()
		if err != nil {
			if errors.Is(err, os.ErrClosed) || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		p.lastLine.Store(int64(time.Since(p.start)))
		p.hold.Hold(p.dec.HasLine())
		p.hold.Batch(true)
		p.seg.Feed(ev)
		p.hold.Batch(false)
	}
	return nil
}

// park hands the pipe to the parker; false means the pump must go on
// reading itself (the pipe was closed, or it cannot be parked).
func (p *outputPump) park() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	tok, err := p.parker.park(p.out.f, p.wake)
	if err != nil {
		return false
	}
	p.parked = tok
	return true
}

// wake is called by the parker once the pipe is readable. The pump stops
// counting as waiting at once, so that a watchdog about to close the pipe
// for an empty one (see waitBlocked) waits for the pump to read what came,
// and it runs again on a new goroutine.
func (p *outputPump) wake() {
	p.out.waiting.Store(false)
	p.mu.Lock()
	p.parked = 0
	p.mu.Unlock()
	goWarm(p.run)
}

// close closes the pipe; a parked pump is run again to read what is left
// and the end.
func (p *outputPump) close() {
	_ = p.out.f.Close()
	p.mu.Lock()
	tok := p.parked
	p.parked, p.closed = 0, true
	p.mu.Unlock()
	if tok != 0 && p.parker.cancel(tok) {
		goWarm(p.run)
	}
}
