package gateway_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
)

// hdStartOf returns the simulator's record of the run of prompt.
func (h *hdServer) startOf(t *testing.T, prompt string) map[string]any {
	t.Helper()
	for _, st := range h.starts(t) {
		if st["prompt"] == prompt {
			return st
		}
	}
	t.Fatalf("the agent never ran the prompt %q", hdClip(prompt))
	return nil
}

func hdClip(s string) string {
	if len(s) > 60 {
		return fmt.Sprintf("%q… (%d bytes)", s[:60], len(s))
	}
	return strconv.Quote(s)
}

// hdArgv returns a start's argv as strings.
func hdArgv(st map[string]any) []string {
	var out []string
	for _, a := range st["argv"].([]any) {
		out = append(out, fmt.Sprint(a))
	}
	return out
}

// TestHostileInput sends prompts and bodies meant to break out of the
// argv, the limits or the JSON decoder. Prompts that look like flags or
// shell are plain text to the agent; the rest is refused with a 4xx and a
// clear error before any agent starts.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	h := hdStart(t)

	t.Run("prompts are text", func(t *testing.T) {
		prompts := []string{"--help", "-", "--- monitor: x ---", "--api-key=evil", "--workspace /", "- [ ] item",
			"--force --model x", "$(touch pwned)", "; rm -rf x", "`touch pwned2`", "x | tee pwned3", "x & echo hi > pwned4",
			"\"'\\", "line one\nline two\r\n-- three", "ünïcödé ✓"}
		var wg sync.WaitGroup
		for _, p := range prompts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp := h.request(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": p})
				b := h.body(t, resp)
				var cr documents.ChatResponse
				if resp.StatusCode != 200 || json.Unmarshal(b, &cr) != nil || cr.Status != documents.StatusCompleted {
					t.Errorf("prompt %s: status %d: %s", hdClip(p), resp.StatusCode, clip(string(b)))
				}
			}()
		}
		wg.Wait()
		for _, p := range prompts {
			argv := hdArgv(h.startOf(t, p))
			n := len(argv)
			if n < 2 || argv[n-2] != "--" || argv[n-1] != p {
				t.Errorf("prompt %s: argv does not end with -- and the prompt: %q", hdClip(p), argv)
			}
			for _, a := range argv[:n-2] {
				if a == "--" || strings.Contains(a, "pwned") || strings.Contains(a, "evil") {
					t.Errorf("prompt %s leaked into the flags: %q", hdClip(p), argv)
				}
			}
		}
		for _, dir := range []string{h.Workspace, h.Dir} {
			matches, _ := filepath.Glob(filepath.Join(dir, "pwned*"))
			if len(matches) > 0 {
				t.Errorf("a shell ran the prompt: %v", matches)
			}
		}
	})

	refused := []struct {
		name   string
		body   any
		status int
		code   string
		says   string // the message must contain this
	}{
		{"NUL in the prompt", `{"prompt":"a\u0000b rejected-1"}`, 400, "bad_prompt", "NUL"},
		{"prompt over the limit", map[string]any{"prompt": "rejected-2 " + strings.Repeat("p", 128<<10)}, 413, "prompt_too_large", "limit"},
		{"messages over the limit", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "rejected-3 " + strings.Repeat("p", 128<<10)}}}, 413, "prompt_too_large", "limit"},
		{"empty body", "", 400, "bad_json", ""},
		{"not an object", `["rejected-4"]`, 400, "bad_json", "object"},
		{"truncated", `{"prompt":"rejected-5"`, 400, "bad_json", ""},
		{"trailing garbage", `{"prompt":"rejected-6"}garbage`, 400, "bad_json", ""},
		{"two objects", `{"prompt":"rejected-7"} {"prompt":"x"}`, 400, "bad_json", ""},
		{"duplicate field", `{"prompt":"rejected-8","prompt":"x"}`, 400, "bad_json", ""},
		{"wrong type", `{"prompt":["rejected-9"]}`, 400, "bad_field", "prompt"},
		{"invalid UTF-8", "{\"prompt\":\"rejected-10 \xff\"}", 400, "bad_json", ""},
		{"unknown field", `{"prompt":"rejected-11","args":["--force"]}`, 400, "unknown_field", `"args"`},
		{"unknown field by case", `{"Prompt":"rejected-12"}`, 400, "unknown_field", `"Prompt"`},
		{"unknown field in a message", `{"messages":[{"role":"user","content":"rejected-12b","bogus":1}]}`, 400, "unknown_field", `"messages/0/bogus"`},
		{"unknown field in an answer", `{"prompt":"rejected-12c","conversationId":"c1","answers":[{"questionId":"q","optionId":"o","extra":1}]}`, 400, "unknown_field", `"answers/0/extra"`},
		{"blank prompt", `{"prompt":"  \n "}`, 400, "empty_prompt", ""},
		{"bad mode", `{"prompt":"rejected-13","mode":"yolo"}`, 400, "bad_mode", "yolo"},
		{"bad backend", `{"prompt":"rejected-14","backend":"sh"}`, 400, "bad_backend", ""},
		{"model flag", `{"prompt":"rejected-15","model":"--yolo"}`, 400, "bad_model", ""},
		{"unknown model", `{"prompt":"rejected-16","model":"gpt-evil"}`, 400, "unknown_model", "auto, sim-fast, sim-smart"},
	}
	for i, ws := range []string{"../x", "/etc", "a/../../b", "%2e%2e/", "main/..", "..", ".", "main/", "main\u0000", strings.Repeat("w", 1000), "nope"} {
		refused = append(refused, struct {
			name   string
			body   any
			status int
			code   string
			says   string
		}{"workspace " + hdClip(ws), map[string]any{"prompt": fmt.Sprintf("rejected-ws-%d", i), "workspace": ws}, 400, "", "workspace"})
	}
	for i, conv := range []string{"--force", "-x", "../x", "a b", "x\ny", "x\u0000", strings.Repeat("c", 10<<10), "a/b"} {
		refused = append(refused, struct {
			name   string
			body   any
			status int
			code   string
			says   string
		}{"resume id " + hdClip(conv), map[string]any{"prompt": fmt.Sprintf("rejected-conv-%d", i), "conversationId": conv}, 400, "bad_conversation_id", "conversationId"})
	}
	t.Run("refused", func(t *testing.T) {
		for _, c := range refused {
			t.Run(c.name, func(t *testing.T) {
				e := h.expectError(t, h.request(t, http.MethodPost, "/v1/chat", c.body), c.status, c.code)
				if !strings.Contains(e.Error.Message, c.says) {
					t.Errorf("the message %q does not say %q", e.Error.Message, c.says)
				}
			})
		}
	})
	for _, st := range h.starts(t) {
		if strings.Contains(fmt.Sprint(st["prompt"]), "rejected-") {
			t.Errorf("a refused request started the agent: %s", hdClip(fmt.Sprint(st["prompt"])))
		}
	}

	t.Run("prompt at the argv limit", func(t *testing.T) {
		// One argument may hold 128 KiB including its NUL: a prompt of
		// exactly 128 KiB must be refused before the spawn, not fail it.
		for _, n := range []int{128<<10 - 1, 128 << 10} {
			p := "echo " + strings.Repeat("a", n-5)
			resp := h.request(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": p})
			b := h.body(t, resp)
			if resp.StatusCode == 200 {
				var cr documents.ChatResponse
				if err := json.Unmarshal(b, &cr); err != nil || cr.Status != documents.StatusCompleted {
					t.Errorf("a prompt of %d bytes: accepted but the run failed: %s", n, clip(string(b)))
				}
			} else if resp.StatusCode != 413 {
				t.Errorf("a prompt of %d bytes: status %d: %s", n, resp.StatusCode, clip(string(b)))
			}
		}
	})
}

// TestHugeBodies sends bodies over server.max_body_bytes: with an honest
// Content-Length, chunked, and a 64 MiB one the client keeps sending.
// Each gets a 413 that says why, not a reset connection.
func TestHugeBodies(t *testing.T) {
	t.Parallel()
	h := hdStart(t, "DOCSTREAM_SERVER_MAX_BODY_BYTES=1048576")
	big := func(n int) []byte {
		return append(append([]byte(`{"prompt":"`), bytes.Repeat([]byte("b"), n)...), `"}`...)
	}
	for _, c := range []struct {
		name string
		body func() io.Reader
	}{
		{"content-length", func() io.Reader { return bytes.NewReader(big(2 << 20)) }},
		{"chunked", func() io.Reader { return io.MultiReader(bytes.NewReader(big(2 << 20))) }},
		{"64 MiB still sending", func() io.Reader { return io.MultiReader(&hdSlowReader{left: 64 << 20}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			e := h.expectError(t, h.request(t, http.MethodPost, "/v1/chat", c.body()), 413, "too_large")
			if !strings.Contains(e.Error.Message, "1048576") || !strings.Contains(e.Error.Message, "max_body_bytes") {
				t.Errorf("the message does not name the limit: %q", e.Error.Message)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("the 413 took %s", d)
			}
		})
	}
}

// TestHugeBodyStalled declares a body over the limit and stops sending it,
// or asks for "100 Continue" first: the 413 comes by the body's read
// deadline, or at once, and the connection closes after it. (The stalled
// client never got its 413: after the drain gave up, the server tried to
// read the rest without a deadline.)
func TestHugeBodyStalled(t *testing.T) {
	t.Parallel()
	h := hdStart(t, "DOCSTREAM_SERVER_MAX_BODY_BYTES=1024", "DOCSTREAM_SERVER_READ_BODY_TIMEOUT=2s")
	for _, c := range []struct {
		name, head, body string
		within           time.Duration
	}{
		{"stalled", "Content-Length: 5000000\r\n", `{"prompt":"`, 8 * time.Second},
		// Past the limit in its first chunk, then no more.
		{"chunked stalled", "Transfer-Encoding: chunked\r\n", fmt.Sprintf("%x\r\n%s\r\n", 3000, strings.Repeat("x", 3000)), 8 * time.Second},
		{"100-continue", "Expect: 100-continue\r\nContent-Length: 5000000\r\n", "", time.Second},
		// net/http reads a short rest of a body when it closes it: one
		// that was never asked for must not be waited for.
		{"100-continue short", "Expect: 100-continue\r\nContent-Length: 2048\r\n", "", time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", h.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			fmt.Fprintf(conn, "POST /v1/chat HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n%s\r\n%s",
				hdClientKey, c.head, c.body)
			_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer after %s: %v", time.Since(start), err)
			}
			h.expectError(t, resp, 413, "too_large")
			if d := time.Since(start); d > c.within {
				t.Errorf("the 413 took %s", d)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("the connection stays open after the 413: %v", err)
			}
			if d := time.Since(start); d > c.within {
				t.Errorf("the connection closed %s after the request", d)
			}
		})
	}
}

// TestEncodedBody: a compressed body is a 415 that says so, on both kinds
// of route, where gzip was a misleading 400 bad_json and br ran the agent
// on whatever the bytes were.
func TestEncodedBody(t *testing.T) {
	t.Parallel()
	h := hdStart(t)
	for _, path := range []string{"/v1/chat", "/v1/chat/completions"} {
		for _, enc := range []string{"gzip", "br"} {
			body := map[string]any{"prompt": "x", "model": "auto", "messages": []map[string]string{{"role": "user", "content": "x"}}}
			if path == "/v1/chat" {
				body = map[string]any{"prompt": "x"}
			}
			e := h.expectError(t, h.request(t, http.MethodPost, path, body, "Content-Encoding", enc), 415, "unsupported_encoding")
			if !strings.Contains(e.Error.Message, enc) {
				t.Errorf("%s %s: %s", path, enc, e.Error.Message)
			}
		}
	}
	if n := len(h.starts(t)); n != 0 {
		t.Errorf("%d agents started", n)
	}
}

// TestShortBody sends less body than its Content-Length says and stops
// sending: the answer is a 400 that says the body could not be read, not a
// hang or a 500.
func TestShortBody(t *testing.T) {
	t.Parallel()
	h := hdStart(t)
	conn, err := net.Dial("tcp", h.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"prompt":"short`
	fmt.Fprintf(conn, "POST /v1/chat HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		hdClientKey, len(body)+100, body)
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	e := h.expectError(t, resp, 400, "bad_body")
	if !strings.Contains(e.Error.Message, "reading the request body") {
		t.Errorf("message %q", e.Error.Message)
	}
}

// hdSlowReader yields left bytes of a JSON body in 64 KiB pieces.
type hdSlowReader struct {
	left    int
	started bool
}

func (r *hdSlowReader) Read(p []byte) (int, error) {
	if !r.started {
		r.started = true
		return copy(p, `{"prompt":"`), nil
	}
	if r.left <= 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.left, 64<<10)
	for i := range p[:n] {
		p[i] = 'z'
	}
	r.left -= n
	return n, nil
}

// TestAuth checks the API keys: missing, wrong and query-string keys are
// refused with 401 and a message that says what to do; a key in the query
// string is refused even when it is right. CORS answers only the
// configured origin.
func TestAuth(t *testing.T) {
	t.Parallel()
	h := hdStart(t, "DOCSTREAM_SERVER_CORS_ORIGINS=https://ok.example")
	for _, c := range []struct {
		name    string
		path    string
		headers []string
		says    string
	}{
		{"missing", "/v1/workspaces", []string{"Authorization", ""}, "missing API key"},
		{"wrong", "/v1/workspaces", []string{"Authorization", "Bearer wrong-key"}, "invalid API key"},
		{"empty bearer", "/v1/workspaces", []string{"Authorization", "Bearer "}, "missing API key"},
		{"basic", "/v1/workspaces", []string{"Authorization", "Basic a2V5LW1hcmtlcjo="}, "missing API key"},
		{"long", "/v1/workspaces", []string{"Authorization", "Bearer " + strings.Repeat("k", 32<<10)}, "invalid API key"},
		{"wrong x-api-key", "/v1/workspaces", []string{"Authorization", "", "X-Api-Key", "nope"}, "invalid API key"},
		{"query only", "/v1/workspaces?api_key=" + hdClientKey, []string{"Authorization", ""}, "query string"},
		{"query and header", "/v1/workspaces?key=" + hdClientKey, nil, "query string"},
		{"query token", "/v1/chat/x?access_token=" + hdClientKey, nil, "query string"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			resp := h.request(t, http.MethodGet, c.path, nil, c.headers...)
			e := h.expectError(t, resp, 401, "unauthorized")
			if !strings.Contains(e.Error.Message, c.says) {
				t.Errorf("message %q, want it to say %q", e.Error.Message, c.says)
			}
		})
	}
	t.Run("right key", func(t *testing.T) {
		t.Parallel()
		for _, hd := range [][]string{nil, {"Authorization", "", "X-Api-Key", hdClientKey}, {"Authorization", "bearer " + hdClientKey}} {
			resp := h.request(t, http.MethodGet, "/v1/workspaces", nil, hd...)
			b := h.body(t, resp)
			if resp.StatusCode != 200 {
				t.Errorf("headers %q: status %d: %s", hd, resp.StatusCode, b)
			}
			if bytes.Contains(b, []byte(h.Workspace)) {
				t.Errorf("/v1/workspaces shows a directory: %s", b)
			}
		}
	})
	t.Run("public routes", func(t *testing.T) {
		t.Parallel()
		for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
			resp := h.request(t, http.MethodGet, p, nil, "Authorization", "")
			if h.body(t, resp); resp.StatusCode != 200 {
				t.Errorf("%s without a key: %d", p, resp.StatusCode)
			}
		}
	})
	t.Run("cors", func(t *testing.T) {
		t.Parallel()
		for origin, want := range map[string]string{"https://ok.example": "https://ok.example", "https://evil.example": ""} {
			resp := h.request(t, http.MethodOptions, "/v1/chat", nil, "Authorization", "", "Origin", origin,
				"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type, x-evil")
			h.body(t, resp)
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != want {
				t.Errorf("preflight from %s: Access-Control-Allow-Origin %q, want %q", origin, got, want)
			}
			if strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "x-evil") {
				t.Errorf("preflight allows an unknown header: %q", resp.Header.Get("Access-Control-Allow-Headers"))
			}
			if resp.Header.Get("Access-Control-Allow-Credentials") != "" {
				t.Errorf("credentials allowed")
			}
		}
	})
}

// TestRateLimit checks the per-key limit (429 with Retry-After, a separate
// bucket per key) and that without keys the client IP is the peer's, not a
// forged X-Forwarded-For.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	t.Run("per key", func(t *testing.T) {
		t.Parallel()
		h := hdStart(t, "DOCSTREAM_AUTH_API_KEYS="+hdClientKey+",other-key", "DOCSTREAM_AUTH_RATE_PER_MINUTE=6", "DOCSTREAM_AUTH_BURST=2")
		for i := 0; i < 2; i++ {
			if resp := h.request(t, http.MethodGet, "/v1/workspaces", nil); resp.StatusCode != 200 {
				t.Fatalf("request %d: %d %s", i, resp.StatusCode, h.body(t, resp))
			} else {
				h.body(t, resp)
			}
		}
		resp := h.request(t, http.MethodGet, "/v1/workspaces", nil)
		e := h.expectError(t, resp, 429, "rate_limited")
		ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil || ra < 1 || ra > 11 {
			t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
		}
		if !strings.Contains(e.Error.Message, "try again") {
			t.Errorf("message %q", e.Error.Message)
		}
		if resp := h.request(t, http.MethodGet, "/v1/workspaces", nil, "Authorization", "Bearer other-key"); resp.StatusCode != 200 {
			t.Errorf("another key is limited too: %d", resp.StatusCode)
		} else {
			h.body(t, resp)
		}
	})
	t.Run("guessing keys", func(t *testing.T) {
		t.Parallel()
		h := hdStart(t, "DOCSTREAM_AUTH_RATE_PER_MINUTE=6", "DOCSTREAM_AUTH_BURST=2")
		for i := 0; i < 2; i++ {
			h.expectError(t, h.request(t, http.MethodGet, "/v1/workspaces", nil, "Authorization", fmt.Sprintf("Bearer guess-%d", i)), 401, "unauthorized")
		}
		resp := h.request(t, http.MethodGet, "/v1/workspaces", nil, "Authorization", "Bearer guess-3")
		h.expectError(t, resp, 429, "rate_limited")
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
		// The right key is not locked out by someone else's guessing.
		if resp := h.request(t, http.MethodGet, "/v1/workspaces", nil); resp.StatusCode != 200 {
			t.Errorf("the right key after failed guesses: %d %s", resp.StatusCode, h.body(t, resp))
		} else {
			h.body(t, resp)
		}
	})
	t.Run("forged X-Forwarded-For", func(t *testing.T) {
		t.Parallel()
		h := hdStart(t, "DOCSTREAM_AUTH_API_KEYS=", "DOCSTREAM_AUTH_RATE_PER_MINUTE=6", "DOCSTREAM_AUTH_BURST=2")
		codes := []int{}
		for i := 0; i < 4; i++ {
			resp := h.request(t, http.MethodGet, "/v1/workspaces", nil, "Authorization", "", "X-Forwarded-For", fmt.Sprintf("10.0.0.%d", i+1), "X-Real-Ip", fmt.Sprintf("10.1.0.%d", i+1))
			h.body(t, resp)
			codes = append(codes, resp.StatusCode)
		}
		if codes[2] != 429 || codes[3] != 429 {
			t.Errorf("statuses %v: a forged X-Forwarded-For escapes the rate limit", codes)
		}
	})
}

// TestConcurrencyCap fills the only run slot and the queue of one: the
// next request, and every one of a burst, gets 503 with Retry-After before
// anything is spawned.
func TestConcurrencyCap(t *testing.T) {
	t.Parallel()
	h := hdStart(t, "DOCSTREAM_LIMITS_MAX_CONCURRENT_RUNS=1", "DOCSTREAM_LIMITS_QUEUE_SIZE=1", "DOCSTREAM_RUNS_DETACH_GRACE=0s")
	open := func(prompt string) (*http.Response, string) {
		resp := h.request(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": prompt, "stream": true})
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d: %s", prompt, resp.StatusCode, h.body(t, resp))
		}
		return resp, resp.Header.Get("X-Docstream-Response-Id")
	}
	running, runID := open("fault:hang-mid")
	defer running.Body.Close()
	// Wait until the first run holds the slot: its agent is up and has
	// recorded its start (a process that is seen but not yet logged could
	// be killed below before it logs).
	deadline := time.Now().Add(10 * time.Second)
	for len(h.agentProcesses()) == 0 || len(h.starts(t)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first run's agent never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The agent's stdin is a pipe that is already closed, never the
	// gateway's own stdin.
	for _, pid := range h.agentProcesses() {
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/0", pid)); err == nil && !strings.HasPrefix(link, "pipe:") {
			t.Errorf("agent %d has stdin %s, want a closed pipe", pid, link)
		}
	}
	// A burst while the queue is empty: one may wait, the rest are refused.
	const burst = 8
	var wg sync.WaitGroup
	codes := make(chan int, burst)
	var mu sync.Mutex
	var admitted []*http.Response
	for i := 0; i < burst; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := h.request(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": fmt.Sprintf("fault:hang-mid %d", i), "stream": true})
			codes <- resp.StatusCode
			if resp.StatusCode == 200 {
				mu.Lock()
				admitted = append(admitted, resp)
				mu.Unlock()
				return
			}
			e := h.expectError(t, resp, 503, "overloaded")
			if resp.Header.Get("Retry-After") == "" {
				t.Errorf("503 without Retry-After: %s", e.Error.Message)
			}
		}()
	}
	wg.Wait()
	close(codes)
	n200 := 0
	for c := range codes {
		if c == 200 {
			n200++
		}
	}
	if n200 != 1 {
		t.Errorf("%d of a burst of %d were admitted with one slot busy and a queue of 1; want 1", n200, burst)
	}
	// A refusal sheds load on purpose: one warning each, not two errors.
	for _, line := range strings.Split(h.Logs(), "\n") {
		if strings.Contains(line, "overloaded") && (strings.Contains(line, `"level":"error"`) || strings.Contains(line, "request failed")) {
			t.Errorf("a 503 overloaded logged as an error: %s", line)
		}
	}
	// A request's line is written once its answer has gone out.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n := strings.Count(h.Logs(), `"error":"overloaded"`)
		if n == burst-n200 {
			break
		}
		if n > burst-n200 || time.Now().After(deadline) {
			t.Errorf("%d request lines name the overload, want %d", n, burst-n200)
			break
		}
	}
	if got := h.metricValue(t, "docstream_run_queue_length"); got > 1 {
		t.Errorf("queue length %v, over the queue size of 1", got)
	}
	if n := len(h.agentProcesses()); n > 1 {
		t.Errorf("%d agents running with max_concurrent_runs=1", n)
	}
	// End everything: the queued runs end without an agent ever starting.
	for _, r := range admitted {
		r.Body.Close()
	}
	for deadline := time.Now().Add(5 * time.Second); h.metricValue(t, "docstream_run_queue_length") > 0; {
		if time.Now().After(deadline) {
			t.Fatal("a queued run whose client left is still queued")
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp := h.request(t, http.MethodPost, "/v1/chat/"+runID+"/cancel", `{"signal":"KILL"}`)
	h.body(t, resp)
	running.Body.Close()
	h.waitNoAgents(t, 10*time.Second)
	if starts := h.starts(t); len(starts) != 1 {
		t.Errorf("%d agents were started; only the first run had a slot", len(starts))
	}
}

// metricValue reads one unlabelled series from /metrics.
func (h *hdServer) metricValue(t *testing.T, name string) float64 {
	t.Helper()
	for _, line := range strings.Split(h.metrics(t), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestSpawnRate starts a burst of runs with spawn_per_second=2: they all
// complete, but the agents are started no faster than the limit.
func TestSpawnRate(t *testing.T) {
	t.Parallel()
	h := hdStart(t, "DOCSTREAM_LIMITS_SPAWN_PER_SECOND=2")
	const n = 6
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := h.request(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": fmt.Sprintf("hello %d", i)})
			if b := h.body(t, resp); resp.StatusCode != 200 {
				t.Errorf("run %d: %d %s", i, resp.StatusCode, b)
			}
		}()
	}
	wg.Wait()
	// A burst of 2, then one every 500ms: the 6th starts after about 2s.
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Errorf("%d runs finished in %s: the spawn rate of 2/s was not applied", n, d)
	}
	if got := len(h.starts(t)); got != n {
		t.Errorf("%d agents started, want %d", got, n)
	}
}

// TestServerTimeouts checks the slowloris guard (ReadHeaderTimeout) and
// the heartbeats of a quiet stream.
func TestServerTimeouts(t *testing.T) {
	t.Parallel()
	// The heartbeat stream lasts longer than read_body_timeout: the body's
	// deadline must not reach the stream.
	h := hdStart(t, "DOCSTREAM_SERVER_READ_HEADER_TIMEOUT=1s", "DOCSTREAM_SERVER_READ_BODY_TIMEOUT=1s",
		"DOCSTREAM_SERVER_HEARTBEAT=200ms", "DOCSTREAM_AGENT_IDLE_TIMEOUT=1500ms")
	// partial sends a request whose body stops short of its length, and
	// returns the response and when it came.
	partial := func(t *testing.T, key string) (net.Conn, *http.Response, time.Duration) {
		conn, err := net.Dial("tcp", h.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		auth := ""
		if key != "" {
			auth = "Authorization: Bearer " + key + "\r\n"
		}
		body := `{"prompt":"sl`
		start := time.Now()
		fmt.Fprintf(conn, "POST /v1/chat HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", auth, len(body)+100, body)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer to a request whose body stalls: %v", err)
		}
		took := time.Since(start)
		b, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		// Then the connection is closed, not kept.
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("after the answer the connection gave %v, want EOF", err)
		}
		return conn, resp, took
	}
	t.Run("slow body", func(t *testing.T) {
		t.Parallel()
		_, resp, took := partial(t, hdClientKey)
		h.expectError(t, resp, http.StatusRequestTimeout, "body_timeout")
		if took < 900*time.Millisecond || took > 5*time.Second {
			t.Errorf("answered after %s; read_body_timeout is 1s", took)
		}
	})
	t.Run("slow body without a key", func(t *testing.T) {
		t.Parallel()
		_, resp, took := partial(t, "")
		h.expectError(t, resp, http.StatusUnauthorized, "")
		if took > 900*time.Millisecond {
			t.Errorf("the 401 waited %s for a body nobody reads", took)
		}
	})
	t.Run("slow headers", func(t *testing.T) {
		t.Parallel()
		conn, err := net.Dial("tcp", h.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		fmt.Fprint(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.ReadAll(conn)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("a client that never finishes its headers is kept for 10s")
		}
		if d := time.Since(start); d < 900*time.Millisecond || d > 5*time.Second {
			t.Errorf("the connection was closed after %s; read_header_timeout is 1s", d)
		}
	})
	t.Run("heartbeats", func(t *testing.T) {
		t.Parallel()
		resp := h.request(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": "fault:hang-mid", "stream": true})
		raw := h.body(t, resp)
		if n := bytes.Count(raw, []byte("\n: ping\r\n")); n < 3 {
			t.Errorf("%d heartbeats in a stream quiet for 1.5s with heartbeat 200ms", n)
		}
		cr := fold(t, readEvents(t, bytes.NewReader(raw)))
		hdExpectErrorDoc(t, cr, documents.CodeTimeout, documents.StopTimeout)
	})
}

// TestWorkspaceSymlink configures a workspace through a symlink: the agent
// runs in the link's target, and clients only ever see the name.
func TestWorkspaceSymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "real-project")
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	// "main" is a plain directory of this test (its path identifies the
	// agents); "linked" is the symlink.
	main := filepath.Join(dir, "main")
	if err := os.MkdirAll(main, 0o755); err != nil {
		t.Fatal(err)
	}
	h := hdStart(t, "DOCSTREAM_AGENT_WORKSPACES=main="+main+",linked="+link, "DOCSTREAM_AGENT_DEFAULT_WORKSPACE=main")
	h.Workspace = main
	resp := h.request(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": "echo linked", "workspace": "linked"})
	if b := h.body(t, resp); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	st := h.startOf(t, "echo linked")
	real, _ := filepath.EvalSymlinks(target)
	if st["cwd"] != real {
		t.Errorf("the agent ran in %v, want the symlink's target %s", st["cwd"], real)
	}
	argv := hdArgv(st)
	for i, a := range argv {
		if a == "--workspace" && (i+1 >= len(argv) || argv[i+1] != real) {
			t.Errorf("--workspace is not the resolved directory: %q", argv)
		}
	}
	resp = h.request(t, http.MethodGet, "/v1/workspaces", nil)
	b := h.body(t, resp)
	if !bytes.Contains(b, []byte(`"linked"`)) || bytes.Contains(b, []byte(dir)) {
		t.Errorf("/v1/workspaces: %s", b)
	}
	for _, ws := range []string{link, target, "linked/..", "linked/../.."} {
		h.expectError(t, h.request(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": "x", "workspace": ws}), 400, "")
	}
}

// TestMetricsMethods sends made-up request methods: they are counted as
// "other", not as new series each.
func TestMetricsMethods(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for i := 0; i < 5; i++ {
		resp, err := http.DefaultClient.Do(newRequest(t, fmt.Sprintf("MADEUP%d", i), s.URL+"/healthz", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	m := s.metrics(t)
	if strings.Contains(m, `method="MADEUP`) {
		t.Errorf("made-up methods became label values")
	}
	if !strings.Contains(m, `method="other"`) {
		t.Errorf("made-up methods were not counted as other")
	}
}

// TestWrongMethods sends methods a route does not serve: a 405 that says
// which it does, in the native error shape.
func TestWrongMethods(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for _, r := range []struct{ method, path, allow string }{
		{http.MethodGet, "/v1/chat", "POST"}, {http.MethodPut, "/v1/chat", "POST"},
		{http.MethodDelete, "/v1/chat/chat_000000000000000000000000", "GET, HEAD"},
		{http.MethodGet, "/v1/chat/chat_000000000000000000000000/cancel", "POST"},
		{http.MethodPost, "/v1/chat/chat_000000000000000000000000/stream", "GET"},
		{http.MethodPost, "/v1/workspaces", "GET, HEAD"}, {http.MethodPatch, "/v1/cloud/agents/x", "DELETE, GET"},
		{http.MethodTrace, "/v1/chat", "POST"},
	} {
		resp, err := http.DefaultClient.Do(newRequest(t, r.method, s.URL+r.path, nil))
		if err != nil {
			t.Fatal(err)
		}
		if code, _ := e2eErrorBody(t, resp, http.StatusMethodNotAllowed); code != "method_not_allowed" {
			t.Errorf("%s %s: %s", r.method, r.path, code)
		}
		if got := resp.Header.Get("Allow"); got != r.allow {
			t.Errorf("%s %s: Allow %q, want %q", r.method, r.path, got, r.allow)
		}
	}
}

// TestMadeUpMethods sends methods no route registers: on an API path they
// are a 405 naming the served methods, like the known ones (they were a 404
// "no such route"), in the path's error shape; on a path that does not
// exist, any method is a 404.
func TestMadeUpMethods(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for _, r := range []struct {
		method, path, allow string
		openAI              bool
	}{
		{"FOO", "/v1/chat", "POST", false},
		{"PROPFIND", "/v1/chat/chat_000000000000000000000000", "GET, HEAD", false},
		{http.MethodConnect, "/v1/workspaces", "GET, HEAD", false},
		{"FOO", "/v1/cloud/agents/x", "DELETE, GET", false},
		{"FOO", "/v1/chat/completions", "POST", true},
		{"FOO", "/v1/models/auto", "GET, HEAD", true},
	} {
		resp, err := http.DefaultClient.Do(newRequest(t, r.method, s.URL+r.path, nil))
		if err != nil {
			t.Fatal(err)
		}
		if r.openAI {
			checkOpenAIError(t, resp, readAll(t, resp), http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed")
		} else if code, _ := e2eErrorBody(t, resp, http.StatusMethodNotAllowed); code != "method_not_allowed" {
			t.Errorf("%s %s: %s", r.method, r.path, code)
		}
		if got := resp.Header.Get("Allow"); got != r.allow {
			t.Errorf("%s %s: Allow %q, want %q", r.method, r.path, got, r.allow)
		}
	}
	for _, r := range []struct{ method, path string }{{"FOO", "/nonexistent"}, {"FOO", "/v1/nonexistent"}, {http.MethodDelete, "/nonexistent"}} {
		resp, err := http.DefaultClient.Do(newRequest(t, r.method, s.URL+r.path, nil))
		if err != nil {
			t.Fatal(err)
		}
		if code, _ := e2eErrorBody(t, resp, http.StatusNotFound); code != "not_found" {
			t.Errorf("%s %s: %s", r.method, r.path, code)
		}
		if got := resp.Header.Get("Allow"); got != "" {
			t.Errorf("%s %s: Allow %q on a path that does not exist", r.method, r.path, got)
		}
	}
}

// TestHeadAndOptions: HEAD is answered as GET without the body on the
// routes that only read (monitors probe with it; it was a 405), and OPTIONS
// on an API path names its methods (it was a 404 "no such route").
func TestHeadAndOptions(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/v1/models", "/v1/models/auto", "/v1/workspaces"} {
		resp, err := http.DefaultClient.Do(newRequest(t, http.MethodHead, s.URL+path, nil))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(b) != 0 {
			t.Errorf("HEAD %s: %d with %d bytes", path, resp.StatusCode, len(b))
		}
	}
	resp, err := http.DefaultClient.Do(newRequest(t, http.MethodHead, s.URL+"/v1/chat/chat_000000000000000000000000", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("HEAD of an unknown response: %d", resp.StatusCode)
	}
	for path, allow := range map[string]string{"/v1/chat": "POST, OPTIONS", "/v1/chat/chat_000000000000000000000000": "GET, HEAD, OPTIONS",
		"/v1/chat/completions": "POST, OPTIONS"} {
		resp, err := http.DefaultClient.Do(newRequest(t, http.MethodOptions, s.URL+path, nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Allow") != allow {
			t.Errorf("OPTIONS %s: %d, Allow %q, want 204 and %q", path, resp.StatusCode, resp.Header.Get("Allow"), allow)
		}
	}
}

// TestWorkspaceRequired: with several workspaces and no default, a run that
// names none is refused on every route, where it used to run the agent in
// the gateway's own directory; a follow-up keeps its conversation's.
func TestWorkspaceRequired(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{a, b} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h := hdStart(t, "DOCSTREAM_AGENT_WORKSPACES=a="+a+",b="+b)
	h.Workspace = a
	e := h.expectError(t, h.request(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": "echo none"}), 400, "workspace_required")
	if !strings.Contains(e.Error.Message, "a, b") {
		t.Errorf("the message does not name the workspaces: %s", e.Error.Message)
	}
	h.expectError(t, h.request(t, http.MethodPost, "/v1/chat/completions", map[string]any{
		"model": "auto", "messages": []map[string]string{{"role": "user", "content": "echo none"}}}), 400, "workspace_required")
	if n := len(h.starts(t)); n != 0 {
		t.Fatalf("%d agents started", n)
	}
	resp := h.request(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": "echo named", "workspace": "b"})
	body := h.body(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	realB, _ := filepath.EvalSymlinks(b)
	if st := h.startOf(t, "echo named"); st["cwd"] != realB {
		t.Errorf("the agent ran in %v, want %s", st["cwd"], realB)
	}
	var r struct {
		ConversationID string `json:"conversationId"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.ConversationID == "" {
		t.Fatalf("no conversation: %v %s", err, body)
	}
	resp = h.request(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": "echo again", "conversationId": r.ConversationID})
	if b := h.body(t, resp); resp.StatusCode != 200 {
		t.Fatalf("follow-up: status %d: %s", resp.StatusCode, b)
	}
	if st := h.startOf(t, "echo again"); st["cwd"] != realB {
		t.Errorf("the follow-up ran in %v, want its conversation's %s", st["cwd"], realB)
	}
	// The OpenAI route resumes sessions the same way: by conversation_id,
	// and by a history it has answered (it was workspace_required).
	user := func(text string) map[string]string { return map[string]string{"role": "user", "content": text} }
	resp = h.request(t, http.MethodPost, "/v1/chat/completions", map[string]any{"model": "auto",
		"conversation_id": r.ConversationID, "messages": []map[string]string{user("echo openai again")}})
	if b := h.body(t, resp); resp.StatusCode != 200 {
		t.Fatalf("OpenAI follow-up: status %d: %s", resp.StatusCode, b)
	}
	if st := h.startOf(t, "echo openai again"); st["cwd"] != realB {
		t.Errorf("the OpenAI follow-up ran in %v, want its conversation's %s", st["cwd"], realB)
	}
	resp = h.request(t, http.MethodPost, "/v1/chat/completions", map[string]any{"model": "auto", "workspace": "b",
		"messages": []map[string]string{user("echo first")}})
	body = h.body(t, resp)
	var c struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &c); err != nil || resp.StatusCode != 200 || len(c.Choices) != 1 {
		t.Fatalf("OpenAI first turn: %d %v %s", resp.StatusCode, err, body)
	}
	resp = h.request(t, http.MethodPost, "/v1/chat/completions", map[string]any{"model": "auto",
		"messages": []map[string]string{user("echo first"), {"role": "assistant", "content": c.Choices[0].Message.Content}, user("echo by history")}})
	if b := h.body(t, resp); resp.StatusCode != 200 {
		t.Fatalf("OpenAI history follow-up: status %d: %s", resp.StatusCode, b)
	}
	if st := h.startOf(t, "echo by history"); st["cwd"] != realB {
		t.Errorf("the history follow-up ran in %v, want its conversation's %s", st["cwd"], realB)
	}
	// The conversation has moved past that history: sent again with its
	// last message edited, it starts a new session, still in b.
	resp = h.request(t, http.MethodPost, "/v1/chat/completions", map[string]any{"model": "auto",
		"messages": []map[string]string{user("echo first"), {"role": "assistant", "content": c.Choices[0].Message.Content}, user("echo edited")}})
	if b := h.body(t, resp); resp.StatusCode != 200 {
		t.Fatalf("an edited history: status %d: %s", resp.StatusCode, b)
	}
	ran := false
	for _, st := range h.starts(t) {
		if p, _ := st["prompt"].(string); strings.HasSuffix(p, "echo edited") {
			ran = true
			if st["cwd"] != realB {
				t.Errorf("the edited history ran in %v, want its conversation's %s", st["cwd"], realB)
			}
		}
	}
	if !ran {
		t.Errorf("the edited history did not run")
	}
}

// TestAgentStderrRedacted: the agent's stderr goes to clients in an error's
// details, without the key and header values the gateway gave the agent.
func TestAgentStderrRedacted(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "agent.sh")
	const header = "hdr-value-marker"
	// The tail kept (64 bytes) begins within the key written first; the
	// line after it is whole.
	body := "#!/bin/sh\necho \"$CURSOR_API_KEY$CURSOR_API_KEY$CURSOR_API_KEY\" >&2\n" +
		"echo \"key=$CURSOR_API_KEY header=" + header + " then the end\" >&2\nexit 3\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	h := hdStart(t, "DOCSTREAM_AGENT_BINARY="+script, "DOCSTREAM_AGENT_HEADERS=X-Test: "+header, "DOCSTREAM_AGENT_STDERR_TAIL_BYTES=64")
	for _, stream := range []bool{false, true} {
		resp := h.request(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": "x", "stream": stream})
		b := h.body(t, resp)
		if !bytes.Contains(b, []byte("key=[redacted] header=[redacted] then the end")) {
			t.Errorf("stream=%v: the stderr is not in the answer, redacted: %s", stream, clip(string(b)))
		}
		if bytes.Contains(b, []byte(header)) {
			t.Errorf("stream=%v: the header value reached the client", stream)
		}
	}
	// hdStart's cleanup fails the test if the key shows in a body or log.
}

// TestAgentStdoutRedacted: without stderr, an agent's lines that are not
// JSON become an error's details, and are masked too (the key went out).
func TestAgentStdoutRedacted(t *testing.T) {
	t.Parallel()
	script := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"fatal: invalid key $CURSOR_API_KEY\"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := hdStart(t, "DOCSTREAM_AGENT_BINARY="+script)
	b := h.body(t, h.request(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": "x"}))
	if !bytes.Contains(b, []byte("fatal: invalid key [redacted]")) {
		t.Errorf("the agent's line is not in the details, masked: %s", clip(string(b)))
	}
	// hdStart's cleanup fails the test if the key shows in a body or log.
}

// TestReadyzScriptInterpreter: an agent script whose interpreter is missing
// cannot start, and /readyz says so.
func TestReadyzScriptInterpreter(t *testing.T) {
	t.Parallel()
	for line, says := range map[string]string{
		"#!/nonexistent/interp -x":           "/nonexistent/interp",
		"#!/usr/bin/env -S nosuch-interp -x": "nosuch-interp",
		"#!/bin/sh\r":                        "CR",
		"#!/usr/bin/env sh -e":               "sh -e",
		"#!/usr/bin/env":                     "no program",
		"#!/tmp":                             "directory",
		"\ufeff#!/bin/sh":                    "neither a program",
		"echo no interpreter":                "neither a program",
	} {
		t.Run(says, func(t *testing.T) {
			t.Parallel()
			script := filepath.Join(t.TempDir(), "agent.sh")
			if err := os.WriteFile(script, []byte(line+"\nexit 0\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			s := startServer(t, "DOCSTREAM_AGENT_BINARY="+script)
			resp, err := http.Get(s.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || !bytes.Contains(b, []byte(says)) {
				t.Fatalf("/readyz %d: %s", resp.StatusCode, b)
			}
		})
	}
}
