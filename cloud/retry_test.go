package cloud_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docstream/docstream/cloud"
	"github.com/docstream/docstream/cloud/cloudtest"
)

func TestRetryAfterSecondsHonoured(t *testing.T) {
	srv := newFake(t)
	c, rec := newClient(t, srv)
	a := launchReadme(t, c)
	srv.FailNext(http.MethodGet, "/v0/agents/{id}", http.StatusTooManyRequests, 3*time.Second)
	if _, err := c.Agent(context.Background(), a.ID); err != nil {
		t.Fatal(err)
	}
	if got := rec.Sleeps(); !slices.Equal(got, []time.Duration{3 * time.Second}) {
		t.Fatalf("sleeps = %v", got)
	}
	if n := srv.Calls()[cloudtest.RouteAgent]; n != 2 {
		t.Fatalf("calls = %d", n)
	}
}

func TestRetryAfterDateHonoured(t *testing.T) {
	clk := newClock()
	srv := newFake(t)
	c, rec := newClient(t, srv, cloud.WithClock(clk.Now))
	srv.Fail(cloudtest.Fault{
		Method: http.MethodGet, Path: "/v0/me", Status: http.StatusTooManyRequests,
		Header: http.Header{"Retry-After": {clk.Now().Add(7 * time.Second).Format(http.TimeFormat)}},
	})
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := rec.Sleeps(); !slices.Equal(got, []time.Duration{7 * time.Second}) {
		t.Fatalf("sleeps = %v", got)
	}
}

func TestRetryAfterBeyondMaxDelayIsReturned(t *testing.T) {
	srv := newFake(t)
	c, rec := newClient(t, srv)
	srv.FailNext(http.MethodGet, "/v0/me", http.StatusTooManyRequests, 2*time.Minute)
	_, err := c.Me(context.Background())
	e := asError(t, err)
	if e.Code != cloud.CodeRateLimited || e.Status != 429 || e.RetryAfter != 2*time.Minute {
		t.Fatalf("error = %+v", e)
	}
	if len(rec.Sleeps()) != 0 || srv.Calls()[cloudtest.RouteMe] != 1 {
		t.Fatalf("sleeps %v, calls %v", rec.Sleeps(), srv.Calls())
	}
}

func TestRetryNeverWaitsPastDeadline(t *testing.T) {
	srv := newFake(t)
	c, rec := newClient(t, srv)
	srv.FailNext(http.MethodGet, "/v0/me", http.StatusTooManyRequests, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := c.Me(ctx)
	if asError(t, err).Code != cloud.CodeRateLimited {
		t.Fatalf("err = %v", err)
	}
	if len(rec.Sleeps()) != 0 || srv.Calls()[cloudtest.RouteMe] != 1 {
		t.Fatalf("sleeps %v, calls %v", rec.Sleeps(), srv.Calls())
	}
}

func TestServerErrorRetriedForGET(t *testing.T) {
	srv := newFake(t)
	c, rec := newClient(t, srv, cloud.WithJitter(identity))
	srv.Fail(cloudtest.Fault{Method: http.MethodGet, Path: "/v0/models", Status: http.StatusServiceUnavailable, Times: 2})
	if _, err := c.Models(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := srv.Calls()[cloudtest.RouteModels]; n != 3 {
		t.Fatalf("calls = %d", n)
	}
	if got := rec.Sleeps(); !slices.Equal(got, []time.Duration{time.Second, 2 * time.Second}) {
		t.Fatalf("sleeps = %v", got)
	}
}

func TestServerErrorAttemptsBounded(t *testing.T) {
	srv := newFake(t)
	c, rec := newClient(t, srv)
	srv.Fail(cloudtest.Fault{Method: http.MethodGet, Path: "/v0/models", Status: http.StatusInternalServerError, Times: 100})
	_, err := c.Models(context.Background())
	if e := asError(t, err); e.Code != cloud.CodeUnavailable || e.Status != 500 {
		t.Fatalf("error = %+v", e)
	}
	if n := srv.Calls()[cloudtest.RouteModels]; n != cloud.DefaultMaxAttempts {
		t.Fatalf("calls = %d", n)
	}
	for i, d := range rec.Sleeps() {
		if ceiling := time.Second << i; d < 0 || d > ceiling {
			t.Fatalf("sleep %d = %s, outside [0, %s]", i, d, ceiling)
		}
	}
}

func TestBackoffCappedAtMaxDelay(t *testing.T) {
	srv := newFake(t)
	c, rec := newClient(t, srv, cloud.WithJitter(identity), cloud.WithRetry(6, 3*time.Second))
	srv.Fail(cloudtest.Fault{Method: http.MethodGet, Path: "/v0/models", Status: http.StatusBadGateway, Times: 100})
	_, _ = c.Models(context.Background())
	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second, 3 * time.Second}
	if got := rec.Sleeps(); !slices.Equal(got, want) {
		t.Fatalf("sleeps = %v, want %v", got, want)
	}
}

func TestTransportErrorRetriedForGET(t *testing.T) {
	srv := newFake(t)
	ft := &failingTransport{n: 2, next: http.DefaultTransport}
	c, _ := newClient(t, srv, cloud.WithHTTPClient(&http.Client{Transport: ft}))
	if _, err := c.Me(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ft.Calls() != 3 {
		t.Fatalf("transport calls = %d", ft.Calls())
	}
}

func TestStopAndDeleteRetriedAfterServerError(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	ctx := context.Background()
	a := launchReadme(t, c)
	srv.FailNext(http.MethodPost, "/v0/agents/{id}/stop", http.StatusInternalServerError, 0)
	if err := c.Stop(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	srv.FailNext(http.MethodDelete, "/v0/agents/"+a.ID, http.StatusServiceUnavailable, 0)
	if err := c.Delete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	calls := srv.Calls()
	if calls[cloudtest.RouteStop] != 2 || calls[cloudtest.RouteDelete] != 2 {
		t.Fatalf("calls = %v", calls)
	}
}

func TestLaunchNotRetriedAfterServerError(t *testing.T) {
	srv := newFake(t)
	c, rec := newClient(t, srv)
	srv.FailNext(http.MethodPost, "/v0/agents", http.StatusInternalServerError, 0)
	_, err := c.Launch(context.Background(), cloud.LaunchRequest{Prompt: cloud.Prompt{Text: "add a README"}, Source: cloud.Source{Repository: "https://github.com/acme/shop"}})
	e := asError(t, err)
	if e.Code != cloud.CodeUnavailable || !strings.Contains(e.Message, "may have been started") {
		t.Fatalf("error = %+v", e)
	}
	if n := srv.Calls()[cloudtest.RouteLaunch]; n != 1 {
		t.Fatalf("launch calls = %d, want 1", n)
	}
	if len(rec.Sleeps()) != 0 {
		t.Fatalf("sleeps = %v", rec.Sleeps())
	}
}

func TestLaunchNotRetriedAfterClientTimeout(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv, cloud.WithHTTPClient(&http.Client{Timeout: 100 * time.Millisecond}))
	srv.Hang(http.MethodPost, "/v0/agents", 10*time.Second)
	_, err := c.Launch(context.Background(), cloud.LaunchRequest{Prompt: cloud.Prompt{Text: "add a README"}, Source: cloud.Source{Repository: "https://github.com/acme/shop"}})
	e := asError(t, err)
	if e.Code != cloud.CodeUnavailable || e.Status != 0 || !strings.Contains(e.Message, "may have been started") {
		t.Fatalf("error = %+v", e)
	}
	if n := srv.Calls()[cloudtest.RouteLaunch]; n != 1 {
		t.Fatalf("launch calls = %d, want 1", n)
	}
	// The agent did start: a retry would have made a second one.
	if ids := srv.AgentIDs(); len(ids) != 1 {
		t.Fatalf("agents = %v", ids)
	}
}

func TestLaunchNotRetriedAfterContextDeadline(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	srv.Hang(http.MethodPost, "/v0/agents", 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Launch(ctx, cloud.LaunchRequest{Prompt: cloud.Prompt{Text: "add a README"}, Source: cloud.Source{Repository: "https://github.com/acme/shop"}})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "may have been started") {
		t.Fatalf("err = %v", err)
	}
	if n := srv.Calls()[cloudtest.RouteLaunch]; n != 1 {
		t.Fatalf("launch calls = %d, want 1", n)
	}
}

// TestHungGETEndsAtDeadline: a GET, retried after transport errors, to an
// API that never answers ends with ctx's deadline, not after every try has
// waited out the HTTP client's 60 s.
func TestHungGETEndsAtDeadline(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	srv.Fail(cloudtest.Fault{Method: http.MethodGet, Path: "/v0/me", Delay: time.Minute, Times: 10})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Me(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Me returned after %s, with a deadline of 200ms", took)
	}
	if n := srv.Calls()[cloudtest.RouteMe]; n != 1 {
		t.Fatalf("calls = %d, want 1", n)
	}
}

func TestLaunchNotRetriedAfterTransportError(t *testing.T) {
	srv := newFake(t)
	ft := &failingTransport{n: 1, next: http.DefaultTransport}
	c, _ := newClient(t, srv, cloud.WithHTTPClient(&http.Client{Transport: ft}))
	_, err := c.Launch(context.Background(), cloud.LaunchRequest{Prompt: cloud.Prompt{Text: "add a README"}, Source: cloud.Source{Repository: "https://github.com/acme/shop"}})
	if e := asError(t, err); e.Code != cloud.CodeUnavailable || errors.Unwrap(e) == nil {
		t.Fatalf("error = %+v", e)
	}
	if ft.Calls() != 1 {
		t.Fatalf("transport calls = %d", ft.Calls())
	}
}

func TestLaunchRetriedAfterRateLimit(t *testing.T) {
	srv := newFake(t)
	c, rec := newClient(t, srv)
	srv.FailNext(http.MethodPost, "/v0/agents", http.StatusTooManyRequests, time.Second)
	launchReadme(t, c)
	if n := srv.Calls()[cloudtest.RouteLaunch]; n != 2 {
		t.Fatalf("launch calls = %d, want 2", n)
	}
	if ids := srv.AgentIDs(); len(ids) != 1 {
		t.Fatalf("agents = %v", ids)
	}
	if !slices.Equal(rec.Sleeps(), []time.Duration{time.Second}) {
		t.Fatalf("sleeps = %v", rec.Sleeps())
	}
}

func TestFollowUpRetryRules(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	ctx := context.Background()
	a := launchReadme(t, c)

	srv.FailNext(http.MethodPost, "/v0/agents/{id}/followup", http.StatusBadGateway, 0)
	err := c.FollowUp(ctx, a.ID, cloud.Prompt{Text: "more"})
	if e := asError(t, err); e.Code != cloud.CodeUnavailable || !strings.Contains(e.Message, "may have been delivered") {
		t.Fatalf("error = %+v", e)
	}
	if n := srv.Calls()[cloudtest.RouteFollowUp]; n != 1 {
		t.Fatalf("follow-up calls after 502 = %d, want 1", n)
	}

	srv.FailNext(http.MethodPost, "/v0/agents/{id}/followup", http.StatusTooManyRequests, time.Second)
	if err := c.FollowUp(ctx, a.ID, cloud.Prompt{Text: "more"}); err != nil {
		t.Fatal(err)
	}
	if n := srv.Calls()[cloudtest.RouteFollowUp]; n != 3 {
		t.Fatalf("follow-up calls = %d, want 3", n)
	}
}
