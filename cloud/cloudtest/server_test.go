package cloudtest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docstream/docstream/cloud/cloudtest"
)

// do sends a request to srv with key as Basic user (none when key is "-").
func do(t *testing.T, srv *cloudtest.Server, key, method, path, body string) (*http.Response, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "-" {
		req.SetBasicAuth(key, "")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("body %q: %v", raw, err)
	}
	return resp, v
}

func TestAuth(t *testing.T) {
	srv := cloudtest.NewServer(cloudtest.WithAPIKey("k_test_123"))
	defer srv.Close()
	for _, key := range []string{"-", "wrong", ""} {
		resp, body := do(t, srv, key, "GET", "/v0/me", "")
		if resp.StatusCode != 401 || body["error"] != "Unauthorized" {
			t.Fatalf("key %q: %d %v", key, resp.StatusCode, body)
		}
	}
	if resp, _ := do(t, srv, "k_test_123", "GET", "/v0/me", ""); resp.StatusCode != 200 {
		t.Fatalf("right key: %d", resp.StatusCode)
	}
	if n := srv.Calls()[cloudtest.RouteMe]; n != 4 {
		t.Fatalf("calls = %d", n)
	}
}

func TestStrictBodies(t *testing.T) {
	srv := cloudtest.NewServer()
	defer srv.Close()
	for _, body := range []string{
		`{"promt":{"text":"x"},"source":{"repository":"r"}}`,
		`{"prompt":{"text":"x"},"source":{"repository":"r"},"target":{"autoCreatePR":true}}`,
		`{"prompt":{"text":""},"source":{"repository":"r"}}`,
		`{"prompt":{"text":"x"},"source":{}}`,
		`{"prompt":{"text":"x"},"source":{"repository":"r"},"webhook":{"url":"u","secret":"short"}}`,
		`{"prompt":{"text":"x","images":[{},{},{},{},{},{}]},"source":{"repository":"r"}}`,
		`{"prompt":{"text":"x"},"source":{"repository":"r"}} {}`,
	} {
		resp, v := do(t, srv, srv.APIKey, "POST", "/v0/agents", body)
		if resp.StatusCode != 400 || v["message"] == "" {
			t.Fatalf("%s: %d %v", body, resp.StatusCode, v)
		}
	}
	if len(srv.AgentIDs()) != 0 {
		t.Fatal("an agent was created")
	}
}

func TestDefaultScript(t *testing.T) {
	srv := cloudtest.NewServer()
	defer srv.Close()
	_, a := do(t, srv, srv.APIKey, "POST", "/v0/agents", `{"prompt":{"text":"add a README"},"source":{"repository":"https://github.com/acme/shop"}}`)
	id := a["id"].(string)
	var statuses []string
	for range 5 {
		_, v := do(t, srv, srv.APIKey, "GET", "/v0/agents/"+id, "")
		statuses = append(statuses, v["status"].(string))
	}
	if got := strings.Join(statuses, ","); got != "CREATING,RUNNING,RUNNING,FINISHED,FINISHED" {
		t.Fatalf("statuses = %s", got)
	}
	_, conv := do(t, srv, srv.APIKey, "GET", "/v0/agents/"+id+"/conversation", "")
	msgs := conv["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("messages = %v", msgs)
	}
	if text := msgs[1].(map[string]any)["text"]; text != "I'll add the README.\n\n```markdown\n# Shop\n\nA tiny shop.\n```" {
		t.Fatalf("grown = %q", text)
	}
	if text := msgs[2].(map[string]any)["text"].(string); !strings.HasPrefix(text, "README.md is on the branch cursor/add-a-readme-") {
		t.Fatalf("final = %q", text)
	}
	_, v := do(t, srv, srv.APIKey, "GET", "/v0/agents/"+id, "")
	target := v["target"].(map[string]any)
	if target["prUrl"] != "https://github.com/acme/shop/pull/7" || v["summary"] == "" {
		t.Fatalf("finished = %v", v)
	}
}

func TestRepositoriesLimit(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	srv := cloudtest.NewServer(cloudtest.WithClock(clock))
	defer srv.Close()
	if resp, v := do(t, srv, srv.APIKey, "GET", "/v0/repositories", ""); resp.StatusCode != 200 || len(v["repositories"].([]any)) != 3 {
		t.Fatalf("first: %d %v", resp.StatusCode, v)
	}
	advance(15 * time.Second)
	resp, v := do(t, srv, srv.APIKey, "GET", "/v0/repositories", "")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "45" || v["message"] != "Rate limit exceeded. Please try again later." {
		t.Fatalf("second: %d %q %v", resp.StatusCode, resp.Header.Get("Retry-After"), v)
	}
	advance(45 * time.Second)
	if resp, _ := do(t, srv, srv.APIKey, "GET", "/v0/repositories", ""); resp.StatusCode != 200 {
		t.Fatalf("after a minute: %d", resp.StatusCode)
	}
}

func TestFaultsAndCalls(t *testing.T) {
	srv := cloudtest.NewServer()
	defer srv.Close()
	srv.FailNext("GET", "/v0/models", 503, 2*time.Second)
	resp, _ := do(t, srv, srv.APIKey, "GET", "/v0/models", "")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("faulted: %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp, _ := do(t, srv, srv.APIKey, "GET", "/v0/models", ""); resp.StatusCode != 200 {
		t.Fatalf("after fault: %d", resp.StatusCode)
	}
	do(t, srv, srv.APIKey, "GET", "/v0/nothing", "")
	calls := srv.Calls()
	if calls[cloudtest.RouteModels] != 2 || calls["GET /v0/nothing"] != 1 {
		t.Fatalf("calls = %v", calls)
	}
}

func TestFollowUpStopDelete(t *testing.T) {
	srv := cloudtest.NewServer(cloudtest.WithManualAdvance())
	defer srv.Close()
	_, a := do(t, srv, srv.APIKey, "POST", "/v0/agents", `{"prompt":{"text":"x"},"source":{"repository":"r"}}`)
	id := a["id"].(string)
	if _, v := do(t, srv, srv.APIKey, "GET", "/v0/agents/"+id, ""); v["status"] != "CREATING" {
		t.Fatalf("manual advance moved the agent: %v", v)
	}
	if resp, v := do(t, srv, srv.APIKey, "POST", "/v0/agents/"+id+"/stop", ""); resp.StatusCode != 200 || v["id"] != id {
		t.Fatalf("stop: %d %v", resp.StatusCode, v)
	}
	if _, v := do(t, srv, srv.APIKey, "GET", "/v0/agents/"+id, ""); v["status"] != "STOPPED" {
		t.Fatalf("after stop: %v", v)
	}
	if resp, _ := do(t, srv, srv.APIKey, "POST", "/v0/agents/"+id+"/followup", `{"prompt":{"text":"again"}}`); resp.StatusCode != 200 {
		t.Fatalf("follow-up: %d", resp.StatusCode)
	}
	if _, v := do(t, srv, srv.APIKey, "GET", "/v0/agents/"+id, ""); v["status"] != "RUNNING" {
		t.Fatalf("after follow-up: %v", v)
	}
	if !srv.Advance(id) {
		t.Fatal("no follow-up step")
	}
	if resp, _ := do(t, srv, srv.APIKey, "DELETE", "/v0/agents/"+id, ""); resp.StatusCode != 200 {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	if resp, _ := do(t, srv, srv.APIKey, "GET", "/v0/agents/"+id+"/conversation", ""); resp.StatusCode != 404 {
		t.Fatalf("conversation after delete: %d", resp.StatusCode)
	}
}
