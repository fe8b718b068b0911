package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
)

// brokenStore is a memory store whose writes fail while broken is set.
type brokenStore struct {
	*MemoryStore
	broken atomic.Bool
}

var errDiskGone = errors.New("disk I/O error")

func (b *brokenStore) PutTurn(ctx context.Context, t Turn) error {
	if b.broken.Load() {
		return errDiskGone
	}
	return b.MemoryStore.PutTurn(ctx, t)
}

func (b *brokenStore) PutConversation(ctx context.Context, c Conversation) error {
	if b.broken.Load() {
		return errDiskGone
	}
	return b.MemoryStore.PutConversation(ctx, c)
}

// TestStoreWriteFailures: failed store writes are counted and /readyz says
// so ("degraded", the runs are still served), until a write works again.
// Before, /readyz said the store was fine while every write failed.
func TestStoreWriteFailures(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	cfg.Agent.Binary = BuiltinBench
	cfg.Agent.Workspaces = map[string]string{"main": t.TempDir()}
	cfg.Auth.RatePerMinute = 0
	st := &brokenStore{MemoryStore: NewMemoryStore()}
	m := NewMetrics()
	s, err := NewServer(Deps{Config: cfg, Logger: zerolog.Nop(), Store: st, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	ready := func() (int, string) {
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	chat := func() {
		resp, err := http.Post(srv.URL+"/v1/chat", "application/json", strings.NewReader(`{"prompt":"bench:2"}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"status":"completed"`) {
			t.Fatalf("chat: %d %s", resp.StatusCode, b)
		}
	}
	st.broken.Store(true)
	chat()
	code, body := ready()
	if code != 200 || !strings.Contains(body, `"status":"degraded"`) || !strings.Contains(body, "disk I/O error") {
		t.Errorf("/readyz while writes fail: %d %s", code, body)
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(metrics), "docstream_store_write_errors_total 0") || !strings.Contains(string(metrics), "docstream_store_write_errors_total ") {
		t.Errorf("the failed writes are not counted")
	}
	st.broken.Store(false)
	chat()
	if code, body := ready(); code != 200 || !strings.Contains(body, `"status":"ready"`) || !strings.Contains(body, `"store":"ok"`) {
		t.Errorf("/readyz once writes work again: %d %s", code, body)
	}
	s.Shutdown(context.Background())
}
