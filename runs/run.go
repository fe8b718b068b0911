package runs

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
)

// Run is one agent run, owned by the registry rather than by a request.
type Run struct {
	ID      string
	Spec    *Spec
	Log     *Log
	started time.Time

	reg      *Registry
	cancel   context.CancelCauseFunc
	done     chan struct{}
	mu       sync.Mutex
	builder  documents.Builder
	subs     int
	grace    *time.Timer
	conv     string
	docs     int // the documents started, counted by step
	lastSave time.Time
	finished bool
	saved    bool   // the store holds the final response
	released bool   // only the store holds it: the builder is let go of
	launch   func() // starts the run, once
	kill     func() // closes Spec.Killed, once: the agent is killed without the SIGTERM grace
	observe  []func(documents.Event)

	redacting redacting   // used by emit only
	keptBytes int         // counted in keep_finished_bytes while kept; g.mu's
	keepTimer *time.Timer // lets go of the run after keep_finished; g.mu's
}

// Observe has fn called with every event of the run once it is logged. It
// must be called before Launch.
func (r *Run) Observe(fn func(documents.Event)) {
	r.observe = append(r.observe, fn)
}

// Done is closed once the run has finished, after its done event is logged.
func (r *Run) Done() <-chan struct{} { return r.done }

// ConversationID returns the run's conversation id, once known.
func (r *Run) ConversationID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conv
}

// Response returns the response so far, or the finished one.
func (r *Run) Response() documents.ChatResponse {
	r.mu.Lock()
	if r.released {
		r.mu.Unlock()
		return r.stored()
	}
	defer r.mu.Unlock()
	resp := r.builder.Response()
	fillResponse(&resp, r.Spec)
	return resp
}

// Ended reports whether the run's done event is folded into its response,
// which it is before any reader of the log can see it.
func (r *Run) Ended() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.released || r.builder.Done()
}

// Released reports whether only the store holds the finished response.
func (r *Run) Released() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.released
}

// release lets go of the finished response once the store holds it and no
// client is attached; r.mu is held.
func (r *Run) release() {
	if r.finished && r.saved && r.subs == 0 {
		r.released = true
		r.builder = documents.Builder{}
	}
}

// markSaved records that the store holds the final response.
func (r *Run) markSaved() {
	r.mu.Lock()
	r.saved = true
	r.release()
	r.mu.Unlock()
}

// stored reads the finished response from the store.
func (r *Run) stored() documents.ChatResponse {
	var resp documents.ChatResponse
	t, err := r.reg.store.Turn(context.Background(), r.ID)
	if err == nil {
		err = json.Unmarshal(t.Response, &resp)
	}
	if err != nil {
		r.reg.log.Warn().Err(err).Str("response_id", r.ID).Msg("reading a finished response from the store")
		resp = documents.ChatResponse{Status: documents.StatusError}
		fillResponse(&resp, r.Spec)
	}
	return resp
}

// fillResponse sets the fields a response has before its events say them.
func fillResponse(resp *documents.ChatResponse, spec *Spec) {
	resp.ID = cmp.Or(resp.ID, spec.ResponseID)
	resp.Model = cmp.Or(resp.Model, spec.Model, "auto")
	resp.Mode = cmp.Or(resp.Mode, spec.Mode, "agent")
	resp.Created = cmp.Or(resp.Created, spec.Created)
	if resp.Documents == nil {
		resp.Documents = []documents.Document{}
	}
}

// Cancel ends the run: its documents so far stay, an error document and
// done follow. kill skips the SIGTERM grace.
func (r *Run) Cancel(kill bool) {
	r.cancel(&Stop{Reason: documents.StopCancelled, Msg: "the run was cancelled", Kill: kill})
	if kill {
		r.kill()
	}
}

// Attach registers a subscriber and returns its detach. A running run left by
// its last subscriber is cancelled after the detach grace.
func (r *Run) Attach() (detach func()) {
	r.mu.Lock()
	r.subs++
	if r.grace != nil {
		r.grace.Stop()
	}
	r.mu.Unlock()
	r.reg.metrics.Subscribers.Inc()
	return sync.OnceFunc(func() {
		r.reg.metrics.Subscribers.Dec()
		r.mu.Lock()
		defer r.mu.Unlock()
		r.subs--
		if r.subs > 0 {
			return
		}
		if r.finished {
			r.release()
			return
		}
		stop := &Stop{Reason: documents.StopCancelled, Msg: "the client disconnected and did not come back within the detach grace"}
		g := r.reg.cfg.DetachGrace
		if g <= 0 {
			r.cancel(stop)
			return
		}
		r.grace = time.AfterFunc(g, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.subs == 0 {
				r.cancel(stop)
			}
		})
	})
}

// Launch starts a prepared run; later calls do nothing.
func (r *Run) Launch() { r.launch() }

// openSnapshotEvery is how often a response is saved while a document is open.
const openSnapshotEvery = 5 * time.Second

// emit passes the run's events, with secrets masked, through its steps.
func (r *Run) emit(ev documents.Event) {
	r.redacting.each(ev, r.step)
}

// step passes one event through the run's steps.
func (r *Run) step(ev documents.Event) {
	want := r.fold(ev)
	r.count(ev)
	r.save(ev, want)
	r.Log.Append(ev)
	for _, fn := range r.observe {
		fn(ev)
	}
	if d, ok := ev.(documents.Done); ok {
		r.finish(d)
	}
}

// count records a document's start in the metrics.
func (r *Run) count(ev documents.Event) {
	if e, ok := ev.(documents.DocumentStart); ok {
		r.docs++
		if r.docs == 1 {
			r.reg.metrics.FirstDocument.Observe(time.Since(r.started).Seconds())
		}
		r.reg.metrics.Documents.WithLabelValues(string(e.Type)).Inc()
	}
}

// fold adds ev to the response and says what the store needs before ev goes out.
func (r *Run) fold(ev documents.Event) saveWant {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.builder.Add(ev)
	var want saveWant
	switch e := ev.(type) {
	case documents.ResponseStart:
		// The store has the turn and its conversation before any event
		// goes out: a client may use the conversation id at once.
		want = saveTurn | saveUrgent
		if e.ConversationID != nil {
			r.conv = *e.ConversationID
			want |= saveConversation
		}
		r.lastSave = time.Now()
	case documents.Done:
		// The store has the final response before done goes out.
		want = saveTurn | saveUrgent
	case documents.DocumentEnd:
		if time.Since(r.lastSave) > time.Second {
			r.lastSave = time.Now()
			want = saveTurn
		}
	case documents.ContentDelta:
		// A long document is saved while it grows, for a crash to keep it.
		if now := time.Now(); now.Sub(r.lastSave) > openSnapshotEvery && now.Sub(r.started) > openSnapshotEvery {
			r.lastSave = now
			want = saveTurn
		}
	}
	return want
}

// save has the store take what want asks for, urgent writes before ev goes out.
func (r *Run) save(ev documents.Event, want saveWant) {
	g := r.reg
	if want == 0 {
		return
	}
	if want&saveConversation != 0 {
		g.claimTurn(r)
	}
	g.save(r, want)
	if want&saveUrgent != 0 && !g.saver.await(r, want&^saveUrgent, storeWait) {
		g.log.Warn().Str("response_id", r.ID).Dur("waited", storeWait).
			Msg("the store has not taken the run's writes; the run goes on without them")
	}
	if _, done := ev.(documents.Done); done {
		g.endTurn(r)
	}
}

// finish records the final response once done went out.
func (r *Run) finish(d documents.Done) {
	g := r.reg
	r.mu.Lock()
	r.finished = true
	if r.grace != nil {
		r.grace.Stop()
	}
	r.release()
	r.mu.Unlock()
	r.Log.Close()
	outcome := "completed"
	if d.Status != documents.StatusCompleted {
		outcome = cmp.Or(string(d.Metadata.StopReason), "error")
	}
	g.metrics.Runs.WithLabelValues(outcome, g.metrics.ModelLabel(r.Spec.Model)).Inc()
	g.metrics.RunDuration.Observe(time.Since(r.started).Seconds())
	if d.Usage.Reported {
		g.metrics.CountTokens("prompt", r.Spec.Model, d.Usage.PromptTokens)
		g.metrics.CountTokens("completion", r.Spec.Model, d.Usage.CompletionTokens)
		g.metrics.CountTokens("cache_read", r.Spec.Model, d.Usage.CacheReadTokens)
		g.metrics.CountTokens("cache_write", r.Spec.Model, d.Usage.CacheWriteTokens)
	}
	close(r.done)
	g.log.Info().Str("response_id", r.ID).Str("status", string(d.Status)).Str("outcome", outcome).
		Int("documents", r.docs).Dur("duration", time.Since(r.started)).Msg("run finished")
}
