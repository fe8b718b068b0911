package gateway_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docstream/docstream/cloud/cloudtest"
)

// TestCloudRequestTimeout: with an API that never answers, a pass-through
// route and a cloud run's launch answer a 504 cloud_timeout within
// cloud.request_timeout (2s here) rather than after every try has waited
// out the client's own limit.
func TestCloudRequestTimeout(t *testing.T) {
	t.Parallel()
	fake, s := startCloud(t, "", "20ms", "DOCSTREAM_CLOUD_REQUEST_TIMEOUT=2s")
	client := &http.Client{Timeout: 60 * time.Second}
	launch := map[string]any{"backend": "cloud", "prompt": "add a README", "source": shop}
	for _, c := range []struct {
		method, path string
		body         any
		upstream     string // the API route that hangs
		note         string // what the message must say besides the limit
	}{
		{http.MethodGet, "/v1/cloud/me", nil, "GET /v0/me", ""},
		{http.MethodDelete, "/v1/cloud/agents/bc_0001", nil, "DELETE /v0/agents/{id}", ""},
		{http.MethodPost, "/v1/chat", launch, "POST /v0/agents", "may have been started"},
		{http.MethodPost, "/v1/chat?stream=true", launch, "POST /v0/agents", "may have been started"},
	} {
		method, path, _ := strings.Cut(c.upstream, " ")
		fake.Fail(cloudtest.Fault{Method: method, Path: path, Delay: 10 * time.Minute, Times: 10})
		start := time.Now()
		resp, err := client.Do(newRequest(t, c.method, s.URL+c.path, c.body))
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		code, msg := e2eErrorBody(t, resp, http.StatusGatewayTimeout)
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s %s: answered after %s, with cloud.request_timeout 2s", c.method, c.path, took)
		}
		if code != "cloud_timeout" || !strings.Contains(msg, "cloud.request_timeout") || !strings.Contains(msg, c.note) {
			t.Errorf("%s %s: %s %q, want cloud_timeout naming cloud.request_timeout", c.method, c.path, code, msg)
		}
	}
}
