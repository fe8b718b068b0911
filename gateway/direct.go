package gateway

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docstream/docstream/sse"
)

// connKey is the request context key of the client's connection.
type connKey struct{}

// withConn records the connection in its requests' context (an
// http.Server's ConnContext): the TCP connection itself, not the connection
// limit's wrapper, so that its send buffer can be asked about.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if u, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = u.NetConn()
	}
	return context.WithValue(ctx, connKey{}, c)
}

// sendRoom says whether a write of n bytes to a connection is queued by the
// kernel at once, without blocking, and counts it.
type sendRoom interface {
	take(n int) bool
	// forget drops what is known of the room: writes that were not taken
	// from it have used some, and the next take measures again.
	forget()
}

// directSink lets a run's goroutine write the frames it appends to a stream
// that has caught up, instead of waking the stream's goroutine for each: a
// stream costs one goroutine switch less per event. It writes only what the
// connection's send buffer takes without blocking, so that a slow client
// never holds up the run; everything else is written for the stream's own
// goroutine, which Kick wakes (see followDirect).
type directSink struct {
	st   *streamer
	room sendRoom
	kick chan struct{}
	send func(sse.Frame) (complete bool, err error)
	size func(sse.Frame) int // at least what send writes for a frame

	// mu is held while the response is written, by either goroutine.
	mu       sync.Mutex
	last     int   // the id of the last frame written
	err      error // the first write error: the stream is over
	complete bool  // send said the stream is complete
	ended    bool  // the handler is done with the response
	// unflushed is set while frames Deliver took are not flushed yet.
	unflushed bool

	// beat is set by the heartbeat timer hb, which then kicks.
	beat atomic.Bool
	hb   *time.Timer
	// unwatch stops the kick at the end of the request's context.
	unwatch func() bool
}

// Deliver writes f if it is the next frame, nobody is writing, and the
// connection takes it without blocking, and flushes it unless flush is
// false (a frame of a batch, sent at the next flush).
func (d *directSink) Deliver(f sse.Frame, flush bool) bool {
	if !d.mu.TryLock() {
		return false
	}
	defer d.mu.Unlock()
	if d.ended || d.over() || f.ID != d.last+1 || !d.room.take(d.size(f)) {
		return false
	}
	d.st.deadline()
	d.write(f)
	if flush {
		d.flush()
	} else {
		d.unflushed = true
	}
	if d.over() {
		return false // the stream's goroutine, kicked, ends the stream
	}
	d.st.s.metrics.DirectFrames.Inc()
	return true
}

// Flush sends the frames Deliver took without flushing. When the stream's
// goroutine is writing, that goroutine sends them.
func (d *directSink) Flush() {
	if !d.mu.TryLock() {
		d.Kick()
		return
	}
	defer d.mu.Unlock()
	if d.ended || !d.unflushed || d.over() {
		return
	}
	d.flush()
	if d.over() {
		d.Kick()
	}
}

// flush sends what was written; d.mu is held.
func (d *directSink) flush() {
	d.unflushed = false
	if d.err == nil {
		d.err = d.st.rc.Flush()
	}
}

// flushOwn flushes what the stream's goroutine wrote itself: those writes
// were not taken from the room, so the next Deliver measures it again; d.mu
// is held.
func (d *directSink) flushOwn() {
	d.flush()
	d.room.forget()
}

// write sends one frame; d.mu is held.
func (d *directSink) write(f sse.Frame) {
	d.complete, d.err = d.send(f)
	d.last = f.ID
}

// over reports whether nothing more is to be written; d.mu is held.
func (d *directSink) over() bool { return d.err != nil || d.complete }

// Kick wakes the stream's goroutine.
func (d *directSink) Kick() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// frameSize is about what f takes on the wire, with its chunk framing.
func frameSize(f sse.Frame) int { return len(f.Data) + len(f.Name) + 64 }

// followDirect is follow for a stream whose connection's send room can be
// known: the stream becomes its run's log's sink, and the run writes the
// frames that find the stream caught up (see directSink). size bounds what
// send writes for a frame. It reports false, having sent nothing, when it
// cannot be used.
//
// The handler's goroutine only waits here: what it writes itself (frames
// the run could not, heartbeats) is written off its stack (see offStack).
func (st *streamer) followDirect(ctx context.Context, run *Run, after int, send func(sse.Frame) (complete bool, err error), size func(sse.Frame) int, beat string) bool {
	var d *directSink
	offStack(func() { d = st.newSink(ctx, run, after, send, size) })
	if d == nil {
		return false
	}
	defer d.end(run)
	for {
		var more bool
		offStack(func() { more = d.catchUp(run, beat) })
		if !more {
			return true
		}
		if <-d.kick; ctx.Err() != nil {
			return true
		}
	}
}

// newSink makes the stream its run's log's sink, with its heartbeat armed,
// or returns nil when the connection's send room cannot be known or another
// stream of the run is the sink.
func (st *streamer) newSink(ctx context.Context, run *Run, after int, send func(sse.Frame) (complete bool, err error), size func(sse.Frame) int) *directSink {
	if st.conn == nil {
		return nil
	}
	room := newSendRoom(st.conn)
	if room == nil {
		return nil
	}
	d := &directSink{st: st, room: room, kick: make(chan struct{}, 1), send: send, size: size, last: max(after, 0)}
	if !run.Log.SetSink(d) {
		return nil
	}
	// The heartbeat and the end of ctx kick rather than having channels of
	// their own: a parked stream waits on one channel, which takes less
	// of its stack than a select.
	d.hb = time.AfterFunc(st.s.heartbeat(), func() {
		d.beat.Store(true)
		d.Kick()
	})
	d.unwatch = context.AfterFunc(ctx, d.Kick)
	return d
}

// end gives the run's log back its sink-less state once the handler is done
// with the response.
func (d *directSink) end(run *Run) {
	d.hb.Stop()
	d.unwatch()
	run.Log.SetSink(nil)
	d.mu.Lock()
	d.ended = true
	d.mu.Unlock()
}

// catchUp writes a heartbeat that is due and the frames the log holds past
// the last one written, and reports whether the stream goes on.
func (d *directSink) catchUp(run *Run, beat string) bool {
	st := d.st
	if d.beat.Swap(false) {
		d.mu.Lock()
		st.deadline()
		d.err = sse.WriteComment(st.w, beat)
		d.flushOwn()
		d.mu.Unlock()
		d.hb.Reset(st.s.heartbeat())
	}
	for {
		d.mu.Lock()
		frames, closed, ok := run.Log.Read(d.last)
		if !ok && !d.over() {
			st.lost = true
			d.mu.Unlock()
			return false
		}
		if len(frames) > 0 && !d.over() {
			st.deadline()
			for _, f := range frames {
				if d.write(f); d.over() {
					break
				}
			}
			d.flushOwn()
		} else if d.unflushed && !d.over() {
			d.flush() // frames the run wrote, which its Flush left to this goroutine
		}
		over := d.over()
		d.mu.Unlock()
		if over || (closed && len(frames) == 0) {
			return false
		}
		if len(frames) == 0 {
			return true
		}
	}
}
