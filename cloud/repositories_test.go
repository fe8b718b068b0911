package cloud_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docstream/docstream/cloud"
	"github.com/docstream/docstream/cloud/cloudtest"
)

var wantRepos = []cloud.Repository{
	{Owner: "acme", Name: "shop", Repository: "https://github.com/acme/shop"},
	{Owner: "acme", Name: "docs", Repository: "https://github.com/acme/docs"},
	{Owner: "dev", Name: "playground", Repository: "https://github.com/dev/playground"},
}

func TestRepositoriesCached(t *testing.T) {
	clk := newClock()
	srv := newFake(t, cloudtest.WithClock(clk.Now))
	c, _ := newClient(t, srv, cloud.WithClock(clk.Now))
	ctx := context.Background()
	for range 3 {
		repos, err := c.Repositories(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(repos, wantRepos) {
			t.Fatalf("repos = %+v", repos)
		}
		repos[0].Name = "changed by the caller"
	}
	if n := srv.Calls()[cloudtest.RouteRepositories]; n != 1 {
		t.Fatalf("calls = %d, want 1", n)
	}
	clk.Advance(cloud.DefaultRepositoriesTTL + time.Second)
	repos, err := c.Repositories(ctx)
	if err != nil || !reflect.DeepEqual(repos, wantRepos) {
		t.Fatalf("after TTL: %+v, %v", repos, err)
	}
	if n := srv.Calls()[cloudtest.RouteRepositories]; n != 2 {
		t.Fatalf("calls after TTL = %d, want 2", n)
	}
}

func TestRepositoriesLocalLimitWithoutCache(t *testing.T) {
	clk := newClock()
	srv := newFake(t, cloudtest.WithClock(clk.Now))
	c, _ := newClient(t, srv, cloud.WithClock(clk.Now), cloud.WithRepositoriesTTL(0))
	ctx := context.Background()
	if _, err := c.Repositories(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(20 * time.Second)
	_, err := c.Repositories(ctx)
	e := asError(t, err)
	if e.Code != cloud.CodeRateLimited || e.Status != 0 || e.RetryAfter != 40*time.Second {
		t.Fatalf("error = %+v", e)
	}
	if !strings.Contains(e.Message, "again in 40s") || !strings.Contains(e.Message, "12:01:00Z") {
		t.Fatalf("message = %q", e.Message)
	}
	if n := srv.Calls()[cloudtest.RouteRepositories]; n != 1 {
		t.Fatalf("a limited request was sent: %d calls", n)
	}
	clk.Advance(40 * time.Second)
	if _, err := c.Repositories(ctx); err != nil {
		t.Fatal(err)
	}
	if n := srv.Calls()[cloudtest.RouteRepositories]; n != 2 {
		t.Fatalf("calls = %d", n)
	}
}

func TestRepositoriesHourlyLimit(t *testing.T) {
	clk := newClock()
	srv := newFake(t, cloudtest.WithClock(clk.Now))
	c, _ := newClient(t, srv, cloud.WithClock(clk.Now), cloud.WithRepositoriesTTL(0))
	ctx := context.Background()
	for i := range cloud.RepositoriesPerHour {
		if _, err := c.Repositories(ctx); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		clk.Advance(61 * time.Second)
	}
	// 30 requests were sent in the last 30*61 s; the oldest leaves the hour
	// window 3600 - 1830 s from now.
	_, err := c.Repositories(ctx)
	e := asError(t, err)
	if e.Code != cloud.CodeRateLimited || e.RetryAfter != 3600*time.Second-1830*time.Second {
		t.Fatalf("error = %+v", e)
	}
	if n := srv.Calls()[cloudtest.RouteRepositories]; n != cloud.RepositoriesPerHour {
		t.Fatalf("calls = %d", n)
	}
}

func TestRepositoriesFailureThenLocalLimit(t *testing.T) {
	clk := newClock()
	srv := newFake(t, cloudtest.WithClock(clk.Now))
	c, rec := newClient(t, srv, cloud.WithClock(clk.Now))
	ctx := context.Background()
	srv.FailNext(http.MethodGet, "/v0/repositories", http.StatusInternalServerError, 0)
	_, err := c.Repositories(ctx)
	if asError(t, err).Code != cloud.CodeUnavailable {
		t.Fatalf("err = %v", err)
	}
	if len(rec.Sleeps()) != 0 {
		t.Fatalf("repositories was retried: %v", rec.Sleeps())
	}
	_, err = c.Repositories(ctx)
	if e := asError(t, err); e.Code != cloud.CodeRateLimited || e.RetryAfter != time.Minute {
		t.Fatalf("error = %+v", e)
	}
	if n := srv.Calls()[cloudtest.RouteRepositories]; n != 1 {
		t.Fatalf("calls = %d", n)
	}
}

func TestRepositoriesServesStaleWhenLimited(t *testing.T) {
	clk := newClock()
	srv := newFake(t, cloudtest.WithClock(clk.Now))
	c, _ := newClient(t, srv, cloud.WithClock(clk.Now), cloud.WithRepositoriesTTL(2*time.Minute))
	ctx := context.Background()
	if _, err := c.Repositories(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(3 * time.Minute)
	srv.FailNext(http.MethodGet, "/v0/repositories", http.StatusTooManyRequests, 10*time.Minute)
	repos, err := c.Repositories(ctx)
	if err != nil || !reflect.DeepEqual(repos, wantRepos) {
		t.Fatalf("upstream 429 with a stale list: %+v, %v", repos, err)
	}
	// The 429's Retry-After now holds the limiter: the stale list is served
	// without a request.
	clk.Advance(5 * time.Minute)
	repos, err = c.Repositories(ctx)
	if err != nil || !reflect.DeepEqual(repos, wantRepos) {
		t.Fatalf("locally limited with a stale list: %+v, %v", repos, err)
	}
	if n := srv.Calls()[cloudtest.RouteRepositories]; n != 2 {
		t.Fatalf("calls = %d, want 2", n)
	}
}

func TestRepositoriesConcurrentCallersShareOneRequest(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	srv.Hang(http.MethodGet, "/v0/repositories", 50*time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			repos, err := c.Repositories(context.Background())
			if err == nil && len(repos) != len(wantRepos) {
				t.Errorf("repos = %+v", repos)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.Calls()[cloudtest.RouteRepositories]; n != 1 {
		t.Fatalf("calls = %d, want 1", n)
	}
}

func TestRepositoriesUnauthorizedNotHidden(t *testing.T) {
	srv := newFake(t)
	c, err := cloud.New(srv.URL, "nope-nope")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Repositories(context.Background())
	if asError(t, err).Code != cloud.CodeUnauthorized {
		t.Fatalf("err = %v", err)
	}
}
