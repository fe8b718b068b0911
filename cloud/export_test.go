package cloud

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// The options below set what the tests drive: the HTTP client, retries,
// the clock, waits, jitter and the repositories cache.

// WithHTTPClient sets the HTTP client. The default has a 60 s timeout.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithRetry sets the attempts per request and the largest wait between them;
// non-positive values keep the defaults.
func WithRetry(maxAttempts int, maxDelay time.Duration) Option {
	return func(c *Client) {
		if maxAttempts > 0 {
			c.maxAttempts = maxAttempts
		}
		if maxDelay > 0 {
			c.maxDelay = maxDelay
		}
	}
}

// WithClock sets the clock of Retry-After dates, the repositories cache and
// Watch's follow-up grace.
func WithClock(now func() time.Time) Option {
	return func(c *Client) {
		if now != nil {
			c.now = now
		}
	}
}

// WithSleep sets the wait between retries and polls; it returns ctx.Err()
// early when ctx ends.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) {
		if sleep != nil {
			c.sleep = sleep
		}
	}
}

// WithJitter sets how a backoff delay is picked in [0, ceiling].
func WithJitter(jitter func(ceiling time.Duration) time.Duration) Option {
	return func(c *Client) {
		if jitter != nil {
			c.jitter = jitter
		}
	}
}

// WithRepositoriesTTL sets how long Repositories reuses a fetched list; zero
// or less turns the cache off.
func WithRepositoriesTTL(ttl time.Duration) Option {
	return func(c *Client) { c.repos.ttl = ttl }
}

// ErrorCode returns the Code of the *Error in err's chain, or "".
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
