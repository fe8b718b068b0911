package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/docstream/docstream/documents"
)

// PostgresStore is a Store on PostgreSQL, shared by the replicas of a
// cluster.
type PostgresStore struct {
	pool *pgxpool.Pool
}

// pgMigrations are applied in order; the schema version is the row of
// docstream_schema. The replica tables are the cluster's.
var pgMigrations = []string{
	`CREATE TABLE conversations (
		id text PRIMARY KEY,
		session_id text NOT NULL,
		backend text NOT NULL,
		workspace text NOT NULL,
		model text NOT NULL,
		created timestamptz NOT NULL,
		updated timestamptz NOT NULL,
		owner text NOT NULL DEFAULT ''
	);
	CREATE INDEX conversations_activity ON conversations(updated, id);
	CREATE INDEX conversations_owner_activity ON conversations(owner, updated, id);
	CREATE TABLE turns (
		response_id text PRIMARY KEY,
		conversation_id text NOT NULL,
		prompt text NOT NULL,
		status text NOT NULL,
		created timestamptz NOT NULL,
		response bytea NOT NULL,
		owner text NOT NULL DEFAULT ''
	);
	CREATE INDEX turns_conversation ON turns(conversation_id, created);
	CREATE INDEX turns_status ON turns(status);
	CREATE TABLE fingerprints (
		fingerprint text PRIMARY KEY,
		conversation_id text NOT NULL,
		created timestamptz NOT NULL,
		seq bigserial NOT NULL
	);
	CREATE INDEX fingerprints_conversation ON fingerprints(conversation_id, seq);
	CREATE TABLE replicas (
		id text PRIMARY KEY,
		url text NOT NULL,
		started timestamptz NOT NULL,
		heartbeat timestamptz NOT NULL
	);
	CREATE TABLE replica_runs (
		response_id text PRIMARY KEY,
		replica_id text NOT NULL,
		live boolean NOT NULL,
		ended timestamptz
	);
	CREATE INDEX replica_runs_live ON replica_runs(replica_id) WHERE live;
	CREATE TABLE replica_sessions (
		conversation_id text PRIMARY KEY,
		replica_id text NOT NULL,
		session_id text NOT NULL
	);`,
}

// schemaLock is the advisory lock the replicas take while one of them
// migrates the schema.
const schemaLock = 0x646f6373 // "docs"

// OpenPostgres connects to the database at dsn and applies the migrations
// it lacks, one replica at a time.
func OpenPostgres(ctx context.Context, dsn string) (*PostgresStore, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store.dsn: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store.dsn: %w", err)
	}
	p := &PostgresStore{pool: pool}
	if err := p.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return p, nil
}

// Pool is the store's connection pool, for the cluster's tables.
func (p *PostgresStore) Pool() *pgxpool.Pool { return p.pool }

// migrate applies the migrations the database lacks under schemaLock.
func (p *PostgresStore) migrate(ctx context.Context) error {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, schemaLock); err != nil {
		return fmt.Errorf("locking the schema: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS docstream_schema (version int NOT NULL)`); err != nil {
		return fmt.Errorf("reading the schema version: %w", err)
	}
	var v int
	err = tx.QueryRow(ctx, `SELECT version FROM docstream_schema`).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		_, err = tx.Exec(ctx, `INSERT INTO docstream_schema (version) VALUES (0)`)
	}
	if err != nil {
		return fmt.Errorf("reading the schema version: %w", err)
	}
	for i := v; i < len(pgMigrations); i++ {
		if _, err := tx.Exec(ctx, pgMigrations[i]); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	if v < len(pgMigrations) {
		if _, err := tx.Exec(ctx, `UPDATE docstream_schema SET version = $1`, len(pgMigrations)); err != nil {
			return fmt.Errorf("migrating: %w", err)
		}
	}
	return tx.Commit(ctx)
}

// pgTime is t as PostgreSQL keeps it: in microseconds.
func pgTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

const pgPutConversation = `INSERT INTO conversations (id, session_id, backend, workspace, model, created, updated, owner)
	VALUES ($1, $2, $3, $4, $5, $6, $6, $7)
	ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, backend = excluded.backend,
	workspace = excluded.workspace, model = excluded.model, updated = excluded.updated`

const pgPutTurn = `INSERT INTO turns (response_id, conversation_id, prompt, status, created, response, owner)
	VALUES ($1, $2, $3, $4, $5, $6, $7)
	ON CONFLICT (response_id) DO UPDATE SET conversation_id = excluded.conversation_id,
	status = excluded.status, response = excluded.response`

func convArgs(c Conversation, now time.Time) []any {
	return []any{c.ID, c.SessionID, c.Backend, c.Workspace, c.Model, now, c.Owner}
}

func turnArgs(t Turn) []any {
	return []any{t.ResponseID, t.ConversationID, t.Prompt, t.Status, pgTime(t.Created), t.Response, t.Owner}
}

// PutConversation creates or updates a conversation.
func (p *PostgresStore) PutConversation(ctx context.Context, c Conversation) error {
	if _, err := p.pool.Exec(ctx, pgPutConversation, convArgs(c, pgTime(clock()))...); err != nil {
		return fmt.Errorf("saving conversation: %w", err)
	}
	return nil
}

// PutTurn creates or replaces a turn.
func (p *PostgresStore) PutTurn(ctx context.Context, t Turn) error {
	if _, err := p.pool.Exec(ctx, pgPutTurn, turnArgs(t)...); err != nil {
		return fmt.Errorf("saving turn: %w", err)
	}
	return nil
}

// PutBatch creates or replaces conversations, then turns, in one
// transaction.
func (p *PostgresStore) PutBatch(ctx context.Context, convs []Conversation, turns []Turn) error {
	var b pgx.Batch
	now := pgTime(clock())
	for _, c := range convs {
		b.Queue(pgPutConversation, convArgs(c, now)...)
	}
	for _, t := range turns {
		b.Queue(pgPutTurn, turnArgs(t)...)
	}
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error { return tx.SendBatch(ctx, &b).Close() })
	if err != nil {
		return fmt.Errorf("saving responses: %w", err)
	}
	return nil
}

func scanPGConversation(r pgx.Row) (Conversation, error) {
	var c Conversation
	err := r.Scan(&c.ID, &c.SessionID, &c.Backend, &c.Workspace, &c.Model, &c.Created, &c.Updated, &c.Owner)
	c.Created, c.Updated = c.Created.UTC(), c.Updated.UTC()
	return c, err
}

func scanPGTurn(r pgx.Row) (Turn, error) {
	var t Turn
	err := r.Scan(&t.ResponseID, &t.ConversationID, &t.Prompt, &t.Status, &t.Created, &t.Response, &t.Owner)
	t.Created = t.Created.UTC()
	return t, err
}

// ConversationInfo returns a conversation without its turns.
func (p *PostgresStore) ConversationInfo(ctx context.Context, id string) (Conversation, error) {
	c, err := scanPGConversation(p.pool.QueryRow(ctx, `SELECT `+convColumns+` FROM conversations WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, ErrNotFound
	}
	if err != nil {
		return c, fmt.Errorf("reading conversation: %w", err)
	}
	return c, nil
}

// Conversation returns a conversation and its turns, oldest first.
func (p *PostgresStore) Conversation(ctx context.Context, id string) (Conversation, []Turn, error) {
	c, err := p.ConversationInfo(ctx, id)
	if err != nil {
		return c, nil, err
	}
	rows, err := p.pool.Query(ctx, `SELECT `+turnColumns+` FROM turns WHERE conversation_id = $1 ORDER BY created`, id)
	if err != nil {
		return c, nil, fmt.Errorf("reading turns: %w", err)
	}
	turns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Turn, error) { return scanPGTurn(r) })
	if err != nil {
		return c, nil, fmt.Errorf("reading turns: %w", err)
	}
	return c, turns, nil
}

// Turn returns a turn by its response id.
func (p *PostgresStore) Turn(ctx context.Context, id string) (Turn, error) {
	t, err := scanPGTurn(p.pool.QueryRow(ctx, `SELECT `+turnColumns+` FROM turns WHERE response_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, ErrNotFound
	}
	if err != nil {
		return t, fmt.Errorf("reading turn: %w", err)
	}
	return t, nil
}

// MarkInterrupted marks every streaming turn as interrupted. A cluster
// marks those of the replicas that stopped instead (MarkTurnsInterrupted).
func (p *PostgresStore) MarkInterrupted(ctx context.Context) (int, error) {
	return p.markInterrupted(ctx, `SELECT `+turnColumns+` FROM turns WHERE status = $1 FOR UPDATE`)
}

// MarkTurnsInterrupted marks the turns of the given runs that are still
// streaming as interrupted, and returns how many there were.
func (p *PostgresStore) MarkTurnsInterrupted(ctx context.Context, ids []string) (int, error) {
	return p.markInterrupted(ctx, `SELECT `+turnColumns+` FROM turns WHERE status = $1 AND response_id = ANY($2) FOR UPDATE`, ids)
}

func (p *PostgresStore) markInterrupted(ctx context.Context, query string, args ...any) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, query, append([]any{string(documents.StatusStreaming)}, args...)...)
		if err != nil {
			return err
		}
		turns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Turn, error) { return scanPGTurn(r) })
		if err != nil {
			return err
		}
		for _, t := range turns {
			if _, err := tx.Exec(ctx, `UPDATE turns SET status = $2, response = $3 WHERE response_id = $1`,
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

// PutFingerprint records where a conversation stands: the row is replaced
// with the next seq, so that the latest has the highest.
func (p *PostgresStore) PutFingerprint(ctx context.Context, fp, conv string) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO fingerprints (fingerprint, conversation_id, created) VALUES ($1, $2, $3)
		ON CONFLICT (fingerprint) DO UPDATE SET conversation_id = excluded.conversation_id, created = excluded.created, seq = excluded.seq`,
		fp, conv, pgTime(time.Now()))
	if err != nil {
		return fmt.Errorf("saving fingerprint: %w", err)
	}
	return nil
}

// Fingerprint returns the conversation that stands at an OpenAI history.
func (p *PostgresStore) Fingerprint(ctx context.Context, fp string) (string, error) {
	return p.fingerprint(ctx, `SELECT f.conversation_id FROM fingerprints f WHERE f.fingerprint = $1
		AND NOT EXISTS (SELECT 1 FROM fingerprints g WHERE g.conversation_id = f.conversation_id AND g.seq > f.seq)`, fp)
}

// HistoryConversation returns the conversation a history was recorded for.
func (p *PostgresStore) HistoryConversation(ctx context.Context, fp string) (string, error) {
	return p.fingerprint(ctx, `SELECT conversation_id FROM fingerprints WHERE fingerprint = $1`, fp)
}

func (p *PostgresStore) fingerprint(ctx context.Context, query, fp string) (string, error) {
	var c string
	err := p.pool.QueryRow(ctx, query, fp).Scan(&c)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading fingerprint: %w", err)
	}
	return c, nil
}

// Prune deletes what is older than before.
func (p *PostgresStore) Prune(ctx context.Context, before time.Time) (int, error) {
	const stale = `SELECT c.id FROM conversations c WHERE c.updated < $1 AND NOT EXISTS
		(SELECT 1 FROM turns t WHERE t.conversation_id = c.id AND (t.created >= $1 OR t.status = 'streaming'))`
	var n int64
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		for _, d := range []struct {
			q     string
			turns bool // it deletes turns, which Prune counts
		}{
			{`DELETE FROM fingerprints WHERE conversation_id IN (` + stale + `)`, false},
			{`DELETE FROM turns WHERE conversation_id IN (` + stale + `)`, true},
			{`DELETE FROM turns WHERE conversation_id = '' AND status != 'streaming' AND created < $1`, true},
			{`DELETE FROM conversations WHERE updated < $1 AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.conversation_id = conversations.id)`, false},
		} {
			tag, err := tx.Exec(ctx, d.q, pgTime(before))
			if err != nil {
				return err
			}
			if d.turns {
				n += tag.RowsAffected()
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pruning the store: %w", err)
	}
	return int(n), nil
}

// Conversations returns a page of conversations, the most recently active
// first.
func (p *PostgresStore) Conversations(ctx context.Context, q ListQuery) ([]Conversation, error) {
	query := `SELECT ` + convColumns + ` FROM conversations WHERE ($1 = '' OR owner = $1) AND ($2 = '' OR workspace = $2)`
	args := []any{q.Owner, q.Workspace}
	if q.After != nil {
		query += ` AND (updated, id) < ($3, $4)`
		args = append(args, pgTime(q.After.Updated), q.After.ID)
	}
	query += ` ORDER BY updated DESC, id DESC`
	if q.Limit > 0 {
		query += fmt.Sprintf(` LIMIT %d`, q.Limit)
	}
	rows, err := p.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("listing conversations: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Conversation, error) { return scanPGConversation(r) })
	if err != nil {
		return nil, fmt.Errorf("listing conversations: %w", err)
	}
	if out == nil {
		out = []Conversation{}
	}
	return out, nil
}

// DeleteConversation deletes a conversation, its turns and fingerprints,
// in one transaction.
func (p *PostgresStore) DeleteConversation(ctx context.Context, id string) error {
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM conversations WHERE id = $1`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		for _, q := range []string{`DELETE FROM turns WHERE conversation_id = $1`, `DELETE FROM fingerprints WHERE conversation_id = $1`,
			`DELETE FROM replica_sessions WHERE conversation_id = $1`} {
			if _, err := tx.Exec(ctx, q, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("deleting conversation: %w", err)
	}
	return err
}

// DeleteTurn deletes a turn.
func (p *PostgresStore) DeleteTurn(ctx context.Context, id string) error {
	tag, err := p.pool.Exec(ctx, `DELETE FROM turns WHERE response_id = $1`, id)
	if err != nil {
		return fmt.Errorf("deleting turn: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// Ping checks the database answers.
func (p *PostgresStore) Ping(ctx context.Context) error { return p.pool.Ping(ctx) }

// Close closes the pool.
func (p *PostgresStore) Close() error {
	p.pool.Close()
	return nil
}
