package gateway_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/cloud/cloudtest"
	"github.com/docstream/docstream/documents"
)

// startCloud starts the fake Cloud Agents API and a gateway that uses it.
func startCloud(t *testing.T, key, interval string, extra ...string) (*cloudtest.Server, *testServer) {
	t.Helper()
	return startCloudWith(t, cloudtest.NewServer(), key, interval, extra...)
}

// startCloudWith is startCloud with the fake given.
func startCloudWith(t *testing.T, fake *cloudtest.Server, key, interval string, extra ...string) (*cloudtest.Server, *testServer) {
	t.Helper()
	t.Cleanup(fake.Close)
	if key == "" {
		key = fake.APIKey
	}
	s := startServer(t, append([]string{
		"DOCSTREAM_CLOUD_BASE_URL=" + fake.URL + "/v0",
		"DOCSTREAM_CLOUD_API_KEY=" + key,
		"DOCSTREAM_CLOUD_POLL_INTERVAL=" + interval,
	}, extra...)...)
	return fake, s
}

var shop = map[string]any{"repository": "https://github.com/acme/shop", "ref": "main"}

// TestCloudRunStreamsDocuments launches a cloud agent through /v1/chat and
// checks its messages arrive once each as documents, the PR url is in the
// metadata, and a follow-up goes to the same agent.
func TestCloudRunStreamsDocuments(t *testing.T) {
	fake, s := startCloud(t, "", "20ms")
	_, evs := s.chatStream(t, map[string]any{"backend": "cloud", "prompt": "add a README", "source": shop})
	resp := fold(t, evs)
	if resp.Status != documents.StatusCompleted {
		t.Fatalf("status %s: %+v", resp.Status, resp.Documents)
	}
	var types []documents.Type
	all := ""
	for _, d := range resp.Documents {
		types = append(types, d.Type)
		all += str(d.Content) + "\n"
	}
	want := []documents.Type{documents.TypeText, documents.TypeCodeBlock, documents.TypeText}
	if len(types) != len(want) {
		t.Fatalf("documents %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("documents %v, want %v", types, want)
		}
	}
	if c := str(resp.Documents[1].Content); c != "# Shop\n\nA tiny shop." {
		t.Errorf("code block %q", c)
	}
	if resp.Metadata.TurnCount != 2 {
		t.Errorf("turnCount %d, want the 2 assistant messages", resp.Metadata.TurnCount)
	}
	var cb documents.CodeBlockMeta
	_ = json.Unmarshal(resp.Documents[1].Metadata, &cb)
	if cb.Language != "markdown" {
		t.Errorf("code block language %q", cb.Language)
	}
	if n := strings.Count(all, "I'll add the README."); n != 1 {
		t.Errorf("the first message appears %d times", n)
	}
	if resp.Metadata.Cloud == nil || !strings.HasSuffix(resp.Metadata.Cloud.PRURL, "/pull/7") {
		t.Errorf("no PR url in the metadata: %+v", resp.Metadata.Cloud)
	}
	if resp.ConversationID == nil || *resp.ConversationID == "" {
		t.Fatal("no conversation id")
	}
	if n := fake.Calls()[cloudtest.RouteLaunch]; n != 1 {
		t.Errorf("launch called %d times", n)
	}
	conv := *resp.ConversationID

	follow := s.chatJSON(t, map[string]any{"backend": "cloud", "conversationId": conv, "prompt": "also add a licence"})
	if follow.Status != documents.StatusCompleted || !strings.Contains(contents(follow), "Follow-up done.") {
		t.Fatalf("follow-up: %s %q", follow.Status, contents(follow))
	}
	if strings.Contains(contents(follow), "I'll add the README.") {
		t.Errorf("the follow-up repeats the first turn's messages")
	}
	if n := fake.Calls()[cloudtest.RouteFollowUp]; n != 1 {
		t.Errorf("follow-up called %d times", n)
	}
	if n := fake.Calls()[cloudtest.RouteLaunch]; n != 1 {
		t.Errorf("launch called %d times after the follow-up", n)
	}

	// The pass-through management routes.
	for _, path := range []string{"/v1/cloud/agents", "/v1/cloud/agents/" + conv, "/v1/cloud/agents/" + conv + "/conversation", "/v1/cloud/me", "/v1/cloud/models"} {
		r, err := http.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b := readAll(t, r)
		if r.StatusCode != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			t.Errorf("GET %s: %d %s", path, r.StatusCode, b)
		}
	}
	// Stopping a finished agent is refused upstream: the message comes through.
	r := s.post(t, "/v1/cloud/agents/"+conv+"/stop", "")
	if b := readAll(t, r); r.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "not running") {
		t.Errorf("stop of a finished agent: %d %s", r.StatusCode, b)
	}
}

func contents(r documents.ChatResponse) string {
	var b strings.Builder
	for _, d := range r.Documents {
		b.WriteString(str(d.Content))
		b.WriteString("\n")
	}
	return b.String()
}

// TestCloudErrors checks upstream failures are mapped to clear answers and
// an upstream 401 is not shown as the gateway's own auth failure.
func TestCloudErrors(t *testing.T) {
	_, s := startCloud(t, "wrong-key", "20ms")
	r := s.post(t, "/v1/chat", map[string]any{"backend": "cloud", "prompt": "x", "source": shop})
	b := readAll(t, r)
	if r.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "cloud_unauthorized") {
		t.Errorf("wrong cloud key: %d %s", r.StatusCode, b)
	}
	r = s.post(t, "/v1/chat", map[string]any{"backend": "cloud", "prompt": "x"})
	if b := readAll(t, r); r.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "source") {
		t.Errorf("no source: %d %s", r.StatusCode, b)
	}
	plain := startServer(t)
	r = plain.post(t, "/v1/chat", map[string]any{"backend": "cloud", "prompt": "x", "source": shop})
	if b := readAll(t, r); r.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "cloud_not_configured") {
		t.Errorf("cloud not configured: %d %s", r.StatusCode, b)
	}
}

// TestCloudFailureAndCancel checks a failing agent ends with an error
// document and a cancelled run stops the cloud agent.
func TestCloudFailureAndCancel(t *testing.T) {
	_, s := startCloud(t, "", "20ms")
	_, evs := s.chatStream(t, map[string]any{"backend": "cloud", "prompt": "please fail", "source": shop})
	resp := fold(t, evs)
	if resp.Status != documents.StatusError {
		t.Fatalf("status %s", resp.Status)
	}
	last := resp.Documents[len(resp.Documents)-1]
	if last.Type != documents.TypeError || !strings.Contains(string(last.Metadata), documents.CodeCloudAPIError) {
		t.Errorf("last document %s %s", last.Type, last.Metadata)
	}

	// Cancel while the agent is still running (polled slowly).
	fake, s := startCloud(t, "", "1s")
	r := s.post(t, "/v1/chat?stream=true", map[string]any{"backend": "cloud", "prompt": "add a README", "source": shop})
	id := r.Header.Get("X-Docstream-Response-Id")
	// The agent is launched before the answer's headers; the run watches
	// it once it has polled it.
	if !waitFor(10*time.Second, func() bool { return fake.Calls()[cloudtest.RouteAgent] > 0 }) {
		t.Fatalf("the run never polled its cloud agent: %v", fake.Calls())
	}
	c := s.post(t, "/v1/chat/"+id+"/cancel", "")
	readAll(t, c)
	evs = readEvents(t, r.Body)
	r.Body.Close()
	resp = fold(t, evs)
	if resp.Status != documents.StatusError || resp.Metadata.StopReason != documents.StopCancelled {
		t.Errorf("cancelled cloud run: status %s stop %s", resp.Status, resp.Metadata.StopReason)
	}
	if fake.Calls()[cloudtest.RouteStop] < 1 {
		t.Errorf("cancel did not stop the cloud agent: %v", fake.Calls())
	}
}

// TestCloudRefusalsSendNothing checks that a request the gateway refuses
// has no effect upstream: a follow-up while the agent's turn runs is a 409
// conversation_busy and delivers nothing, and a run refused as overloaded
// launches no agent. They used to be sent first and refused after.
func TestCloudRefusalsSendNothing(t *testing.T) {
	fake, s := startCloud(t, "", "1s", "DOCSTREAM_LIMITS_MAX_CONCURRENT_RUNS=2", "DOCSTREAM_LIMITS_QUEUE_SIZE=0")
	r := s.post(t, "/v1/chat?stream=true", map[string]any{"backend": "cloud", "prompt": "add a README", "source": shop})
	defer r.Body.Close()
	conv := r.Header.Get("X-Docstream-Conversation-Id")
	if conv == "" {
		t.Fatalf("no conversation id in %v", r.Header)
	}
	f := s.post(t, "/v1/chat", map[string]any{"backend": "cloud", "prompt": "and a licence", "conversationId": conv})
	if b := readAll(t, f); f.StatusCode != http.StatusConflict || !strings.Contains(string(b), "conversation_busy") {
		t.Errorf("a follow-up while the agent runs: %d %s, want 409 conversation_busy", f.StatusCode, b)
	}
	second := s.post(t, "/v1/chat?stream=true", map[string]any{"backend": "cloud", "prompt": "second", "source": shop})
	defer second.Body.Close()
	over := s.post(t, "/v1/chat", map[string]any{"backend": "cloud", "prompt": "third", "source": shop})
	if b := readAll(t, over); over.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "overloaded") {
		t.Errorf("a third run with 2 slots and no queue: %d %s, want 503 overloaded", over.StatusCode, b)
	}
	if c := fake.Calls(); c[cloudtest.RouteFollowUp] != 0 || c[cloudtest.RouteLaunch] != 2 {
		t.Errorf("upstream calls %v: want 2 launches and no follow-up", c)
	}
}

// TestCloudPassThroughInput checks what the pass-through refuses before
// calling upstream, and that an unreachable API is a 502 that does not say
// where the gateway looked.
func TestCloudPassThroughInput(t *testing.T) {
	fake, s := startCloud(t, "", "20ms")
	for _, path := range []string{"/v1/cloud/agents/.", "/v1/cloud/agents/..", "/v1/cloud/agents/../stop", "/v1/cloud/agents/./conversation",
		"/v1/cloud/agents?limit=abc", "/v1/cloud/agents?limit=0"} {
		method := http.MethodGet
		if strings.HasSuffix(path, "/stop") {
			method = http.MethodPost
		}
		r := s.e2eDo(t, method, path, nil)
		if b := readAll(t, r); r.StatusCode != http.StatusBadRequest {
			t.Errorf("%s %s: %d %s, want 400", method, path, r.StatusCode, b)
		}
	}
	if c := fake.Calls(); len(c) != 0 {
		t.Errorf("refused requests reached upstream: %v", c)
	}
	down := startServer(t, "DOCSTREAM_CLOUD_BASE_URL=http://127.0.0.1:1/v0", "DOCSTREAM_CLOUD_API_KEY=k")
	r := down.e2eDo(t, http.MethodGet, "/v1/cloud/me", nil)
	if b := readAll(t, r); r.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "cloud_unavailable") || strings.Contains(string(b), "127.0.0.1") {
		t.Errorf("an unreachable Cloud API: %d %s, want 502 cloud_unavailable without its address", r.StatusCode, b)
	}
}

// TestCloudRunLimits runs a cloud agent that never finishes: the run ends
// with a TIMEOUT error at agent.run_timeout, or at agent.idle_timeout when
// the agent says nothing new, and the agent is stopped upstream. Cloud runs
// used to poll for ever.
func TestCloudRunLimits(t *testing.T) {
	forever := cloudtest.WithScript(func(in cloudtest.ScriptInput) []cloudtest.Step {
		steps := []cloudtest.Step{{Status: "RUNNING", Say: "Working on it."}}
		for range 100000 {
			steps = append(steps, cloudtest.Step{Status: "RUNNING"})
		}
		return steps
	})
	for _, tc := range []struct{ name, env, msg string }{
		{"run timeout", "DOCSTREAM_AGENT_RUN_TIMEOUT=1s", "time limit"},
		{"idle timeout", "DOCSTREAM_AGENT_IDLE_TIMEOUT=1s", "nothing new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake, s := startCloudWith(t, cloudtest.NewServer(forever), "", "50ms", tc.env)
			start := time.Now()
			_, evs := s.chatStream(t, map[string]any{"backend": "cloud", "prompt": "add a README", "source": shop})
			resp := fold(t, evs)
			if resp.Status != documents.StatusError || resp.Metadata.StopReason != documents.StopTimeout {
				t.Fatalf("status %s stopReason %q, want error timeout", resp.Status, resp.Metadata.StopReason)
			}
			if last := resp.Documents[len(resp.Documents)-1]; last.Type != documents.TypeError || !strings.Contains(str(last.Content), tc.msg) {
				t.Errorf("last document %s %q", last.Type, str(last.Content))
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("the run lasted %s with a 1s limit", d)
			}
			if fake.Calls()[cloudtest.RouteStop] < 1 {
				t.Errorf("the agent was not stopped upstream: %v", fake.Calls())
			}
		})
	}
}

// TestCloudAliasOnNativeChat checks that a cloud alias launches on its
// repository from /v1/chat, with or without "backend": "cloud" in the
// request (naming the backend lost the alias's repository: 400 no_source).
func TestCloudAliasOnNativeChat(t *testing.T) {
	fake, s := startCloud(t, "", "20ms")
	s.stop(t)
	cfg := "openai:\n  aliases:\n    shop: {backend: cloud, repository: \"https://github.com/acme/shop\", ref: main}\n"
	if err := os.WriteFile(filepath.Join(s.Dir, "config.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s.start(t)
	for _, body := range []map[string]any{
		{"prompt": "add a README", "model": "shop"},
		{"prompt": "add a README", "model": "shop", "backend": "cloud"},
	} {
		resp := s.post(t, "/v1/chat", body)
		b := readAll(t, resp)
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"status":"completed"`) {
			t.Errorf("%v: %d %s", body, resp.StatusCode, b)
		}
	}
	if n := len(fake.AgentIDs()); n != 2 {
		t.Errorf("%d cloud agents launched, want 2", n)
	}
}
