package runs

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/metrics"
	"github.com/docstream/docstream/store"
)

// brokenStore is a memory store whose writes fail while broken is set.
type brokenStore struct {
	*store.MemoryStore
	broken atomic.Bool
}

var errDiskGone = errors.New("disk I/O error")

func (b *brokenStore) PutTurn(ctx context.Context, t store.Turn) error {
	if b.broken.Load() {
		return errDiskGone
	}
	return b.MemoryStore.PutTurn(ctx, t)
}

func (b *brokenStore) PutConversation(ctx context.Context, c store.Conversation) error {
	if b.broken.Load() {
		return errDiskGone
	}
	return b.MemoryStore.PutConversation(ctx, c)
}

// TestStoreWriteFailures: failed store writes are counted and reported by
// StoreError (which /readyz turns into "degraded"), until a write works
// again; the runs are served all the same.
func TestStoreWriteFailures(t *testing.T) {
	t.Parallel()
	st := &brokenStore{MemoryStore: store.NewMemoryStore()}
	m := metrics.New()
	g := NewRegistry(Config{KeepFinished: time.Minute}, Limits{MaxConcurrentRuns: 2, QueueSize: 2},
		Deps{Backends: map[string]Backend{"cli": textBackend{}}, Store: st, Metrics: m, Log: zerolog.Nop()})
	defer g.Shutdown(context.Background())
	st.broken.Store(true)
	_, resp, detach := runToEnd(t, g, "one")
	detach()
	if resp.Status != documents.StatusCompleted {
		t.Fatalf("a run while writes fail: %s", resp.Status)
	}
	if err := g.StoreError(); err == nil || !strings.Contains(err.Error(), "disk I/O error") {
		t.Errorf("StoreError while writes fail: %v", err)
	}
	var counted dto.Metric
	if err := m.StoreErrors.Write(&counted); err != nil || counted.GetCounter().GetValue() == 0 {
		t.Errorf("the failed writes are not counted")
	}
	st.broken.Store(false)
	_, _, detach = runToEnd(t, g, "two")
	detach()
	deadline := time.Now().Add(10 * time.Second)
	for g.StoreError() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("StoreError once writes work again: %v", g.StoreError())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
