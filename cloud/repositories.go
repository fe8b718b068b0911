package cloud

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Upstream limits of GET /v0/repositories.
const (
	RepositoriesPerMinute = 1
	RepositoriesPerHour   = 30
)

// reposState is the cache, limiter and in-flight request of Repositories.
type reposState struct {
	mu       sync.Mutex
	ttl      time.Duration
	value    []Repository // nil until fetched
	fetched  time.Time
	sent     []time.Time // requests sent within the last hour, oldest first
	blocked  time.Time   // not before this, from an upstream 429
	inflight *reposFlight
}

// reposFlight is one request shared by concurrent callers.
type reposFlight struct {
	done  chan struct{}
	value []Repository
	err   error
}

// Repositories returns the GitHub repositories the key can reach
// (GET /v0/repositories), cached and kept within the upstream limits: a list
// is served stale, or CodeRateLimited returned, rather than break them.
func (c *Client) Repositories(ctx context.Context) ([]Repository, error) {
	s := &c.repos
	s.mu.Lock()
	now := c.now()
	if s.value != nil && now.Sub(s.fetched) < s.ttl {
		v := slices.Clone(s.value)
		s.mu.Unlock()
		return v, nil
	}
	if f := s.inflight; f != nil {
		s.mu.Unlock()
		select {
		case <-f.done:
			return slices.Clone(f.value), f.err
		case <-ctx.Done():
			return nil, fmt.Errorf("cloud: list repositories: %w", ctx.Err())
		}
	}
	if wait := s.wait(now); wait > 0 {
		if s.value != nil {
			v, fetched := slices.Clone(s.value), s.fetched
			s.mu.Unlock()
			c.log("cloud: GET /v0/repositories: local limit, serving the list fetched at %s", fetched.UTC().Format(time.RFC3339))
			return v, nil
		}
		s.mu.Unlock()
		return nil, &Error{
			Code:       CodeRateLimited,
			RetryAfter: wait,
			Message: fmt.Sprintf("the repositories list can be fetched again in %s (at %s); the Cloud Agents API allows %d request per minute and %d per hour",
				wait.Round(time.Second), now.Add(wait).UTC().Format(time.RFC3339), RepositoriesPerMinute, RepositoriesPerHour),
		}
	}
	s.sent = append(s.sent, now)
	f := &reposFlight{done: make(chan struct{})}
	s.inflight = f
	s.mu.Unlock()

	var out struct {
		Repositories []Repository `json:"repositories"`
	}
	err := c.do(ctx, &call{method: http.MethodGet, path: "/v0/repositories", policy: retryNever, op: "list repositories"}, &out)

	s.mu.Lock()
	defer s.mu.Unlock()
	now = c.now()
	var e *Error
	switch {
	case err == nil:
		if out.Repositories == nil {
			out.Repositories = []Repository{}
		}
		f.value = out.Repositories
		if s.ttl > 0 {
			s.value, s.fetched = out.Repositories, now
		}
	case errors.As(err, &e) && e.Retryable():
		if e.Code == CodeRateLimited {
			ra := e.RetryAfter
			if ra <= 0 {
				ra = time.Minute
			}
			if until := now.Add(ra); until.After(s.blocked) {
				s.blocked = until
			}
		}
		if s.value != nil {
			c.log("cloud: GET /v0/repositories: %s, serving the list fetched at %s", e.Code, s.fetched.UTC().Format(time.RFC3339))
			f.value = s.value
		} else {
			f.err = err
		}
	default:
		f.err = err
	}
	s.inflight = nil
	close(f.done)
	return slices.Clone(f.value), f.err
}

// wait returns how long until a request keeps within the limits. s.mu is held.
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
