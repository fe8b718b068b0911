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
	// UpdateStatus: the agent's status changed to a non-terminal one
	// (the first status read is always reported). Agent is set.
	UpdateStatus UpdateKind = "status"
	// UpdateMessage: a message not seen before. Message holds its full text.
	UpdateMessage UpdateKind = "message"
	// UpdateMessageGrew: the text of a message already reported changed.
	// Message holds the new full text and Previous the text last reported;
	// usually Previous is a prefix of Message.Text and the delta is the rest.
	// If it is not a prefix, the consumer replaces the whole text.
	UpdateMessageGrew UpdateKind = "message_grew"
	// UpdateDone: the agent reached a terminal status. Agent holds it with its
	// Summary, Target.BranchName and Target.PRURL. It is the last update.
	UpdateDone UpdateKind = "done"
	// UpdateError: the watch ended on an error (Err). It is the last update.
	UpdateError UpdateKind = "error"
)

// Update is one observation of a watched agent. Which fields are set depends on
// Kind: Agent for UpdateStatus and UpdateDone; Message (and Previous) for
// UpdateMessage and UpdateMessageGrew; Err for UpdateError.
type Update struct {
	Kind     UpdateKind
	Agent    *Agent
	Message  *Message
	Previous string
	Err      error
}

// WatchOptions tunes Watch. Zero values take the defaults.
type WatchOptions struct {
	// Interval between polls; default 2 s.
	Interval time.Duration
	// MaxBackoff bounds the wait after failed polls; default 30 s.
	MaxBackoff time.Duration
	// MaxErrors is the number of polls in a row failing with a retryable
	// error (rate limited, unavailable) that ends the watch; default 10.
	MaxErrors int
	// Known are messages the consumer already has (for instance the
	// conversation before a follow-up); they are not reported again unless
	// their text changes.
	Known []Message
	// FollowUp marks a watch started right after FollowUp: the agent may still
	// show the previous turn's terminal status for a moment, so a terminal
	// status ends the watch only once the agent has been seen in a
	// non-terminal status, or FollowUpGrace (default 1 min) has passed.
	FollowUp      bool
	FollowUpGrace time.Duration
}

// Watch polls agent id until it reaches a terminal status and sends what it
// sees on the returned channel, which is closed after the last update.
//
// Each poll reads the status and then the conversation. It reports a status
// change (UpdateStatus), each new message (UpdateMessage), and each message
// whose text changed since it was last reported (UpdateMessageGrew), in
// conversation order. Messages are tracked by id (by position for messages
// without one). Unknown statuses are reported and polling goes on. At a
// terminal status the conversation read in that same poll is the final one: its
// remaining messages are sent, then UpdateDone with the agent.
//
// A failed poll that may succeed later (CodeRateLimited, CodeUnavailable) is
// repeated after a backoff that starts at Interval (or Retry-After), doubles,
// and is capped at MaxBackoff; at the MaxErrors-th failure in a row, or at once
// for any other error, the watch ends with UpdateError. When ctx ends the channel
// is closed without a further update. The consumer must read the channel until
// it is closed or cancel ctx.
func (c *Client) Watch(ctx context.Context, id string, opts WatchOptions) <-chan Update {
	if opts.Interval <= 0 {
		opts.Interval = DefaultWatchInterval
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultWatchMaxBackoff
	}
	if opts.MaxBackoff < opts.Interval {
		opts.MaxBackoff = opts.Interval
	}
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
		agent, conv, err := w.poll(ctx)
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
			delay := w.backoff(failures, e.RetryAfter)
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

// poll reads the status, then the conversation.
func (w *watcher) poll(ctx context.Context) (*Agent, *Conversation, error) {
	agent, err := w.c.Agent(ctx, w.id)
	if err != nil {
		return nil, nil, err
	}
	conv, err := w.c.Conversation(ctx, w.id)
	if err != nil {
		return nil, nil, err
	}
	return agent, conv, nil
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

// backoff is the wait after the n-th failed poll in a row.
func (w *watcher) backoff(n int, retryAfter time.Duration) time.Duration {
	d := w.opts.Interval
	for i := 1; i < n && d < w.opts.MaxBackoff; i++ {
		d *= 2
	}
	d = max(d, retryAfter)
	return min(d, w.opts.MaxBackoff)
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
