package gateway

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/docstream/docstream/translate"
)

// blockingBackend runs until its run is cancelled.
type blockingBackend struct{}

func (blockingBackend) Run(ctx context.Context, _ *RunSpec, _ *translate.Segmenter) translate.End {
	<-ctx.Done()
	r, msg, _ := stopCause(ctx)
	return translate.End{Reason: r, Message: msg}
}

// TestAdmitCountsARunOnce checks that a run holding a slot while it waits
// for a spawn token is not also counted as queued: slots plus queue places
// are admitted, and one more is refused.
func TestAdmitCountsARunOnce(t *testing.T) {
	limits := LimitsConfig{MaxConcurrentRuns: 2, QueueSize: 3, QueueTimeout: time.Minute, SpawnPerSecond: 0.01}
	g := NewRegistry(RunsConfig{KeepFinished: time.Minute}, limits, map[string]Backend{"cli": blockingBackend{}}, nil, NewMetrics(), zerolog.Nop())
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		g.Shutdown(ctx)
	}()
	start := func() error {
		r, err := g.Prepare(&RunSpec{ResponseID: NewResponseID(), Backend: "cli", Mode: "agent", Model: "auto"})
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
	if err := start(); !errors.Is(err, errOverloaded) {
		t.Fatalf("run 6: %v, want overloaded", err)
	}
}
