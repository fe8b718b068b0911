package store

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/store/pgtest"
)

// TestStoreMarkInterrupted checks, on each store, that a streaming turn is
// marked interrupted with an error document, and a finished one is left
// as it was.
func TestStoreMarkInterrupted(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st Store) {
		for _, tu := range []Turn{{ResponseID: "r1", Status: "streaming"}, {ResponseID: "r2", Status: "completed"}} {
			tu.Created, tu.Response = time.Now(), []byte(`{"id":"`+tu.ResponseID+`","object":"chat.response","status":"`+tu.Status+`","documents":[]}`)
			if err := st.PutTurn(ctx, tu); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := st.MarkInterrupted(ctx); err != nil || n != 1 {
			t.Fatalf("MarkInterrupted = %d, %v; want 1", n, err)
		}
		tu, err := st.Turn(ctx, "r1")
		if err != nil || tu.Status != "error" || !strings.Contains(string(tu.Response), string(documents.CodeInterrupted)) {
			t.Errorf("r1 after: %q %s, %v", tu.Status, tu.Response, err)
		}
		if tu, err := st.Turn(ctx, "r2"); err != nil || tu.Status != "completed" {
			t.Errorf("r2 after: %q, %v", tu.Status, err)
		}
	})
}

// TestPostgresMigratesOnce opens one database from several replicas at
// once: each finds the schema whole, made once under the advisory lock,
// and a batch written by one is read by another.
func TestPostgresMigratesOnce(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Start(t).DSN()
	stores := make([]*PostgresStore, 4)
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = OpenPostgres(ctx, dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	var v int
	if err := stores[0].pool.QueryRow(ctx, `SELECT version FROM docstream_schema`).Scan(&v); err != nil || v != len(pgMigrations) {
		t.Fatalf("schema version %d, %v; want %d", v, err, len(pgMigrations))
	}
	resp, _ := json.Marshal(documents.ChatResponse{ID: "r1", Status: documents.StatusCompleted})
	if err := stores[1].PutBatch(ctx, []Conversation{{ID: "c1", Backend: "cli"}}, []Turn{{ResponseID: "r1", ConversationID: "c1", Status: "completed", Created: time.Now(), Response: resp}}); err != nil {
		t.Fatal(err)
	}
	if _, turns, err := stores[2].Conversation(ctx, "c1"); err != nil || len(turns) != 1 {
		t.Fatalf("read from another replica: %d turns, %v", len(turns), err)
	}
}

// TestPostgresUnreachable checks that a database that does not answer is
// an error at open, naming where it was looked for.
func TestPostgresUnreachable(t *testing.T) {
	_, err := OpenPostgres(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("err = %v; want one naming the address", err)
	}
}
