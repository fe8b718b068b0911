package runs

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/docstream/docstream/metrics"
	"github.com/docstream/docstream/store"
	"github.com/docstream/docstream/translate"
)

// sessionBackend names a session, then answers the prompt.
type sessionBackend struct{ session string }

func (b sessionBackend) Run(_ context.Context, spec *Spec, seg *translate.Segmenter) translate.End {
	seg.SetConversation(b.session)
	seg.Snapshot(spec.Prompt)
	seg.EndSegment()
	seg.Complete(1)
	return translate.End{}
}

// TestOwnerIsStored checks that a run's owner is stored with its turn and
// its new conversation.
func TestOwnerIsStored(t *testing.T) {
	st := store.NewMemoryStore()
	g := NewRegistry(Config{KeepFinished: time.Minute}, Limits{MaxConcurrentRuns: 2, QueueSize: 2},
		Deps{Backends: map[string]Backend{"cli": sessionBackend{session: "sess-1"}}, Store: st, Metrics: metrics.New(), Log: zerolog.Nop()})
	defer g.Shutdown(context.Background())
	r, err := g.Prepare(&Spec{ResponseID: NewResponseID(), Backend: "cli", Mode: "agent", Model: "auto", Prompt: "hi", Owner: "00112233aabbccdd"})
	if err != nil {
		t.Fatal(err)
	}
	detach := r.Attach()
	r.Launch()
	<-r.Done()
	detach()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tr, terr := st.Turn(ctx, r.ID)
		c, cerr := st.ConversationInfo(ctx, "sess-1")
		if terr == nil && cerr == nil && tr.Status == "completed" {
			if tr.Owner != "00112233aabbccdd" || c.Owner != "00112233aabbccdd" {
				t.Fatalf("turn owner %q, conversation owner %q", tr.Owner, c.Owner)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not stored: %v, %v", terr, cerr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
