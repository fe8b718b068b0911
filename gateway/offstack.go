package gateway

import (
	"slices"
	"sync"
	"time"
)

// offStack runs f on another goroutine and waits for it, raising a panic
// of f again on the caller's goroutine.
//
// A stream's handler goroutine is parked for as long as the stream is
// open, and the runtime never gives back the stack one deep call grew it
// to: it shrinks a stack only when less than a quarter of it is in use,
// and a parked handler uses more than a quarter of 8 KB (net/http's own
// frames are 1.3 KB). Decoding the body, writing the response headers or a
// batch of frames through net/http once would make every open stream hold
// 8 KB of stack instead of 4. Done here, such work grows a stack that is
// not the handler's.
//
// The goroutines that run f wait a while for the next call (see
// stackWorkers), so that a call seldom pays for a new goroutine and for
// growing its stack again, which with a cold cache cost more than most of
// the work done here.
func offStack(f func()) {
	t := stackTask{f: f, done: make(chan any, 1)}
	t.start()
	if p := <-t.done; p != nil {
		panic(p)
	}
}

// goWarm runs f on one of offStack's goroutines without waiting for it:
// one that waits for a call, whose stack has grown already, when there is
// one. A run's goroutine started this way does not grow a new stack step
// by step for each run. A panic of f ends the program, as on any goroutine.
func goWarm(f func()) { stackTask{f: f}.start() }

// start hands t to a waiting worker, or to a new one.
func (t stackTask) start() {
	if w := stackIdle.pop(); w != nil {
		w.tasks <- t
	} else {
		go (&stackWorker{tasks: make(chan stackTask, 1)}).run(t)
	}
}

// stackTask is one offStack or goWarm call.
type stackTask struct {
	f    func()
	done chan any // receives f's panic, or nil; nil for goWarm
}

// stackWorker is a goroutine that runs offStack calls.
type stackWorker struct {
	tasks chan stackTask // a call handed to it while it waits; room for one
}

// stackWorkers are the stackWorkers waiting for a call. The one that
// waited least is handed the next (its stack is the likeliest to be in
// the cache); the others wait stackLinger at most, so that after a burst
// of calls no more goroutines wait than the calls need.
type stackWorkers struct {
	mu   sync.Mutex
	idle []*stackWorker
}

var stackIdle stackWorkers

// maxStackIdle is how many stackWorkers may wait at once, and stackLinger
// how long one waits.
const (
	maxStackIdle = 16
	stackLinger  = 5 * time.Second
)

// pop takes the worker that waited least, or returns nil.
func (ws *stackWorkers) pop() *stackWorker {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	n := len(ws.idle)
	if n == 0 {
		return nil
	}
	w := ws.idle[n-1]
	ws.idle[n-1] = nil
	ws.idle = ws.idle[:n-1]
	return w
}

// push adds w to the waiting workers, unless maxStackIdle wait already.
func (ws *stackWorkers) push(w *stackWorker) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.idle) >= maxStackIdle {
		return false
	}
	ws.idle = append(ws.idle, w)
	return true
}

// remove takes w out of the waiting workers, reporting false when a call
// has taken it first (and is handed to it).
func (ws *stackWorkers) remove(w *stackWorker) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for i, x := range ws.idle {
		if x == w {
			ws.idle = slices.Delete(ws.idle, i, i+1)
			return true
		}
	}
	return false
}

// run runs t, then the calls handed to it while it waits, until it has
// waited stackLinger, maxStackIdle others wait, or a call panics.
func (w *stackWorker) run(t stackTask) {
	var linger *time.Timer
	for runTask(t) && stackIdle.push(w) {
		if linger == nil {
			linger = time.NewTimer(stackLinger)
		} else {
			linger.Reset(stackLinger)
		}
		select {
		case t = <-w.tasks:
		case <-linger.C:
			if stackIdle.remove(w) {
				return
			}
			t = <-w.tasks
		}
	}
}

// runTask runs t.f and sends its panic, or nil, on t.done; it reports
// whether f returned. Without t.done a panic goes on as it is.
func runTask(t stackTask) (ok bool) {
	if t.done == nil {
		t.f()
		return true
	}
	defer func() {
		if !ok {
			t.done <- recover()
		}
	}()
	t.f()
	t.done <- nil
	return true
}
