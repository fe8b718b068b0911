package sse

import (
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/docstream/docstream/documents"
)

// Log is a run's bounded, replayable event log. Events get the ids 1..n in
// the order they are appended; subscribers read what they missed with Since
// and wait for more on the returned channel. The oldest events are dropped
// once the log holds more than its event or byte limit. It is safe for
// concurrent use.
//
// The events' data is kept in a few large chunks rather than one
// allocation each, and the index of the events holds no pointers: a log of
// many events costs the garbage collector little to allocate and to scan.
// What an append reads besides (the current chunk, the last event's name)
// lies in the Log itself: a server with many slow streams finds each log
// cold in the cache, and every separate object costs a miss.
type Log struct {
	mu       sync.Mutex
	ents     []entry  // the kept events, oldest first
	tail     []byte   // the chunk appended to, number chunk0+len(chunks)
	chunks   [][]byte // the full chunks before it; chunks[i] is number chunk0+i
	chunk0   int
	names    []string // the event names, by entry.name
	last     string   // the name of the last event appended, names[lastName]
	lastName uint8
	first    int // id of ents[0]
	next     int // id of the next frame
	bytes    int
	maxN     int
	maxBytes int
	closed   bool
	wake     chan struct{}
	waiting  bool // wake was handed out by Since: Append must close it
	sink     Sink
	held     atomic.Bool // more events are on their way: the sink reads them itself
	// shown is the id of the last frame readers get: the frames of a
	// batch are shown at its end (see Batch).
	shown int
	// batch is set while the events appended are one batch, unshown once
	// one of them is appended; only the appending goroutine uses them.
	// unflushed is set once the sink took one of a batch's frames without
	// flushing it, kick once it was to be kicked for one.
	batch, unshown bool
	unflushed      atomic.Bool
	kick           atomic.Bool
}

// entry is where one event's data lies in a log's chunks.
type entry struct {
	chunk    int32 // the chunk's number
	off, end int32
	name     uint8 // index into names
}

// Chunk sizes: a log's first chunk is small, so that an idle stream costs
// little, and later ones grow with what the log holds.
const (
	minChunk = 512
	maxChunk = 32 << 10
)

// Sink takes a log's events on the goroutine that appends them, so that a
// subscriber that keeps up is not woken for each one.
type Sink interface {
	// Deliver is offered each frame just appended, in order, unless more
	// frames are on their way at once (see Hold), and reports whether it
	// took it. A frame of a batch (see Batch) is offered with flush false:
	// the sink sends it with the next frame it flushes, or at Flush. It
	// must not block.
	Deliver(f Frame, flush bool) bool
	// Flush sends the frames taken without flushing. It must not block:
	// a sink that cannot flush at once has the frames sent as soon as it
	// can.
	Flush()
	// Kick says that there is more to read with Read: a frame that was not
	// delivered, or the end of the log. It must not block.
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
	if cap(l.tail)-len(l.tail) < len(data) {
		l.newChunk(len(data))
	}
	off := len(l.tail)
	l.tail = append(l.tail, data...)
	end := len(l.tail)
	name := ev.Name()
	e := entry{chunk: int32(l.chunk0 + len(l.chunks)), off: int32(off), end: int32(end), name: l.nameIndex(name)}
	f := Frame{ID: l.next, Name: name, Data: l.tail[off:end:end]}
	l.next++
	l.ents = append(l.ents, e)
	l.bytes += end - off
	for len(l.ents) > 1 && ((l.maxN > 0 && len(l.ents) > l.maxN) || (l.maxBytes > 0 && l.bytes > l.maxBytes)) {
		l.bytes -= int(l.ents[0].end - l.ents[0].off)
		l.ents = l.ents[1:]
		l.first++
		for l.chunk0 < int(l.ents[0].chunk) {
			l.chunks[0] = nil
			l.chunks = l.chunks[1:]
			l.chunk0++
		}
	}
	batch := l.batch
	if batch {
		l.unshown = true
	} else {
		l.show()
	}
	sink, held := l.sink, l.held.Load()
	l.mu.Unlock()
	if sink != nil {
		switch {
		case held || !sink.Deliver(f, !batch):
			if batch {
				l.kick.Store(true) // once the batch is shown
			} else {
				sink.Kick()
			}
		case batch:
			l.unflushed.Store(true)
		}
	}
	return f.ID
}

// show lets readers have every frame appended, waking the subscribers;
// l.mu is held.
func (l *Log) show() {
	l.shown = l.next - 1
	// Only a channel that Since handed out can have a subscriber waiting on
	// it; while nobody took the current one (a subscriber busy writing),
	// appends need not replace it.
	if l.waiting {
		close(l.wake)
		l.wake = make(chan struct{})
		l.waiting = false
	}
}

// newChunk starts a chunk with room for at least n bytes; l.mu is held. A
// chunk is never written over, only appended to: frames handed out stay
// valid.
func (l *Log) newChunk(n int) {
	if l.tail != nil {
		l.chunks = append(l.chunks, l.tail)
	}
	l.tail = make([]byte, 0, max(min(max(l.bytes/4, minChunk), maxChunk), n))
}

// nameIndex returns the index of an event name in l.names, adding it when
// new; l.mu is held. A log sees a handful of names.
func (l *Log) nameIndex(name string) uint8 {
	if name == l.last && len(l.names) > 0 {
		return l.lastName
	}
	i := slices.Index(l.names, name)
	if i < 0 {
		if len(l.names) == 256 {
			return 0 // not reached: there are ten event names
		}
		l.names = append(l.names, name)
		i = len(l.names) - 1
	}
	l.last, l.lastName = name, uint8(i)
	return l.lastName
}

// frame returns the frame of an entry, its data capped so that nobody
// appending to it writes over the next one; l.mu is held.
func (l *Log) frame(id int, e entry) Frame {
	c := l.tail
	if i := int(e.chunk) - l.chunk0; i < len(l.chunks) {
		c = l.chunks[i]
	}
	return Frame{ID: id, Name: l.names[e.name], Data: c[e.off:e.end:e.end]}
}

// Hold says whether more events are on their way at once (the producer has
// more input read). While held, appended frames are not offered to the
// sink: it is kicked and reads them in one batch, written and flushed
// together while the producer goes on. The goroutine that appends calls
// it before each event, so it takes no lock.
func (l *Log) Hold(more bool) {
	l.held.Store(more)
}

// Batch says whether the events appended from now on are one batch,
// produced together (the events of one agent line). Readers get a batch
// whole, once it ends (Batch(false)) or at Flush; the sink takes its frames
// without a flush each, and what it took is flushed once. Only the
// goroutine that appends calls it.
func (l *Log) Batch(on bool) {
	if on {
		l.batch = true
		return
	}
	l.batch = false
	l.Flush()
}

// Flush shows readers what a batch holds so far and has the sink send what
// it took of it, for a producer about to wait for something else in the
// middle of one.
func (l *Log) Flush() {
	if !l.unshown {
		return // a line that made no event costs no lock
	}
	l.unshown = false
	l.mu.Lock()
	if l.shown != l.next-1 {
		l.show()
	}
	sink := l.sink
	l.mu.Unlock()
	unflushed, kick := l.unflushed.Swap(false), l.kick.Swap(false)
	if sink != nil {
		if unflushed {
			sink.Flush()
		}
		if kick {
			sink.Kick()
		}
	}
}

// Close marks the log complete: no more events follow. A complete log
// gives back the room it kept for appends.
func (l *Log) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		l.shown = l.next - 1
		l.clip()
		close(l.wake)
		if l.sink != nil {
			l.sink.Kick()
		}
	}
}

// clip copies the current chunk and the index to their length when they
// have room to spare; l.mu is held. Frames handed out keep the old chunk.
func (l *Log) clip() {
	if cap(l.tail)-len(l.tail) > len(l.tail)/8 {
		l.tail = append(make([]byte, 0, len(l.tail)), l.tail...)
	}
	if cap(l.ents)-len(l.ents) > len(l.ents)/8 {
		l.ents = append(make([]entry, 0, len(l.ents)), l.ents...)
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
	after = max(after, 0)
	ok = l.keeps(after)
	i := max(after+1-l.first, 0)
	if n := l.shown + 1 - l.first; i < n {
		frames = make([]Frame, 0, n-i)
		for j, e := range l.ents[i:n] {
			frames = append(frames, l.frame(l.first+i+j, e))
		}
	}
	return frames, ok
}

// Keeps reports whether the log still holds every event after the given
// id: false once it dropped some of them to stay within its bounds.
func (l *Log) Keeps(after int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.keeps(max(after, 0))
}

// keeps is Keeps for an id ≥ 0; l.mu is held.
func (l *Log) keeps(after int) bool { return after+1 >= l.first }

// Size returns the bytes the log holds: its events' data and their index.
func (l *Log) Size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytes + len(l.ents)*int(unsafe.Sizeof(entry{}))
}

// Last returns the id of the last event appended, 0 when there is none.
func (l *Log) Last() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next - 1
}
