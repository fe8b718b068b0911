package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestSQLitePathWithURIMarks opens stores whose paths hold the characters
// a URI gives a meaning to: each is the file at its own path, not one
// named by the path up to the mark.
func TestSQLitePathWithURIMarks(t *testing.T) {
	ctx := context.Background()
	for _, dir := range []string{"a#01", "b?x=1", "c%41", "d e"} {
		path := filepath.Join(t.TempDir(), dir, "s.db")
		st, err := OpenSQLite(ctx, path)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if err := st.PutConversation(ctx, Conversation{ID: dir, Backend: "cli"}); err != nil {
			t.Fatal(err)
		}
		st.Close()
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: the store is not at its path: %v", dir, err)
		}
		st, err = OpenSQLite(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.ConversationInfo(ctx, dir); err != nil {
			t.Errorf("%s: reopened, the conversation is gone: %v", dir, err)
		}
		st.Close()
	}
}
