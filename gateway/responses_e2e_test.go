package gateway_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
)

// rsEvent is one Responses stream event as a client reads it.
type rsEvent struct {
	Name string
	Data map[string]any
}

// rsRead reads Responses events from an SSE stream and checks the framing
// of each: JSON data whose type is the SSE event name and whose
// sequence_number grows by one from the first.
func rsRead(t *testing.T, st *e2eStream, first int) []rsEvent {
	t.Helper()
	var evs []rsEvent
	for {
		e, ok := st.Next()
		if !ok {
			return evs
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(e.Data), &m); err != nil {
			t.Fatalf("event %q: data is not JSON: %v: %s", e.Name, err, e.Data)
		}
		if m["type"] != e.Name {
			t.Errorf("event: %q but type %v", e.Name, m["type"])
		}
		if seq, _ := m["sequence_number"].(float64); int(seq) != first+len(evs) {
			t.Errorf("event %d (%s) has sequence_number %v, want %d", len(evs), e.Name, m["sequence_number"], first+len(evs))
		}
		evs = append(evs, rsEvent{Name: e.Name, Data: m})
	}
}

// rsStream posts a streaming Responses request and reads it to its end.
func (s *testServer) rsStream(t *testing.T, body map[string]any) (*http.Response, []rsEvent) {
	t.Helper()
	body["stream"] = true
	st := e2eNewStream(t, s.e2eDo(t, http.MethodPost, "/v1/responses", body))
	defer st.Close()
	return st.Resp, rsRead(t, st, 0)
}

// rsPost posts a Responses request and decodes the answer.
func (s *testServer) rsPost(t *testing.T, body any) (*http.Response, []byte, map[string]any) {
	t.Helper()
	resp := s.e2eDo(t, http.MethodPost, "/v1/responses", body)
	b := readAll(t, resp)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp, b, m
}

// rsGet fetches GET /v1/responses/{id}.
func (s *testServer) rsGet(t *testing.T, id string) (int, map[string]any) {
	t.Helper()
	resp := s.e2eDo(t, http.MethodGet, "/v1/responses/"+id, nil)
	var m map[string]any
	_ = json.Unmarshal(readAll(t, resp), &m)
	return resp.StatusCode, m
}

// rsText is the text of a Response's message items, joined.
func rsText(resp map[string]any) string {
	var b strings.Builder
	out, _ := resp["output"].([]any)
	for _, o := range out {
		it := o.(map[string]any)
		if it["type"] != "message" {
			continue
		}
		for _, p := range it["content"].([]any) {
			b.WriteString(p.(map[string]any)["text"].(string))
		}
	}
	return b.String()
}

// rsCheckOrder checks a whole stream against OpenAI's order: created,
// in_progress, each item added, its part added, its deltas, its text
// done, part done and item done, and last completed (or failed); the
// text done and the final response hold what the deltas said. It returns
// the final response and the message text.
func rsCheckOrder(t *testing.T, evs []rsEvent) (map[string]any, string) {
	t.Helper()
	if len(evs) < 3 || evs[0].Name != "response.created" || evs[1].Name != "response.in_progress" {
		t.Fatalf("the stream does not begin with response.created, response.in_progress: %v", rsNames(evs))
	}
	last := evs[len(evs)-1]
	if last.Name != "response.completed" && last.Name != "response.failed" {
		t.Fatalf("the stream ends with %s", last.Name)
	}
	open, part := -1, false
	var text, all strings.Builder
	for i, e := range evs[2 : len(evs)-1] {
		idx, _ := e.Data["output_index"].(float64)
		switch e.Name {
		case "response.output_item.added":
			if open >= 0 {
				t.Errorf("event %d: item %v added while item %d is open", i, idx, open)
			}
			open, part = int(idx), false
			text.Reset()
		case "response.content_part.added", "response.reasoning_summary_part.added":
			part = true
		case "response.output_text.delta", "response.reasoning_summary_text.delta":
			if !part || int(idx) != open {
				t.Fatalf("event %d: a delta for item %v before its part was added (open item %d)", i, idx, open)
			}
			text.WriteString(e.Data["delta"].(string))
			if e.Name == "response.output_text.delta" {
				all.WriteString(e.Data["delta"].(string))
			}
		case "response.output_text.done", "response.reasoning_summary_text.done":
			if e.Data["text"] != text.String() {
				t.Errorf("%s text %q, the deltas said %q", e.Name, e.Data["text"], text.String())
			}
		case "response.output_item.done":
			if int(idx) != open {
				t.Errorf("item %v done while item %d is open", idx, open)
			}
			open = -1
		case "response.content_part.done", "response.reasoning_summary_part.done":
		default:
			t.Errorf("unexpected event %s inside the stream", e.Name)
		}
	}
	if open >= 0 {
		t.Errorf("item %d still open at the end", open)
	}
	final := last.Data["response"].(map[string]any)
	if got := rsText(final); got != all.String() {
		t.Errorf("the final response's text is not the deltas':\n%s", oaDiff(got, all.String()))
	}
	return final, all.String()
}

func rsNames(evs []rsEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Name)
	}
	return out
}

// TestResponsesStream checks a streamed response of the tour: OpenAI's
// event order and framing, usage, and its text against the documents.
func TestResponsesStream(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	resp, evs := s.rsStream(t, map[string]any{"model": "auto", "input": "tour"})
	final, text := rsCheckOrder(t, evs)
	if final["status"] != "completed" || final["object"] != "response" || final["model"] != "auto" {
		t.Errorf("final response %v", final)
	}
	for _, e := range evs {
		if strings.HasPrefix(e.Name, "response.reasoning") {
			t.Fatalf("reasoning events without reasoning asked for: %s", e.Name)
		}
	}
	u, _ := final["usage"].(map[string]any)
	cr := s.storedResponse(t, resp)
	if u == nil || u["input_tokens"] != float64(cr.Usage.PromptTokens+cr.Usage.CacheReadTokens+cr.Usage.CacheWriteTokens) ||
		u["output_tokens"] != float64(cr.Usage.CompletionTokens) || u["total_tokens"] == nil ||
		u["input_tokens_details"].(map[string]any)["cached_tokens"] != float64(cr.Usage.CacheReadTokens) {
		t.Errorf("usage %v, the agent's %+v", u, cr.Usage)
	}
	checkRendersResponse(t, text, cr)
	if id, _ := final["id"].(string); id != "resp_"+strings.TrimPrefix(cr.ID, "chat_") {
		t.Errorf("id %q for run %s", id, cr.ID)
	}

	// Thinking asked for: reasoning items with its text, before the text.
	_, evs = s.rsStream(t, map[string]any{"input": "hello", "reasoning": map[string]any{"summary": "auto"}})
	final, _ = rsCheckOrder(t, evs)
	out := final["output"].([]any)
	if len(out) < 2 || out[0].(map[string]any)["type"] != "reasoning" || out[len(out)-1].(map[string]any)["type"] != "message" {
		t.Fatalf("output %v: want reasoning first, a message last", out)
	}
	summary := out[0].(map[string]any)["summary"].([]any)
	if len(summary) != 1 || !strings.Contains(summary[0].(map[string]any)["text"].(string), "names no scenario") {
		t.Errorf("reasoning summary %v", summary)
	}
}

// TestResponsesNonStreaming checks the Response object, and that GET
// answers the same response.
func TestResponsesNonStreaming(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	resp, b, m := s.rsPost(t, map[string]any{"model": "auto", "input": []any{
		map[string]any{"role": "developer", "content": "Be brief."},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "echo hi"}}}},
		"instructions": "Answer in French.", "metadata": map[string]any{"k": "v"},
		"tools":   []any{map[string]any{"type": "web_search"}, map[string]any{"type": "namespace", "name": "x", "tools": []any{}}},
		"include": []any{"reasoning.encrypted_content"}, "prompt_cache_key": "p", "client_metadata": map[string]any{"a": 1}, "parallel_tool_calls": false})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if m["object"] != "response" || m["status"] != "completed" || m["error"] != nil || m["instructions"] != "Answer in French." ||
		m["metadata"].(map[string]any)["k"] != "v" || m["store"] != true || m["usage"] == nil {
		t.Errorf("response %s", b)
	}
	out := m["output"].([]any)
	msg := out[0].(map[string]any)
	part := msg["content"].([]any)[0].(map[string]any)
	if len(out) != 1 || msg["type"] != "message" || msg["role"] != "assistant" || msg["status"] != "completed" || part["type"] != "output_text" ||
		!strings.Contains(part["text"].(string), "echo hi") {
		t.Errorf("output %v", out)
	}
	checkRendersResponse(t, part["text"].(string), s.storedResponse(t, resp))
	if resp := s.e2eDo(t, http.MethodHead, "/v1/responses/"+m["id"].(string)+"?stream=true", nil); resp.StatusCode != 200 ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("HEAD: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	code, got := s.rsGet(t, m["id"].(string))
	if code != 200 || got["id"] != m["id"] || got["status"] != "completed" || rsText(got) != rsText(m) || got["instructions"] != "Answer in French." {
		t.Errorf("GET: %d %v", code, got)
	}
}

// TestResponsesBadInput checks that bad requests are 4xx in OpenAI's error
// shape, naming the parameter, and start no agent.
func TestResponsesBadInput(t *testing.T) {
	t.Parallel()
	s := startE2E(t, "DOCSTREAM_SERVER_MAX_BODY_BYTES=65536", "DOCSTREAM_SERVER_MAX_PROMPT_BYTES=4096")
	user := func(c any) map[string]any { return map[string]any{"role": "user", "content": c} }
	tests := []struct {
		name   string
		body   any
		status int
		code   string
		param  string
	}{
		{"not JSON", `{"input": [`, 400, "bad_json", ""},
		{"no input", map[string]any{"model": "auto"}, 400, "missing_input", "input"},
		{"input a number", map[string]any{"input": 5}, 400, "bad_field", "input"},
		{"input empty", map[string]any{"input": []any{}}, 400, "empty_input", "input"},
		{"input blank", map[string]any{"input": "  "}, 400, "empty_prompt", ""},
		{"item not an object", map[string]any{"input": []any{"hi"}}, 400, "bad_field", "input/0"},
		{"bad role", map[string]any{"input": []any{map[string]any{"role": "tool", "content": "x"}}}, 400, "bad_role", "input/0/role"},
		{"content a number", map[string]any{"input": []any{user(5)}}, 400, "bad_field", "input/0/content"},
		{"an image", map[string]any{"input": []any{user([]any{map[string]any{"type": "input_image", "image_url": "x"}})}}, 400, "unsupported_content", "input/0/content/0"},
		{"no user message", map[string]any{"input": []any{map[string]any{"role": "developer", "content": "x"}}}, 400, "no_user_message", ""},
		{"ends with an assistant message", map[string]any{"input": []any{user("echo a"), map[string]any{"role": "assistant", "content": "b"}}}, 400, "last_message_not_user", ""},
		{"stream a string", map[string]any{"input": "hi", "stream": "yes"}, 400, "bad_field", "stream"},
		{"model a number", map[string]any{"input": "hi", "model": 5}, 400, "bad_field", "model"},
		{"instructions an object", map[string]any{"input": "hi", "instructions": map[string]any{}}, 400, "bad_field", "instructions"},
		{"metadata not strings", map[string]any{"input": "hi", "metadata": map[string]any{"a": 1}}, 400, "bad_field", "metadata/a"},
		{"unknown model", map[string]any{"input": "hi", "model": "gpt-nope"}, 400, "unknown_model", "model"},
		{"background without store", map[string]any{"input": "hi", "background": true, "store": false}, 400, "unsupported_value", "background"},
		{"unknown previous response", map[string]any{"input": "hi", "previous_response_id": "resp_0000"}, 404, "response_not_found", "previous_response_id"},
		{"previous response not an id", map[string]any{"input": "hi", "previous_response_id": "chat_x"}, 404, "response_not_found", "previous_response_id"},
		{"oversized body", map[string]any{"input": strings.Repeat("x", 70000)}, 413, "too_large", ""},
		{"oversized prompt", map[string]any{"input": strings.Repeat("x", 5000)}, 413, "prompt_too_large", "input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := s.e2eDo(t, http.MethodPost, "/v1/responses", tt.body)
			b := readAll(t, resp)
			checkOpenAIErrorParam(t, resp, b, tt.status, "invalid_request_error", tt.code, tt.param)
		})
	}
	for _, path := range []string{"/v1/responses/resp_0000", "/v1/responses/nope", "/v1/responses/resp_0000?stream=true"} {
		resp := s.e2eDo(t, http.MethodGet, path, nil)
		checkOpenAIErrorParam(t, resp, readAll(t, resp), 404, "invalid_request_error", "response_not_found", "response_id")
	}
	resp := s.e2eDo(t, http.MethodGet, "/v1/responses/resp_0000?starting_after=x", nil)
	checkOpenAIErrorParam(t, resp, readAll(t, resp), 400, "invalid_request_error", "bad_query", "starting_after")
	for _, r := range []struct{ method, path string }{{http.MethodDelete, "/v1/responses/resp_0000"}, {http.MethodPost, "/v1/responses/resp_0000/cancel"}} {
		resp := s.e2eDo(t, r.method, r.path, nil)
		checkOpenAIErrorParam(t, resp, readAll(t, resp), 404, "invalid_request_error", "response_not_found", "response_id")
	}
	for _, st := range s.simStarts(t) {
		if st["prompt"] != nil && st["prompt"] != "" {
			t.Errorf("an agent started by a refused request: %v", st["prompt"])
		}
	}
}

// TestResponsesWebSocket: a client that asks for a WebSocket is answered
// 426, which sends it to POST at once.
func TestResponsesWebSocket(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	resp := s.e2eDo(t, http.MethodGet, "/v1/responses", nil, "Connection", "Upgrade", "Upgrade", "websocket",
		"Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	checkOpenAIErrorParam(t, resp, readAll(t, resp), http.StatusUpgradeRequired, "invalid_request_error", "websocket_unsupported", "")
	resp = s.e2eDo(t, http.MethodGet, "/v1/responses", nil)
	b := readAll(t, resp)
	checkOpenAIErrorParam(t, resp, b, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", "")
	if resp.Header.Get("Allow") != "POST" {
		t.Errorf("Allow %q", resp.Header.Get("Allow"))
	}
}

// TestResponsesBackground: a background response runs detached; GET polls
// it, and GET ?stream=true re-attaches: from the start, or after
// starting_after, while it runs and once it ended.
func TestResponsesBackground(t *testing.T) {
	t.Parallel()
	s := startE2E(t, "DOCSTREAM_AUTH_RATE_PER_MINUTE=0") // polls as often as a slow machine needs
	resp, b, m := s.rsPost(t, map[string]any{"input": "fault:hang-mid", "background": true})
	if resp.StatusCode != 200 || m["status"] != "in_progress" || m["background"] != true {
		t.Fatalf("background answer %d: %s", resp.StatusCode, b)
	}
	id := m["id"].(string)
	// It runs with no client: the hang holds it mid-text.
	if !waitFor(10*time.Second, func() bool {
		_, got := s.rsGet(t, id)
		return got["status"] == "in_progress" && rsText(got) != ""
	}) {
		t.Fatalf("the background run shows no text while it runs")
	}
	// Re-attached from the start: the events so far, then live.
	st := e2eNewStream(t, s.e2eDo(t, http.MethodGet, "/v1/responses/"+id+"?stream=true", nil))
	head := st.Until("response.output_text.delta")
	st.Close()
	// After starting_after: the same events from there on.
	st = e2eNewStream(t, s.e2eDo(t, http.MethodGet, "/v1/responses/"+id+"?stream=true&starting_after=2", nil))
	first, ok := st.Next()
	if !ok || first.Name != head[3].Name || first.Data != head[3].Data {
		t.Fatalf("after starting_after=2: %v, want %v", first, head[3])
	}
	// Cancelled while a client follows: the stream ends with response.failed.
	cancel := s.e2eDo(t, http.MethodPost, "/v1/responses/"+id+"/cancel", nil)
	var cm map[string]any
	if err := json.Unmarshal(readAll(t, cancel), &cm); err != nil || cancel.StatusCode != 200 || cm["status"] != "cancelled" {
		t.Fatalf("cancel: %d %v", cancel.StatusCode, cm)
	}
	rest := rsRead(t, st, 4)
	st.Close()
	if n := len(rest); n == 0 || rest[n-1].Name != "response.failed" {
		t.Fatalf("the re-attached stream ends with %v", rsNames(rest))
	}
	failed := rest[len(rest)-1].Data["response"].(map[string]any)
	if failed["status"] != "cancelled" || failed["error"].(map[string]any)["code"] != "cancelled" {
		t.Errorf("failed response %v", failed)
	}
	if code, got := s.rsGet(t, id); code != 200 || got["status"] != "cancelled" {
		t.Errorf("GET after the cancel: %d %v", code, got["status"])
	}

	// A background run that completes: polled to its end, then re-attached
	// after its last events.
	_, _, m = s.rsPost(t, map[string]any{"input": "tour", "background": true})
	id = m["id"].(string)
	var done map[string]any
	if !waitFor(20*time.Second, func() bool { _, done = s.rsGet(t, id); return done["status"] == "completed" }) {
		t.Fatalf("the background run did not complete: %v", done["status"])
	}
	st = e2eNewStream(t, s.e2eDo(t, http.MethodGet, "/v1/responses/"+id+"?stream=true", nil))
	all := rsRead(t, st, 0)
	st.Close()
	final, _ := rsCheckOrder(t, all)
	if final["status"] != "completed" || final["background"] != true {
		t.Errorf("replayed final response %v", final)
	}
	n := len(all)
	st = e2eNewStream(t, s.e2eDo(t, http.MethodGet, "/v1/responses/"+id+"?stream=true&starting_after="+strconv.Itoa(n-3), nil))
	tail := rsRead(t, st, n-2)
	st.Close()
	if !slices.Equal(rsNames(tail), rsNames(all[n-2:])) {
		t.Errorf("after starting_after=%d: %v, want %v", n-3, rsNames(tail), rsNames(all[n-2:]))
	}
}

// TestResponsesDelete: a finished response is deleted, a running one is
// not (409), and a deleted one is unknown.
func TestResponsesDelete(t *testing.T) {
	t.Parallel()
	s := startE2E(t)
	_, _, m := s.rsPost(t, map[string]any{"input": "echo keep"})
	id := m["id"].(string)
	resp := s.e2eDo(t, http.MethodDelete, "/v1/responses/"+id, nil)
	var del map[string]any
	if err := json.Unmarshal(readAll(t, resp), &del); err != nil || resp.StatusCode != 200 || del["deleted"] != true || del["id"] != id {
		t.Fatalf("DELETE: %d %v", resp.StatusCode, del)
	}
	if code, _ := s.rsGet(t, id); code != 404 {
		t.Errorf("GET after DELETE: %d", code)
	}
	resp = s.e2eDo(t, http.MethodDelete, "/v1/responses/"+id, nil)
	checkOpenAIErrorParam(t, resp, readAll(t, resp), 404, "invalid_request_error", "response_not_found", "response_id")

	_, _, m = s.rsPost(t, map[string]any{"input": "fault:hang-mid", "background": true})
	id = m["id"].(string)
	resp = s.e2eDo(t, http.MethodDelete, "/v1/responses/"+id, nil)
	checkOpenAIErrorParam(t, resp, readAll(t, resp), 409, "invalid_request_error", "response_running", "response_id")
	readAll(t, s.e2eDo(t, http.MethodPost, "/v1/responses/"+id+"/cancel", nil))
	if resp := s.e2eDo(t, http.MethodDelete, "/v1/responses/"+id, nil); resp.StatusCode != 200 {
		t.Errorf("DELETE after the cancel: %d %s", resp.StatusCode, readAll(t, resp))
	}
}

// TestResponsesPreviousResponseID: a response that names the one before
// resumes its agent session with only the new message.
func TestResponsesPreviousResponseID(t *testing.T) {
	t.Parallel()
	s := startE2E(t)
	_, _, first := s.rsPost(t, map[string]any{"input": "echo first turn", "instructions": "Be brief."})
	session := e2eResume(e2eArgv(s.e2eSimStart(t, func(p string) bool { return strings.HasSuffix(p, "echo first turn") })))
	if session != "" {
		t.Fatalf("the first turn resumed a session")
	}
	for _, stream := range []bool{false, true} {
		q := fmt.Sprintf("echo second turn %v", stream)
		body := map[string]any{"input": q, "previous_response_id": first["id"]}
		var second map[string]any
		if stream {
			_, evs := s.rsStream(t, body)
			second, _ = rsCheckOrder(t, evs)
		} else {
			_, _, second = s.rsPost(t, body)
		}
		if second["status"] != "completed" || second["previous_response_id"] != first["id"] {
			t.Errorf("second response %v", second)
		}
		st := s.e2eSimStart(t, func(p string) bool { return strings.Contains(p, q) })
		if p := st["prompt"]; p != q {
			t.Errorf("resumed prompt %q, want only the new message", p)
		}
		if e2eResume(e2eArgv(st)) == "" {
			t.Errorf("the turn did not resume the session: %v", e2eArgv(st))
		}
		first = second
	}
}

// TestResponsesResumeByHistory: a client that resends the whole history
// (Codex: developer messages, store: false, reasoning items and the reply
// as output_text items) resumes the agent session with only the new
// message; a response asked for with store: false is not kept.
func TestResponsesResumeByHistory(t *testing.T) {
	t.Parallel()
	s := startE2E(t)
	dev := map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "You are Codex."}}}
	user := func(q string) map[string]any {
		return map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": q}}}
	}
	input := []any{dev, user("echo codex first")}
	body := map[string]any{"model": "auto", "input": input, "store": false, "reasoning": map[string]any{"summary": "auto"},
		"tools": []any{map[string]any{"type": "web_search"}}, "include": []any{"reasoning.encrypted_content"}}
	_, evs := s.rsStream(t, body)
	final, _ := rsCheckOrder(t, evs)
	// Codex takes the items from output_item.done and sends them back.
	var items []any
	for _, e := range evs {
		if e.Name == "response.output_item.done" {
			items = append(items, e.Data["item"])
		}
	}
	if len(items) < 2 {
		t.Fatalf("items %v: want reasoning and a message", items)
	}
	if !waitFor(10*time.Second, func() bool { code, _ := s.rsGet(t, final["id"].(string)); return code == 404 }) {
		t.Errorf("a response asked for with store: false is kept")
	}
	body["input"] = append(append(input, items...), user("echo codex second"))
	_, evs = s.rsStream(t, body)
	if final, _ = rsCheckOrder(t, evs); final["status"] != "completed" {
		t.Fatalf("second turn %v", final["status"])
	}
	st := s.e2eSimStart(t, func(p string) bool { return strings.Contains(p, "echo codex second") })
	if st["prompt"] != "echo codex second" || e2eResume(e2eArgv(st)) == "" {
		t.Errorf("the resent history did not resume the session with the new message alone: %q %v", st["prompt"], e2eArgv(st))
	}
}

// TestResponsesFaults: a run that fails ends its stream with
// response.failed carrying the error, and a non-streamed one is a 502 in
// OpenAI's error shape: an agent crash, a hang past the idle timeout, an
// agent that cannot be spawned, and a shutdown.
func TestResponsesFaults(t *testing.T) {
	t.Parallel()
	s := startServer(t, "DOCSTREAM_AGENT_IDLE_TIMEOUT=1s")
	for _, tt := range []struct{ prompt, code string }{{"fault:crash", "agent_exit"}, {"fault:hang-mid", "timeout"}} {
		_, evs := s.rsStream(t, map[string]any{"input": tt.prompt})
		final, text := rsCheckOrder(t, evs)
		e, _ := final["error"].(map[string]any)
		if evs[len(evs)-1].Name != "response.failed" || final["status"] != "failed" || e == nil || e["code"] != tt.code || e["message"] == "" {
			t.Errorf("%s: ends with %s, status %v, error %v", tt.prompt, evs[len(evs)-1].Name, final["status"], e)
		}
		if !strings.Contains(text, "**Error:**") {
			t.Errorf("%s: the text does not hold the error document: %q", tt.prompt, oaClip(text))
		}
		resp := s.e2eDo(t, http.MethodPost, "/v1/responses", map[string]any{"input": tt.prompt})
		checkOpenAIError(t, resp, readAll(t, resp), http.StatusBadGateway, "server_error", tt.code)
		if resp.Header.Get("X-Should-Retry") != "false" {
			t.Errorf("%s: X-Should-Retry %q", tt.prompt, resp.Header.Get("X-Should-Retry"))
		}
	}

	// An agent binary that cannot be run.
	bad := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(bad, []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	s2 := startServer(t, "DOCSTREAM_AGENT_BINARY="+bad)
	_, evs := s2.rsStream(t, map[string]any{"input": "hello"})
	final, _ := rsCheckOrder(t, evs)
	if e, _ := final["error"].(map[string]any); evs[len(evs)-1].Name != "response.failed" || e == nil || !strings.Contains(e["message"].(string), documents.CodeSpawnFailed) {
		t.Errorf("spawn failure: %s %v", evs[len(evs)-1].Name, final["error"])
	}

	// A shutdown while the agent hangs.
	s3 := startServer(t, "DOCSTREAM_SERVER_SHUTDOWN_TIMEOUT=1s")
	st := e2eNewStream(t, s3.e2eDo(t, http.MethodPost, "/v1/responses", map[string]any{"input": "fault:hang-mid", "stream": true}))
	st.Until("response.output_text.delta")
	if err := s3.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var last rsEvent
	for e, ok := st.Next(); ok; e, ok = st.Next() {
		last = rsEvent{Name: e.Name}
		_ = json.Unmarshal([]byte(e.Data), &last.Data)
	}
	st.Close()
	if last.Name != "response.failed" || last.Data["response"].(map[string]any)["error"].(map[string]any)["code"] != "shutdown" {
		t.Errorf("shutdown: the stream ends with %s %v", last.Name, last.Data)
	}
}

// TestResponsesAuthCORSMetrics: the Responses routes are behind the API
// keys and refuse in OpenAI's error shape, answer a page of an allowed
// origin, refuse another, and are counted by route.
func TestResponsesAuthCORSMetrics(t *testing.T) {
	t.Parallel()
	const origin = "http://localhost:3000"
	s := startServer(t, "DOCSTREAM_AUTH_API_KEYS=rs-key", "DOCSTREAM_SERVER_CORS_ORIGINS="+origin)
	for _, r := range []struct{ method, path string }{{http.MethodPost, "/v1/responses"}, {http.MethodGet, "/v1/responses/resp_0000"},
		{http.MethodDelete, "/v1/responses/resp_0000"}, {http.MethodPost, "/v1/responses/resp_0000/cancel"}} {
		resp := s.e2eDo(t, r.method, r.path, map[string]any{"input": "hi"})
		checkOpenAIError(t, resp, readAll(t, resp), 401, "authentication_error", "unauthorized")
	}
	key := []string{"Authorization", "Bearer rs-key"}
	resp := s.e2eDo(t, http.MethodPost, "/v1/responses", map[string]any{"input": "echo ok"}, append(key, "Origin", origin)...)
	if b := readAll(t, resp); resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"status":"completed"`)) {
		t.Errorf("with the key: %d %s", resp.StatusCode, b)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Errorf("the answer is not readable by the page of %s", origin)
	}
	resp = s.e2eDo(t, http.MethodPost, "/v1/responses", map[string]any{"input": "echo ok"}, append(key, "Origin", "http://elsewhere.example")...)
	checkOpenAIError(t, resp, readAll(t, resp), 403, "invalid_request_error", "origin_not_allowed")
	// A request is counted once its handler returned, after its answer.
	s.e2eWaitMetric(t, `docstream_http_requests_total{code="200",method="POST",route="/v1/responses"}`, 1)
}

// TestResponsesIsolation: with auth.isolate_keys, another key's response
// is unknown: to GET, cancel, DELETE, previous_response_id and an item
// reference.
func TestResponsesIsolation(t *testing.T) {
	t.Parallel()
	s := startServer(t, "DOCSTREAM_AUTH_API_KEYS=ka,kb", "DOCSTREAM_AUTH_ISOLATE_KEYS=true")
	a, b := []string{"Authorization", "Bearer ka"}, []string{"Authorization", "Bearer kb"}
	resp := s.e2eDo(t, http.MethodPost, "/v1/responses", map[string]any{"input": "echo mine"}, a...)
	var m map[string]any
	if err := json.Unmarshal(readAll(t, resp), &m); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	id := m["id"].(string)
	msgID := m["output"].([]any)[0].(map[string]any)["id"].(string)
	for _, r := range []struct{ method, path string }{{http.MethodGet, "/v1/responses/" + id}, {http.MethodPost, "/v1/responses/" + id + "/cancel"},
		{http.MethodDelete, "/v1/responses/" + id}} {
		resp := s.e2eDo(t, r.method, r.path, nil, b...)
		checkOpenAIErrorParam(t, resp, readAll(t, resp), 404, "invalid_request_error", "response_not_found", "response_id")
	}
	resp = s.e2eDo(t, http.MethodPost, "/v1/responses", map[string]any{"input": "echo x", "previous_response_id": id}, b...)
	checkOpenAIErrorParam(t, resp, readAll(t, resp), 404, "invalid_request_error", "response_not_found", "previous_response_id")
	resp = s.e2eDo(t, http.MethodPost, "/v1/responses", map[string]any{"input": []any{map[string]any{"role": "user", "content": "echo a"},
		map[string]any{"type": "item_reference", "id": msgID}, map[string]any{"role": "user", "content": "echo b"}}}, b...)
	checkOpenAIErrorParam(t, resp, readAll(t, resp), 400, "invalid_request_error", "unknown_item", "input/1/id")
	if resp := s.e2eDo(t, http.MethodGet, "/v1/responses/"+id, nil, a...); resp.StatusCode != 200 {
		t.Errorf("the key's own response: %d %s", resp.StatusCode, readAll(t, resp))
	}
}
