package cloud

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Upstream limits of GET /v0/repositories.
const (
	RepositoriesPerMinute = 1
	RepositoriesPerHour   = 30
)

// reposState is the cache and limiter of Repositories.
type reposState struct {
	turn    chan struct{} // held by the one caller that reads or fetches the list
	ttl     time.Duration
	value   []Repository // nil until fetched
	fetched time.Time
	sent    []time.Time // requests sent within the last hour, oldest first
	blocked time.Time   // not before this, from an upstream 429
}

// Repositories returns the GitHub repositories the key can reach
// (GET /v0/repositories), cached and kept within the upstream limits: a list
// is served stale, or CodeRateLimited returned, rather than break them.
// Concurrent callers wait for one request.
func (c *Client) Repositories(ctx context.Context) ([]Repository, error) {
	s := &c.repos
	select {
	case s.turn <- struct{}{}:
		defer func() { <-s.turn }()
	case <-ctx.Done():
		return nil, fmt.Errorf("cloud: list repositories: %w", ctx.Err())
	}
	now := c.now()
	if s.value != nil && now.Sub(s.fetched) < s.ttl {
		return slices.Clone(s.value), nil
	}
	if wait := s.wait(now); wait > 0 {
		if s.value != nil {
			return slices.Clone(s.value), nil
		}
		return nil, &Error{
			Code:       CodeRateLimited,
			RetryAfter: wait,
			Message: fmt.Sprintf("the repositories list can be fetched again in %s (at %s); the Cloud Agents API allows %d request per minute and %d per hour",
				wait.Round(time.Second), now.Add(wait).UTC().Format(time.RFC3339), RepositoriesPerMinute, RepositoriesPerHour),
		}
	}
	s.sent = append(s.sent, now)
	var out struct {
		Repositories []Repository `json:"repositories"`
	}
	err := c.do(ctx, &call{method: http.MethodGet, path: "/v0/repositories", op: "list repositories", once: true}, &out)
	var e *Error
	if errors.As(err, &e) && e.Code == CodeRateLimited {
		if until := c.now().Add(cmp.Or(e.RetryAfter, time.Minute)); until.After(s.blocked) {
			s.blocked = until
		}
	}
	switch {
	case err == nil:
		if out.Repositories == nil {
			out.Repositories = []Repository{}
		}
		if s.ttl > 0 {
			s.value, s.fetched = out.Repositories, c.now()
		}
		return slices.Clone(out.Repositories), nil
	case e != nil && e.Retryable() && s.value != nil:
		return slices.Clone(s.value), nil
	}
	return nil, err
}

// wait returns how long until a request keeps within the limits.
func (s *reposState) wait(now time.Time) time.Duration {
	hourAgo := now.Add(-time.Hour)
	for len(s.sent) > 0 && !s.sent[0].After(hourAgo) {
		s.sent = s.sent[1:]
	}
	wait := s.blocked.Sub(now)
	if n := len(s.sent); n > 0 {
		wait = max(wait, s.sent[n-1].Add(time.Minute/RepositoriesPerMinute).Sub(now))
	}
	if n := len(s.sent); n >= RepositoriesPerHour {
		wait = max(wait, s.sent[n-RepositoriesPerHour].Add(time.Hour).Sub(now))
	}
	return max(wait, 0)
}
