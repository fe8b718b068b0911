package cloud_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docstream/docstream/cloud"
	"github.com/docstream/docstream/cloud/cloudtest"
)

// recorder collects the waits of a client; its sleep returns at once so no
// test waits for real time.
type recorder struct {
	mu     sync.Mutex
	sleeps []time.Duration
	// onSleep, when set, runs after each recorded wait with its 1-based count.
	onSleep func(n int)
}

func (r *recorder) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.sleeps = append(r.sleeps, d)
	n, hook := len(r.sleeps), r.onSleep
	r.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	return ctx.Err()
}

func (r *recorder) Sleeps() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.sleeps...)
}

// fakeClock is a settable clock shared by client and fake.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newFake(t *testing.T, opts ...cloudtest.Option) *cloudtest.Server {
	t.Helper()
	srv := cloudtest.NewServer(opts...)
	t.Cleanup(srv.Close)
	return srv
}

// newClient returns a client of srv with recorded sleeps.
func newClient(t *testing.T, srv *cloudtest.Server, opts ...cloud.Option) (*cloud.Client, *recorder) {
	t.Helper()
	rec := &recorder{}
	all := append([]cloud.Option{cloud.WithSleep(rec.sleep)}, opts...)
	c, err := cloud.New(srv.URL, srv.APIKey, all...)
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
}

// asError returns err as *cloud.Error or fails the test.
func asError(t *testing.T, err error) *cloud.Error {
	t.Helper()
	var e *cloud.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *cloud.Error", err, err)
	}
	return e
}

// launchReadme launches the default "add a README" run.
func launchReadme(t *testing.T, c *cloud.Client) *cloud.Agent {
	t.Helper()
	a, err := c.Launch(context.Background(), cloud.LaunchRequest{
		Prompt: cloud.Prompt{Text: "add a README"},
		Source: cloud.Source{Repository: "https://github.com/acme/shop", Ref: "main"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// identity is a jitter that always picks the ceiling.
func identity(d time.Duration) time.Duration { return d }

// failingTransport fails the first n requests before delegating.
type failingTransport struct {
	mu    sync.Mutex
	n     int
	calls int
	next  http.RoundTripper
}

func (f *failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.calls++
	fail := f.calls <= f.n
	f.mu.Unlock()
	if fail {
		return nil, errors.New("connection reset by peer")
	}
	return f.next.RoundTrip(r)
}

func (f *failingTransport) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// noKey fails when s contains the API key.
func noKey(t *testing.T, srv *cloudtest.Server, s string) {
	t.Helper()
	if strings.Contains(s, srv.APIKey) {
		t.Fatalf("API key leaked in %q", s)
	}
}
