package store

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// atClock has the store put conversations at the times the test sets.
func atClock(t *testing.T) func(time.Time) {
	t.Helper()
	var at time.Time
	clock = func() time.Time { return at }
	t.Cleanup(func() { clock = time.Now })
	return func(tm time.Time) { at = tm }
}

// ids returns the ids of conversations, in order.
func ids(cs []Conversation) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

// listAll reads the listing of q page by page, limit at a time, following
// the cursor of each page's last conversation, and returns the ids and the
// sizes of the pages.
func listAll(t *testing.T, st Store, q ListQuery, limit int) (got []string, pages []int) {
	t.Helper()
	q.Limit = limit
	for range 100 {
		page, err := st.Conversations(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, len(page))
		got = append(got, ids(page)...)
		if len(page) < limit {
			return got, pages
		}
		last := page[len(page)-1]
		q.After = &Cursor{Updated: last.Updated, ID: last.ID}
	}
	t.Fatal("the listing does not end")
	return nil, nil
}

// TestStoreConversationsList checks, on each store, that conversations
// are listed the most recently active first, ties by id, greatest first;
// that pages follow on from a cursor without a gap or a repeat, also
// through ties and across whole and fractional seconds; and that the
// workspace and owner filters keep what they name.
func TestStoreConversationsList(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st Store) {
		set := atClock(t)
		t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
		for _, c := range []struct {
			id, ws, owner string
			at            time.Duration
		}{
			{"c01", "app", "k1", 0},
			{"c02", "app", "k2", time.Second},
			{"c03", "web", "k1", time.Second},
			{"c04", "app", "k1", time.Second},
			{"c05", "web", "k2", time.Second + 500*time.Millisecond},
			{"c06", "app", "k1", time.Second + 123456789},
			{"c07", "app", "k2", time.Second + 123456789},
			{"c08", "web", "", 2 * time.Second},
			{"c09", "app", "k1", 3 * time.Second},
			{"c10", "app", "k2", 3 * time.Second},
			{"c01", "app", "k2", 4 * time.Second}, // a later turn: c01 is the most recent, and still k1's
		} {
			set(t0.Add(c.at))
			if err := st.PutConversation(ctx, Conversation{ID: c.id, Backend: "cli", Workspace: c.ws, Model: "auto", Owner: c.owner}); err != nil {
				t.Fatal(err)
			}
		}
		all := []string{"c01", "c10", "c09", "c08", "c05", "c07", "c06", "c04", "c03", "c02"}
		page, err := st.Conversations(ctx, ListQuery{})
		if err != nil || !slices.Equal(ids(page), all) {
			t.Fatalf("listing %v, %v; want %v", ids(page), err, all)
		}
		if page[0].Owner != "k1" || !page[0].Updated.Equal(t0.Add(4*time.Second)) || !page[0].Created.Equal(t0) || page[0].Workspace != "app" {
			t.Errorf("c01 listed as %+v", page[0])
		}
		for _, limit := range []int{1, 2, 3, 4, 10, 11} {
			got, pages := listAll(t, st, ListQuery{}, limit)
			if !slices.Equal(got, all) {
				t.Errorf("limit %d: pages %v list %v; want %v", limit, pages, got, all)
			}
		}
		for _, c := range []struct {
			q    ListQuery
			want []string
		}{
			{ListQuery{Workspace: "app"}, []string{"c01", "c10", "c09", "c07", "c06", "c04", "c02"}},
			{ListQuery{Workspace: "web"}, []string{"c08", "c05", "c03"}},
			{ListQuery{Workspace: "none"}, []string{}},
			{ListQuery{Owner: "k1"}, []string{"c01", "c09", "c06", "c04", "c03"}},
			{ListQuery{Owner: "k2"}, []string{"c10", "c05", "c07", "c02"}},
			{ListQuery{Owner: "k2", Workspace: "app"}, []string{"c10", "c07", "c02"}},
			{ListQuery{Owner: "k3"}, []string{}},
		} {
			for _, limit := range []int{1, 2, 100} {
				got, _ := listAll(t, st, c.q, limit)
				if got == nil {
					got = []string{}
				}
				if !slices.Equal(got, c.want) {
					t.Errorf("%+v, limit %d: %v; want %v", c.q, limit, got, c.want)
				}
			}
		}
		// A cursor at a conversation that is gone still places the page.
		page, err = st.Conversations(ctx, ListQuery{After: &Cursor{Updated: t0.Add(time.Second + 123456789), ID: "c065"}, Limit: 3})
		if err != nil || !slices.Equal(ids(page), []string{"c06", "c04", "c03"}) {
			t.Errorf("after a gone conversation: %v, %v", ids(page), err)
		}
	})
}

// TestStoreDeleteConversation checks, on each store, that a deleted
// conversation goes with its turns and fingerprints, and leaves the others
// as they were; an unknown one is ErrNotFound.
func TestStoreDeleteConversation(t *testing.T) {
	ctx := context.Background()
	eachStore(t, func(t *testing.T, st Store) {
		for _, c := range []string{"a", "b"} {
			if err := st.PutConversation(ctx, Conversation{ID: c, Backend: "cli", Workspace: "app"}); err != nil {
				t.Fatal(err)
			}
			for i, status := range []string{"completed", "streaming"} {
				rid := c + "-r" + string(rune('1'+i))
				if err := st.PutTurn(ctx, Turn{ResponseID: rid, ConversationID: c, Status: status, Created: time.Now(), Response: []byte(`{"id":"` + rid + `"}`)}); err != nil {
					t.Fatal(err)
				}
			}
			for _, fp := range []string{"fp1-" + c, "fp2-" + c} {
				if err := st.PutFingerprint(ctx, fp, c); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := st.DeleteConversation(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.Conversation(ctx, "a"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Conversation(a) after delete: %v", err)
		}
		if _, err := st.ConversationInfo(ctx, "a"); !errors.Is(err, ErrNotFound) {
			t.Errorf("ConversationInfo(a) after delete: %v", err)
		}
		for _, rid := range []string{"a-r1", "a-r2"} {
			if _, err := st.Turn(ctx, rid); !errors.Is(err, ErrNotFound) {
				t.Errorf("Turn(%s) after delete: %v", rid, err)
			}
		}
		for _, fp := range []string{"fp1-a", "fp2-a"} {
			if _, err := st.HistoryConversation(ctx, fp); !errors.Is(err, ErrNotFound) {
				t.Errorf("HistoryConversation(%s) after delete: %v", fp, err)
			}
			if _, err := st.Fingerprint(ctx, fp); !errors.Is(err, ErrNotFound) {
				t.Errorf("Fingerprint(%s) after delete: %v", fp, err)
			}
		}
		if list, err := st.Conversations(ctx, ListQuery{}); err != nil || !slices.Equal(ids(list), []string{"b"}) {
			t.Errorf("listing after delete: %v, %v", ids(list), err)
		}
		_, turns, err := st.Conversation(ctx, "b")
		if err != nil || len(turns) != 2 {
			t.Errorf("b after a's delete: %d turns, %v", len(turns), err)
		}
		if c, err := st.Fingerprint(ctx, "fp2-b"); err != nil || c != "b" {
			t.Errorf("b's fingerprint after a's delete: %q, %v", c, err)
		}
		if err := st.DeleteConversation(ctx, "a"); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleting a again: %v, want ErrNotFound", err)
		}
		if err := st.DeleteConversation(ctx, "zzz"); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleting an unknown conversation: %v, want ErrNotFound", err)
		}
		// The id may be used again, from scratch.
		if err := st.PutConversation(ctx, Conversation{ID: "a", Backend: "cli", Owner: "k9"}); err != nil {
			t.Fatal(err)
		}
		if c, turns, err := st.Conversation(ctx, "a"); err != nil || len(turns) != 0 || c.Owner != "k9" {
			t.Errorf("a put again: %+v, %d turns, %v", c, len(turns), err)
		}
	})
}

// TestMemoryDeleteBytes checks that the memory store counts a deleted
// conversation's responses out of its size.
func TestMemoryDeleteBytes(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryStore()
	_ = m.PutConversation(ctx, Conversation{ID: "a"})
	_ = m.PutTurn(ctx, Turn{ResponseID: "r", ConversationID: "a", Status: "completed", Response: []byte("0123456789")})
	if err := m.DeleteConversation(ctx, "a"); err != nil || m.bytes != 0 {
		t.Errorf("bytes %d after delete, %v", m.bytes, err)
	}
}

// TestSQLiteListingIndex checks that SQLite reads the listing, all of it
// or one owner's, in the order of an index rather than sorting the table.
func TestSQLiteListingIndex(t *testing.T) {
	ctx := context.Background()
	st, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, c := range []struct {
		where, index string
		args         []any
	}{
		{"", "conversations_activity", nil},
		{"WHERE owner = ?", "conversations_owner_activity", []any{"k"}},
		{"WHERE (" + sqlite.activity + ", id) < (?, ?)", "conversations_activity", []any{"2026", "x"}},
		{"WHERE owner = ? AND (" + sqlite.activity + ", id) < (?, ?)", "conversations_owner_activity", []any{"k", "2026", "x"}},
	} {
		rows, err := st.db.QueryContext(ctx, `EXPLAIN QUERY PLAN SELECT id FROM conversations `+c.where+` ORDER BY `+sqlite.activity+` DESC, id DESC LIMIT 20`, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		p := strings.Join(plan, "; ")
		if !strings.Contains(p, c.index) || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%q: plan %q; want %s and no sort", c.where, p, c.index)
		}
	}
}
