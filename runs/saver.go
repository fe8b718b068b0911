package runs

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/docstream/docstream/store"
)

// saver writes the runs' turns and conversations to the store from a
// goroutine of its own, so that a run's events never wait behind the store.
// Pending saves of a run fold into one, and are written in batches, urgent
// ones first.
type saver struct {
	g *Registry

	mu            sync.Mutex
	cond          sync.Cond         // broadcast when saves are asked for or written
	pending       map[*Run]saveWant // what each waiting run wants written
	urgent, later []*Run            // the waiting runs in order; a run may stand twice
	busy          map[*Run]saveWant // being written, outside mu
	closed        bool
	closing       chan struct{} // closed by close
	stopped       chan struct{}
}

// saveWant is what a run wants written.
type saveWant uint8

const (
	saveTurn         saveWant = 1 << iota // the turn, with the response as it is now
	saveConversation                      // the conversation row
	saveUrgent                            // before the snapshots of running turns
)

const (
	saveBatch = 256                    // the most runs written together
	saveLater = 16                     // the most snapshots of running turns among them
	retryGap  = 500 * time.Millisecond // before what the store refused is tried again
	storeWait = time.Second            // the longest a run waits for its urgent writes
)

// batcher is a store that takes several writes in one transaction.
type batcher interface {
	PutBatch(ctx context.Context, convs []store.Conversation, turns []store.Turn) error
}

// newSaver starts a saver for g's store.
func newSaver(g *Registry) *saver {
	s := &saver{g: g, pending: map[*Run]saveWant{}, busy: map[*Run]saveWant{},
		closing: make(chan struct{}), stopped: make(chan struct{})}
	s.cond.L = &s.mu
	go s.loop()
	return s
}

// save asks for r to be written, at once when the saver is closed.
func (s *saver) save(r *Run, want saveWant) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.await(r, saveTurn|saveConversation, storeWait) // a write of r under way
		s.g.writeSaves([]saveJob{{r, want}})
		return
	}
	s.enqueue(r, want)
	s.cond.Broadcast()
	s.mu.Unlock()
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

// await makes r's pending writes urgent and waits at most limit for them to
// be written (not necessarily taken by the store). A nil saver has none.
func (s *saver) await(r *Run, what saveWant, limit time.Duration) bool {
	if s == nil {
		return true
	}
	deadline := time.Now().Add(limit)
	t := time.AfterFunc(limit, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer t.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if want := s.pending[r]; want&what != 0 && want&saveUrgent == 0 {
		s.enqueue(r, saveUrgent)
		s.cond.Broadcast()
	}
	for s.pending[r]&what != 0 || s.busy[r]&what != 0 {
		if !time.Now().Before(deadline) {
			return false
		}
		s.cond.Wait()
	}
	return true
}

// saveJob is one run's writes.
type saveJob struct {
	r    *Run
	want saveWant
}

// take takes the next runs to write, urgent ones first; s.mu is held.
func (s *saver) take(jobs []saveJob) []saveJob {
	for i, q := range []*[]*Run{&s.urgent, &s.later} {
		limit := saveBatch
		if i == 1 {
			limit = min(saveBatch, len(jobs)+saveLater)
		}
		for len(*q) > 0 && len(jobs) < limit {
			r := (*q)[0]
			(*q)[0] = nil
			*q = (*q)[1:]
			if want, ok := s.pending[r]; ok {
				delete(s.pending, r)
				s.busy[r] = want
				jobs = append(jobs, saveJob{r, want})
			}
		}
		if cap(*q) > 64 && len(*q) == 0 {
			*q = nil // a burst's queue is not kept
		}
	}
	return jobs
}

// loop writes what the runs ask for until the saver is closed and nothing
// is pending.
func (s *saver) loop() {
	defer close(s.stopped)
	var jobs []saveJob
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		jobs = s.take(jobs[:0])
		if len(jobs) == 0 {
			if s.closed {
				return
			}
			s.cond.Wait()
			continue
		}
		s.mu.Unlock()
		refused := s.g.writeSaves(jobs)
		s.mu.Lock()
		for _, j := range jobs {
			delete(s.busy, j.r)
		}
		clear(jobs)
		s.cond.Broadcast()
		if len(refused) == 0 || s.closed {
			continue
		}
		for r, want := range refused {
			s.enqueue(r, want)
		}
		s.mu.Unlock()
		select {
		case <-time.After(retryGap):
		case <-s.closing:
		}
		s.mu.Lock()
	}
}

// close writes what is pending and stops the saver, waiting until ctx's
// deadline but at least 5 s; saves asked for after it are written by the
// caller. A nil saver has nothing to close.
func (s *saver) close(ctx context.Context) {
	if s == nil {
		return
	}
	wait := 5 * time.Second
	if d, ok := ctx.Deadline(); ok && ctx.Err() == nil && time.Until(d) > wait {
		wait = time.Until(d) // a drain cut short (a second signal) does not wait for it
	}
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closing)
		s.cond.Broadcast()
	}
	s.mu.Unlock()
	select {
	case <-s.stopped:
	case <-time.After(wait):
		s.g.log.Error().Dur("waited", wait).Msg("the store did not take the pending saves during the shutdown")
	}
}

// writeSaves writes the jobs and returns what the store refused.
func (g *Registry) writeSaves(jobs []saveJob) (refused map[*Run]saveWant) {
	var convs []store.Conversation
	var turns []store.Turn
	var finals []*Run // the runs whose final response is among turns
	for _, j := range jobs {
		if conv := j.r.ConversationID(); conv != "" && j.want&saveConversation != 0 {
			s := j.r.Spec
			convs = append(convs, store.Conversation{ID: conv, SessionID: conv, Backend: s.Backend,
				Workspace: s.WorkspaceName, Model: s.Model, Owner: s.Owner})
		}
		if j.want&saveTurn == 0 {
			continue
		}
		if t, final, ok := g.turnOf(j.r); ok {
			turns = append(turns, t)
			if final {
				finals = append(finals, j.r)
			}
		}
	}
	if len(convs)+len(turns) == 0 {
		return nil
	}
	err := g.put(convs, turns)
	g.StoreWrote(err)
	if err != nil {
		g.log.Warn().Err(err).Int("turns", len(turns)).Int("conversations", len(convs)).Msg("saving responses")
		refused = map[*Run]saveWant{}
		for _, j := range jobs {
			refused[j.r] |= j.want &^ saveUrgent
		}
		return refused
	}
	for _, r := range finals {
		r.markSaved()
	}
	return nil
}

// put writes the conversations, then the turns, in one transaction when
// the store takes batches.
func (g *Registry) put(convs []store.Conversation, turns []store.Turn) error {
	ctx := context.Background()
	if b, ok := g.store.(batcher); ok && len(convs)+len(turns) > 1 {
		return b.PutBatch(ctx, convs, turns)
	}
	var errs []error
	for _, c := range convs {
		errs = append(errs, g.store.PutConversation(ctx, c))
	}
	for _, t := range turns {
		errs = append(errs, g.store.PutTurn(ctx, t))
	}
	return errors.Join(errs...)
}
