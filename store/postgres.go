package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// PostgresStore is a Store on PostgreSQL, shared by the replicas of a
// cluster.
type PostgresStore struct {
	*SQLStore
	pool *pgxpool.Pool
}

// postgres keeps times in microseconds and orders fingerprints by a serial.
var postgres = dialect{
	time:     func(t time.Time) any { return t.UTC().Truncate(time.Microsecond) },
	activity: "updated",
	key:      func(t time.Time) any { return t.UTC().Truncate(time.Microsecond) },
	seq:      "seq",
	putFingerprint: `INSERT INTO fingerprints (fingerprint, conversation_id, created) VALUES ($1, $2, $3)
		ON CONFLICT (fingerprint) DO UPDATE SET conversation_id = excluded.conversation_id, created = excluded.created, seq = excluded.seq`,
	lock:       " FOR UPDATE",
	convTables: []string{"turns", "fingerprints", "replica_sessions"},
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
	p := &PostgresStore{SQLStore: &SQLStore{db: stdlib.OpenDBFromPool(pool), d: postgres}, pool: pool}
	if err := p.migrate(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("postgres %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return p, nil
}

// Pool is the store's connection pool, for the cluster's tables.
func (p *PostgresStore) Pool() *pgxpool.Pool { return p.pool }

// migrate applies the migrations the database lacks under schemaLock.
func (p *PostgresStore) migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, schemaLock); err != nil {
			return fmt.Errorf("locking the schema: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS docstream_schema (version int NOT NULL);
			INSERT INTO docstream_schema SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM docstream_schema)`); err != nil {
			return fmt.Errorf("reading the schema version: %w", err)
		}
		var v int
		if err := tx.QueryRow(ctx, `SELECT version FROM docstream_schema`).Scan(&v); err != nil {
			return fmt.Errorf("reading the schema version: %w", err)
		}
		for i := v; i < len(pgMigrations); i++ {
			if _, err := tx.Exec(ctx, pgMigrations[i]); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
		}
		// A newer replica's version stays.
		if _, err := tx.Exec(ctx, `UPDATE docstream_schema SET version = greatest(version, $1)`, len(pgMigrations)); err != nil {
			return fmt.Errorf("migrating: %w", err)
		}
		return nil
	})
}

// MarkTurnsInterrupted marks the turns of the given runs that are still
// streaming as interrupted, and returns how many there were. A cluster
// marks these rather than every streaming turn (MarkInterrupted).
func (p *PostgresStore) MarkTurnsInterrupted(ctx context.Context, ids []string) (int, error) {
	return p.markInterrupted(ctx, ` AND response_id = ANY($1)`, ids)
}

// Close closes the database and its pool.
func (p *PostgresStore) Close() error {
	err := p.SQLStore.Close()
	p.pool.Close()
	return err
}
