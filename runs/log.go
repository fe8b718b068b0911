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
	blocks   []*block // the kept events, oldest first
	n        int      // the kept events
	first    int      // the id of the oldest kept event
	bytes    int
	maxN     int
	maxBytes int
	closed   bool
	watchers []chan struct{} // of Watch
}

// block holds events in the order of their ids; a log grows by blocks,
// copying none.
type block [blockLen]sse.Frame

const blockLen = 16

// frameOverhead is what a kept frame costs besides its data: the frame and
// its SSE fields.
const frameOverhead = 112

// NewLog returns an empty log of at most maxEvents events and maxBytes bytes.
func NewLog(maxEvents, maxBytes int) *Log {
	return &Log{first: 1, maxN: maxEvents, maxBytes: maxBytes}
}

// at returns the place of the kept event with the given id.
func (l *Log) at(id int) *sse.Frame {
	p, oldest := id-1, (l.first-1)/blockLen // oldest: the block of blocks[0]
	return &l.blocks[p/blockLen-oldest][p%blockLen]
}

// Append keeps ev with the next id and wakes the readers. It returns the id,
// or 0 when the log is closed or ev cannot be encoded.
func (l *Log) Append(ev documents.Event) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0
	}
	id := l.first + l.n
	f, err := sse.NewFrame(id, ev)
	if err != nil {
		return 0
	}
	if (id-1)%blockLen == 0 {
		l.blocks = append(l.blocks, new(block))
	}
	*l.at(id) = f
	l.n++
	l.bytes += len(f.Data)
	for l.n > 1 && ((l.maxN > 0 && l.n > l.maxN) || (l.maxBytes > 0 && l.bytes > l.maxBytes)) {
		l.drop()
	}
	l.notify()
	return f.ID
}

// drop lets go of the oldest event.
func (l *Log) drop() {
	f := l.at(l.first)
	l.bytes -= len(f.Data)
	*f = sse.Frame{}
	l.first++
	l.n--
	if (l.first-1)%blockLen == 0 {
		l.blocks[0] = nil
		l.blocks = l.blocks[1:]
	}
}

// notify wakes the readers.
func (l *Log) notify() {
	for _, w := range l.watchers {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// Close marks the log complete: no more events follow.
func (l *Log) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		l.notify()
	}
}

// Next returns the event after the given id, or one with ID 0 when there is
// none yet, whether the log is closed, and false when it was dropped.
func (l *Log) Next(after int) (f sse.Frame, closed, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	after = max(after, 0)
	if i := after + 1 - l.first; i >= 0 && i < l.n {
		f = *l.at(after + 1)
	}
	return f, l.closed, after+1 >= l.first
}

// Watch returns a channel that receives after each append and at the close,
// for one reader of Next, and stop, which ends that.
func (l *Log) Watch() (wake <-chan struct{}, stop func()) {
	w := make(chan struct{}, 1)
	l.mu.Lock()
	l.watchers = append(l.watchers, w)
	l.mu.Unlock()
	return w, func() {
		l.mu.Lock()
		l.watchers = slices.DeleteFunc(l.watchers, func(c chan struct{}) bool { return c == w })
		l.mu.Unlock()
	}
}

// Keeps reports whether the log still holds every event after the given id.
func (l *Log) Keeps(after int) bool {
	_, _, ok := l.Next(after)
	return ok
}

// Size returns the bytes the log holds.
func (l *Log) Size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytes + l.n*frameOverhead
}

// Last returns the id of the last event appended, 0 when there is none.
func (l *Log) Last() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first + l.n - 1
}
