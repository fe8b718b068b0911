package gateway

import (
	"sync"
	"time"
)

// saver writes the runs' turns and conversations to the store from a
// goroutine of its own, so that a run's events never wait behind the store:
// a run asks for a save and goes on, and the saver writes the run as it is
// when its turn comes. Saves of one run that a busy store has not reached
// yet fold into one. A run's conversation row and its final turn go before
// the snapshots of running turns.
type saver struct {
	g *Registry

	mu   sync.Mutex
	cond sync.Cond // broadcast when a run's save is written
	// pending is what each run waiting for the saver wants written; urgent
	// and later are those runs in the order they asked, urgent first. A run
	// may stand in a queue more than once (it asked again, or its save was
	// made urgent); it is written when first reached and passed over after.
	pending       map[*Run]saveWant
	urgent, later []*Run
	busy          *Run // being written, outside mu
	busyWant      saveWant
	closed        bool
	wake          chan struct{}
	stopped       chan struct{}
}

// saveWant is what a run wants written.
type saveWant uint8

const (
	saveTurn         saveWant = 1 << iota // the turn, with the response as it is now
	saveConversation                      // the conversation row
	saveUrgent                            // before the snapshots of running turns
)

// newSaver starts a saver for g's store.
func newSaver(g *Registry) *saver {
	s := &saver{g: g, pending: map[*Run]saveWant{}, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	s.cond.L = &s.mu
	go s.loop()
	return s
}

// save asks for r to be written. Once the saver is closed it is written
// here and now.
func (s *saver) save(r *Run, want saveWant) {
	s.mu.Lock()
	if s.closed {
		for s.busy == r {
			s.cond.Wait()
		}
		s.mu.Unlock()
		s.write(r, want)
		return
	}
	s.enqueue(r, want)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// enqueue adds want to r's pending save; s.mu is held.
func (s *saver) enqueue(r *Run, want saveWant) {
	old, ok := s.pending[r]
	s.pending[r] = old | want
	switch {
	case want&saveUrgent != 0 && old&saveUrgent == 0:
		s.urgent = append(s.urgent, r)
	case !ok:
		s.later = append(s.later, r)
	}
}

// flush makes r's pending save urgent and waits until it is written.
func (s *saver) flush(r *Run) { s.await(r, saveTurn|saveConversation) }

// await waits until what r wants of what is written, if anything, is
// written, making its pending save urgent.
func (s *saver) await(r *Run, what saveWant) {
	s.mu.Lock()
	if want := s.pending[r]; want&what != 0 && want&saveUrgent == 0 {
		s.enqueue(r, saveUrgent)
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	for s.pending[r]&what != 0 || (s.busy == r && s.busyWant&what != 0) {
		s.cond.Wait()
	}
	s.mu.Unlock()
}

// next takes the next run to write; s.mu is held.
func (s *saver) next() (*Run, saveWant) {
	for _, q := range []*[]*Run{&s.urgent, &s.later} {
		for len(*q) > 0 {
			r := (*q)[0]
			(*q)[0] = nil
			*q = (*q)[1:]
			if want, ok := s.pending[r]; ok {
				delete(s.pending, r)
				return r, want
			}
		}
		if cap(*q) > 64 && len(*q) == 0 {
			*q = nil // a burst's queue is not kept
		}
	}
	return nil, 0
}

func (s *saver) loop() {
	defer close(s.stopped)
	s.mu.Lock()
	for {
		r, want := s.next()
		if r == nil {
			if s.closed {
				s.mu.Unlock()
				return
			}
			s.mu.Unlock()
			<-s.wake
			s.mu.Lock()
			continue
		}
		s.busy, s.busyWant = r, want
		s.mu.Unlock()
		s.write(r, want)
		s.mu.Lock()
		s.busy = nil
		s.cond.Broadcast()
	}
}

// write writes what r wants: its conversation row first, so that a turn
// never names a conversation the store does not have yet.
func (s *saver) write(r *Run, want saveWant) {
	g := s.g
	if want&saveConversation != 0 {
		g.saveConversation(r)
	}
	if want&saveTurn == 0 {
		return
	}
	r.mu.Lock()
	released := r.finished && r.final == nil
	r.mu.Unlock()
	if released {
		return // its final turn is written already
	}
	ok := g.saveTurn(r, r.Response())
	r.mu.Lock()
	r.turnSaved = ok
	r.mu.Unlock()
}

// close writes what is pending and stops the saver, waiting at most wait;
// saves asked for after it are written by the caller.
func (s *saver) close(wait time.Duration) bool {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	select {
	case <-s.stopped:
		return true
	case <-time.After(wait):
		return false
	}
}
