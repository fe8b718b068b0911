package store

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStoreOwner checks, on each store, that conversations and turns keep
// the key id that made them, and that a conversation keeps its first
// owner when it is put again (a later turn, from any key).
func TestStoreOwner(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st Store) {
		if err := st.PutConversation(ctx, Conversation{ID: "c1", Backend: "cli", Owner: "0123456789abcdef"}); err != nil {
			t.Fatal(err)
		}
		if err := st.PutConversation(ctx, Conversation{ID: "c1", Backend: "cli", Model: "m", Owner: "fedcba9876543210"}); err != nil {
			t.Fatal(err)
		}
		if err := st.PutTurn(ctx, Turn{ResponseID: "r1", ConversationID: "c1", Status: "completed", Created: time.Now(),
			Response: []byte(`{}`), Owner: "0123456789abcdef"}); err != nil {
			t.Fatal(err)
		}
		c, err := st.ConversationInfo(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if c.Owner != "0123456789abcdef" || c.Model != "m" {
			t.Errorf("conversation owner %q model %q; want the first owner and the new model", c.Owner, c.Model)
		}
		_, turns, err := st.Conversation(ctx, "c1")
		if err != nil || len(turns) != 1 || turns[0].Owner != "0123456789abcdef" {
			t.Fatalf("turns %+v, %v", turns, err)
		}
		tr, err := st.Turn(ctx, "r1")
		if err != nil || tr.Owner != "0123456789abcdef" {
			t.Fatalf("turn owner %q, %v", tr.Owner, err)
		}
	})
}

// TestSQLiteOwnerMigration opens a store made before owners were kept: its
// rows come back with no owner, and new ones keep theirs.
func TestSQLiteOwnerMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range migrations[:2] {
		if _, err := db.Exec(m.sql); err != nil {
			t.Fatalf("migration %d: %v", i+1, err)
		}
	}
	if _, err := db.Exec(`PRAGMA user_version = 2;
		INSERT INTO conversations VALUES ('old', 'old', 'cli', 'main', 'auto', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');
		INSERT INTO turns VALUES ('chat_old', 'old', 'p', 'completed', '2026-01-01T00:00:00Z', '{}');`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	st, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := st.ConversationInfo(ctx, "old")
	if err != nil || c.Owner != "" {
		t.Fatalf("old conversation: owner %q, %v", c.Owner, err)
	}
	if tr, err := st.Turn(ctx, "chat_old"); err != nil || tr.Owner != "" {
		t.Fatalf("old turn: owner %q, %v", tr.Owner, err)
	}
	if err := st.PutConversation(ctx, Conversation{ID: "new", Backend: "cli", Owner: "0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
	if c, err := st.ConversationInfo(ctx, "new"); err != nil || c.Owner != "0123456789abcdef" {
		t.Fatalf("new conversation: owner %q, %v", c.Owner, err)
	}
	var v int
	if err := st.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != len(migrations) {
		t.Fatalf("user_version %d, %v; want %d", v, err, len(migrations))
	}
}

// TestSQLiteVersionSetBack opens a store whose version a gateway that
// knew fewer migrations set back, after a newer one had added the owner
// columns: it opens, and keeps its owners. A store of a version past the
// migrations this gateway knows keeps its version.
func TestSQLiteVersionSetBack(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutConversation(ctx, Conversation{ID: "c", Backend: "cli", Owner: "0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []int{2, len(migrations) + 5} {
		if _, err := st.db.Exec(fmt.Sprintf("PRAGMA user_version = %d", v)); err != nil {
			t.Fatal(err)
		}
		st.Close()
		if st, err = OpenSQLite(ctx, path); err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		if c, err := st.ConversationInfo(ctx, "c"); err != nil || c.Owner != "0123456789abcdef" {
			t.Fatalf("version %d: owner %q, %v", v, c.Owner, err)
		}
		var got int
		if err := st.db.QueryRow("PRAGMA user_version").Scan(&got); err != nil || got != max(v, len(migrations)) {
			t.Errorf("version %d reopened as %d, %v", v, got, err)
		}
	}
	st.Close()
}

// TestSQLiteOwnerBytes checks that the owner id reaches the database file
// itself (the write-ahead log copied in at close).
func TestSQLiteOwnerBytes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	const owner = "a1b2c3d4e5f60718"
	for i := range 3 {
		id := fmt.Sprintf("c%d", i)
		if err := st.PutConversation(ctx, Conversation{ID: id, Backend: "cli", Owner: owner}); err != nil {
			t.Fatal(err)
		}
		if err := st.PutTurn(ctx, Turn{ResponseID: "r" + id, ConversationID: id, Status: "completed", Created: time.Now(),
			Response: []byte(`{}`), Owner: owner}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(owner)) {
		t.Errorf("the database file does not hold the owner id")
	}
}
