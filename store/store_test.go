package store

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docstream/docstream/store/pgtest"
)

// eachStore runs test on a new store of each driver.
func eachStore(t *testing.T, test func(t *testing.T, st Store)) {
	for _, driver := range []string{"memory", "sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			cfg := Config{Driver: driver, Path: filepath.Join(t.TempDir(), "s.db")}
			if driver == "postgres" {
				cfg.DSN = pgtest.Start(t).DSN()
			}
			st, err := Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			test(t, st)
		})
	}
}

// TestStoreConversationTurns checks, on each store, that a conversation
// returns its own turns oldest first, that replacing a turn keeps one copy,
// that a turn moved to another conversation leaves the first one, and that
// a turn stored before it has a conversation joins it once.
func TestStoreConversationTurns(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st Store) {
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
		// One turn deleted: the others and the conversation stay.
		if err := st.DeleteTurn(ctx, "r3"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Turn(ctx, "r3"); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted turn: %v, want ErrNotFound", err)
		}
		if err := st.DeleteTurn(ctx, "r3"); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleting it again: %v, want ErrNotFound", err)
		}
		check("a", "r1", "r5")
	})
}

// TestStoreHistories checks, on each store, that a history the
// conversation has moved past is not where it stands, but still names it.
func TestStoreHistories(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st Store) {
		for _, fp := range []string{"fp-1", "fp-2"} {
			if err := st.PutFingerprint(ctx, fp, "c"); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := st.Fingerprint(ctx, "fp-2"); err != nil || got != "c" {
			t.Errorf("Fingerprint(fp-2) = %q, %v", got, err)
		}
		if _, err := st.Fingerprint(ctx, "fp-1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Fingerprint(fp-1), moved past: %v, want ErrNotFound", err)
		}
		for _, fp := range []string{"fp-1", "fp-2"} {
			if got, err := st.HistoryConversation(ctx, fp); err != nil || got != "c" {
				t.Errorf("HistoryConversation(%s) = %q, %v", fp, got, err)
			}
		}
		if _, err := st.HistoryConversation(ctx, "fp-x"); !errors.Is(err, ErrNotFound) {
			t.Errorf("HistoryConversation of an unknown history: %v", err)
		}
	})
}

// TestStorePrune checks, on each store, that Prune deletes the
// conversations with no turn since the cut, with their turns and
// fingerprints, and finished turns of no conversation, and keeps a
// conversation with a newer or a running turn.
func TestStorePrune(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st Store) {
		cut := time.Now().Add(time.Hour) // every conversation was updated before it
		old, newer := cut.Add(-48*time.Hour), cut.Add(time.Minute)
		for _, c := range []string{"old", "running", "recent"} {
			if err := st.PutConversation(ctx, Conversation{ID: c, Backend: "cli"}); err != nil {
				t.Fatal(err)
			}
			if err := st.PutFingerprint(ctx, "fp-"+c, c); err != nil {
				t.Fatal(err)
			}
		}
		for _, tu := range []Turn{
			{ResponseID: "o1", ConversationID: "old", Status: "completed", Created: old},
			{ResponseID: "o2", ConversationID: "old", Status: "error", Created: old.Add(time.Second)},
			{ResponseID: "r1", ConversationID: "running", Status: "completed", Created: old},
			{ResponseID: "r2", ConversationID: "running", Status: "streaming", Created: old},
			{ResponseID: "n1", ConversationID: "recent", Status: "completed", Created: old},
			{ResponseID: "n2", ConversationID: "recent", Status: "completed", Created: newer},
			{ResponseID: "x1", Status: "completed", Created: old},
			{ResponseID: "x2", Status: "streaming", Created: old},
		} {
			tu.Response = []byte(`{}`)
			if err := st.PutTurn(ctx, tu); err != nil {
				t.Fatal(err)
			}
		}
		n, err := st.Prune(ctx, cut)
		if err != nil || n != 3 {
			t.Fatalf("Prune: %d turns, %v; want 3", n, err)
		}
		if _, _, err := st.Conversation(ctx, "old"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the old conversation is still there: %v", err)
		}
		if _, err := st.Fingerprint(ctx, "fp-old"); !errors.Is(err, ErrNotFound) {
			t.Errorf("the old conversation's fingerprint is still there: %v", err)
		}
		for _, id := range []string{"o1", "o2", "x1"} {
			if _, err := st.Turn(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("turn %s is still there: %v", id, err)
			}
		}
		for _, c := range []string{"running", "recent"} {
			if _, ts, err := st.Conversation(ctx, c); err != nil || len(ts) != 2 {
				t.Errorf("conversation %s: %d turns, %v; want both kept", c, len(ts), err)
			}
			if got, err := st.Fingerprint(ctx, "fp-"+c); err != nil || got != c {
				t.Errorf("fingerprint of %s: %q, %v", c, got, err)
			}
		}
		if _, err := st.Turn(ctx, "x2"); err != nil {
			t.Errorf("a running turn of no conversation was pruned: %v", err)
		}
	})
}

// TestMemoryStoreBound checks that the memory store keeps at most
// memory_max_bytes of responses, forgetting the oldest finished turns and
// a conversation once its last turn went, never a running turn.
func TestMemoryStoreBound(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, Config{Driver: "memory", MemoryMaxBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	m := st.(*MemoryStore)
	body := []byte(`{"content":"` + strings.Repeat("x", 28) + `"}`) // 42 bytes
	put := func(id, conv, status string) {
		t.Helper()
		if err := st.PutConversation(ctx, Conversation{ID: conv}); err != nil {
			t.Fatal(err)
		}
		if err := st.PutTurn(ctx, Turn{ResponseID: id, ConversationID: conv, Status: status, Created: time.Now(), Response: body}); err != nil {
			t.Fatal(err)
		}
		if m.bytes > 100 {
			t.Fatalf("after %s: %d bytes held", id, m.bytes)
		}
	}
	put("a1", "a", "streaming")
	_ = st.PutFingerprint(ctx, "fp-b", "b")
	put("b1", "b", "completed")
	put("c1", "c", "completed") // b1 goes, and b with it; a1 runs
	if _, _, err := st.Conversation(ctx, "b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("conversation b outlived its last turn: %v", err)
	}
	if _, err := st.Fingerprint(ctx, "fp-b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("conversation b's fingerprint outlived it: %v", err)
	}
	if _, err := st.Turn(ctx, "a1"); err != nil {
		t.Errorf("a running turn was forgotten: %v", err)
	}
	put("a1", "a", "completed")
	put("c2", "c", "completed") // a1 is the oldest finished turn now
	for id, want := range map[string]bool{"a1": false, "c1": true, "c2": true} {
		if _, err := st.Turn(ctx, id); (err == nil) != want {
			t.Errorf("turn %s kept %v, want %v", id, err == nil, want)
		}
	}
	if _, ts, err := st.Conversation(ctx, "c"); err != nil || len(ts) != 2 {
		t.Errorf("conversation c: %d turns, %v", len(ts), err)
	}
}

// TestMemoryStoreEvictsInOrder checks what a full memory store keeps as
// turns come and go: the newest turns, the fingerprints of the
// conversations it holds (a fingerprint recorded again for another
// conversation stays with that one), and an order no longer than its turns.
func TestMemoryStoreEvictsInOrder(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, Config{Driver: "memory", MemoryMaxBytes: 130})
	if err != nil {
		t.Fatal(err)
	}
	m := st.(*MemoryStore)
	body := []byte(`{"content":"` + strings.Repeat("x", 28) + `"}`) // 42 bytes: three fit
	_ = st.PutFingerprint(ctx, "fp-shared", "c0")
	for i := range 1000 {
		conv := "c" + strconv.Itoa(i)
		if err := st.PutConversation(ctx, Conversation{ID: conv}); err != nil {
			t.Fatal(err)
		}
		if err := st.PutFingerprint(ctx, "fp-"+conv, conv); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			_ = st.PutFingerprint(ctx, "fp-shared", conv) // moves from c0 to c1
		}
		if err := st.PutTurn(ctx, Turn{ResponseID: "r" + strconv.Itoa(i), ConversationID: conv, Status: "completed", Created: time.Now(), Response: body}); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			// c0 is forgotten by now; the fingerprint it gave to c1 is not.
			if c, err := st.HistoryConversation(ctx, "fp-shared"); err != nil || c != "c1" {
				t.Errorf("the moved fingerprint: %q, %v", c, err)
			}
		}
	}
	if len(m.turns) != 3 || len(m.order) != 3 || len(m.convs) != 3 || len(m.fps) != 3 || len(m.convFP) != 3 {
		t.Errorf("held: %d turns, %d in order, %d conversations, %d fingerprints (%d lists)", len(m.turns), len(m.order), len(m.convs), len(m.fps), len(m.convFP))
	}
	for _, id := range []string{"r997", "r998", "r999"} {
		if _, err := st.Turn(ctx, id); err != nil {
			t.Errorf("turn %s: %v", id, err)
		}
	}
	if _, err := st.HistoryConversation(ctx, "fp-shared"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the fingerprint of a forgotten conversation: %v", err)
	}
}

// BenchmarkMemoryStoreFull is the cost of a turn put into a full memory
// store holding 20,000 turns, each with its conversation and fingerprint.
func BenchmarkMemoryStoreFull(b *testing.B) {
	ctx := context.Background()
	body := []byte(`{"content":"` + strings.Repeat("x", 28) + `"}`)
	st, _ := Open(ctx, Config{Driver: "memory", MemoryMaxBytes: int64(20000 * len(body))})
	i := 0
	put := func() {
		conv := "c" + strconv.Itoa(i)
		_ = st.PutConversation(ctx, Conversation{ID: conv})
		_ = st.PutFingerprint(ctx, "fp-"+conv, conv)
		_ = st.PutTurn(ctx, Turn{ResponseID: "r" + strconv.Itoa(i), ConversationID: conv, Status: "completed", Created: time.Now(), Response: body})
		i++
	}
	for range 20000 {
		put()
	}
	for b.Loop() {
		put()
	}
}

// TestStoreConversationInfo checks, on each store, that a conversation is
// read without its turns, and that an unknown one is ErrNotFound.
func TestStoreConversationInfo(t *testing.T) {
	eachStore(t, func(t *testing.T, st Store) {
		ctx := context.Background()
		want := Conversation{ID: "c1", SessionID: "s1", Backend: "cli", Workspace: "main", Model: "auto"}
		if err := st.PutConversation(ctx, want); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"r1", "r2"} {
			if err := st.PutTurn(ctx, Turn{ResponseID: id, ConversationID: "c1", Status: "completed", Created: time.Now(), Response: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := st.ConversationInfo(ctx, "c1")
		if err != nil || got.ID != want.ID || got.SessionID != want.SessionID || got.Backend != want.Backend ||
			got.Workspace != want.Workspace || got.Model != want.Model || got.Created.IsZero() {
			t.Errorf("ConversationInfo: %+v, %v; want %+v", got, err, want)
		}
		full, turns, err := st.Conversation(ctx, "c1")
		if err != nil || len(turns) != 2 || full.Workspace != got.Workspace || !full.Updated.Equal(got.Updated) {
			t.Errorf("Conversation: %+v with %d turns, %v", full, len(turns), err)
		}
		if _, err := st.ConversationInfo(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("an unknown conversation: %v", err)
		}
	})
}

// BenchmarkSQLiteSnapshot is one snapshot of a running turn written to the
// SQLite store, as the saver writes it when the store has one write
// pending: the row replaced, with a response of some kilobytes.
func BenchmarkSQLiteSnapshot(b *testing.B) {
	ctx := context.Background()
	st := newSQLite(b)
	if err := st.PutConversation(ctx, Conversation{ID: "c", Backend: "cli"}); err != nil {
		b.Fatal(err)
	}
	resp := []byte(`{"id":"resp_1","documents":[{"type":"text","content":"` + strings.Repeat("word ", 1000) + `"}]}`)
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		t := Turn{ResponseID: "resp_" + strconv.Itoa(i%100), ConversationID: "c", Prompt: "p", Status: "streaming", Created: now, Response: resp}
		if err := st.PutTurn(ctx, t); err != nil {
			b.Fatal(err)
		}
	}
}

// newSQLite opens a SQLite store in a temporary folder, closed when tb
// ends.
func newSQLite(tb testing.TB) *SQLStore {
	tb.Helper()
	st, err := OpenSQLite(context.Background(), filepath.Join(tb.TempDir(), "s.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// TestSQLiteCommitsDoNotCheckpoint writes several megabytes to a store
// whose checkpointer waits an hour: the commits leave the log alone (SQLite
// would have copied it into the database at 1,000 pages, inside a commit),
// and closing the store copies it, so that a store opened again has every
// turn.
func TestSQLiteCommitsDoNotCheckpoint(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := openSQLite(ctx, path, time.Hour, checkpointLongLog)
	if err != nil {
		t.Fatal(err)
	}
	before := fileSize(t, path)
	const n = 300
	writeBigTurns(t, st, 0, n)
	if grew := fileSize(t, path) - before; grew > 256<<10 {
		t.Errorf("the database file grew by %d bytes while the log was not to be copied", grew)
	}
	if wal := fileSize(t, path+"-wal"); wal < 4<<20 {
		t.Errorf("log of %d bytes after writing %d turns of 20 KB", wal, n)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if wal := fileSize(t, path+"-wal"); wal != 0 {
		t.Errorf("log of %d bytes left after Close", wal)
	}
	st, err = OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, i := range []int{0, n / 2, n - 1} {
		if got, err := st.Turn(ctx, "resp_"+strconv.Itoa(i)); err != nil || len(got.Response) != 20<<10 {
			t.Errorf("turn %d after reopening: %d bytes, %v", i, len(got.Response), err)
		}
	}
}

// TestSQLiteCheckpointer checks that the checkpointer copies the log into
// the database while writes go on, so that the log is written over from its
// start again rather than growing with every write.
func TestSQLiteCheckpointer(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := openSQLite(ctx, path, 20*time.Millisecond, checkpointLongLog)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 200 // about 4 MB a round
	var wals []int64
	for round := range 4 {
		writeBigTurns(t, st, round*n, n)
		// The writes pause until the log is copied: the next one starts
		// it over.
		waitLogCopied(t, path)
		if size := fileSize(t, path); size < int64(round+1)*n*20<<10 {
			t.Fatalf("round %d: the database file holds %d bytes after %d turns of 20 KB", round, size, (round+1)*n)
		}
		wals = append(wals, fileSize(t, path+"-wal"))
	}
	// Four rounds of 4 MB went through a log that was copied after each:
	// it was written over, not grown to 16 MB.
	if last := wals[len(wals)-1]; last > 10<<20 {
		t.Errorf("log sizes after each round %v: it grows with the writes", wals)
	}
}

// TestSQLiteCheckpointerUnderSteadyWrites writes 23 MiB without a pause:
// once the log is long, the checkpointer copies what is left of it between
// two writes, and the log starts over rather than growing with the writes.
func TestSQLiteCheckpointerUnderSteadyWrites(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := openSQLite(ctx, path, 5*time.Millisecond, 256)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 1200
	writeBigTurns(t, st, 0, n)
	if wal := fileSize(t, path+"-wal"); wal > 12<<20 {
		t.Errorf("log of %d bytes after %d MiB written without a pause", wal, n*20>>10)
	}
	if got, err := st.Turn(ctx, "resp_"+strconv.Itoa(n-1)); err != nil || len(got.Response) != 20<<10 {
		t.Errorf("last turn: %d bytes, %v", len(got.Response), err)
	}
}

// waitLogCopied waits until every frame of the log of the SQLite database
// at path is copied into it, as its wal-index says: mxFrame and nBackfill
// (sqlite.org/walformat.html).
func waitLogCopied(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := os.ReadFile(path + "-shm")
		if err != nil {
			t.Fatal(err)
		}
		frames, copied := binary.NativeEndian.Uint32(b[16:]), binary.NativeEndian.Uint32(b[96:])
		if frames > 0 && copied == frames {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the log's %d frames copied into the database after a minute", copied, frames)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// writeBigTurns writes n turns of 20 KB each, from number first on.
func writeBigTurns(t *testing.T, st *SQLStore, first, n int) {
	t.Helper()
	ctx := context.Background()
	resp := []byte(strings.Repeat("x", 20<<10))
	for i := first; i < first+n; i++ {
		if err := st.PutTurn(ctx, Turn{ResponseID: "resp_" + strconv.Itoa(i), ConversationID: "c", Prompt: "p", Status: "completed", Created: time.Now(), Response: resp}); err != nil {
			t.Fatal(err)
		}
	}
}

// fileSize is the size of the file at path, 0 when there is none.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestSQLiteCloseTwice closes a store twice: the second Close neither
// panics nor hangs.
func TestSQLiteCloseTwice(t *testing.T) {
	st, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st.Close()
}

// TestSQLStorePutBatch checks that a batch's conversations and turns are
// all stored, each as a single write would store it.
func TestSQLStorePutBatch(t *testing.T) {
	ctx := context.Background()
	st := newSQLite(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	convs := []Conversation{{ID: "a", SessionID: "a", Backend: "cli"}, {ID: "b", SessionID: "b", Backend: "cli"}}
	turns := []Turn{
		{ResponseID: "r1", ConversationID: "a", Status: "streaming", Created: at, Response: []byte(`{"n":1}`)},
		{ResponseID: "r2", ConversationID: "b", Status: "completed", Created: at.Add(time.Second), Response: []byte(`{"n":2}`)},
		{ResponseID: "r1", ConversationID: "a", Status: "completed", Created: at, Response: []byte(`{"n":3}`)},
	}
	if err := st.PutBatch(ctx, convs, turns); err != nil {
		t.Fatal(err)
	}
	for conv, want := range map[string]string{"a": `r1 completed {"n":3}`, "b": `r2 completed {"n":2}`} {
		_, ts, err := st.Conversation(ctx, conv)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tu := range ts {
			got = append(got, tu.ResponseID+" "+tu.Status+" "+string(tu.Response))
		}
		if strings.Join(got, ";") != want {
			t.Errorf("conversation %s: %q, want %q", conv, got, want)
		}
	}
}
