package gateway

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/docstream/docstream/sse"
)

// connKey is the request context key of the client's connection.
type connKey struct{}

// withConn records the connection in its requests' context (an
// http.Server's ConnContext).
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// sendRoom says whether a write of n bytes to a connection is queued by the
// kernel at once, without blocking, and counts it.
type sendRoom interface {
	take(n int) bool
}

// directSink lets a run's goroutine write the frames it appends to a stream
// that has caught up, instead of waking the stream's goroutine for each: a
// stream costs one goroutine switch less per event. It writes only what the
// connection's send buffer takes without blocking, so that a slow client
// never holds up the run; everything else is written by the stream's own
// goroutine, which Kick wakes.
type directSink struct {
	st   *streamer
	room sendRoom
	kick chan struct{}

	// mu is held while the response is written, by either goroutine.
	mu    sync.Mutex
	last  int   // the id of the last frame written
	err   error // the first write error: the stream is over
	ended bool  // the handler is done with the response
}

// Deliver writes f if it is the next frame, nobody is writing, and the
// connection takes it without blocking.
func (d *directSink) Deliver(f sse.Frame) bool {
	if !d.mu.TryLock() {
		return false
	}
	defer d.mu.Unlock()
	if d.ended || d.err != nil || f.ID != d.last+1 || !d.room.take(frameSize(f)) {
		return false
	}
	d.st.deadline()
	if _, err := f.WriteTo(d.st.w); err != nil {
		d.err = err
		return false
	}
	d.last = f.ID
	if err := d.st.rc.Flush(); err != nil {
		d.err = err
		return false
	}
	d.st.s.metrics.DirectFrames.Inc()
	return true
}

// Kick wakes the stream's goroutine.
func (d *directSink) Kick() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// frameSize is about what f takes on the wire, with its chunk framing.
func frameSize(f sse.Frame) int { return len(f.Data) + len(f.Name) + 64 }

// followDirect is follow for an SSE stream of a run's frames when the
// connection's send room can be known: the stream becomes its run's log's
// sink. It reports false, having sent nothing, when it cannot be used.
func (st *streamer) followDirect(ctx context.Context, run *Run, after int, beat string) bool {
	if st.conn == nil {
		return false
	}
	room := newSendRoom(st.conn)
	if room == nil {
		return false
	}
	d := &directSink{st: st, room: room, kick: make(chan struct{}, 1), last: max(after, 0)}
	if !run.Log.SetSink(d) {
		return false // another stream of this run has it
	}
	defer func() {
		run.Log.SetSink(nil)
		d.mu.Lock()
		d.ended = true
		d.mu.Unlock()
	}()
	ticker := time.NewTicker(st.s.heartbeat())
	defer ticker.Stop()
	for {
		d.mu.Lock()
		frames, closed, _ := run.Log.Read(d.last)
		if len(frames) > 0 && d.err == nil {
			st.deadline()
			for _, f := range frames {
				if _, d.err = f.WriteTo(st.w); d.err != nil {
					break
				}
				d.last = f.ID
			}
			if d.err == nil {
				d.err = st.rc.Flush()
			}
		}
		err := d.err
		d.mu.Unlock()
		if err != nil || (closed && len(frames) == 0) {
			return true
		}
		if len(frames) > 0 {
			continue
		}
		select {
		case <-d.kick:
		case <-ticker.C:
			d.mu.Lock()
			st.deadline()
			if d.err = sse.WriteComment(st.w, beat); d.err == nil {
				d.err = st.rc.Flush()
			}
			d.mu.Unlock()
		case <-ctx.Done():
			return true
		}
	}
}
