package cluster

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/docstream/docstream/store"
	"github.com/docstream/docstream/store/pgtest"
)

// TestConfigCheck checks what a replica refuses to join with, naming the
// key at fault.
func TestConfigCheck(t *testing.T) {
	good := Config{AdvertiseURL: "http://docstream-0.docstream-headless:8080", Secret: "0123456789abcdef", Heartbeat: 2 * time.Second, OwnerTimeout: 15 * time.Second}
	if err := good.Check(); err != nil {
		t.Fatalf("a good configuration: %v", err)
	}
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.AdvertiseURL = "" }, "cluster.advertise_url is empty"},
		{func(c *Config) { c.AdvertiseURL = "docstream-0:8080" }, "want http://host:port"},
		{func(c *Config) { c.Secret = "short" }, "cluster.secret"},
		{func(c *Config) { c.OwnerTimeout = 3 * time.Second }, "cluster.owner_timeout"},
		{func(c *Config) { c.Heartbeat = 0 }, "cluster.heartbeat"},
	} {
		cfg := good
		c.edit(&cfg)
		if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error naming %q", cfg, err, c.want)
		}
	}
}

// TestAuthentic checks that only the cluster's own secret marks a request
// as another replica's.
func TestAuthentic(t *testing.T) {
	c := &Cluster{cfg: Config{Secret: "0123456789abcdef"}}
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	if c.Authentic(r) {
		t.Errorf("a request without the secret is authentic")
	}
	r.Header.Set(SecretHeader, "0123456789abcdeX")
	if c.Authentic(r) {
		t.Errorf("a request with another secret is authentic")
	}
	c.Sign(r.Header)
	if !c.Authentic(r) {
		t.Errorf("a signed request is not authentic")
	}
}

// joinTest joins a replica with the given heartbeat and owner timeout to
// a new PostgreSQL, whose DSN it returns with whether a beat has failed; it
// leaves when the test ends. params are added to the replica's DSN.
func joinTest(t *testing.T, heartbeat, ownerTimeout time.Duration, params string) (*Cluster, *atomic.Bool, string) {
	t.Helper()
	dsn := pgtest.Start(t).DSN()
	st, err := store.OpenPostgres(context.Background(), dsn+params)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	failed := new(atomic.Bool)
	log := zerolog.New(io.Discard).Hook(zerolog.HookFunc(func(_ *zerolog.Event, _ zerolog.Level, msg string) {
		if strings.HasPrefix(msg, "the cluster heartbeat failed") {
			failed.Store(true)
		}
	}))
	cfg := Config{AdvertiseURL: "http://127.0.0.1:1", Secret: "0123456789abcdef", Heartbeat: heartbeat, OwnerTimeout: ownerTimeout}
	c, err := Join(context.Background(), cfg, st, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Leave(context.Background()) })
	return c, failed, dsn
}

// holds reports whether the query's one boolean answer is true.
func (c *Cluster) holds(query string, args ...any) bool {
	var ok bool
	return c.db.QueryRow(context.Background(), query, args...).Scan(&ok) == nil && ok
}

// waitFor polls cond until it holds, for 10 s at most, and reports whether
// it came to hold.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// locked begins a transaction on q that runs stmt, which takes a lock the
// transaction holds until it ends; the test's end rolls it back.
func locked(t *testing.T, q interface {
	Begin(context.Context) (pgx.Tx, error)
}, stmt string, args ...any) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := q.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, stmt, args...); err != nil {
		t.Fatal(err)
	}
	return tx
}

// beatsAfter reports whether c's replica has beaten since the database's
// now() when it was called, as a condition for waitFor.
func beatsAfter(t *testing.T, c *Cluster) func() bool {
	t.Helper()
	var since time.Time
	if err := c.db.QueryRow(context.Background(), `SELECT now()`).Scan(&since); err != nil {
		t.Fatal(err)
	}
	return func() bool { return c.holds(`SELECT heartbeat > $2 FROM replicas WHERE id = $1`, c.ID, since) }
}

// rejoin starts c's replica again, as after a crash, and sends Join's error
// once it has joined and left.
func rejoin(c *Cluster) <-chan error {
	joined := make(chan error, 1)
	go func() {
		again, err := Join(context.Background(), c.cfg, c.st, zerolog.Nop())
		if err == nil {
			again.Leave(context.Background())
		}
		joined <- err
	}()
	return joined
}

// waiting is the query that reports whether a statement of the cluster's
// waits on a lock for longer than $1 seconds.
const waiting = `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'
	AND clock_timestamp() - query_start > make_interval(secs => $1) AND query LIKE $2)`

// TestBeatsBesideReap checks that a replica goes on beating while its reap
// of the others waits on the database: the others would take it for gone.
func TestBeatsBesideReap(t *testing.T) {
	c, _, _ := joinTest(t, 50*time.Millisecond, 500*time.Millisecond, "")
	locked(t, c.db, `LOCK TABLE replica_runs`)
	if !waitFor(func() bool { return c.holds(waiting, 0, "SELECT response_id FROM replica_runs%") }) {
		t.Fatal("no reap waits on the locked replica_runs")
	}
	if !waitFor(beatsAfter(t, c)) {
		t.Fatal("the replica does not beat while its reap waits")
	}
}

// TestSlowBeat checks that a beat the database answers later than a
// heartbeat, but within the owner timeout, goes through.
func TestSlowBeat(t *testing.T) {
	ctx := context.Background()
	c, failed, _ := joinTest(t, 100*time.Millisecond, 10*time.Second, "")
	lock := locked(t, c.db, `SELECT 1 FROM replicas WHERE id = $1 FOR UPDATE`, c.ID)
	if !waitFor(func() bool { return c.holds(waiting, 0.3, "INSERT INTO replicas%") }) {
		t.Fatal("no beat waits on the locked row of the replica")
	}
	var released time.Time
	if err := lock.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&released); err != nil {
		t.Fatal(err)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// A beat after the slow one: the loop has taken the slow one's answer.
	if !waitFor(func() bool { return c.holds(`SELECT heartbeat > $2 FROM replicas WHERE id = $1`, c.ID, released) }) {
		t.Fatal("the replica does not beat once its row is free")
	}
	if failed.Load() {
		t.Error("a slow beat failed")
	}
}

// TestRejoinSlowAnswer restarts a replica while the database answers
// slowly: a look at its last life's heartbeat answered past the wait for
// that life to fall silent does not make it a second replica on the URL.
func TestRejoinSlowAnswer(t *testing.T) {
	ctx := context.Background()
	// One connection, which has the look prepared: it waits on the lock
	// below after its now(), as a late answer would.
	c, _, dsn := joinTest(t, 100*time.Millisecond, 500*time.Millisecond, "&pool_max_conns=1")
	c.stop() // a crash: the row stays, beaten a moment ago
	<-c.stopped
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	lock := locked(t, conn, `LOCK TABLE replicas`)
	joined := rejoin(c)
	wait := (c.cfg.OwnerTimeout + c.cfg.Heartbeat).Seconds()
	if !waitFor(func() bool {
		var ok bool
		return lock.QueryRow(ctx, waiting, wait, "SELECT EXISTS (SELECT 1 FROM replicas%").Scan(&ok) == nil && ok
	}) {
		t.Fatal("the restarted replica's look at its last life does not wait on the locked replicas")
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-joined; err != nil {
		t.Fatalf("the restarted replica: %v", err)
	}
}

// TestBeatsWhileRejoining restarts a replica whose last start left a run
// live while marking it interrupted waits on the database: the replica
// beats meanwhile, so that the others do not take it for gone once it is
// back.
func TestBeatsWhileRejoining(t *testing.T) {
	ctx := context.Background()
	c, _, _ := joinTest(t, 50*time.Millisecond, 500*time.Millisecond, "")
	c.stop() // a crash, with a run live
	<-c.stopped
	if _, err := c.db.Exec(ctx, `INSERT INTO replica_runs (response_id, replica_id, live) VALUES ('chat_left', $1, true)`, c.ID); err != nil {
		t.Fatal(err)
	}
	lock := locked(t, c.db, `LOCK TABLE turns`)
	joined := rejoin(c)
	if !waitFor(func() bool { return c.holds(waiting, 0, "SELECT %FROM turns%") }) {
		t.Fatal("marking the last start's run does not wait on the locked turns")
	}
	if !waitFor(beatsAfter(t, c)) {
		t.Error("the restarted replica does not beat while it marks its last start's runs")
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-joined; err != nil {
		t.Fatalf("the restarted replica: %v", err)
	}
}

// TestReapForgetsWhatItMarks reaps a replica that falls silent between the
// reap's look at the live runs and its removal of the runs of the silent
// replicas: its live run is marked interrupted, not forgotten unmarked.
func TestReapForgetsWhatItMarks(t *testing.T) {
	ctx := context.Background()
	c, _, _ := joinTest(t, 50*time.Millisecond, 500*time.Millisecond, "")
	// Another replica, beating a second ahead, and its live run.
	if _, err := c.db.Exec(ctx, `INSERT INTO replicas (id, url, started, heartbeat) VALUES ('rep_other', 'http://127.0.0.1:2', now(), now() + interval '1 second');
		INSERT INTO replica_runs (response_id, replica_id, live) VALUES ('chat_other', 'rep_other', true)`); err != nil {
		t.Fatal(err)
	}
	if err := c.st.PutTurn(ctx, store.Turn{ResponseID: "chat_other", Status: "streaming", Created: time.Now(),
		Response: []byte(`{"id":"chat_other","object":"chat.response","status":"streaming","documents":[]}`)}); err != nil {
		t.Fatal(err)
	}
	// Reaps read the runs but wait to remove any.
	lock := locked(t, c.db, `LOCK TABLE replica_runs IN EXCLUSIVE MODE`)
	if !waitFor(func() bool { return c.holds(waiting, 0, "DELETE FROM replica_runs%") }) {
		t.Fatal("no reap waits to remove runs")
	}
	if !waitFor(func() bool {
		return c.holds(`SELECT heartbeat < now() - make_interval(secs => $1) FROM replicas WHERE id = 'rep_other'`, c.timeout())
	}) {
		t.Fatal("the other replica does not fall silent")
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if !waitFor(func() bool { return c.holds(`SELECT status = 'error' FROM turns WHERE response_id = 'chat_other'`) }) {
		t.Fatalf("the silent replica's run is not marked interrupted")
	}
}
