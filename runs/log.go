package runs

import (
	"slices"
	"sync"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/sse"
)

// Log is a run's bounded, replayable event log, with ids 1..n; the oldest
// events are dropped past its limits. It is safe for concurrent use.
type Log struct {
	mu       sync.Mutex
	frames   []sse.Frame // the kept events, oldest first; frames[0] has id first
	first    int
	bytes    int
	maxN     int
	maxBytes int
	closed   bool
	wake     chan struct{} // closed and replaced by each append
}

// frameOverhead is what a kept frame costs besides its data.
const frameOverhead = 48

// NewLog returns an empty log of at most maxEvents events and maxBytes bytes.
func NewLog(maxEvents, maxBytes int) *Log {
	return &Log{first: 1, maxN: maxEvents, maxBytes: maxBytes, wake: make(chan struct{})}
}

// Append keeps ev with the next id and wakes the readers. It returns the id,
// or 0 when the log is closed or ev cannot be encoded.
func (l *Log) Append(ev documents.Event) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0
	}
	f, err := sse.NewFrame(l.first+len(l.frames), ev)
	if err != nil {
		return 0
	}
	l.frames = append(l.frames, f)
	l.bytes += len(f.Data)
	for len(l.frames) > 1 && ((l.maxN > 0 && len(l.frames) > l.maxN) || (l.maxBytes > 0 && l.bytes > l.maxBytes)) {
		l.bytes -= len(l.frames[0].Data)
		l.frames[0] = sse.Frame{}
		l.frames = l.frames[1:]
		l.first++
	}
	close(l.wake)
	l.wake = make(chan struct{})
	return f.ID
}

// Close marks the log complete: no more events follow.
func (l *Log) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		l.frames = append([]sse.Frame(nil), l.frames...) // gives back the room kept for appends
		close(l.wake)
	}
}

// Since returns a copy of the events after the given id, whether the log is
// closed, a channel closed when more arrive, and false when some were dropped.
func (l *Log) Since(after int) (frames []sse.Frame, closed bool, more <-chan struct{}, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	after = max(after, 0)
	ok = after+1 >= l.first
	if i := max(after+1-l.first, 0); i < len(l.frames) {
		frames = slices.Clone(l.frames[i:])
	}
	return frames, l.closed, l.wake, ok
}

// Keeps reports whether the log still holds every event after the given id.
func (l *Log) Keeps(after int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(after, 0)+1 >= l.first
}

// Size returns the bytes the log holds.
func (l *Log) Size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytes + len(l.frames)*frameOverhead
}

// Last returns the id of the last event appended, 0 when there is none.
func (l *Log) Last() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first + len(l.frames) - 1
}
