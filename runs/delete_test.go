package runs

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/docstream/docstream/metrics"
	"github.com/docstream/docstream/store"
)

// TestDeleteConversationLetsGoOfRuns checks, with the saver (SQLite) and
// without it (memory), that deleting a conversation deletes it from the
// store and lets go of its finished runs, also one a client still reads,
// which reads on; and that no turn of it can start while it is deleted.
func TestDeleteConversationLetsGoOfRuns(t *testing.T) {
	ctx := context.Background()
	for _, driver := range []string{"sqlite", "memory"} {
		t.Run(driver, func(t *testing.T) {
			st, err := store.Open(ctx, store.Config{Driver: driver, Path: filepath.Join(t.TempDir(), "s.db")})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			g := NewRegistry(Config{KeepFinished: time.Minute}, Limits{MaxConcurrentRuns: 2, QueueSize: 2},
				Deps{Backends: map[string]Backend{"cli": sessionBackend{session: "sess-1"}}, Store: st, Metrics: metrics.New(), Log: zerolog.Nop()})
			defer g.Shutdown(ctx)
			first, _, detach := runToEnd(t, g, "one")
			detach()
			second, err := g.Prepare(&Spec{ResponseID: NewResponseID(), Backend: "cli", Mode: "agent", Model: "auto", Prompt: "two", ConversationID: "sess-1"})
			if err != nil {
				t.Fatal(err)
			}
			reader := second.Attach() // still reading when the conversation goes
			defer reader()
			second.Launch()
			<-second.Done()
			for _, r := range []*Run{first, second} {
				if g.Get(r.ID) != r {
					t.Fatalf("run %s not kept before the delete", r.ID)
				}
			}
			deleted := false
			err = g.DeleteConversation("sess-1", func() error {
				_, perr := g.Prepare(&Spec{ResponseID: NewResponseID(), Backend: "cli", Mode: "agent", Model: "auto", Prompt: "three", ConversationID: "sess-1"})
				if be := (*BusyError)(nil); !errors.As(perr, &be) {
					t.Errorf("a turn started while its conversation was deleted: %v", perr)
				}
				deleted = true
				return st.DeleteConversation(ctx, "sess-1")
			})
			if err != nil || !deleted {
				t.Fatalf("DeleteConversation: %v (deleted %v)", err, deleted)
			}
			for _, r := range []*Run{first, second} {
				if g.Get(r.ID) != nil {
					t.Errorf("run %s still held after its conversation was deleted", r.ID)
				}
				if _, err := st.Turn(ctx, r.ID); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("turn %s after the delete: %v", r.ID, err)
				}
			}
			if resp := second.Response(); resp.Status != "completed" || len(resp.Documents) != 1 {
				t.Errorf("the attached reader's response: %+v", resp)
			}
			if _, err := st.ConversationInfo(ctx, "sess-1"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("conversation after the delete: %v", err)
			}
			// The conversation is no longer held.
			if _, busy := g.RunningTurn("sess-1"); busy {
				t.Error("the conversation is still held after the delete")
			}
			err = g.DeleteConversation("sess-1", func() error { return st.DeleteConversation(ctx, "sess-1") })
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("deleting it again: %v, want not found", err)
			}
		})
	}
}

// TestDeleteConversationBusy checks that a conversation with a running
// turn is not deleted: the answer names the running turn.
func TestDeleteConversationBusy(t *testing.T) {
	g := NewRegistry(Config{KeepFinished: time.Minute}, Limits{MaxConcurrentRuns: 2, QueueSize: 2},
		Deps{Backends: map[string]Backend{"cli": blockingBackend{}}, Metrics: metrics.New(), Log: zerolog.Nop()})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		g.Shutdown(ctx)
	}()
	r, err := g.Prepare(&Spec{ResponseID: NewResponseID(), Backend: "cli", Mode: "agent", Model: "auto", Prompt: "p", ConversationID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	r.Launch()
	called := false
	err = g.DeleteConversation("c1", func() error { called = true; return nil })
	var be *BusyError
	if !errors.As(err, &be) || be.ID != r.ID || called {
		t.Fatalf("DeleteConversation of a running conversation: %v (deleted %v), want busy with %s", err, called, r.ID)
	}
	r.Cancel(true)
	<-r.Done()
	if err := g.DeleteConversation("c1", func() error { called = true; return nil }); err != nil || !called {
		t.Fatalf("after the turn ended: %v (deleted %v)", err, called)
	}
}

// TestDeleteResponse checks that a running run's response is not deleted,
// and that once deleted the registry no longer holds the run.
func TestDeleteResponse(t *testing.T) {
	g := NewRegistry(Config{KeepFinished: time.Minute}, Limits{MaxConcurrentRuns: 2, QueueSize: 2},
		Deps{Backends: map[string]Backend{"cli": blockingBackend{}}, Metrics: metrics.New(), Log: zerolog.Nop()})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		g.Shutdown(ctx)
	}()
	r, err := g.Prepare(&Spec{ResponseID: NewResponseID(), Backend: "cli", Mode: "agent", Model: "auto", Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	r.Launch()
	called := false
	if err := g.DeleteResponse(r.ID, func() error { called = true; return nil }); !errors.Is(err, ErrRunning) || called {
		t.Fatalf("DeleteResponse of a running run: %v (deleted %v), want ErrRunning", err, called)
	}
	r.Cancel(true)
	<-r.Done()
	if err := g.DeleteResponse(r.ID, func() error { called = true; return nil }); err != nil || !called {
		t.Fatalf("after the run ended: %v (deleted %v)", err, called)
	}
	if g.Get(r.ID) != nil {
		t.Errorf("the registry still holds the deleted run")
	}
}
