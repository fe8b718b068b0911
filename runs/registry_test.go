package runs

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/docstream/docstream/metrics"
	"github.com/docstream/docstream/store"

	"github.com/go-json-experiment/json"
	"github.com/rs/zerolog"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/translate"
)

// blockingBackend runs until its run is cancelled.
type blockingBackend struct{}

func (blockingBackend) Run(ctx context.Context, _ *Spec, _ *translate.Segmenter) translate.End {
	<-ctx.Done()
	r, msg, _ := StopCause(ctx)
	return translate.End{Reason: r, Message: msg}
}

// TestAdmitCountsARunOnce checks that a run holding a slot while it waits
// for a spawn token is not also counted as queued: slots plus queue places
// are admitted, and one more is refused.
func TestAdmitCountsARunOnce(t *testing.T) {
	limits := Limits{MaxConcurrentRuns: 2, QueueSize: 3, QueueTimeout: time.Minute, SpawnPerSecond: 0.01}
	g := NewRegistry(Config{KeepFinished: time.Minute}, limits, Deps{Backends: map[string]Backend{"cli": blockingBackend{}}, Store: nil, Metrics: metrics.New(), Log: zerolog.Nop()})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		g.Shutdown(ctx)
	}()
	start := func() error {
		r, err := g.Prepare(&Spec{ResponseID: NewResponseID(), Backend: "cli", Mode: "agent", Model: "auto"})
		if err == nil {
			r.Launch()
		}
		return err
	}
	// The spawn rate allows one run now: the first runs, the second holds
	// the other slot until a token comes, the next three wait for a slot.
	for i := 1; i <= 2; i++ {
		if err := start(); err != nil {
			t.Fatalf("run %d refused: %v", i, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(g.slots) < 2 || g.queued.Load() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the two runs never held both slots (%d held, %d queued)", len(g.slots), g.queued.Load())
		}
		time.Sleep(time.Millisecond)
	}
	for i := 3; i <= 5; i++ {
		if err := start(); err != nil {
			t.Fatalf("run %d refused with 2 slots and a queue of 3: %v", i, err)
		}
	}
	if err := start(); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("run 6: %v, want overloaded", err)
	}
}

// textBackend writes its run's prompt as the answer and completes.
type textBackend struct{}

func (textBackend) Run(_ context.Context, spec *Spec, seg *translate.Segmenter) translate.End {
	seg.Snapshot(spec.Prompt)
	seg.EndSegment()
	seg.Complete(1)
	return translate.End{}
}

// runToEnd starts a run of prompt and waits for its end, attached while it
// runs; detach lets it go.
func runToEnd(t *testing.T, g *Registry, prompt string) (r *Run, resp documents.ChatResponse, detach func()) {
	t.Helper()
	r, err := g.Prepare(&Spec{ResponseID: NewResponseID(), Backend: "cli", Mode: "agent", Model: "auto", Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	detach = r.Attach()
	r.Launch()
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not end")
	}
	return r, r.Response(), detach
}

// TestFinishedRunReleasesResponse checks that a finished run stops holding
// its response once the store has it and no client is attached, and still
// answers with the same response, read from the store.
func TestFinishedRunReleasesResponse(t *testing.T) {
	for _, withStore := range []bool{true, false} {
		var st store.Store
		if withStore {
			st = store.NewMemoryStore()
		}
		g := NewRegistry(Config{KeepFinished: time.Minute}, Limits{MaxConcurrentRuns: 2, QueueSize: 2}, Deps{Backends: map[string]Backend{"cli": textBackend{}}, Store: st, Metrics: metrics.New(), Log: zerolog.Nop()})
		r, before, detach := runToEnd(t, g, strings.Repeat("all work and no play ", 100))
		if before.Status != documents.StatusCompleted || len(before.Documents) != 1 {
			t.Fatalf("the run's response: %+v", before)
		}
		if r.Released() {
			t.Fatalf("released while a client is attached")
		}
		detach()
		if r.Released() != withStore {
			t.Fatalf("with a store %v: released %v after the last client left", withStore, r.Released())
		}
		after := r.Response()
		b1, _ := json.Marshal(before)
		b2, _ := json.Marshal(after)
		if string(b1) != string(b2) {
			t.Errorf("with a store %v, the response changed once released:\n%s\n%s", withStore, b1, b2)
		}
	}
}

// TestFinishedRunsWithinBytes checks that the finished runs kept for
// re-attaching hold no more than runs.keep_finished_bytes together (their
// logs, prompts and what each run holds besides),
// letting go of those that finished first, and that keep_finished lets go
// of the rest.
func TestFinishedRunsWithinBytes(t *testing.T) {
	g := NewRegistry(Config{KeepFinished: 2 * time.Second, KeepFinishedBytes: 50000}, Limits{MaxConcurrentRuns: 2, QueueSize: 2}, Deps{Backends: map[string]Backend{"cli": textBackend{}}, Store: store.NewMemoryStore(), Metrics: metrics.New(), Log: zerolog.Nop()})
	var runs []*Run
	for range 5 {
		r, _, detach := runToEnd(t, g, strings.Repeat("x", 2000))
		detach()
		runs = append(runs, r)
		// done goes out before the run's goroutine hands it to keep.
		deadline := time.Now().Add(10 * time.Second)
		for {
			g.mu.Lock()
			kept := r.keptBytes > 0 || g.runs[r.ID] != r
			g.mu.Unlock()
			if kept {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a finished run was not kept")
			}
			time.Sleep(time.Millisecond)
		}
		g.mu.Lock()
		n := g.keptBytes
		g.mu.Unlock()
		if n > 50000 {
			t.Fatalf("finished runs hold %d bytes, more than 50000", n)
		}
	}
	if g.Get(runs[0].ID) != nil || g.Get(runs[4].ID) == nil {
		t.Errorf("the registry holds the first run %v and the last %v; want the last only", g.Get(runs[0].ID) != nil, g.Get(runs[4].ID) != nil)
	}
	// What the registry let go of is garbage, although keep_finished has
	// not passed for it (its timer held it, with its whole log).
	// The run's own goroutine may not have returned yet on a loaded
	// machine: a while is given, well within keep_finished.
	dropped := weak.Make(runs[0])
	runs[0] = nil
	for i := 0; i < 50 && dropped.Value() != nil; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if dropped.Value() != nil {
		t.Errorf("a run let go of for keep_finished_bytes is still reachable")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		g.mu.Lock()
		n, k, m := g.keptBytes, len(g.kept), len(g.runs)
		g.mu.Unlock()
		if n == 0 && k == 0 && m == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after keep_finished: %d bytes, %d kept, %d runs", n, k, m)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEndedOnceDoneIsLogged checks that a run whose done event a reader of
// its log can see is ended, before its Done channel closes.
func TestEndedOnceDoneIsLogged(t *testing.T) {
	limits := Limits{MaxConcurrentRuns: 1, QueueSize: 1, QueueTimeout: time.Minute}
	g := NewRegistry(Config{KeepFinished: time.Minute}, limits, Deps{Backends: map[string]Backend{"cli": linesBackend{}}, Metrics: metrics.New(), Log: zerolog.Nop()})
	defer g.Shutdown(context.Background())
	r, err := g.Prepare(&Spec{ResponseID: NewResponseID(), Prompt: "2", Backend: "cli", Mode: "agent", Model: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	logged, hold := make(chan struct{}), make(chan struct{})
	r.Observe(func(ev documents.Event) {
		if _, ok := ev.(documents.Done); ok {
			close(logged)
			<-hold // the run's step stops here, between the log and its finish
		}
	})
	r.Launch()
	<-logged
	if !r.Ended() {
		t.Error("a run whose done event is in its log is not ended")
	}
	select {
	case <-r.Done():
		t.Error("Done closed before the run's finish")
	default:
	}
	close(hold)
	<-r.Done()
}
