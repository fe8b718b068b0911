package gateway

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestStoreConversationTurns checks, on both stores, that a conversation
// returns its own turns oldest first, that replacing a turn keeps one copy,
// that a turn moved to another conversation leaves the first one, and that
// a turn stored before it has a conversation joins it once.
func TestStoreConversationTurns(t *testing.T) {
	ctx := context.Background()
	for _, driver := range []string{"memory", "sqlite"} {
		t.Run(driver, func(t *testing.T) {
			st, err := OpenStore(ctx, StoreConfig{Driver: driver, Path: filepath.Join(t.TempDir(), "s.db")})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			for _, c := range []string{"a", "b"} {
				if err := st.PutConversation(ctx, Conversation{ID: c, Backend: "cli"}); err != nil {
					t.Fatal(err)
				}
			}
			t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			put := func(id, conv, status string, at int) {
				t.Helper()
				turn := Turn{ResponseID: id, ConversationID: conv, Prompt: id, Status: status,
					Created: t0.Add(time.Duration(at) * time.Second), Response: []byte(`{}`)}
				if err := st.PutTurn(ctx, turn); err != nil {
					t.Fatal(err)
				}
			}
			put("r3", "a", "streaming", 3)
			put("r1", "a", "streaming", 1)
			put("r2", "b", "streaming", 2)
			put("r1", "a", "completed", 1) // replaced, not added
			put("r4", "a", "completed", 4)
			put("r4", "b", "completed", 4) // moved to b
			put("r5", "", "streaming", 5)  // no conversation yet
			if ms, ok := st.(*MemoryStore); ok && len(ms.byConv[""]) != 0 {
				t.Errorf("turns indexed under no conversation: %v", ms.byConv[""])
			}
			put("r5", "a", "completed", 5)
			check := func(conv string, want ...string) {
				t.Helper()
				_, ts, err := st.Conversation(ctx, conv)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, tu := range ts {
					got = append(got, tu.ResponseID)
				}
				if len(got) != len(want) {
					t.Fatalf("conversation %s: turns %v, want %v", conv, got, want)
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("conversation %s: turns %v, want %v", conv, got, want)
					}
				}
			}
			check("a", "r1", "r3", "r5")
			check("b", "r2", "r4")
			if tu, err := st.Turn(ctx, "r1"); err != nil || tu.Status != "completed" {
				t.Errorf("Turn(r1) = %+v, %v", tu, err)
			}
			if _, _, err := st.Conversation(ctx, "c"); !errors.Is(err, ErrNotFound) {
				t.Errorf("unknown conversation: %v, want ErrNotFound", err)
			}
		})
	}
}
