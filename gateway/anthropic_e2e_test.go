package gateway_test

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
)

// msgStream is a /v1/messages event stream as a client reads it.
type msgStream struct {
	resp     *http.Response
	raw      string
	events   []event
	types    []string // the events' types, pings left out
	blocks   []string // the content blocks' types, in order
	content  []string // each block's text or thinking
	text     string   // the text blocks' text, in order
	thinking string
	pings    int
	delta    map[string]any // the message_delta event
	errObj   map[string]any // the error event's error
}

// messagesStream posts a streaming Messages request and reads it to the
// end, checking its framing: every event named by its type, message_start
// first, each block started, filled with deltas of its kind and stopped in
// index order, and message_delta then message_stop at the end, or an error
// event in their place.
func (s *testServer) messagesStream(t *testing.T, body map[string]any, headers ...string) *msgStream {
	t.Helper()
	body["stream"] = true
	resp := s.post(t, "/v1/messages", body, headers...)
	raw := readAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/messages: status %d: %s", resp.StatusCode, raw)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q", ct)
	}
	st := &msgStream{resp: resp, raw: string(raw), events: readEvents(t, bytes.NewReader(raw))}
	open := -1 // the index of the open block
	for i, e := range st.events {
		var m map[string]any
		if err := json.Unmarshal([]byte(e.Data), &m); err != nil {
			t.Fatalf("event %d is not JSON: %v: %q", i, err, e.Data)
		}
		typ, _ := m["type"].(string)
		if e.Name != typ {
			t.Fatalf("event %d: event: %q but data.type %q", i, e.Name, typ)
		}
		if typ == "ping" {
			st.pings++
			continue
		}
		if len(st.types) == 0 && typ != "message_start" {
			t.Fatalf("the first event is %s, not message_start", typ)
		}
		if st.errObj != nil || st.delta != nil && typ != "message_stop" {
			t.Fatalf("%s after the end (%v)", typ, st.types)
		}
		st.types = append(st.types, typ)
		index := -1
		if f, ok := m["index"].(float64); ok {
			index = int(f)
		}
		switch typ {
		case "message_start":
			if len(st.types) != 1 {
				t.Fatalf("message_start again")
			}
			msg := m["message"].(map[string]any)
			if msg["type"] != "message" || msg["role"] != "assistant" || !strings.HasPrefix(msg["id"].(string), "msg_") || len(msg["content"].([]any)) != 0 {
				t.Errorf("message_start %v", msg)
			}
		case "content_block_start":
			if open != -1 || index != len(st.blocks) {
				t.Fatalf("block %d starts while block %d is open, after %d blocks", index, open, len(st.blocks))
			}
			open = index
			cb := m["content_block"].(map[string]any)
			st.blocks = append(st.blocks, cb["type"].(string))
			st.content = append(st.content, "")
		case "content_block_delta":
			if index != open {
				t.Fatalf("a delta of block %d while block %d is open", index, open)
			}
			d := m["delta"].(map[string]any)
			switch kind := st.blocks[open]; {
			case kind == "text" && d["type"] == "text_delta":
				st.text += d["text"].(string)
				st.content[open] += d["text"].(string)
			case kind == "thinking" && d["type"] == "thinking_delta":
				st.thinking += d["thinking"].(string)
				st.content[open] += d["thinking"].(string)
			default:
				t.Fatalf("a %v in a %s block", d["type"], kind)
			}
		case "content_block_stop":
			if index != open {
				t.Fatalf("block %d stops while block %d is open", index, open)
			}
			open = -1
		case "message_delta":
			if open != -1 {
				t.Fatalf("message_delta while block %d is open", open)
			}
			st.delta = m
		case "message_stop":
			if st.delta == nil {
				t.Fatalf("message_stop without message_delta")
			}
		case "error":
			st.errObj = m["error"].(map[string]any)
		default:
			t.Fatalf("unknown event %s", typ)
		}
	}
	if n := len(st.types); n == 0 || st.types[n-1] != "message_stop" && st.types[n-1] != "error" {
		t.Fatalf("the stream ends with %v, not message_stop or error:\n%s", st.types, oaTail(st.raw, 600))
	}
	return st
}

// messagesJSON posts a non-streaming Messages request.
func (s *testServer) messagesJSON(t *testing.T, body any, headers ...string) (*http.Response, map[string]any) {
	t.Helper()
	resp := s.post(t, "/v1/messages", body, headers...)
	b := readAll(t, resp)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("status %d, body not JSON: %v: %s", resp.StatusCode, err, b)
	}
	return resp, m
}

// checkAnthropicError checks an error answer in Anthropic's shape.
func checkAnthropicError(t *testing.T, resp *http.Response, m map[string]any, status int, typ string) string {
	t.Helper()
	e, _ := m["error"].(map[string]any)
	if resp.StatusCode != status || m["type"] != "error" || e == nil || e["type"] != typ {
		t.Errorf("got %d %v, want %d with an error of type %s", resp.StatusCode, m, status, typ)
		return ""
	}
	msg, _ := e["message"].(string)
	if msg == "" || len(e) != 2 {
		t.Errorf("error %v: want type and a message only", e)
	}
	if id, _ := m["request_id"].(string); id == "" || id != resp.Header.Get("X-Request-Id") {
		t.Errorf("request_id %v, X-Request-Id %q", m["request_id"], resp.Header.Get("X-Request-Id"))
	}
	return msg
}

func blockText(t *testing.T, msg map[string]any) (text string, types []string) {
	t.Helper()
	for _, b := range msg["content"].([]any) {
		b := b.(map[string]any)
		types = append(types, b["type"].(string))
		if b["type"] == "text" {
			text += b["text"].(string)
		}
	}
	return text, types
}

// TestMessagesStream: the events of a streamed message, framed as
// Anthropic's SDKs read them, its text the chat-completion renderer's.
func TestMessagesStream(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	st := s.messagesStream(t, map[string]any{"model": "auto", "max_tokens": 1024,
		"messages": []any{userMsg("tour")}}, "anthropic-version", "2023-06-01")
	if st.resp.Header.Get("X-Docstream-Response-Id") == "" {
		t.Errorf("no X-Docstream-Response-Id")
	}
	if len(st.blocks) == 0 || slices.Contains(st.blocks, "thinking") {
		t.Errorf("blocks %v: want text blocks only without thinking", st.blocks)
	}
	if d := st.delta["delta"].(map[string]any); d["stop_reason"] != "end_turn" || d["stop_sequence"] != nil {
		t.Errorf("message_delta %v", st.delta)
	}
	cr := s.storedResponse(t, st.resp)
	u := st.delta["usage"].(map[string]any)
	if u["input_tokens"] != float64(cr.Usage.PromptTokens) || u["output_tokens"] != float64(cr.Usage.CompletionTokens) ||
		u["cache_read_input_tokens"] != float64(cr.Usage.CacheReadTokens) || u["cache_creation_input_tokens"] != float64(cr.Usage.CacheWriteTokens) || cr.Usage.CompletionTokens == 0 {
		t.Errorf("usage %v, the run's %+v", u, cr.Usage)
	}
	// The documents rendered as chat completions render them.
	oa := s.completionStream(t, map[string]any{"model": "auto", "messages": []any{userMsg("tour")}})
	if st.text != oa.content {
		t.Errorf("the text is not the chat completion's content: %s", oaDiff(st.text, oa.content))
	}
	checkRendersResponse(t, st.text, cr)
}

// TestMessagesNonStreaming: one Message, the streamed message folded.
func TestMessagesNonStreaming(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	body := map[string]any{"model": "sim-fast", "max_tokens": 64, "thinking": map[string]any{"type": "enabled", "budget_tokens": 2048},
		"system": "You are terse.", "messages": []any{userMsg("hello without streaming")}}
	resp, msg := s.messagesJSON(t, body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, msg)
	}
	if !strings.HasPrefix(msg["id"].(string), "msg_") || msg["type"] != "message" || msg["role"] != "assistant" || msg["model"] != "sim-fast" ||
		msg["stop_reason"] != "end_turn" || msg["stop_sequence"] != nil {
		t.Errorf("message %v", msg)
	}
	text, types := blockText(t, msg)
	if !slices.Equal(types, []string{"thinking", "text"}) {
		t.Errorf("blocks %v, want thinking then text", types)
	}
	if th := msg["content"].([]any)[0].(map[string]any); th["thinking"] == "" || th["signature"] != "" {
		t.Errorf("thinking block %v", th)
	}
	if !strings.Contains(text, "hello without streaming") || !strings.Contains(text, "You are terse.") {
		t.Errorf("text %q: want the prompt, with the system text folded in", oaClip(text))
	}
	u := msg["usage"].(map[string]any)
	if cr := s.storedResponse(t, resp); u["output_tokens"] != float64(cr.Usage.CompletionTokens) || u["input_tokens"] != float64(cr.Usage.PromptTokens) {
		t.Errorf("usage %v, the run's %+v", u, cr.Usage)
	}
	st := s.messagesStream(t, body)
	if st.text != text || !slices.Equal(st.blocks, types) {
		t.Errorf("streamed %v %q, not streamed %v %q", st.blocks, oaClip(st.text), types, oaClip(text))
	}
}

// TestMessagesThinking: thinking blocks only when thinking is asked for
// and not omitted.
func TestMessagesThinking(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for _, tt := range []struct {
		thinking any
		want     bool
	}{
		{nil, false},
		{map[string]any{"type": "disabled"}, false},
		{map[string]any{"type": "enabled", "budget_tokens": 1024}, true},
		{map[string]any{"type": "adaptive"}, true},
		{map[string]any{"type": "adaptive", "display": "summarized"}, true},
		{map[string]any{"type": "adaptive", "display": "omitted"}, false},
	} {
		body := map[string]any{"messages": []any{userMsg("hello")}}
		if tt.thinking != nil {
			body["thinking"] = tt.thinking
		}
		st := s.messagesStream(t, body)
		if got := slices.Contains(st.blocks, "thinking"); got != tt.want || got != (st.thinking != "") {
			t.Errorf("thinking %v: blocks %v, thinking %q", tt.thinking, st.blocks, oaClip(st.thinking))
		}
		if tt.want && (st.blocks[0] != "thinking" || strings.Contains(st.text, st.thinking[:20])) {
			t.Errorf("thinking %v: blocks %v; the thinking must come first, apart from the text", tt.thinking, st.blocks)
		}
	}
}

// TestMessagesAuth: the API keys of /v1, as x-api-key or a bearer token;
// the query and Anthropic's headers are accepted.
func TestMessagesAuth(t *testing.T) {
	t.Parallel()
	s := startServer(t, "DOCSTREAM_AUTH_API_KEYS=k1,k2")
	body := map[string]any{"model": "auto", "max_tokens": 16, "messages": []any{userMsg("hi")}}
	for _, h := range [][]string{nil, {"x-api-key", "wrong"}, {"Authorization", "Bearer wrong"}} {
		resp, m := s.messagesJSON(t, body, h...)
		checkAnthropicError(t, resp, m, http.StatusUnauthorized, "authentication_error")
	}
	resp := s.post(t, "/v1/messages?beta=true", map[string]any{"stream": true, "messages": []any{userMsg("hi")}})
	resp2, m := resp, map[string]any{}
	_ = json.Unmarshal(readAll(t, resp), &m)
	checkAnthropicError(t, resp2, m, http.StatusUnauthorized, "authentication_error")

	anthropicHeaders := []string{"anthropic-version", "2023-06-01", "anthropic-beta", "claude-code-20250219,interleaved-thinking-2025-05-14",
		"anthropic-dangerous-direct-browser-access", "true"}
	for _, h := range [][]string{{"x-api-key", "k1"}, {"Authorization", "Bearer k2"}} {
		resp, m := s.messagesJSON(t, body, append(h, anthropicHeaders...)...)
		if resp.StatusCode != 200 || m["type"] != "message" {
			t.Errorf("%s: %d %v", h[0], resp.StatusCode, m)
		}
		resp = s.post(t, "/v1/messages?beta=true", map[string]any{"stream": true, "messages": []any{userMsg("hi")}}, append(h, anthropicHeaders...)...)
		if b := readAll(t, resp); resp.StatusCode != 200 || !bytes.Contains(b, []byte("event: message_stop")) {
			t.Errorf("%s, ?beta=true: %d %s", h[0], resp.StatusCode, oaTail(string(b), 200))
		}
	}
}

// TestMessagesBadInput: what cannot be run is a 4xx in Anthropic's shape,
// before any agent starts.
func TestMessagesBadInput(t *testing.T) {
	t.Parallel()
	s := startServer(t, "DOCSTREAM_SERVER_MAX_BODY_BYTES=65536", "DOCSTREAM_AUTH_RATE_PER_MINUTE=0")
	msgs := []any{userMsg("hi")}
	tests := []struct {
		name   string
		body   any
		status int
		says   string
	}{
		{"not JSON", `{"messages": [`, 400, "not valid JSON"},
		{"empty body", ``, 400, "empty"},
		{"an array", `[]`, 400, "JSON object"},
		{"no messages", map[string]any{"model": "auto"}, 400, "messages"},
		{"empty messages", map[string]any{"messages": []any{}}, 400, "messages"},
		{"messages a string", map[string]any{"messages": "hello"}, 400, "messages"},
		{"stream a string", map[string]any{"stream": "yes", "messages": msgs}, 400, "stream"},
		{"max_tokens a string", map[string]any{"max_tokens": "many", "messages": msgs}, 400, "max_tokens"},
		{"system a number", map[string]any{"system": 5, "messages": msgs}, 400, "system"},
		{"role unknown", map[string]any{"messages": []any{map[string]any{"role": "tool", "content": "x"}}}, 400, "messages/0/role"},
		{"content a number", map[string]any{"messages": []any{map[string]any{"role": "user", "content": 5}}}, 400, "messages/0/content"},
		{"a block not an object", map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{"hi"}}}}, 400, "messages/0/content/0"},
		{"a text block without text", map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": 5}}}}}, 400, "messages/0/content/0"},
		{"an image to the agent", map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "what is this"}, map[string]any{"type": "image", "source": map[string]any{"type": "base64"}}}}}}, 400, "messages/0/content/1"},
		{"no user message", map[string]any{"messages": []any{map[string]any{"role": "assistant", "content": "hi"}}}, 400, "user message"},
		{"blank", map[string]any{"messages": []any{userMsg("  ")}}, 400, "no text"},
		{"ends with the assistant", map[string]any{"messages": []any{userMsg("hi"), map[string]any{"role": "assistant", "content": "Hel"}}}, 400, "end with a user message"},
		{"thinking unknown", map[string]any{"thinking": map[string]any{"type": "always"}, "messages": msgs}, 400, "thinking/type"},
		{"tool_choice any", map[string]any{"tool_choice": map[string]any{"type": "any"}, "messages": msgs}, 400, "tool_choice"},
		{"unknown model", map[string]any{"model": "claude-nope", "messages": msgs}, 400, "claude-nope"},
		{"too large", map[string]any{"messages": []any{userMsg(strings.Repeat("x", 70000))}}, 413, "larger than the limit"},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream=%v", tt.name, stream), func(t *testing.T) {
				body := tt.body
				if m, ok := body.(map[string]any); ok && stream {
					if _, set := m["stream"]; set {
						t.Skip("the body sets stream")
					}
					m = maps.Clone(m)
					m["stream"] = true
					body = m
				}
				resp, m := s.messagesJSON(t, body)
				typ := "invalid_request_error"
				if tt.status == 413 {
					typ = "request_too_large"
				}
				if msg := checkAnthropicError(t, resp, m, tt.status, typ); !strings.Contains(msg, tt.says) {
					t.Errorf("message %q does not say %q", msg, tt.says)
				}
			})
		}
	}
	for _, st := range s.simStarts(t) {
		if !slices.Contains(argvOf(st), "models") { // the list that model names are checked against
			t.Errorf("an agent started for a refused request: %v", argvOf(st))
		}
	}
	// Token counting is not guessed; other paths and methods are Anthropic
	// errors too.
	for _, tt := range []struct {
		method, path string
		status       int
		typ, says    string
	}{
		{http.MethodPost, "/v1/messages/count_tokens", 400, "invalid_request_error", "not supported"},
		{http.MethodGet, "/v1/messages", 405, "invalid_request_error", "POST"},
		{http.MethodPost, "/v1/messages/batches", 404, "not_found_error", "no such route"},
	} {
		req := newRequest(t, tt.method, s.URL+tt.path, map[string]any{"model": "auto", "messages": msgs})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		_ = json.Unmarshal(readAll(t, resp), &m)
		if msg := checkAnthropicError(t, resp, m, tt.status, tt.typ); !strings.Contains(msg, tt.says) {
			t.Errorf("%s %s: %q does not say %q", tt.method, tt.path, msg, tt.says)
		}
	}
}

// TestMessagesAccepted: the fields Claude Code sends that Docstream does
// not use are accepted, and so are system messages and the blocks of
// earlier turns that are not text.
func TestMessagesAccepted(t *testing.T) {
	t.Parallel()
	s := startServer(t, simLogEnv)
	body := map[string]any{
		"model": "auto", "max_tokens": 32000, "stream": true, "temperature": 1, "top_p": 0.9, "top_k": 5, "stop_sequences": []any{"END"},
		"system":      []any{map[string]any{"type": "text", "text": "Be brief."}, map[string]any{"type": "text", "text": "Answer in English.", "cache_control": map[string]any{"type": "ephemeral"}}},
		"tools":       []any{map[string]any{"name": "Bash", "description": "run", "input_schema": map[string]any{"type": "object"}}},
		"tool_choice": map[string]any{"type": "auto"}, "metadata": map[string]any{"user_id": "u1"},
		"thinking":           map[string]any{"type": "adaptive", "display": "omitted"},
		"context_management": map[string]any{"edits": []any{map[string]any{"type": "clear_thinking_20251015", "keep": "all"}}},
		"output_config":      map[string]any{"effort": "high"},
		"messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "image", "source": map[string]any{"type": "base64", "data": "AAAA"}}, map[string]any{"type": "text", "text": "first"}}},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "thinking", "thinking": "hmm", "signature": "sig"},
				map[string]any{"type": "tool_use", "id": "t1", "name": "Bash", "input": map[string]any{}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "echo now", "cache_control": map[string]any{"type": "ephemeral"}}}},
			map[string]any{"role": "system", "content": "Working directory: /tmp"},
		},
	}
	st := s.messagesStream(t, body)
	if st.errObj != nil || slices.Contains(st.blocks, "thinking") {
		t.Fatalf("error %v, blocks %v", st.errObj, st.blocks)
	}
	p, _ := s.simStarts(t)[0]["prompt"].(string)
	for _, want := range []string{"Be brief.\nAnswer in English.", "Working directory: /tmp", "user: first", "\n\necho now"} {
		if !strings.Contains(p, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, p)
		}
	}
	if strings.Contains(p, "hmm") || strings.Contains(p, "tool_result") {
		t.Errorf("blocks that are not text reached the prompt:\n%s", p)
	}
}

// TestMessagesResumeByHistory: a client that resends the whole history, as
// Claude Code does (with a system message after the first user message),
// resumes the agent session with only the new message.
func TestMessagesResumeByHistory(t *testing.T) {
	t.Parallel()
	s := startServer(t, simLogEnv)
	system := []any{map[string]any{"type": "text", "text": "You are a coding agent."}}
	env := map[string]any{"role": "system", "content": []any{map[string]any{"type": "text", "text": "Primary working directory: /tmp"}}}
	for _, tt := range []struct {
		q1     string
		stream bool
	}{{"echo first json", false}, {"echo first stream", true}, {"tour", true}, {"tour please", false}} {
		first := map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "<system-reminder>be kind</system-reminder>"},
			map[string]any{"type": "text", "text": tt.q1}}}
		body := map[string]any{"system": system, "thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}, "messages": []any{first, env}}
		var reply []any // the assistant's content blocks, as the client got them
		var conv string
		if tt.stream {
			st := s.messagesStream(t, body)
			for i, typ := range st.blocks {
				reply = append(reply, map[string]any{"type": typ, typ: st.content[i]})
			}
			conv = *s.storedResponse(t, st.resp).ConversationID
		} else {
			resp, msg := s.messagesJSON(t, body)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %v", resp.StatusCode, msg)
			}
			reply, conv = msg["content"].([]any), resp.Header.Get("X-Docstream-Conversation-Id")
		}
		if !slices.ContainsFunc(reply, func(b any) bool { return b.(map[string]any)["type"] == "thinking" }) {
			t.Errorf("%q: no thinking block in the reply %v", tt.q1, reply)
		}
		n := len(s.simStarts(t))
		second := map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "echo second", "cache_control": map[string]any{"type": "ephemeral"}}}}
		env2 := map[string]any{"role": "system", "content": "Primary working directory: /tmp"}
		resp, msg := s.messagesJSON(t, map[string]any{"system": system, "messages": []any{first, env2,
			map[string]any{"role": "assistant", "content": reply}, second}})
		if resp.StatusCode != 200 {
			t.Fatalf("%d %v", resp.StatusCode, msg)
		}
		starts := s.simStarts(t)
		if len(starts) != n+1 {
			t.Fatalf("starts: %d then %d", n, len(starts))
		}
		last := starts[len(starts)-1]
		if p, _ := last["prompt"].(string); p != "echo second" {
			t.Errorf("%q stream %v: resumed prompt %q, want only the new message", tt.q1, tt.stream, oaClip(p))
		}
		if r := e2eResume(argvOf(last)); r == "" || r != conv {
			t.Errorf("%q stream %v: the history did not resume its session %s: %v", tt.q1, tt.stream, conv, argvOf(last))
		}
	}
	// A history not answered here is folded into a new session's prompt.
	resp, msg := s.messagesJSON(t, map[string]any{"messages": []any{userMsg("echo a"),
		map[string]any{"role": "assistant", "content": "made up"}, userMsg("echo b")}})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, msg)
	}
	starts := s.simStarts(t)
	if argv := argvOf(starts[len(starts)-1]); slices.Contains(argv, "--resume") {
		t.Errorf("an unknown history resumed a session: %v", argv)
	}
}

// TestMessagesFaults: a failed run is an error event once the stream has
// started, and a 502 in Anthropic's shape when not streamed.
func TestMessagesFaults(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, prompt string
		env          []string
		says         string
	}{
		{"crash", "fault:crash", nil, "agent_exit"},
		{"hang", "fault:hang-mid", []string{"DOCSTREAM_AGENT_IDLE_TIMEOUT=1500ms", "DOCSTREAM_SERVER_HEARTBEAT=200ms"}, "timeout"},
		{"spawn failure", "hello", []string{"DOCSTREAM_AGENT_BINARY=" + os.DevNull}, "SPAWN_FAILED"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, tt.env...)
			st := s.messagesStream(t, map[string]any{"messages": []any{userMsg(tt.prompt)}})
			if st.errObj == nil || st.delta != nil {
				t.Fatalf("events %v: want an error event in place of message_delta", st.types)
			}
			if msg, _ := st.errObj["message"].(string); st.errObj["type"] != "api_error" || !strings.Contains(msg, tt.says) {
				t.Errorf("error %v: want an api_error saying %q", st.errObj, tt.says)
			}
			if tt.name == "hang" && st.pings == 0 {
				t.Errorf("no ping event while the agent was silent")
			}
			resp, m := s.messagesJSON(t, map[string]any{"messages": []any{userMsg(tt.prompt)}})
			if msg := checkAnthropicError(t, resp, m, http.StatusBadGateway, "api_error"); !strings.Contains(msg, tt.says) {
				t.Errorf("message %q does not say %q", msg, tt.says)
			}
			if resp.Header.Get("X-Should-Retry") != "false" || resp.Header.Get("X-Docstream-Response-Id") == "" {
				t.Errorf("headers %v", resp.Header)
			}
		})
	}
}

// TestMessagesCancelAndShutdown: a run cancelled, or cut by the gateway's
// shutdown, ends its stream with an error event.
func TestMessagesCancelAndShutdown(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for _, how := range []string{"cancel", "shutdown"} {
		resp := s.post(t, "/v1/messages", map[string]any{"stream": true, "messages": []any{userMsg("fault:hang-mid " + how)}})
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, readAll(t, resp))
		}
		st := e2eNewStream(t, resp)
		st.Until("content_block_delta") // the agent is running
		if how == "cancel" {
			r := s.post(t, "/v1/chat/"+resp.Header.Get("X-Docstream-Response-Id")+"/cancel", nil)
			readAll(t, r)
		} else {
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
		}
		rest := st.Rest()
		last := rest[len(rest)-1]
		if last.Name != "error" || !strings.Contains(last.Data, `"type":"api_error"`) {
			t.Errorf("%s: the stream ends with %s %s, want an api_error event", how, last.Name, last.Data)
		}
	}
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		t.Errorf("the gateway did not stop")
	}
}

// TestMessagesLimits: a gateway that sheds load answers Anthropic's 529
// overloaded_error, and a client over its rate limit a 429
// rate_limit_error, both with Retry-After.
func TestMessagesLimits(t *testing.T) {
	t.Parallel()
	s := startServer(t, "DOCSTREAM_LIMITS_MAX_CONCURRENT_RUNS=1", "DOCSTREAM_LIMITS_QUEUE_SIZE=0",
		"DOCSTREAM_AUTH_RATE_PER_MINUTE=1", "DOCSTREAM_AUTH_BURST=2", "DOCSTREAM_RUNS_DETACH_GRACE=0s")
	st := e2eNewStream(t, s.post(t, "/v1/messages", map[string]any{"stream": true, "messages": []any{userMsg("fault:hang-mid")}}))
	defer st.Close()
	st.Until("content_block_delta")
	for _, want := range []struct {
		status int
		typ    string
	}{{529, "overloaded_error"}, {429, "rate_limit_error"}} {
		resp, m := s.messagesJSON(t, map[string]any{"messages": []any{userMsg("hi")}})
		checkAnthropicError(t, resp, m, want.status, want.typ)
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("%d without Retry-After", want.status)
		}
	}
}

// TestMessagesCORS: a page of an allowed origin may send Anthropic's
// headers.
func TestMessagesCORS(t *testing.T) {
	t.Parallel()
	const origin = "http://localhost:3000"
	s := startServer(t, "DOCSTREAM_AUTH_API_KEYS=k1", "DOCSTREAM_SERVER_CORS_ORIGINS="+origin)
	const asked = "x-api-key, anthropic-version, anthropic-beta, anthropic-dangerous-direct-browser-access, content-type, x-stainless-os"
	req := newRequest(t, http.MethodOptions, s.URL+"/v1/messages", nil, "Origin", origin,
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", asked)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != origin ||
		resp.Header.Get("Access-Control-Allow-Headers") != asked {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	resp, m := s.messagesJSON(t, map[string]any{"messages": []any{userMsg("hi")}}, "Origin", origin, "x-api-key", "k1")
	if resp.StatusCode != 200 || m["type"] != "message" || resp.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Errorf("%d %v %v", resp.StatusCode, m, resp.Header)
	}
}

// TestMessagesAlias: a model alias of openai.aliases names the agent's
// model here too; the message names the alias.
func TestMessagesAlias(t *testing.T) {
	t.Parallel()
	s := startServer(t, simLogEnv)
	s.stop(t)
	cfg := "openai:\n  aliases:\n    claude-sonnet-4-6: {model: sim-fast}\n"
	if err := os.WriteFile(filepath.Join(s.Dir, "config.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s.start(t)
	resp, m := s.messagesJSON(t, map[string]any{"model": "claude-sonnet-4-6", "messages": []any{userMsg("echo alias")}})
	if resp.StatusCode != 200 || m["model"] != "claude-sonnet-4-6" {
		t.Fatalf("%d %v", resp.StatusCode, m)
	}
	argv := argvOf(s.simStarts(t)[0])
	if i := slices.Index(argv, "--model"); i < 0 || argv[i+1] != "sim-fast" {
		t.Errorf("the agent ran with %v, want --model sim-fast", argv)
	}
}
