package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// checkpointer copies the SQLite store's write-ahead log into the database
// file from a connection of its own, a second after writes begin and every
// second while they go on, so that no commit a run waits for does it.
type checkpointer struct {
	db, store *sql.DB // its own connection; the store's
	every     time.Duration
	longLog   int // frames of a log that must start over (see run)
	kick      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	close     func() error // stops it and closes its connection, once
}

const (
	checkpointEvery   = time.Second // how long writes gather before a checkpoint
	checkpointLongLog = 4096        // frames of a log made to start over: 16 MiB
)

// startCheckpointer starts the checkpointer of store, on a connection to dsn.
func startCheckpointer(dsn string, store *sql.DB, every time.Duration, longLog int) (*checkpointer, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("opening the checkpoint connection: %w", err)
	}
	db.SetMaxOpenConns(1)
	c := &checkpointer{db: db, store: store, every: every, longLog: longLog,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	c.close = sync.OnceValue(func() error {
		close(c.stop)
		<-c.done
		return c.db.Close()
	})
	go c.loop()
	return c, nil
}

// wrote tells the checkpointer that a write was committed.
func (c *checkpointer) wrote() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) loop() {
	defer close(c.done)
	for {
		select {
		case <-c.kick:
		case <-c.stop:
			return
		}
		select {
		case <-time.After(c.every):
		case <-c.stop:
			return
		}
		c.run()
	}
}

// run copies the log into the database. Once the log is long, the frames
// left are copied on the store's own connection, between two of its writes,
// so that the next write starts the log over even under constant writes.
func (c *checkpointer) run() {
	ctx := context.Background()
	var busy, frames, copied int
	if err := c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied); err != nil {
		return
	}
	if frames >= c.longLog {
		_, _ = c.store.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
	}
}
