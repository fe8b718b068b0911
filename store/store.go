// Package store keeps conversations, their turns (each a stored
// ChatResponse) and OpenAI history fingerprints: in SQLite or in memory.
package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/rs/zerolog"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver

	"github.com/docstream/docstream/documents"
)

// ErrNotFound is returned by a Store for an unknown id.
var ErrNotFound = errors.New("not found")

// Conversation is a conversation (an agent session) and what it runs with.
type Conversation struct {
	ID        string    `json:"id"`
	SessionID string    `json:"sessionId"`
	Backend   string    `json:"backend"`
	Workspace string    `json:"workspace"`
	Model     string    `json:"model"`
	Created   time.Time `json:"created"`
	Updated   time.Time `json:"updated"`
	Owner     string    `json:"-"` // the id of the API key that started it, kept by later puts
}

// Turn is one response of a conversation.
type Turn struct {
	ResponseID     string
	ConversationID string
	Prompt         string
	Status         string
	Created        time.Time
	Response       []byte // the ChatResponse JSON
	Owner          string // the id of the API key that sent it ("" when auth was off)
}

// Store keeps conversations, responses and OpenAI history fingerprints.
type Store interface {
	PutConversation(ctx context.Context, c Conversation) error
	Conversation(ctx context.Context, id string) (Conversation, []Turn, error)
	// ConversationInfo returns a conversation without its turns.
	ConversationInfo(ctx context.Context, id string) (Conversation, error)
	PutTurn(ctx context.Context, t Turn) error
	Turn(ctx context.Context, responseID string) (Turn, error)
	// MarkInterrupted marks the turns still "streaming" as interrupted.
	MarkInterrupted(ctx context.Context) (int, error)
	// PutFingerprint records the OpenAI history a conversation stands at.
	PutFingerprint(ctx context.Context, fingerprint, conversationID string) error
	// Fingerprint returns the conversation whose latest recorded history
	// it is; a history the conversation has moved past is ErrNotFound.
	Fingerprint(ctx context.Context, fingerprint string) (string, error)
	// HistoryConversation returns the conversation an OpenAI history was
	// recorded for, whether or not it still stands there.
	HistoryConversation(ctx context.Context, fingerprint string) (string, error)
	// Prune deletes the conversations and finished conversation-less turns
	// idle since before; it returns how many turns went.
	Prune(ctx context.Context, before time.Time) (int, error)
	// Conversations returns the conversations q selects without their
	// turns, the most recently active first.
	Conversations(ctx context.Context, q ListQuery) ([]Conversation, error)
	// DeleteConversation deletes a conversation with its turns and
	// fingerprints; an unknown id is ErrNotFound.
	DeleteConversation(ctx context.Context, id string) error
	// DeleteTurn deletes one turn, its conversation staying; an unknown id
	// is ErrNotFound.
	DeleteTurn(ctx context.Context, responseID string) error
	Ping(ctx context.Context) error
	Close() error
}

// ListQuery selects a page of conversations.
type ListQuery struct {
	Owner     string  // only this key id's; "" for every owner's
	Workspace string  // only this workspace's; "" for every one's
	After     *Cursor // the page starts after this place
	Limit     int     // the most returned; 0 or less: no limit
}

// Cursor is a place in the listing order: the conversation a page ended with.
type Cursor struct {
	Updated time.Time
	ID      string
}

// precedes reports whether the place p comes before c in the listing order.
func (p Cursor) precedes(c *Conversation) bool {
	if !c.Updated.Equal(p.Updated) {
		return c.Updated.Before(p.Updated)
	}
	return c.ID < p.ID
}

// byActivity orders conversations as listed: the most recently active first.
func byActivity(a, b Conversation) int {
	if c := b.Updated.Compare(a.Updated); c != 0 {
		return c
	}
	return cmp.Compare(b.ID, a.ID)
}

// clock is the time conversations are put at; tests set it.
var clock = time.Now

// Config selects the conversation store.
type Config struct {
	Driver         string        `yaml:"driver"`
	Path           string        `yaml:"path"`
	DSN            string        `yaml:"dsn"`
	MaxAge         time.Duration `yaml:"max_age"`
	MemoryMaxBytes int64         `yaml:"memory_max_bytes"`
}

// Open opens the configured store.
func Open(ctx context.Context, cfg Config) (Store, error) {
	switch cfg.Driver {
	case "memory":
		m := NewMemoryStore()
		m.maxBytes = cfg.MemoryMaxBytes
		return m, nil
	case "sqlite", "":
		return OpenSQLite(ctx, cfg.Path)
	case "postgres":
		return OpenPostgres(ctx, cfg.DSN)
	}
	return nil, fmt.Errorf("unknown store driver %q", cfg.Driver)
}

// PruneEvery deletes what is older than maxAge from the store now and then
// every hour (sooner for a short maxAge), until ctx ends.
func PruneEvery(ctx context.Context, store Store, maxAge time.Duration, log zerolog.Logger) {
	every := min(time.Hour, max(maxAge/4, time.Second))
	for {
		if n, err := store.Prune(ctx, time.Now().Add(-maxAge)); err != nil {
			log.Warn().Err(err).Msg("pruning the store")
		} else if n > 0 {
			log.Info().Int("turns", n).Dur("max_age", maxAge).Msg("pruned the store")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// interruptedResponse rewrites a stored streaming response as interrupted.
func interruptedResponse(b []byte) []byte {
	var resp documents.ChatResponse
	if json.Unmarshal(b, &resp) != nil {
		return b
	}
	resp.Status = documents.StatusError
	resp.Metadata.StopReason = documents.StopInterrupted
	msg := "the gateway stopped while this run was in progress"
	meta, _ := json.Marshal(documents.ErrorMeta{ErrorCode: documents.CodeInterrupted, Source: "gateway", Details: "the run was interrupted by a restart of the gateway"})
	seq := len(resp.Documents) + 1
	resp.Documents = append(resp.Documents, documents.Document{ID: documents.DocID(seq), Type: documents.TypeError, Sequence: seq, Content: &msg, Metadata: meta})
	out, err := documents.EncodeResponse(&resp)
	if err != nil {
		return b
	}
	return out
}

// MemoryStore is a Store in memory, for --demo and tests. Past maxBytes of
// responses it forgets its oldest conversations.
type MemoryStore struct {
	mu       sync.Mutex
	convs    map[string]*Conversation
	turns    map[string]*Turn
	byConv   map[string][]string // the response ids of each conversation's turns
	fps      map[string]string
	convFP   map[string][]string // conversation → the fingerprints recorded for it
	heads    map[string]string   // conversation → its latest fingerprint
	order    []string            // response ids as first put, oldest first, some forgotten
	bytes    int64               // the size of the responses held
	maxBytes int64               // 0: no limit
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{convs: map[string]*Conversation{}, turns: map[string]*Turn{}, byConv: map[string][]string{}, fps: map[string]string{}, convFP: map[string][]string{}, heads: map[string]string{}}
}

// PutConversation creates or updates a conversation.
func (m *MemoryStore) PutConversation(_ context.Context, c Conversation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := clock().UTC()
	c.Created, c.Updated = now, now
	if old, ok := m.convs[c.ID]; ok {
		c.Created, c.Owner = old.Created, old.Owner
		*old = c
		return nil
	}
	m.convs[c.ID] = &c
	return nil
}

// ConversationInfo returns a conversation without its turns.
func (m *MemoryStore) ConversationInfo(_ context.Context, id string) (Conversation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.convs[id]
	if !ok {
		return Conversation{}, ErrNotFound
	}
	return *c, nil
}

// Conversation returns a conversation and its turns, oldest first.
func (m *MemoryStore) Conversation(_ context.Context, id string) (Conversation, []Turn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.convs[id]
	if !ok {
		return Conversation{}, nil, ErrNotFound
	}
	ts := make([]Turn, 0, len(m.byConv[id]))
	for _, rid := range m.byConv[id] {
		ts = append(ts, *m.turns[rid])
	}
	slices.SortStableFunc(ts, func(a, b Turn) int { return a.Created.Compare(b.Created) })
	return *c, ts, nil
}

// PutTurn creates or replaces a turn.
func (m *MemoryStore) PutTurn(_ context.Context, t Turn) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.turns[t.ResponseID]
	moved := !ok || old.ConversationID != t.ConversationID
	if ok && moved {
		m.unindex(old.ConversationID, t.ResponseID)
	}
	if moved && t.ConversationID != "" {
		m.byConv[t.ConversationID] = append(m.byConv[t.ConversationID], t.ResponseID)
	}
	if ok {
		m.bytes -= int64(len(old.Response))
		*old = t
	} else {
		m.turns[t.ResponseID] = &t
		m.order = append(m.order, t.ResponseID)
	}
	m.bytes += int64(len(t.Response))
	for m.maxBytes > 0 && m.bytes > m.maxBytes {
		if !m.forgetOldest(t.ResponseID) {
			break
		}
	}
	return nil
}

// forgetOldest forgets the oldest finished turn but keep, and its conversation
// once it has no turn left, and reports whether there was one.
func (m *MemoryStore) forgetOldest(keep string) bool {
	for i, id := range m.order {
		t := m.turns[id]
		if t == nil && i == 0 {
			m.order = m.order[1:] // forgotten before
			return true
		}
		if t == nil || id == keep || t.Status == string(documents.StatusStreaming) {
			continue
		}
		if i == 0 {
			m.order = m.order[1:]
		} // else its id stays, forgotten, until it is the oldest
		conv := t.ConversationID
		m.forgetTurn(id)
		if conv != "" && len(m.byConv[conv]) == 0 {
			m.forgetConversation(conv)
		}
		return true
	}
	return false
}

// forgetTurn deletes a turn.
func (m *MemoryStore) forgetTurn(id string) {
	t := m.turns[id]
	if t == nil {
		return
	}
	m.bytes -= int64(len(t.Response))
	delete(m.turns, id)
	m.unindex(t.ConversationID, id)
}

// unindex takes turn id off conversation conv's turns.
func (m *MemoryStore) unindex(conv, id string) {
	if ids := m.byConv[conv]; conv != "" {
		if i := slices.Index(ids, id); i >= 0 {
			m.byConv[conv] = slices.Delete(ids, i, i+1)
		}
	}
}

// forgetConversation deletes a conversation, its turns and fingerprints.
func (m *MemoryStore) forgetConversation(id string) {
	for _, rid := range slices.Clone(m.byConv[id]) {
		m.forgetTurn(rid)
	}
	delete(m.byConv, id)
	delete(m.convs, id)
	delete(m.heads, id)
	for _, fp := range m.convFP[id] {
		if m.fps[fp] == id {
			delete(m.fps, fp)
		}
	}
	delete(m.convFP, id)
}

// Prune deletes what is older than before.
func (m *MemoryStore) Prune(_ context.Context, before time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.turns)
	old := func(t *Turn) bool {
		return t.Created.Before(before) && t.Status != string(documents.StatusStreaming)
	}
	for id, c := range m.convs {
		if c.Updated.Before(before) && !slices.ContainsFunc(m.byConv[id], func(rid string) bool { return !old(m.turns[rid]) }) {
			m.forgetConversation(id)
		}
	}
	for id, t := range m.turns {
		if t.ConversationID == "" && old(t) {
			m.forgetTurn(id)
		}
	}
	m.order = slices.DeleteFunc(m.order, func(id string) bool { return m.turns[id] == nil })
	return n - len(m.turns), nil
}

// Conversations returns a page of conversations, the most recently active first.
func (m *MemoryStore) Conversations(_ context.Context, q ListQuery) ([]Conversation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []Conversation{}
	for _, c := range m.convs {
		if q.Owner != "" && c.Owner != q.Owner || q.Workspace != "" && c.Workspace != q.Workspace || q.After != nil && !q.After.precedes(c) {
			continue
		}
		out = append(out, *c)
	}
	slices.SortFunc(out, byActivity)
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// DeleteConversation deletes a conversation, its turns and fingerprints.
func (m *MemoryStore) DeleteConversation(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.convs[id]; !ok {
		return ErrNotFound
	}
	m.forgetConversation(id)
	return nil
}

// DeleteTurn deletes a turn.
func (m *MemoryStore) DeleteTurn(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.turns[id]; !ok {
		return ErrNotFound
	}
	m.forgetTurn(id)
	return nil
}

// Turn returns a turn by its response id.
func (m *MemoryStore) Turn(_ context.Context, id string) (Turn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.turns[id]
	if !ok {
		return Turn{}, ErrNotFound
	}
	return *t, nil
}

// MarkInterrupted marks streaming turns as interrupted.
func (m *MemoryStore) MarkInterrupted(context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, t := range m.turns {
		if t.Status == string(documents.StatusStreaming) {
			t.Status = string(documents.StatusError)
			t.Response = interruptedResponse(t.Response)
			n++
		}
	}
	return n, nil
}

// PutFingerprint records where a conversation stands.
func (m *MemoryStore) PutFingerprint(_ context.Context, fp, conv string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fps[fp] != conv {
		m.fps[fp] = conv
		m.convFP[conv] = append(m.convFP[conv], fp)
	}
	m.heads[conv] = fp
	return nil
}

// Fingerprint returns the conversation that stands at an OpenAI history.
func (m *MemoryStore) Fingerprint(_ context.Context, fp string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.fps[fp]
	if !ok || m.heads[c] != fp {
		return "", ErrNotFound
	}
	return c, nil
}

// HistoryConversation returns the conversation a history was recorded for.
func (m *MemoryStore) HistoryConversation(_ context.Context, fp string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.fps[fp]; ok {
		return c, nil
	}
	return "", ErrNotFound
}

// Ping always succeeds.
func (m *MemoryStore) Ping(context.Context) error { return nil }

// Close does nothing.
func (m *MemoryStore) Close() error { return nil }

// SQLStore is a Store on a SQL database: SQLite by default.
type SQLStore struct {
	db               *sql.DB
	putConv, putTurn *sql.Stmt     // the upserts, prepared once
	ckpt             *checkpointer // copies the write-ahead log into the database
}

// migration is one step of the schema: SQL, and columns added unless their
// table has them already (an older gateway may have set the version back).
type migration struct {
	sql     string
	columns []column
}

// column is a column a migration adds to a table.
type column struct{ table, name, decl string }

// apply applies m in tx.
func (m migration) apply(ctx context.Context, tx *sql.Tx) error {
	if m.sql != "" {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return err
		}
	}
	for _, c := range m.columns {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info(?) WHERE name = ?`, c.table, c.name).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := tx.ExecContext(ctx, "ALTER TABLE "+c.table+" ADD COLUMN "+c.name+" "+c.decl); err != nil {
				return err
			}
		}
	}
	return nil
}

// migrations are applied in order; the schema version is user_version.
var migrations = []migration{
	{sql: `CREATE TABLE conversations (
		id TEXT PRIMARY KEY,
		session_id TEXT NOT NULL,
		backend TEXT NOT NULL,
		workspace TEXT NOT NULL,
		model TEXT NOT NULL,
		created TEXT NOT NULL,
		updated TEXT NOT NULL
	);
	CREATE TABLE turns (
		response_id TEXT PRIMARY KEY,
		conversation_id TEXT NOT NULL,
		prompt TEXT NOT NULL,
		status TEXT NOT NULL,
		created TEXT NOT NULL,
		response BLOB NOT NULL
	);
	CREATE INDEX turns_conversation ON turns(conversation_id, created);
	CREATE INDEX turns_status ON turns(status);
	CREATE TABLE fingerprints (
		fingerprint TEXT PRIMARY KEY,
		conversation_id TEXT NOT NULL,
		created TEXT NOT NULL
	);`},
	{sql: `CREATE INDEX fingerprints_conversation ON fingerprints(conversation_id);`},
	// The id of the API key that made each conversation and turn.
	{columns: []column{{"conversations", "owner", "TEXT NOT NULL DEFAULT ''"}, {"turns", "owner", "TEXT NOT NULL DEFAULT ''"}}},
	// The listing order of conversations (see activity), of all and of
	// each owner's.
	{sql: `CREATE INDEX IF NOT EXISTS conversations_activity ON conversations(rtrim(updated, 'Z'), id);
	CREATE INDEX IF NOT EXISTS conversations_owner_activity ON conversations(owner, rtrim(updated, 'Z'), id);`},
}

// activity is the key of the listing order: updated without its zone, which
// sorts as the times do (a second with no fraction before one with one).
const activity = `rtrim(updated, 'Z')`

// OpenSQLite opens or creates the SQLite database at path and migrates it.
func OpenSQLite(ctx context.Context, path string) (*SQLStore, error) {
	return openSQLite(ctx, path, checkpointEvery, checkpointLongLog)
}

// openSQLite is OpenSQLite with the checkpointer's timing.
func openSQLite(ctx context.Context, path string, every time.Duration, longLog int) (*SQLStore, error) {
	path = storePath(path)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating the store folder: %w", err)
	}
	// Escaped, so that a '#' or '?' in the path stays in it.
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(ON)"
	// The checkpointer, not the commits, copies the log (see checkpointer).
	db, err := sql.Open("sqlite", dsn+"&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	db.SetMaxOpenConns(1)
	s := &SQLStore{db: db}
	version, err := s.migrate(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	// A write finds out now whether the store can be written, and keeps
	// the version a newer gateway may have set.
	if _, err := db.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version)); err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s cannot be written: %w", path, err)
	}
	if s.putConv, err = db.PrepareContext(ctx, putConversationSQL); err == nil {
		s.putTurn, err = db.PrepareContext(ctx, putTurnSQL)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: preparing its writes: %w", path, err)
	}
	if s.ckpt, err = startCheckpointer(dsn, db, every, longLog); err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	return s, nil
}

// storePath is the SQLite store's file: store.path, or its default.
func storePath(path string) string {
	if path == "" {
		return "./data/docstream.db"
	}
	return path
}

// migrate applies the migrations the store lacks and returns its version.
func (s *SQLStore) migrate(ctx context.Context) (int, error) {
	var v int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("reading the store version: %w", err)
	}
	for i := v; i < len(migrations); i++ {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return 0, fmt.Errorf("migrating the store: %w", err)
		}
		if err := migrations[i].apply(ctx, tx); err != nil {
			tx.Rollback()
			return 0, fmt.Errorf("migration %d: %w", i+1, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", i+1)); err != nil {
			tx.Rollback()
			return 0, fmt.Errorf("migration %d: %w", i+1, err)
		}
		if err := tx.Commit(); err != nil {
			return 0, fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	return max(v, len(migrations)), nil
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseTS(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// PutConversation creates or updates a conversation.
func (s *SQLStore) PutConversation(ctx context.Context, c Conversation) error {
	return s.wrote(putConversation(ctx, s.putConv, c, ts(clock())))
}

// wrote tells the checkpointer about a committed write; it returns err.
func (s *SQLStore) wrote(err error) error {
	if err == nil {
		s.ckpt.wrote()
	}
	return err
}

// ConversationInfo returns a conversation without its turns.
func (s *SQLStore) ConversationInfo(ctx context.Context, id string) (Conversation, error) {
	c, err := scanConversation(s.db.QueryRowContext(ctx, `SELECT `+convColumns+` FROM conversations WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return c, ErrNotFound
	}
	if err != nil {
		return c, fmt.Errorf("reading conversation: %w", err)
	}
	return c, nil
}

// Conversation returns a conversation and its turns, oldest first.
func (s *SQLStore) Conversation(ctx context.Context, id string) (Conversation, []Turn, error) {
	c, err := s.ConversationInfo(ctx, id)
	if err != nil {
		return c, nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+turnColumns+` FROM turns
		WHERE conversation_id = ? ORDER BY created`, id)
	if err != nil {
		return c, nil, fmt.Errorf("reading turns: %w", err)
	}
	defer rows.Close()
	var turns []Turn
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			return c, nil, err
		}
		turns = append(turns, t)
	}
	return c, turns, rows.Err()
}

type scanner interface{ Scan(dest ...any) error }

// convColumns are the columns scanConversation reads, in its order.
const convColumns = `id, session_id, backend, workspace, model, created, updated, owner`

func scanConversation(r scanner) (Conversation, error) {
	var c Conversation
	var created, updated string
	if err := r.Scan(&c.ID, &c.SessionID, &c.Backend, &c.Workspace, &c.Model, &created, &updated, &c.Owner); err != nil {
		return c, err
	}
	c.Created, c.Updated = parseTS(created), parseTS(updated)
	return c, nil
}

// turnColumns are the columns scanTurn reads, in its order.
const turnColumns = `response_id, conversation_id, prompt, status, created, response, owner`

func scanTurn(r scanner) (Turn, error) {
	var t Turn
	var created string
	if err := r.Scan(&t.ResponseID, &t.ConversationID, &t.Prompt, &t.Status, &created, &t.Response, &t.Owner); err != nil {
		return t, err
	}
	t.Created = parseTS(created)
	return t, nil
}

const putConversationSQL = `INSERT INTO conversations (id, session_id, backend, workspace, model, created, updated, owner)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT(id) DO UPDATE SET session_id=excluded.session_id, backend=excluded.backend,
	workspace=excluded.workspace, model=excluded.model, updated=excluded.updated`

// putConversation creates or updates a conversation row, updated at now,
// with st, a prepared putConversationSQL.
func putConversation(ctx context.Context, st *sql.Stmt, c Conversation, now string) error {
	if _, err := st.ExecContext(ctx, c.ID, c.SessionID, c.Backend, c.Workspace, c.Model, now, now, c.Owner); err != nil {
		return fmt.Errorf("saving conversation: %w", err)
	}
	return nil
}

const putTurnSQL = `INSERT INTO turns (response_id, conversation_id, prompt, status, created, response, owner)
	VALUES (?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT(response_id) DO UPDATE SET conversation_id=excluded.conversation_id, status=excluded.status,
	response=excluded.response`

// putTurn creates or replaces a turn row with st, a prepared putTurnSQL.
func putTurn(ctx context.Context, st *sql.Stmt, t Turn) error {
	if _, err := st.ExecContext(ctx, t.ResponseID, t.ConversationID, t.Prompt, t.Status, ts(t.Created), t.Response, t.Owner); err != nil {
		return fmt.Errorf("saving turn: %w", err)
	}
	return nil
}

// PutTurn creates or replaces a turn.
func (s *SQLStore) PutTurn(ctx context.Context, t Turn) error {
	return s.wrote(putTurn(ctx, s.putTurn, t))
}

// PutBatch creates or replaces conversations, then turns, in one transaction.
func (s *SQLStore) PutBatch(ctx context.Context, convs []Conversation, turns []Turn) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("saving responses: %w", err)
	}
	defer tx.Rollback()
	now := ts(clock())
	putConv, putT := tx.StmtContext(ctx, s.putConv), tx.StmtContext(ctx, s.putTurn)
	for _, c := range convs {
		if err := putConversation(ctx, putConv, c, now); err != nil {
			return err
		}
	}
	for _, t := range turns {
		if err := putTurn(ctx, putT, t); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("saving responses: %w", err)
	}
	return s.wrote(nil)
}

// Prune deletes what is older than before.
func (s *SQLStore) Prune(ctx context.Context, before time.Time) (int, error) {
	const stale = `SELECT c.id FROM conversations c WHERE c.updated < ?1 AND NOT EXISTS
		(SELECT 1 FROM turns t WHERE t.conversation_id = c.id AND (t.created >= ?1 OR t.status = 'streaming'))`
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("pruning the store: %w", err)
	}
	defer tx.Rollback()
	at, n := ts(before), int64(0)
	for _, d := range []struct {
		q     string
		turns bool // it deletes turns, which Prune counts
	}{
		{`DELETE FROM fingerprints WHERE conversation_id IN (` + stale + `)`, false},
		{`DELETE FROM turns WHERE conversation_id IN (` + stale + `)`, true},
		{`DELETE FROM turns WHERE conversation_id = '' AND status != 'streaming' AND created < ?1`, true},
		{`DELETE FROM conversations WHERE updated < ?1 AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.conversation_id = conversations.id)`, false},
	} {
		res, err := tx.ExecContext(ctx, d.q, at)
		if err != nil {
			return 0, fmt.Errorf("pruning the store: %w", err)
		}
		if d.turns {
			k, _ := res.RowsAffected()
			n += k
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("pruning the store: %w", err)
	}
	return int(n), s.wrote(nil)
}

// Conversations returns a page of conversations, the most recently active first.
func (s *SQLStore) Conversations(ctx context.Context, q ListQuery) ([]Conversation, error) {
	var where []string
	var args []any
	if q.Owner != "" {
		where, args = append(where, `owner = ?`), append(args, q.Owner)
	}
	if q.Workspace != "" {
		where, args = append(where, `workspace = ?`), append(args, q.Workspace)
	}
	if q.After != nil {
		where, args = append(where, `(`+activity+`, id) < (?, ?)`), append(args, strings.TrimSuffix(ts(q.After.Updated), "Z"), q.After.ID)
	}
	query := `SELECT ` + convColumns + ` FROM conversations`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = -1 // none
	}
	query += ` ORDER BY ` + activity + ` DESC, id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("listing conversations: %w", err)
	}
	defer rows.Close()
	out := []Conversation{}
	for rows.Next() {
		c, err := scanConversation(rows)
		if err != nil {
			return nil, fmt.Errorf("listing conversations: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing conversations: %w", err)
	}
	return out, nil
}

// DeleteConversation deletes a conversation, its turns and fingerprints.
func (s *SQLStore) DeleteConversation(ctx context.Context, id string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("deleting conversation: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM conversations WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("deleting conversation: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("deleting conversation: %w", err)
	} else if n == 0 {
		return ErrNotFound
	}
	for _, q := range []string{`DELETE FROM turns WHERE conversation_id = ?`, `DELETE FROM fingerprints WHERE conversation_id = ?`} {
		if _, err := tx.ExecContext(ctx, q, id); err != nil {
			return fmt.Errorf("deleting conversation: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("deleting conversation: %w", err)
	}
	return s.wrote(nil)
}

// DeleteTurn deletes a turn.
func (s *SQLStore) DeleteTurn(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM turns WHERE response_id = ?`, id)
	if err != nil {
		return fmt.Errorf("deleting turn: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("deleting turn: %w", err)
	} else if n == 0 {
		return ErrNotFound
	}
	return s.wrote(nil)
}

// Turn returns a turn by its response id.
func (s *SQLStore) Turn(ctx context.Context, id string) (Turn, error) {
	t, err := scanTurn(s.db.QueryRowContext(ctx, `SELECT `+turnColumns+` FROM turns WHERE response_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return t, ErrNotFound
	}
	if err != nil {
		return t, fmt.Errorf("reading turn: %w", err)
	}
	return t, nil
}

// MarkInterrupted marks streaming turns as interrupted.
func (s *SQLStore) MarkInterrupted(ctx context.Context) (int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+turnColumns+` FROM turns WHERE status = ?`, string(documents.StatusStreaming))
	if err != nil {
		return 0, fmt.Errorf("finding interrupted runs: %w", err)
	}
	var turns []Turn
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			rows.Close()
			return 0, err
		}
		turns = append(turns, t)
	}
	rows.Close()
	for _, t := range turns {
		t.Status = string(documents.StatusError)
		t.Response = interruptedResponse(t.Response)
		if err := s.PutTurn(ctx, t); err != nil {
			return 0, err
		}
	}
	return len(turns), nil
}

// PutFingerprint records where a conversation stands, as its highest rowid.
func (s *SQLStore) PutFingerprint(ctx context.Context, fp, conv string) error {
	_, err := s.db.ExecContext(ctx, `INSERT OR REPLACE INTO fingerprints (fingerprint, conversation_id, created) VALUES (?, ?, ?)`,
		fp, conv, ts(time.Now()))
	if err != nil {
		return fmt.Errorf("saving fingerprint: %w", err)
	}
	return s.wrote(nil)
}

// Fingerprint returns the conversation that stands at an OpenAI history.
func (s *SQLStore) Fingerprint(ctx context.Context, fp string) (string, error) {
	return s.fingerprintConversation(ctx, `SELECT f.conversation_id FROM fingerprints f WHERE f.fingerprint = ?
		AND NOT EXISTS (SELECT 1 FROM fingerprints g WHERE g.conversation_id = f.conversation_id AND g.rowid > f.rowid)`, fp)
}

// HistoryConversation returns the conversation a history was recorded for.
func (s *SQLStore) HistoryConversation(ctx context.Context, fp string) (string, error) {
	return s.fingerprintConversation(ctx, `SELECT conversation_id FROM fingerprints WHERE fingerprint = ?`, fp)
}

// fingerprintConversation returns the conversation id that query selects for fp.
func (s *SQLStore) fingerprintConversation(ctx context.Context, query, fp string) (string, error) {
	var c string
	err := s.db.QueryRowContext(ctx, query, fp).Scan(&c)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading fingerprint: %w", err)
	}
	return c, nil
}

// Ping checks the database answers.
func (s *SQLStore) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Close closes the database; its last connection copies the rest of the log.
func (s *SQLStore) Close() error {
	cerr := s.ckpt.close()
	s.putConv.Close()
	s.putTurn.Close()
	return errors.Join(s.db.Close(), cerr)
}
