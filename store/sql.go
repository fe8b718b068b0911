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
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver

	"github.com/docstream/docstream/documents"
)

// SQLStore is a Store on a SQL database: SQLite, or PostgreSQL (see
// PostgresStore).
type SQLStore struct {
	db    *sql.DB
	d     dialect
	stmts map[string]*sql.Stmt // SQLite's upserts, prepared once: parsing costs as much as writing
	ckpt  *checkpointer        // SQLite's: copies the write-ahead log into the database
}

// dialect is what SQLite and PostgreSQL keep or write differently. Both
// read $1-style parameters.
type dialect struct {
	time           func(time.Time) any // a time as the database keeps it
	activity       string              // the key of the listing order
	key            func(time.Time) any // a Cursor's time as activity reads
	seq            string              // the column that orders fingerprints as put
	putFingerprint string              // gives the fingerprint put the highest seq
	lock           string              // what a SELECT adds to lock the rows it reads
	convTables     []string            // the tables of a conversation's rows besides conversations
}

// sqlite keeps times as RFC 3339 text in UTC, listed by updated without its
// zone: that sorts as the times do (a second with no fraction first).
var sqlite = dialect{
	time:           func(t time.Time) any { return t.UTC().Format(time.RFC3339Nano) },
	activity:       `rtrim(updated, 'Z')`,
	key:            func(t time.Time) any { return strings.TrimSuffix(t.UTC().Format(time.RFC3339Nano), "Z") },
	seq:            "rowid",
	putFingerprint: `INSERT OR REPLACE INTO fingerprints (fingerprint, conversation_id, created) VALUES ($1, $2, $3)`,
	convTables:     []string{"turns", "fingerprints"},
}

// OpenSQLite opens or creates the SQLite database at path and migrates it.
func OpenSQLite(ctx context.Context, path string) (*SQLStore, error) {
	return openSQLite(ctx, path, checkpointEvery, checkpointLongLog)
}

// openSQLite is OpenSQLite with the checkpointer's timing.
func openSQLite(ctx context.Context, path string, every time.Duration, longLog int) (*SQLStore, error) {
	path = cmp.Or(path, defaultPath)
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
	s := &SQLStore{db: db, d: sqlite, stmts: map[string]*sql.Stmt{}}
	version, err := s.migrateSQLite(ctx)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	// A write finds out now whether the store can be written, and keeps
	// the version a newer gateway may have set.
	if _, err := db.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version)); err != nil {
		s.Close()
		return nil, fmt.Errorf("store %s cannot be written: %w", path, err)
	}
	for _, q := range []string{putConversationSQL, putTurnSQL} {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("store %s: preparing its writes: %w", path, err)
		}
		s.stmts[q] = st
	}
	if s.ckpt, err = startCheckpointer(dsn, db, every, longLog); err != nil {
		s.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	return s, nil
}

// defaultPath is the SQLite store's file when store.path is empty.
const defaultPath = "./data/docstream.db"

// migration is one step of SQLite's schema: SQL, and columns added unless
// their table has them already (an older gateway may have set the version
// back).
type migration struct {
	sql     string
	columns []column
}

// column is a column a migration adds to a table.
type column struct{ table, name, decl string }

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
	// The listing order of conversations (see sqlite.activity), of all and of
	// each owner's.
	{sql: `CREATE INDEX IF NOT EXISTS conversations_activity ON conversations(rtrim(updated, 'Z'), id);
	CREATE INDEX IF NOT EXISTS conversations_owner_activity ON conversations(owner, rtrim(updated, 'Z'), id);`},
}

// apply applies m in tx.
func (m migration) apply(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return err
	}
	for _, c := range m.columns {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info($1) WHERE name = $2`, c.table, c.name).Scan(&n); err != nil {
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

// migrateSQLite applies the migrations the SQLite store lacks and returns its
// version.
func (s *SQLStore) migrateSQLite(ctx context.Context) (int, error) {
	var v int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("reading the store version: %w", err)
	}
	for i := v; i < len(migrations); i++ {
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			if err := migrations[i].apply(ctx, tx); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", i+1))
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	return max(v, len(migrations)), nil
}

// inTx runs fn in a transaction, committed when it returns nil.
func (s *SQLStore) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return s.wrote(tx.Commit())
}

// exec runs q in tx, or on its own when tx is nil, as the statement
// prepared for it if there is one.
func (s *SQLStore) exec(ctx context.Context, tx *sql.Tx, q string, args ...any) (sql.Result, error) {
	if st := s.stmts[q]; st != nil {
		if tx != nil {
			st = tx.StmtContext(ctx, st)
		}
		return st.ExecContext(ctx, args...)
	}
	if tx != nil {
		return tx.ExecContext(ctx, q, args...)
	}
	return s.db.ExecContext(ctx, q, args...)
}

// wrote tells the checkpointer about a committed write; it returns err.
func (s *SQLStore) wrote(err error) error {
	if err == nil && s.ckpt != nil {
		s.ckpt.wrote()
	}
	return err
}

type scanner interface{ Scan(dest ...any) error }

// timeColumn scans a time kept as text (SQLite) or a timestamp.
type timeColumn struct{ t *time.Time }

// Scan reads v into the time; text that is not RFC 3339 is the zero time.
func (c timeColumn) Scan(v any) error {
	switch v := v.(type) {
	case string:
		*c.t, _ = time.Parse(time.RFC3339Nano, v)
	case time.Time:
		*c.t = v.UTC()
	default:
		return fmt.Errorf("a time kept as %T", v)
	}
	return nil
}

// convColumns are the columns scanConversation reads, in its order.
const convColumns = `id, session_id, backend, workspace, model, created, updated, owner`

func scanConversation(r scanner) (Conversation, error) {
	var c Conversation
	err := r.Scan(&c.ID, &c.SessionID, &c.Backend, &c.Workspace, &c.Model, timeColumn{&c.Created}, timeColumn{&c.Updated}, &c.Owner)
	return c, err
}

// turnColumns are the columns scanTurn reads, in its order.
const turnColumns = `response_id, conversation_id, prompt, status, created, response, owner`

func scanTurn(r scanner) (Turn, error) {
	var t Turn
	err := r.Scan(&t.ResponseID, &t.ConversationID, &t.Prompt, &t.Status, timeColumn{&t.Created}, &t.Response, &t.Owner)
	return t, err
}

// collect scans the rows of a query.
func collect[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// found is err wrapped with what was done, or ErrNotFound for no row.
func found(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows) || errors.Is(err, ErrNotFound):
		return ErrNotFound
	}
	return fmt.Errorf("%s: %w", what, err)
}

// deleted is err, or ErrNotFound when a DELETE deleted no row.
func deleted(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return cmp.Or(err, ErrNotFound)
	}
	return nil
}

const putConversationSQL = `INSERT INTO conversations (id, session_id, backend, workspace, model, created, updated, owner)
	VALUES ($1, $2, $3, $4, $5, $6, $6, $7)
	ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, backend = excluded.backend,
	workspace = excluded.workspace, model = excluded.model, updated = excluded.updated`

const putTurnSQL = `INSERT INTO turns (response_id, conversation_id, prompt, status, created, response, owner)
	VALUES ($1, $2, $3, $4, $5, $6, $7)
	ON CONFLICT (response_id) DO UPDATE SET conversation_id = excluded.conversation_id,
	status = excluded.status, response = excluded.response`

// putConversation creates or updates a conversation, updated at now, in tx
// (nil: on its own).
func (s *SQLStore) putConversation(ctx context.Context, tx *sql.Tx, c Conversation, now time.Time) error {
	if _, err := s.exec(ctx, tx, putConversationSQL, c.ID, c.SessionID, c.Backend, c.Workspace, c.Model, s.d.time(now), c.Owner); err != nil {
		return fmt.Errorf("saving conversation: %w", err)
	}
	return nil
}

// putTurn creates or replaces a turn in tx (nil: on its own).
func (s *SQLStore) putTurn(ctx context.Context, tx *sql.Tx, t Turn) error {
	if _, err := s.exec(ctx, tx, putTurnSQL, t.ResponseID, t.ConversationID, t.Prompt, t.Status, s.d.time(t.Created), t.Response, t.Owner); err != nil {
		return fmt.Errorf("saving turn: %w", err)
	}
	return nil
}

// PutConversation creates or updates a conversation.
func (s *SQLStore) PutConversation(ctx context.Context, c Conversation) error {
	return s.wrote(s.putConversation(ctx, nil, c, clock()))
}

// PutTurn creates or replaces a turn.
func (s *SQLStore) PutTurn(ctx context.Context, t Turn) error {
	return s.wrote(s.putTurn(ctx, nil, t))
}

// PutBatch creates or replaces conversations, then turns, in one transaction.
func (s *SQLStore) PutBatch(ctx context.Context, convs []Conversation, turns []Turn) error {
	now := clock()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for _, c := range convs {
			if err := s.putConversation(ctx, tx, c, now); err != nil {
				return err
			}
		}
		for _, t := range turns {
			if err := s.putTurn(ctx, tx, t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("saving responses: %w", err)
	}
	return nil
}

// ConversationInfo returns a conversation without its turns.
func (s *SQLStore) ConversationInfo(ctx context.Context, id string) (Conversation, error) {
	c, err := scanConversation(s.db.QueryRowContext(ctx, `SELECT `+convColumns+` FROM conversations WHERE id = $1`, id))
	return c, found(err, "reading conversation")
}

// Conversation returns a conversation and its turns, oldest first.
func (s *SQLStore) Conversation(ctx context.Context, id string) (Conversation, []Turn, error) {
	c, err := s.ConversationInfo(ctx, id)
	if err != nil {
		return c, nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+turnColumns+` FROM turns WHERE conversation_id = $1 ORDER BY created`, id)
	turns, err := collect(rows, err, scanTurn)
	if err != nil {
		return c, nil, fmt.Errorf("reading turns: %w", err)
	}
	return c, turns, nil
}

// Turn returns a turn by its response id.
func (s *SQLStore) Turn(ctx context.Context, id string) (Turn, error) {
	t, err := scanTurn(s.db.QueryRowContext(ctx, `SELECT `+turnColumns+` FROM turns WHERE response_id = $1`, id))
	return t, found(err, "reading turn")
}

// Prune deletes what is older than before.
func (s *SQLStore) Prune(ctx context.Context, before time.Time) (int, error) {
	const stale = `SELECT c.id FROM conversations c WHERE c.updated < $1 AND NOT EXISTS
		(SELECT 1 FROM turns t WHERE t.conversation_id = c.id AND (t.created >= $1 OR t.status = 'streaming'))`
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for _, d := range []struct {
			q     string
			turns bool // it deletes turns, which Prune counts
		}{
			{`DELETE FROM fingerprints WHERE conversation_id IN (` + stale + `)`, false},
			{`DELETE FROM turns WHERE conversation_id IN (` + stale + `)`, true},
			{`DELETE FROM turns WHERE conversation_id = '' AND status != 'streaming' AND created < $1`, true},
			{`DELETE FROM conversations WHERE updated < $1 AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.conversation_id = conversations.id)`, false},
		} {
			res, err := tx.ExecContext(ctx, d.q, s.d.time(before))
			if err != nil {
				return err
			}
			if d.turns {
				k, _ := res.RowsAffected()
				n += k
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pruning the store: %w", err)
	}
	return int(n), nil
}

// Conversations returns a page of conversations, the most recently active first.
func (s *SQLStore) Conversations(ctx context.Context, q ListQuery) ([]Conversation, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if q.Owner != "" {
		where = append(where, `owner = `+arg(q.Owner))
	}
	if q.Workspace != "" {
		where = append(where, `workspace = `+arg(q.Workspace))
	}
	if q.After != nil {
		where = append(where, `(`+s.d.activity+`, id) < (`+arg(s.d.key(q.After.Updated))+`, `+arg(q.After.ID)+`)`)
	}
	query := `SELECT ` + convColumns + ` FROM conversations`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, ` AND `)
	}
	query += ` ORDER BY ` + s.d.activity + ` DESC, id DESC`
	if q.Limit > 0 {
		query += ` LIMIT ` + strconv.Itoa(q.Limit)
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	out, err := collect(rows, err, scanConversation)
	if err != nil {
		return nil, fmt.Errorf("listing conversations: %w", err)
	}
	return out, nil
}

// DeleteConversation deletes a conversation with its rows, in one transaction.
func (s *SQLStore) DeleteConversation(ctx context.Context, id string) error {
	return found(s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM conversations WHERE id = $1`, id)
		if err := deleted(res, err); err != nil {
			return err
		}
		for _, table := range s.d.convTables {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE conversation_id = $1`, id); err != nil {
				return err
			}
		}
		return nil
	}), "deleting conversation")
}

// DeleteTurn deletes a turn.
func (s *SQLStore) DeleteTurn(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM turns WHERE response_id = $1`, id)
	return s.wrote(found(deleted(res, err), "deleting turn"))
}

// MarkInterrupted marks streaming turns as interrupted.
func (s *SQLStore) MarkInterrupted(ctx context.Context) (int, error) {
	return s.markInterrupted(ctx, "")
}

// markInterrupted marks the streaming turns that where (and args) selects
// as interrupted, in one transaction.
func (s *SQLStore) markInterrupted(ctx context.Context, where string, args ...any) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+turnColumns+` FROM turns WHERE status = 'streaming'`+where+s.d.lock, args...)
		turns, err := collect(rows, err, scanTurn)
		if err != nil {
			return err
		}
		for _, t := range turns {
			if _, err := tx.ExecContext(ctx, `UPDATE turns SET status = $2, response = $3 WHERE response_id = $1`,
				t.ResponseID, string(documents.StatusError), interruptedResponse(t.Response)); err != nil {
				return err
			}
		}
		n = len(turns)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("marking interrupted runs: %w", err)
	}
	return n, nil
}

// PutFingerprint records where a conversation stands: its latest
// fingerprint is the one with the highest seq.
func (s *SQLStore) PutFingerprint(ctx context.Context, fp, conv string) error {
	if _, err := s.db.ExecContext(ctx, s.d.putFingerprint, fp, conv, s.d.time(time.Now())); err != nil {
		return fmt.Errorf("saving fingerprint: %w", err)
	}
	return s.wrote(nil)
}

// Fingerprint returns the conversation that stands at an OpenAI history.
func (s *SQLStore) Fingerprint(ctx context.Context, fp string) (string, error) {
	return s.fingerprint(ctx, `SELECT f.conversation_id FROM fingerprints f WHERE f.fingerprint = $1
		AND NOT EXISTS (SELECT 1 FROM fingerprints g WHERE g.conversation_id = f.conversation_id AND g.`+s.d.seq+` > f.`+s.d.seq+`)`, fp)
}

// HistoryConversation returns the conversation a history was recorded for.
func (s *SQLStore) HistoryConversation(ctx context.Context, fp string) (string, error) {
	return s.fingerprint(ctx, `SELECT conversation_id FROM fingerprints WHERE fingerprint = $1`, fp)
}

// fingerprint returns the conversation id that query selects for fp.
func (s *SQLStore) fingerprint(ctx context.Context, query, fp string) (string, error) {
	var c string
	err := s.db.QueryRowContext(ctx, query, fp).Scan(&c)
	return c, found(err, "reading fingerprint")
}

// Ping checks the database answers.
func (s *SQLStore) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Close closes the database; SQLite's last connection copies the rest of
// the log.
func (s *SQLStore) Close() error {
	var errs []error
	if s.ckpt != nil {
		errs = append(errs, s.ckpt.close())
	}
	for _, st := range s.stmts {
		st.Close()
	}
	return errors.Join(append(errs, s.db.Close())...)
}
