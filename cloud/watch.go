package cloud

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Defaults of WatchOptions.
const (
	DefaultWatchInterval   = 2 * time.Second
	DefaultWatchMaxBackoff = 30 * time.Second
	DefaultWatchMaxErrors  = 10
	DefaultFollowUpGrace   = time.Minute
)

// UpdateKind says what an Update reports.
type UpdateKind string

// Update kinds, in the order a run produces them.
const (
	UpdateStatus      UpdateKind = "status"       // a new non-terminal status (Agent)
	UpdateMessage     UpdateKind = "message"      // a message not seen before (Message)
	UpdateMessageGrew UpdateKind = "message_grew" // a reported message changed (Message, Previous)
	UpdateDone        UpdateKind = "done"         // a terminal status, the last update (Agent)
	UpdateError       UpdateKind = "error"        // the watch failed, the last update (Err)
)

// Update is one observation of a watched agent; Kind says which fields are set.
type Update struct {
	Kind     UpdateKind
	Agent    *Agent
	Message  *Message
	Previous string
	Err      error
}

// WatchOptions tunes Watch. Zero values take the defaults.
type WatchOptions struct {
	Interval   time.Duration // between polls
	MaxBackoff time.Duration // the longest wait after failed polls
	MaxErrors  int           // retryable failures in a row that end the watch
	Known      []Message     // messages the consumer has, reported again only if changed
	// FollowUp marks a watch started right after FollowUp: the agent may still
	// show the previous turn's terminal status, so that ends the watch only
	// after a non-terminal status or FollowUpGrace.
	FollowUp      bool
	FollowUpGrace time.Duration
}

// Watch polls agent id until it reaches a terminal status and sends its status
// changes and new or changed messages on the returned channel, which is closed
// after the last update or when ctx ends. The consumer reads it to the end or
// cancels ctx.
func (c *Client) Watch(ctx context.Context, id string, opts WatchOptions) <-chan Update {
	if opts.Interval <= 0 {
		opts.Interval = DefaultWatchInterval
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultWatchMaxBackoff
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.Interval)
	if opts.MaxErrors <= 0 {
		opts.MaxErrors = DefaultWatchMaxErrors
	}
	if opts.FollowUpGrace <= 0 {
		opts.FollowUpGrace = DefaultFollowUpGrace
	}
	ch := make(chan Update, 16)
	w := &watcher{c: c, id: id, opts: opts, out: ch, seen: map[string]string{}}
	for i, m := range opts.Known {
		w.seen[messageKey(m, i)] = m.Text
	}
	go func() {
		defer close(ch)
		w.run(ctx)
	}()
	return ch
}

// watcher is the state of one Watch.
type watcher struct {
	c    *Client
	id   string
	opts WatchOptions
	out  chan<- Update
	seen map[string]string // message key → text last reported
}

// run polls until the end of the watch.
func (w *watcher) run(ctx context.Context) {
	started := w.c.now()
	active := !w.opts.FollowUp
	var last Status
	failures := 0
	for {
		agent, err := w.c.Agent(ctx, w.id)
		var conv *Conversation
		if err == nil {
			conv, err = w.c.Conversation(ctx, w.id)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			var e *Error
			failures++
			if !errors.As(err, &e) || !e.Retryable() || failures >= w.opts.MaxErrors {
				w.send(ctx, Update{Kind: UpdateError, Err: err})
				return
			}
			delay := min(max(backoff(w.opts.Interval, w.opts.MaxBackoff, failures), e.RetryAfter), w.opts.MaxBackoff)
			w.c.log("cloud: watch %s: %s; polling again in %s", w.id, e.Code, delay)
			if w.c.sleep(ctx, delay) != nil {
				return
			}
			continue
		}
		failures = 0
		terminal := agent.Status.Terminal()
		if !terminal {
			active = true
		}
		final := terminal && (active || w.c.now().Sub(started) >= w.opts.FollowUpGrace)
		if !terminal && agent.Status != last {
			last = agent.Status
			a := *agent
			if !w.send(ctx, Update{Kind: UpdateStatus, Agent: &a}) {
				return
			}
		}
		if !w.messages(ctx, conv) {
			return
		}
		if final {
			w.send(ctx, Update{Kind: UpdateDone, Agent: agent})
			return
		}
		if w.c.sleep(ctx, w.opts.Interval) != nil {
			return
		}
	}
}

// messages sends new and changed messages; false when ctx ended.
func (w *watcher) messages(ctx context.Context, conv *Conversation) bool {
	for i, m := range conv.Messages {
		k := messageKey(m, i)
		prev, ok := w.seen[k]
		if ok && prev == m.Text {
			continue
		}
		w.seen[k] = m.Text
		msg := m
		u := Update{Kind: UpdateMessage, Message: &msg}
		if ok {
			u.Kind, u.Previous = UpdateMessageGrew, prev
		}
		if !w.send(ctx, u) {
			return false
		}
	}
	return true
}

// send delivers u unless ctx ends first.
func (w *watcher) send(ctx context.Context, u Update) bool {
	select {
	case w.out <- u:
		return true
	case <-ctx.Done():
		return false
	}
}

// messageKey identifies a message by id, or by position when it has none.
func messageKey(m Message, i int) string {
	if m.ID != "" {
		return "id:" + m.ID
	}
	return "#" + strconv.Itoa(i)
}
