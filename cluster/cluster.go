// Package cluster lets the replicas of one PostgreSQL store know each
// other: each registers its id and advertised URL with a heartbeat, records
// which of them runs each live run and holds each conversation's agent
// session, and marks the live runs of a replica that stopped beating as
// interrupted.
package cluster

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/store"
)

// Config is the `cluster` section: what a replica of a PostgreSQL store
// needs to reach the others.
type Config struct {
	// AdvertiseURL is where the other replicas reach this one.
	AdvertiseURL string `yaml:"advertise_url"`
	// Secret authenticates the requests replicas send each other.
	Secret string `yaml:"secret"`
	// Heartbeat is how often the replica says it is alive.
	Heartbeat time.Duration `yaml:"heartbeat"`
	// OwnerTimeout is how long a replica may miss its heartbeat before the
	// others take it for gone.
	OwnerTimeout time.Duration `yaml:"owner_timeout"`
}

// Check refuses a configuration a replica cannot join with.
func (c Config) Check() error {
	u, err := url.Parse(c.AdvertiseURL)
	switch {
	case c.AdvertiseURL == "":
		return errors.New("cluster.advertise_url is empty: with store.driver postgres each replica needs the URL the others reach it at (DOCSTREAM_CLUSTER_ADVERTISE_URL)")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("cluster.advertise_url %q: want http://host:port", c.AdvertiseURL)
	case len(c.Secret) < 16:
		return errors.New("cluster.secret must be at least 16 characters: with store.driver postgres the replicas authenticate each other with it (DOCSTREAM_CLUSTER_SECRET)")
	case c.Heartbeat <= 0 || c.OwnerTimeout < 2*c.Heartbeat:
		return errors.New("cluster.owner_timeout must be at least twice cluster.heartbeat, which must be above 0")
	}
	return nil
}

// Headers of the cluster.
const (
	SecretHeader  = "X-Docstream-Cluster" // cluster.secret, on the requests replicas send each other
	ReplicaHeader = "X-Docstream-Replica" // on every answer, the replica that made it
)

// Cluster is this replica's membership.
type Cluster struct {
	cfg Config
	// ID is this replica's id, from its advertised URL.
	ID  string
	st  *store.PostgresStore
	db  *pgxpool.Pool
	log zerolog.Logger

	stop    context.CancelFunc
	stopped chan struct{}
	tracks  sync.WaitGroup
}

// Replica is another replica.
type Replica struct{ ID, URL string }

// Join registers this replica and starts its heartbeat. The replica's id
// follows from its advertised URL, so that a replica that restarts (with
// its agent sessions on the same volume) is the same one: the runs its last
// life left live are marked interrupted, and its conversations stay. A
// replica whose id still beats is waited for, up to cluster.owner_timeout
// (a crash a moment ago); past that, two replicas advertise one URL.
func Join(ctx context.Context, cfg Config, st *store.PostgresStore, log zerolog.Logger) (*Cluster, error) {
	sum := sha256.Sum256([]byte(cfg.AdvertiseURL))
	c := &Cluster{cfg: cfg, ID: "rep_" + hex.EncodeToString(sum[:8]), st: st, db: st.Pool(), log: log, stopped: make(chan struct{})}
	deadline := time.Now().Add(cfg.OwnerTimeout + cfg.Heartbeat)
	for {
		late := time.Now().After(deadline) // before the query, which a loaded database may answer late
		alive, err := c.Alive(ctx, c.ID)
		if err != nil {
			return nil, fmt.Errorf("registering the replica: %w", err)
		}
		if !alive {
			break
		}
		if late {
			return nil, fmt.Errorf("replica %s (cluster.advertise_url %s) is registered and beating: two replicas advertise the same URL", c.ID, cfg.AdvertiseURL)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(cfg.Heartbeat):
		}
	}
	if err := c.beat(ctx); err != nil {
		return nil, fmt.Errorf("registering the replica: %w", err)
	}
	// It beats while it marks its last start's runs, which may take long.
	loop, stop := context.WithCancel(context.Background())
	c.stop = stop
	go c.loop(loop)
	if err := c.reapRuns(ctx, `replica_id = $1`, c.ID); err != nil {
		stop()
		<-c.stopped
		return nil, fmt.Errorf("marking the runs of the replica's last start: %w", err)
	}
	log.Info().Str("replica", c.ID).Str("advertise_url", cfg.AdvertiseURL).Msg("joined the cluster")
	return c, nil
}

// Authentic reports whether a request carries the cluster's secret.
func (c *Cluster) Authentic(r *http.Request) bool {
	got := r.Header.Get(SecretHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(c.cfg.Secret)) == 1
}

// Sign marks a request to another replica with the cluster's secret.
func (c *Cluster) Sign(h http.Header) { h.Set(SecretHeader, c.cfg.Secret) }

// timeout is cluster.owner_timeout in seconds, as the queries take it.
func (c *Cluster) timeout() float64 { return c.cfg.OwnerTimeout.Seconds() }

// OwnerTimeout is how long a silent replica is still taken for alive.
func (c *Cluster) OwnerTimeout() time.Duration { return c.cfg.OwnerTimeout }

// beat writes this replica's heartbeat (its row again, when the others
// had taken it for gone).
func (c *Cluster) beat(ctx context.Context) error {
	_, err := c.db.Exec(ctx, `INSERT INTO replicas (id, url, started, heartbeat) VALUES ($1, $2, now(), now())
		ON CONFLICT (id) DO UPDATE SET heartbeat = now(), url = excluded.url`, c.ID, c.cfg.AdvertiseURL)
	return err
}

// loop beats and reaps until stopped. A beat may take up to owner_timeout
// (a slow one still counts), and a reap goes on beside the beats.
func (c *Cluster) loop(ctx context.Context) {
	defer close(c.stopped)
	var reaps sync.WaitGroup
	defer reaps.Wait()
	reaping := make(chan struct{}, 1) // full while a reap runs
	t := time.NewTicker(c.cfg.Heartbeat)
	defer t.Stop()
	// beating is since when the heartbeats have gone through without a gap
	// (zero while they fail): a replica reaps others only once it has beaten
	// for a whole owner_timeout, so that after an outage of the database it
	// waits for the others to beat again.
	beating := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		bctx, cancel := context.WithTimeout(ctx, c.cfg.OwnerTimeout)
		err := c.beat(bctx)
		cancel()
		switch {
		case err != nil:
			if !beating.IsZero() {
				c.log.Warn().Err(err).Msg("the cluster heartbeat failed; retrying")
			}
			beating = time.Time{}
		case beating.IsZero():
			beating = time.Now()
			c.log.Info().Msg("the cluster heartbeat goes through again")
		}
		if beating.IsZero() || time.Since(beating) < c.cfg.OwnerTimeout {
			continue
		}
		select {
		case reaping <- struct{}{}:
			reaps.Go(func() {
				defer func() { <-reaping }()
				if err := c.reap(ctx); err != nil && ctx.Err() == nil {
					c.log.Warn().Err(err).Msg("marking the runs of stopped replicas")
				}
			})
		default: // the last reap still runs
		}
	}
}

// reap marks the live runs of the replicas that stopped beating as
// interrupted, and forgets those replicas. Which replicas beat is read
// once, so that the runs forgotten are those looked at.
func (c *Cluster) reap(ctx context.Context) error {
	rows, err := c.db.Query(ctx, `SELECT id FROM replicas WHERE heartbeat >= now() - make_interval(secs => $1)`, c.timeout())
	if err != nil {
		return err
	}
	alive, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if err := c.reapRuns(ctx, `replica_id <> ALL($1)`, append(alive, c.ID)); err != nil {
		return err
	}
	_, err = c.db.Exec(ctx, `DELETE FROM replicas WHERE heartbeat < now() - make_interval(secs => $1)`, c.timeout())
	return err
}

// keepEnded is how long the record of a finished run is kept, for
// re-attaches forwarded to the replica that may still hold it
// (runs.keep_finished there).
const keepEnded = 24 * time.Hour

// reapRuns marks the live runs of the replicas where selects interrupted,
// and forgets those replicas' runs, and the ones that ended keepEnded ago.
func (c *Cluster) reapRuns(ctx context.Context, where string, args ...any) error {
	rows, err := c.db.Query(ctx, `SELECT response_id FROM replica_runs WHERE live AND `+where, args...)
	if err != nil {
		return err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		n, err := c.st.MarkTurnsInterrupted(ctx, ids)
		if err != nil {
			return err
		}
		c.log.Warn().Int("runs", n).Msg("marked the runs of a stopped replica interrupted")
	}
	_, err = c.db.Exec(ctx, `DELETE FROM replica_runs WHERE `+where+fmt.Sprintf(` OR ended < now() - make_interval(secs => %d)`, int(keepEnded.Seconds())), args...)
	return err
}

// Leave stops the heartbeat and unregisters the replica, once the runs
// it tracks have recorded their end (waiting until ctx ends at most).
func (c *Cluster) Leave(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		c.tracks.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	c.stop()
	<-c.stopped
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.OwnerTimeout)
	defer cancel()
	if _, err := c.db.Exec(ctx, `DELETE FROM replicas WHERE id = $1`, c.ID); err != nil {
		c.log.Warn().Err(err).Msg("leaving the cluster")
	}
}

// trackWait bounds the write that records a run's start: past it the run
// starts anyway, the write is retried, and meanwhile another replica does
// not know where the run is (a re-attach there answers 204).
const trackWait = 2 * time.Second

// Track records that r runs here, and at its end which agent session its
// conversation is now at. It must be called before r is launched.
func (c *Cluster) Track(r *runs.Run) {
	ended := make(chan documents.Done, 1)
	r.Observe(func(ev documents.Event) {
		if d, ok := ev.(documents.Done); ok {
			ended <- d
		}
	})
	start := func(ctx context.Context) error {
		_, err := c.db.Exec(ctx, `INSERT INTO replica_runs (response_id, replica_id, live) VALUES ($1, $2, true)
			ON CONFLICT (response_id) DO UPDATE SET replica_id = excluded.replica_id, live = true`, r.ID, c.ID)
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), trackWait)
	err := start(ctx)
	cancel()
	c.tracks.Add(1)
	go func() {
		defer c.tracks.Done()
		if err != nil {
			c.retry("recording a run", start)
		}
		d := <-ended
		conv, session := "", r.Spec.SessionID
		if d.ConversationID != nil {
			conv = *d.ConversationID
		}
		if d.Metadata.Agent != nil {
			session = cmp.Or(d.Metadata.Agent.SessionID, session)
		}
		if r.Spec.Backend != "cli" || session == "" {
			conv = "" // no agent session of this replica's
		}
		c.retry("recording the end of a run", func(ctx context.Context) error {
			return pgx.BeginFunc(ctx, c.db, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `UPDATE replica_runs SET live = false, ended = now() WHERE response_id = $1`, r.ID); err != nil {
					return err
				}
				if conv == "" {
					return nil
				}
				_, err := tx.Exec(ctx, `INSERT INTO replica_sessions (conversation_id, replica_id, session_id) VALUES ($1, $2, $3)
					ON CONFLICT (conversation_id) DO UPDATE SET replica_id = excluded.replica_id, session_id = excluded.session_id`, conv, c.ID, session)
				return err
			})
		})
	}()
	if err != nil {
		c.log.Warn().Err(err).Str("response_id", r.ID).Msg("recording a run in the cluster; the run goes on")
	}
}

// retry runs write until it succeeds, every heartbeat, for at most ten
// owner timeouts.
func (c *Cluster) retry(what string, write func(ctx context.Context) error) {
	deadline := time.Now().Add(10 * c.cfg.OwnerTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.OwnerTimeout)
		err := write(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.log.Error().Err(err).Msg(what)
			return
		}
		time.Sleep(c.cfg.Heartbeat)
	}
}

// RunOwner returns the live replica, other than this one, that runs (or
// ran) the run of the response id, if any.
func (c *Cluster) RunOwner(ctx context.Context, id string) (Replica, bool, error) {
	var r Replica
	err := c.db.QueryRow(ctx, `SELECT p.id, p.url FROM replica_runs x JOIN replicas p ON p.id = x.replica_id
		WHERE x.response_id = $1 AND p.id <> $2 AND p.heartbeat >= now() - make_interval(secs => $3)`, id, c.ID, c.timeout()).Scan(&r.ID, &r.URL)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	return r, err == nil, err
}

// Session is where a conversation's agent session lives.
type Session struct {
	Replica
	SessionID string
	Here      bool // on this replica
	Alive     bool // its replica beats
}

// settleWait bounds how long Session waits for the end of a conversation's
// running turn to be recorded.
const settleWait = 2 * time.Second

// Session returns where the conversation's agent session lives; ok is
// false for a conversation no replica has recorded. A turn of it that a
// live replica still runs is waited for (its end is recorded right after
// its done, which a client may have read already) for settleWait at most;
// past it, the session is that replica's, which has the turn.
func (c *Cluster) Session(ctx context.Context, conv string) (Session, bool, error) {
	deadline := time.Now().Add(settleWait)
	for {
		r, running, err := c.RunningTurn(ctx, conv)
		switch {
		case err != nil:
			return Session{}, false, err
		case !running:
			return c.session(ctx, conv)
		case time.Now().After(deadline):
			return Session{Replica: r, SessionID: conv, Here: r.ID == c.ID, Alive: true}, true, nil
		}
		select {
		case <-ctx.Done():
			return Session{}, false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// RunningTurn returns the live replica that runs a turn of the
// conversation, if one does.
func (c *Cluster) RunningTurn(ctx context.Context, conv string) (Replica, bool, error) {
	var r Replica
	err := c.db.QueryRow(ctx, `SELECT p.id, p.url FROM turns t JOIN replica_runs x ON x.response_id = t.response_id
		JOIN replicas p ON p.id = x.replica_id WHERE t.conversation_id = $1 AND x.live AND p.heartbeat >= now() - make_interval(secs => $2) LIMIT 1`,
		conv, c.timeout()).Scan(&r.ID, &r.URL)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("finding the running turn of conversation %s: %w", conv, err)
	}
	return r, true, nil
}

// session reads where the conversation's agent session was recorded.
func (c *Cluster) session(ctx context.Context, conv string) (s Session, ok bool, err error) {
	err = c.db.QueryRow(ctx, `SELECT s.replica_id, s.session_id, coalesce(p.url, ''), coalesce(p.heartbeat >= now() - make_interval(secs => $2), false)
		FROM replica_sessions s LEFT JOIN replicas p ON p.id = s.replica_id WHERE s.conversation_id = $1`, conv, c.timeout()).
		Scan(&s.ID, &s.SessionID, &s.URL, &s.Alive)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("finding the session of conversation %s: %w", conv, err)
	}
	s.Here = s.ID == c.ID
	s.Alive = s.Alive || s.Here
	return s, true, nil
}

// Alive reports whether the replica still beats.
func (c *Cluster) Alive(ctx context.Context, id string) (bool, error) {
	var alive bool
	err := c.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM replicas WHERE id = $1 AND heartbeat >= now() - make_interval(secs => $2))`, id, c.timeout()).Scan(&alive)
	return alive, err
}
