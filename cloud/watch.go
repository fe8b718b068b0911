package cloud

import (
	"cmp"
	"context"
	"errors"
	"iter"
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

// Watch polls agent id until it reaches a terminal status, and yields its
// status changes and new or changed messages. It ends after the last update,
// when ctx ends, or when the consumer stops.
func (c *Client) Watch(ctx context.Context, id string, opts WatchOptions) iter.Seq[Update] {
	opts.Interval = cmp.Or(opts.Interval, DefaultWatchInterval)
	opts.MaxBackoff = max(cmp.Or(opts.MaxBackoff, DefaultWatchMaxBackoff), opts.Interval)
	opts.MaxErrors = cmp.Or(opts.MaxErrors, DefaultWatchMaxErrors)
	opts.FollowUpGrace = cmp.Or(opts.FollowUpGrace, DefaultFollowUpGrace)
	return func(yield func(Update) bool) {
		seen := map[string]string{} // message key → text last reported
		for i, m := range opts.Known {
			seen[messageKey(m, i)] = m.Text
		}
		started := c.now()
		active := !opts.FollowUp
		var last Status
		failures := 0
		for {
			agent, err := c.Agent(ctx, id)
			var conv *Conversation
			if err == nil {
				conv, err = c.Conversation(ctx, id)
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				var e *Error
				failures++
				if !errors.As(err, &e) || !e.Retryable() || failures >= opts.MaxErrors {
					yield(Update{Kind: UpdateError, Err: err})
					return
				}
				delay := min(max(backoff(opts.Interval, opts.MaxBackoff, failures), e.RetryAfter), opts.MaxBackoff)
				if c.sleep(ctx, delay) != nil {
					return
				}
				continue
			}
			failures = 0
			terminal := agent.Status.Terminal()
			if !terminal {
				active = true
			}
			final := terminal && (active || c.now().Sub(started) >= opts.FollowUpGrace)
			if !terminal && agent.Status != last {
				last = agent.Status
				if !yield(Update{Kind: UpdateStatus, Agent: agent}) {
					return
				}
			}
			for i, m := range conv.Messages {
				k := messageKey(m, i)
				prev, ok := seen[k]
				if ok && prev == m.Text {
					continue
				}
				seen[k] = m.Text
				u := Update{Kind: UpdateMessage, Message: &m}
				if ok {
					u.Kind, u.Previous = UpdateMessageGrew, prev
				}
				if !yield(u) {
					return
				}
			}
			if final {
				yield(Update{Kind: UpdateDone, Agent: agent})
				return
			}
			if c.sleep(ctx, opts.Interval) != nil {
				return
			}
		}
	}
}

// messageKey identifies a message by id, or by position when it has none.
func messageKey(m Message, i int) string {
	if m.ID != "" {
		return "id:" + m.ID
	}
	return "#" + strconv.Itoa(i)
}
