package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
)

// checkpointer copies the SQLite store's write-ahead log into the database
// file from a connection of its own. Left to SQLite, the commit that grows
// the log past 1,000 pages copies it, and syncs the database file, before
// it returns: that commit is a run's first or last write, which the run's
// events wait for, and it took 5.8 ms where a write takes 0.1 ms. The
// store's connection has automatic checkpoints turned off; the checkpointer
// runs a passive one (it waits for no lock and blocks no writer) a second
// after writes begin, and again every second while they go on.
type checkpointer struct {
	db, store *sql.DB // its own connection; the store's
	every     time.Duration
	longLog   int // frames of a log that must start over (see run)
	kick      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// checkpointEvery is how long the checkpointer lets writes gather before it
// copies them, and checkpointLongLog the frames (pages) of a log that the
// writes are made to start over: 16 MiB of 4 KiB pages.
const (
	checkpointEvery   = time.Second
	checkpointLongLog = 4096
)

// startCheckpointer opens a connection to the SQLite database at dsn for
// checkpoints and starts the checkpointer of store, which is open on the
// same database.
func startCheckpointer(dsn string, store *sql.DB, every time.Duration, longLog int) (*checkpointer, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("opening the checkpoint connection: %w", err)
	}
	db.SetMaxOpenConns(1)
	c := &checkpointer{db: db, store: store, every: every, longLog: longLog,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
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
	t := time.NewTimer(c.every)
	t.Stop()
	for {
		select {
		case <-c.kick:
		case <-c.stop:
			return
		}
		t.Reset(c.every)
		select {
		case <-t.C:
		case <-c.stop:
			t.Stop()
			return
		}
		c.run()
	}
}

// run copies the log into the database. The store's connection writes on
// meanwhile, and the log starts over from its beginning at the first write
// that finds all of it copied; writes that never pause would only ever
// find the frames written during the checkpoint left, and the log would
// grow with them. So once it is long, the few frames left are copied on
// the store's own connection, between two of its writes, and the next write
// starts the log over. A failed checkpoint loses nothing: the log keeps the
// writes, and the next one copies them.
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

// close stops the checkpointer, after the checkpoint under way if any, and
// closes its connection; later calls return what the first did.
func (c *checkpointer) close() error {
	c.closeOnce.Do(func() {
		close(c.stop)
		<-c.done
		c.closeErr = c.db.Close()
	})
	return c.closeErr
}
