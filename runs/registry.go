package runs

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/metrics"
	"github.com/docstream/docstream/store"
	"github.com/docstream/docstream/translate"
)

// Registry owns the runs: it admits, queues, starts, tracks and ends them.
type Registry struct {
	cfg      Config
	limits   Limits
	backends map[string]Backend
	store    store.Store
	metrics  *metrics.Metrics
	log      zerolog.Logger

	mu        sync.Mutex
	runs      map[string]*Run
	kept      []*Run          // finished runs held for re-attaching, oldest first
	keptBytes int             // the size of kept
	turns     map[string]*Run // running turns by conversation id
	slots     chan struct{}
	queued    atomic.Int64
	spawn     *rate.Limiter
	wg        sync.WaitGroup
	baseCtx   context.Context
	stopAll   context.CancelCauseFunc
	closing   atomic.Bool
	maxLine   int                   // agent.max_line_bytes
	storeErr  atomic.Pointer[error] // of the last store write
	redactor  *Redactor
	saver     *saver // nil without a store or with the in-memory one
}

// StoreWrote records how a store write went.
func (g *Registry) StoreWrote(err error) {
	if err != nil {
		g.metrics.StoreErrors.Inc()
	}
	g.storeErr.Store(&err)
}

// Closing reports whether the registry has begun to shut down.
func (g *Registry) Closing() bool { return g.closing.Load() }

// StoreError returns the error of the last store write, if it failed.
func (g *Registry) StoreError() error {
	if p := g.storeErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Deps are what a Registry runs with besides its configuration.
type Deps struct {
	Backends map[string]Backend // by the name a Spec gives
	Store    store.Store        // nil: nothing is saved
	Metrics  *metrics.Metrics
	Log      zerolog.Logger
	MaxLine  int       // agent.max_line_bytes
	Redactor *Redactor // masks secrets in everything runs send or store
}

// NewRegistry returns a registry running d.Backends by name.
func NewRegistry(cfg Config, limits Limits, d Deps) *Registry {
	m := d.Metrics
	ctx, cancel := context.WithCancelCause(context.Background())
	sp := rate.Inf
	if limits.SpawnPerSecond > 0 {
		sp = rate.Limit(limits.SpawnPerSecond)
	}
	// A fifth of a second's worth of spawns may go at once.
	burst := max(int(limits.SpawnPerSecond/5), 1)
	m.RunsLimit.Set(float64(limits.MaxConcurrentRuns))
	g := &Registry{cfg: cfg, limits: limits, backends: d.Backends, store: d.Store, metrics: m, log: d.Log,
		maxLine: d.MaxLine, redactor: d.Redactor,
		runs: map[string]*Run{}, turns: map[string]*Run{}, slots: make(chan struct{}, limits.MaxConcurrentRuns),
		spawn: rate.NewLimiter(sp, burst), baseCtx: ctx, stopAll: cancel}
	// The in-memory store never waits: the runs write it themselves.
	if _, mem := d.Store.(*store.MemoryStore); d.Store != nil && !mem {
		g.saver = newSaver(g)
	}
	return g
}

// save has what r wants written, by the saver or at once.
func (g *Registry) save(r *Run, want saveWant) {
	switch {
	case g.saver != nil:
		g.saver.save(r, want)
	case g.store != nil:
		g.writeSaves([]saveJob{{r, want}})
	}
}

// Admit refuses a new run when the queue is full or the gateway drains.
func (g *Registry) Admit() error {
	if g.closing.Load() {
		return ErrShuttingDown
	}
	if int64(len(g.slots))+g.queued.Load() >= int64(cap(g.slots)+g.limits.QueueSize) {
		g.metrics.Rejected.WithLabelValues("overloaded").Inc()
		return ErrOverloaded
	}
	return nil
}

// Get returns a run the registry still holds.
func (g *Registry) Get(id string) *Run {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runs[id]
}

// Prepare admits and registers a run that Launch then starts, so that a
// stream's headers need not wait for the spawn. Launch must follow.
func (g *Registry) Prepare(spec *Spec) (*Run, error) {
	backend := g.backends[spec.Backend]
	if backend == nil {
		return nil, &UnknownBackendError{Name: spec.Backend}
	}
	// Check, queue place and drain count go together under g.mu.
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.Admit(); err != nil {
		return nil, err
	}
	// Two agents resuming one session at once would both write to it.
	conv := spec.ConversationID
	if running, busy := g.turns[conv]; conv != "" && busy {
		return nil, &BusyError{ID: running.id()}
	}
	ctx, cancel := context.WithCancelCause(g.baseCtx)
	r := &Run{ID: spec.ResponseID, Spec: spec, Log: NewLog(g.cfg.LogMaxEvents, g.cfg.LogMaxBytes), started: time.Now(),
		reg: g, cancel: cancel, done: make(chan struct{}), conv: conv, redacting: redacting{r: g.redactor}}
	killed := make(chan struct{})
	r.kill = sync.OnceFunc(func() { close(killed) })
	r.launch = sync.OnceFunc(func() { go g.execute(ctx, r, backend) })
	spec.Killed = killed
	g.runs[r.ID] = r
	if conv != "" {
		g.turns[conv] = r
	}
	g.queued.Add(1)
	g.metrics.QueueLength.Inc()
	g.wg.Add(1)
	return r, nil
}

// RunningTurn reports whether a turn of the conversation runs, and its id.
func (g *Registry) RunningTurn(conv string) (id string, busy bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, busy := g.turns[conv]
	return r.id(), busy
}

// id returns the run's id; a nil run, which holds a conversation being
// deleted, has none.
func (r *Run) id() string {
	if r == nil {
		return ""
	}
	return r.ID
}

// DeleteConversation has del delete the conversation conv while none of its
// turns runs (else a *BusyError), after the pending store writes of its runs,
// and then lets go of those runs.
func (g *Registry) DeleteConversation(conv string, del func() error) error {
	g.mu.Lock()
	if running, busy := g.turns[conv]; busy {
		g.mu.Unlock()
		return &BusyError{ID: running.id()}
	}
	g.turns[conv] = nil // held until del returns
	var ended []*Run
	for _, r := range g.runs {
		if r.Spec.ConversationID == conv || r.ConversationID() == conv {
			ended = append(ended, r)
		}
	}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.turns, conv) // nothing takes it while it is held
		g.mu.Unlock()
	}()
	return g.deleteRuns(ended, del)
}

// DeleteResponse has del delete the stored response of run id, unless the
// registry holds that run and it has not finished (ErrRunning); then it
// lets go of the run, as DeleteConversation does.
func (g *Registry) DeleteResponse(id string, del func() error) error {
	var held []*Run
	if r := g.Get(id); r != nil {
		select {
		case <-r.Done():
		default:
			return ErrRunning
		}
		held = append(held, r)
	}
	return g.deleteRuns(held, del)
}

// deleteRuns has del delete what the store holds of the runs after their
// pending writes (waiting storeWait at most), so that none writes it back,
// then lets go of them.
func (g *Registry) deleteRuns(runs []*Run, del func() error) error {
	for _, r := range runs {
		g.saver.await(r, saveTurn|saveConversation, storeWait)
	}
	if err := del(); err != nil {
		return err
	}
	g.mu.Lock()
	for _, r := range runs {
		g.letGo(r)
	}
	g.mu.Unlock()
	return nil
}

// claimTurn marks the conversation the agent named for r as running r's turn.
func (g *Registry) claimTurn(r *Run) {
	conv := r.ConversationID()
	g.mu.Lock()
	if _, busy := g.turns[conv]; conv != "" && !busy {
		g.turns[conv] = r
	}
	g.mu.Unlock()
}

// endTurn lets the next turn of the run's conversation start.
func (g *Registry) endTurn(r *Run) {
	conv := r.ConversationID()
	g.mu.Lock()
	for _, c := range []string{r.Spec.ConversationID, conv} {
		if c != "" && g.turns[c] == r {
			delete(g.turns, c)
		}
	}
	g.mu.Unlock()
}

// execute runs r on its backend once it has a slot, then closes its
// documents with how it ended and gives the slot back.
func (g *Registry) execute(ctx context.Context, r *Run, backend Backend) {
	defer g.wg.Done()
	g.save(r, saveTurn) // here, not in Prepare, so that no stream's headers wait for it
	spec := r.Spec
	seg := translate.NewSegmenter(translate.Options{
		ResponseID: spec.ResponseID, ConversationID: spec.ConversationID, Model: spec.Model, Mode: spec.Mode,
		Created: spec.Created, Workspace: spec.Workspace, Thinking: spec.Thinking, IncludeRaw: spec.IncludeRaw,
		MaxLine: g.maxLine, Redact: g.redactor.Tail,
	}, r.emit)
	seg.Start()
	end, ok := g.acquire(ctx)
	if ok {
		g.metrics.RunsInFlight.Inc()
		end = backend.Run(ctx, spec, seg)
		g.metrics.RunsInFlight.Dec()
		<-g.slots
	}
	seg.Close(end)
	st := seg.Stats()
	g.metrics.LinesSkipped.WithLabelValues("not_json").Add(float64(st.NotJSON))
	g.metrics.LinesSkipped.WithLabelValues("unknown_type").Add(float64(st.Unknown))
	g.metrics.LinesSkipped.WithLabelValues("oversize").Add(float64(st.Oversize))
	r.cancel(nil)
	g.keep(r)
}

// keep holds a finished run for re-attaching clients for runs.keep_finished,
// letting the oldest go early past runs.keep_finished_bytes.
func (g *Registry) keep(r *Run) {
	size := r.Log.Size() + len(r.Spec.Prompt) + len(r.Spec.UserPrompt) + runOverhead
	g.mu.Lock()
	r.keptBytes = size
	g.keptBytes += size
	g.kept = append(g.kept, r)
	if limit := g.cfg.KeepFinishedBytes; limit > 0 {
		for g.keptBytes > limit && len(g.kept) > 0 {
			g.letGo(g.kept[0])
		}
	}
	if r.keptBytes > 0 {
		r.keepTimer = time.AfterFunc(g.cfg.KeepFinished, func() {
			g.mu.Lock()
			g.letGo(r)
			g.mu.Unlock()
		})
	}
	g.mu.Unlock()
}

// runOverhead is what a finished run holds besides its log and prompt.
const runOverhead = 16 << 10

// letGo stops holding a finished or finishing run; g.mu is held.
func (g *Registry) letGo(r *Run) {
	if r.keepTimer != nil {
		r.keepTimer.Stop() // its function holds the run
		r.keepTimer = nil
	}
	g.keptBytes -= r.keptBytes
	r.keptBytes = 0
	if g.runs[r.ID] == r {
		delete(g.runs, r.ID)
	}
	for len(g.kept) > 0 && g.kept[0].keptBytes == 0 {
		g.kept[0] = nil
		g.kept = g.kept[1:]
	}
}

// acquire takes the run off the queue into a run slot and waits for the
// spawn rate. When it gives up it returns how the run ended.
func (g *Registry) acquire(ctx context.Context) (translate.End, bool) {
	var timeout <-chan time.Time
	if g.limits.QueueTimeout > 0 {
		timeout = time.After(g.limits.QueueTimeout)
	}
	slot, timedOut := false, false
	select {
	case g.slots <- struct{}{}:
		slot = true
	case <-timeout:
		timedOut = true
	case <-ctx.Done():
	}
	g.queued.Add(-1)
	g.metrics.QueueLength.Dec()
	switch {
	case timedOut:
		return translate.End{Reason: documents.StopTimeout, Source: "gateway",
			Message: fmt.Sprintf("no run slot became free within %s", g.limits.QueueTimeout)}, false
	case slot && g.spawn.Wait(ctx) == nil:
		return translate.End{}, true
	case slot:
		<-g.slots
	}
	r, msg, _ := StopCause(ctx)
	return translate.End{Reason: r, Message: msg}, false
}

// turnOf encodes r's turn as it is now and says whether it is final; ok is
// false when the store has the final one already or it does not encode.
func (g *Registry) turnOf(r *Run) (t store.Turn, final, ok bool) {
	if r.Released() {
		return t, false, false
	}
	resp := r.Response()
	b, err := documents.EncodeResponse(&resp)
	if err != nil {
		g.log.Warn().Err(err).Msg("encoding the response")
		return t, false, false
	}
	conv := ""
	if resp.ConversationID != nil {
		conv = *resp.ConversationID
	}
	return store.Turn{ResponseID: r.ID, ConversationID: conv, Prompt: r.Spec.UserPrompt, Status: string(resp.Status),
		Created: r.started, Response: b, Owner: r.Spec.Owner}, resp.Status != documents.StatusStreaming, true
}

// Shutdown stops admitting runs, lets running ones finish until ctx ends,
// then ends the rest.
func (g *Registry) Shutdown(ctx context.Context) {
	defer g.saver.close(ctx)
	g.mu.Lock() // orders this against Prepare's admission
	g.closing.Store(true)
	g.mu.Unlock()
	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	// The drain is over: agents are killed without a grace.
	g.stopAll(&Stop{Reason: documents.StopShutdown, Msg: "the gateway is shutting down", Kill: true})
	g.mu.Lock()
	for _, r := range g.runs {
		r.kill() // also those a client had cancelled with SIGTERM
	}
	g.mu.Unlock()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		g.log.Error().Msg("runs did not end within 30s of the shutdown")
	}
}
