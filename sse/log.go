package sse

import (
	"sync"

	"github.com/docstream/docstream/documents"
)

// Log is a run's bounded, replayable event log. Events get the ids 1..n in
// the order they are appended; subscribers read what they missed with Since
// and wait for more on the returned channel. The oldest events are dropped
// once the log holds more than its event or byte limit. It is safe for
// concurrent use.
type Log struct {
	mu       sync.Mutex
	frames   []Frame
	first    int // id of frames[0]
	next     int // id of the next frame
	bytes    int
	maxN     int
	maxBytes int
	closed   bool
	wake     chan struct{}
	waiting  bool // wake was handed out by Since: Append must close it
	sink     Sink
	held     bool // more events are on their way: the sink need not flush
}

// Sink takes a log's events on the goroutine that appends them, so that a
// subscriber that keeps up is not woken for each one.
type Sink interface {
	// Deliver is offered each frame just appended, in order, and reports
	// whether it took it. flush is false while more frames are on their
	// way (see Hold). It must not block.
	Deliver(f Frame, flush bool) bool
	// Flush sends what Deliver took without flushing. It must not block.
	Flush()
	// Kick says that there is more to read with Read: a frame Deliver did
	// not take, or the end of the log. It must not block.
	Kick()
}

// NewLog returns an empty log that keeps at most maxEvents events and
// maxBytes bytes of data (no limit when ≤ 0).
func NewLog(maxEvents, maxBytes int) *Log {
	return &Log{first: 1, next: 1, maxN: maxEvents, maxBytes: maxBytes, wake: make(chan struct{})}
}

// Append encodes ev, stores it with the next id and wakes the subscribers;
// the sink, if any, is offered the frame. It returns the id, or 0 when the
// log is closed or ev cannot be encoded.
func (l *Log) Append(ev documents.Event) int {
	data, err := Encode(ev)
	if err != nil {
		return 0
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0
	}
	f := Frame{ID: l.next, Name: ev.Name(), Data: data}
	l.next++
	l.frames = append(l.frames, f)
	l.bytes += len(data)
	for len(l.frames) > 1 && ((l.maxN > 0 && len(l.frames) > l.maxN) || (l.maxBytes > 0 && l.bytes > l.maxBytes)) {
		l.bytes -= len(l.frames[0].Data)
		l.frames = l.frames[1:]
		l.first++
	}
	// Only a channel that Since handed out can have a subscriber waiting on
	// it; while nobody took the current one (a subscriber busy writing),
	// appends need not replace it.
	if l.waiting {
		close(l.wake)
		l.wake = make(chan struct{})
		l.waiting = false
	}
	sink, flush := l.sink, !l.held
	l.mu.Unlock()
	if sink != nil && !sink.Deliver(f, flush) {
		sink.Kick()
	}
	return f.ID
}

// Hold says whether more events are on their way at once (the producer has
// more input read): while held, the sink is not asked to flush each frame,
// and releasing the hold flushes it.
func (l *Log) Hold(more bool) {
	l.mu.Lock()
	was := l.held
	l.held = more
	sink := l.sink
	l.mu.Unlock()
	if was && !more && sink != nil {
		sink.Flush()
	}
}

// Close marks the log complete: no more events follow.
func (l *Log) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.wake)
		if l.sink != nil {
			l.sink.Kick()
		}
	}
}

// SetSink makes s the log's sink, or removes the sink when s is nil. A log
// has at most one: SetSink reports false when another one is set.
func (l *Log) SetSink(s Sink) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s != nil && l.sink != nil {
		return false
	}
	l.sink = s
	return true
}

// Since returns the events with ids greater than after, whether the log is
// closed, and a channel that is closed when more arrive. ok is false when
// some of the wanted events were already dropped.
func (l *Log) Since(after int) (frames []Frame, closed bool, more <-chan struct{}, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	frames, ok = l.after(after)
	l.waiting = true
	return frames, l.closed, l.wake, ok
}

// Read returns what Since returns but the channel, for a sink, which is
// kicked instead.
func (l *Log) Read(after int) (frames []Frame, closed bool, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	frames, ok = l.after(after)
	return frames, l.closed, ok
}

// after returns the frames with ids greater than after; l.mu is held.
func (l *Log) after(after int) (frames []Frame, ok bool) {
	if after < 0 {
		after = 0
	}
	ok = after+1 >= l.first
	i := after + 1 - l.first
	if i < 0 {
		i = 0
	}
	if i < len(l.frames) {
		frames = l.frames[i:len(l.frames):len(l.frames)]
	}
	return frames, ok
}

// Last returns the id of the last event appended, 0 when there is none.
func (l *Log) Last() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next - 1
}
