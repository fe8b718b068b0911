package cloud_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docstream/docstream/cloud"
	"github.com/docstream/docstream/cloud/cloudtest"
)

func TestErrorMapping(t *testing.T) {
	cases := []struct {
		status  int
		code    string
		message string // part of the message
	}{
		{400, cloud.CodeBadRequest, "upstream says no"},
		{403, cloud.CodeForbidden, "not allowed"},
		{409, cloud.CodeConflict, "cannot take"},
		{429, cloud.CodeRateLimited, "rate limit"},
		{500, cloud.CodeUnavailable, "failed the agent status request"},
		{503, cloud.CodeUnavailable, "failed"},
		{418, cloud.CodeUnexpected, "unexpected"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			srv := newFake(t)
			c, _ := newClient(t, srv, cloud.WithRetry(1, 0))
			a := launchReadme(t, c)
			srv.Fail(cloudtest.Fault{Method: http.MethodGet, Path: "/v0/agents/{id}", Status: tc.status, Message: "upstream says no", RetryAfter: 9 * time.Second})
			_, err := c.Agent(context.Background(), a.ID)
			var e *cloud.Error
			if !errors.As(err, &e) {
				t.Fatalf("errors.As failed for %v", err)
			}
			if e.Status != tc.status || e.Code != tc.code || !strings.Contains(e.Message, tc.message) {
				t.Fatalf("error = %+v", e)
			}
			if !strings.HasPrefix(err.Error(), "cloud: ") || !strings.Contains(err.Error(), fmt.Sprintf("(HTTP %d)", tc.status)) {
				t.Fatalf("Error() = %q", err.Error())
			}
			if e.RetryAfter != 9*time.Second {
				t.Fatalf("RetryAfter = %s", e.RetryAfter)
			}
			if cloud.ErrorCode(fmt.Errorf("wrapped: %w", err)) != tc.code {
				t.Fatalf("ErrorCode through a wrap failed")
			}
			if e.Retryable() != (tc.status == 429 || tc.status >= 500) {
				t.Fatalf("Retryable = %v", e.Retryable())
			}
			noKey(t, srv, err.Error())
		})
	}
}

func TestErrorUnauthorized(t *testing.T) {
	srv := newFake(t)
	c, err := cloud.New(srv.URL, "wrong-key-"+srv.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Models(context.Background())
	e := asError(t, err)
	if e.Status != 401 || e.Code != cloud.CodeUnauthorized || e.Message != "the Cloud API key is missing or invalid" {
		t.Fatalf("error = %+v", e)
	}
	if strings.Contains(err.Error(), "wrong-key") {
		t.Fatalf("key in %q", err)
	}
	if n := srv.Calls()[cloudtest.RouteModels]; n != 1 {
		t.Fatalf("401 was retried: %d calls", n)
	}
}

func TestErrorNotFound(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	_, err := c.Agent(context.Background(), "bc_nope")
	e := asError(t, err)
	if e.Status != 404 || e.Code != cloud.CodeNotFound || e.Message != "no such agent: bc_nope" {
		t.Fatalf("error = %+v", e)
	}
	if n := srv.Calls()[cloudtest.RouteAgent]; n != 1 {
		t.Fatalf("404 was retried: %d calls", n)
	}
}

func TestErrorBadRequestCarriesUpstreamMessage(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	srv.Fail(cloudtest.Fault{Method: http.MethodPost, Path: "/v0/agents", Status: 400, Message: "prompt.text is required"})
	_, err := c.Launch(context.Background(), cloud.LaunchRequest{Prompt: cloud.Prompt{Text: "x"}, Source: cloud.Source{Repository: "r"}})
	e := asError(t, err)
	if e.Code != cloud.CodeBadRequest || e.Message != "the Cloud Agents API rejected the launch request: prompt.text is required" {
		t.Fatalf("error = %+v", e)
	}
}

func TestErrorRateLimitedAfterAttempts(t *testing.T) {
	srv := newFake(t)
	c, rec := newClient(t, srv)
	srv.Fail(cloudtest.Fault{Method: http.MethodGet, Path: "/v0/me", Status: 429, RetryAfter: 2 * time.Second, Times: 10})
	_, err := c.Me(context.Background())
	e := asError(t, err)
	if e.Code != cloud.CodeRateLimited || e.RetryAfter != 2*time.Second || !strings.Contains(e.Message, "again in 2s") {
		t.Fatalf("error = %+v", e)
	}
	if n := srv.Calls()[cloudtest.RouteMe]; n != cloud.DefaultMaxAttempts {
		t.Fatalf("calls = %d", n)
	}
	if len(rec.Sleeps()) != cloud.DefaultMaxAttempts-1 {
		t.Fatalf("sleeps = %v", rec.Sleeps())
	}
}

func TestKeyRedactedFromMessages(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	srv.Fail(cloudtest.Fault{Method: http.MethodGet, Path: "/v0/me", Status: 400, Message: "bad key " + srv.APIKey})
	_, err := c.Me(context.Background())
	if err == nil || !strings.Contains(err.Error(), "[redacted]") {
		t.Fatalf("err = %v", err)
	}
	noKey(t, srv, err.Error())
}
