package cloud

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defaults of a new Client.
const (
	DefaultBaseURL         = "https://api.cursor.com" // the API origin, without /v0
	DefaultMaxAttempts     = 4
	DefaultMaxDelay        = 30 * time.Second
	DefaultBaseDelay       = time.Second
	DefaultTimeout         = 60 * time.Second
	DefaultRepositoriesTTL = 5 * time.Minute
)

const (
	maxResponseBytes = 32 << 20
	maxErrorBytes    = 64 << 10
	maxRetryAfter    = 24 * time.Hour
)

// Client calls the Cloud Agents API. It is safe for concurrent use.
type Client struct {
	base        string
	apiKey      string
	hc          *http.Client
	maxAttempts int
	maxDelay    time.Duration
	now         func() time.Time
	sleep       func(context.Context, time.Duration) error
	jitter      func(time.Duration) time.Duration
	repos       reposState
}

// Option configures a Client.
type Option func(*Client)

// New returns a Client for baseURL (DefaultBaseURL when empty) and apiKey.
// With an empty key every call fails with CodeUnauthorized.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	base := cmp.Or(strings.TrimSpace(baseURL), DefaultBaseURL)
	base = strings.TrimSuffix(strings.TrimRight(base, "/"), "/v0")
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("cloud: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("cloud: base URL %q is not an absolute http(s) URL", u.Redacted())
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("cloud: base URL %q must not carry user info, query or fragment", u.Redacted())
	}
	c := &Client{
		base:        base,
		apiKey:      apiKey,
		hc:          &http.Client{Timeout: DefaultTimeout},
		maxAttempts: DefaultMaxAttempts,
		maxDelay:    DefaultMaxDelay,
		now:         time.Now,
		sleep:       sleepCtx,
		jitter:      fullJitter,
		repos:       reposState{turn: make(chan struct{}, 1), ttl: DefaultRepositoriesTTL},
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// String describes the client without its key.
func (c *Client) String() string { return "cloud.Client{" + c.base + "}" }

// GoString describes the client without its key.
func (c *Client) GoString() string { return c.String() }

// call is one API request.
type call struct {
	method  string
	path    string // from /v0; agentPath for an agent's
	query   url.Values
	body    any
	op      string // what the request does, for messages: "launch"
	agentID string // the agent the request is about, for 404 messages
	// unsure, on a request that is not idempotent, tells what to do when it
	// may have taken effect; such a request is retried after a 429 only.
	unsure string
	once   bool // never retried (repositories, which has its own limiter)
}

// unsureNote is r.unsure as a note on a failure.
func (r *call) unsureNote() string {
	if r.unsure == "" {
		return ""
	}
	return "; " + r.unsure
}

// retryable reports whether r may be repeated after e.
func (r *call) retryable(e *Error) bool {
	switch {
	case r.once:
		return false
	case r.unsure != "":
		return e.Status == http.StatusTooManyRequests
	}
	return e.Status == http.StatusTooManyRequests || e.Status >= 500 || e.Status == 0 && e.err != nil // no answer
}

// do sends r, retrying as it allows, and decodes a 2xx body into out.
func (c *Client) do(ctx context.Context, r *call, out any) error {
	path := r.path
	if strings.Contains(path, "{id}") {
		if err := checkAgentID(r.agentID); err != nil {
			return err
		}
		path = strings.Replace(path, "{id}", url.PathEscape(r.agentID), 1)
	}
	if c.apiKey == "" {
		return &Error{Code: CodeUnauthorized, Message: "the Cloud API key is missing or invalid (none is configured)"}
	}
	var payload []byte
	if r.body != nil {
		var err error
		if payload, err = json.Marshal(r.body); err != nil {
			return fmt.Errorf("cloud: encode %s request: %w", r.op, err)
		}
	}
	target := c.base + path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	for attempt := 1; ; attempt++ {
		err := c.once(ctx, r, target, payload, out)
		if err == nil {
			return nil
		}
		// A wait past the largest delay or the ctx deadline is not worth it.
		var e *Error
		if !errors.As(err, &e) || attempt >= c.maxAttempts || !r.retryable(e) || e.RetryAfter > c.maxDelay {
			return err
		}
		delay := cmp.Or(e.RetryAfter, c.jitter(backoff(DefaultBaseDelay, c.maxDelay, attempt)))
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= delay {
			return err
		}
		if serr := c.sleep(ctx, delay); serr != nil {
			return fmt.Errorf("cloud: %s: waiting to retry: %w", r.op, serr)
		}
	}
}

// once sends r a single time.
func (c *Client) once(ctx context.Context, r *call, target string, payload []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, r.method, target, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("cloud: build %s request: %w", r.op, err)
	}
	req.SetBasicAuth(c.apiKey, "")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "docstream-cloud/v0")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("cloud: %s: no answer before the context ended%s: %w", r.op, r.unsureNote(), cerr)
		}
		return &Error{
			Code:    CodeUnavailable,
			Message: c.redact("no answer from the Cloud Agents API (" + r.op + "): " + err.Error() + r.unsureNote()),
			err:     err,
		}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		dec := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBytes))
		if err := dec.Decode(out); err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return fmt.Errorf("cloud: %s: reading the answer: %w", r.op, cerr)
			}
			return &Error{
				Status:  resp.StatusCode,
				Code:    CodeUnavailable,
				Message: c.redact("the Cloud Agents API sent an unreadable answer to " + r.op + ": " + err.Error()),
				err:     err,
			}
		}
		return nil
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	retryAfter := parseRetryAfter(resp.Header.Get("Retry-After"), c.now())
	return statusError(r, resp.StatusCode, c.redact(upstreamMessage(raw)), retryAfter)
}

// backoff is base·2^(attempt-1), capped at maxDelay.
func backoff(base, maxDelay time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < maxDelay; i++ {
		d *= 2
	}
	return min(d, maxDelay)
}

// fullJitter picks a delay uniformly in [0, ceiling], ceiling >= 0.
func fullJitter(ceiling time.Duration) time.Duration {
	return time.Duration(rand.Int64N(int64(ceiling) + 1))
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// parseRetryAfter reads a Retry-After value in seconds or as an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Duration(min(max(n, 0), int64(maxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), maxRetryAfter)
	}
	return 0
}

// redact removes the API key from s.
func (c *Client) redact(s string) string {
	if len(c.apiKey) < 4 {
		return s
	}
	return strings.ReplaceAll(s, c.apiKey, "[redacted]")
}
