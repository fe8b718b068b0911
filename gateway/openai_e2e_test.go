package gateway_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/openai"
)

// simLogEnv lets DOCSTREAM_SIM_LOG reach the simulator: the agent's
// environment drops DOCSTREAM_* names by default.
const simLogEnv = "DOCSTREAM_AGENT_ENV_DENY=*KEY*,*TOKEN*,*SECRET*"

// oaStream is a /v1/chat/completions chunk stream as a client reads it.
type oaStream struct {
	resp      *http.Response
	raw       string
	events    []event
	chunks    []map[string]any // every data payload but [DONE], decoded
	content   string
	reasoning string
	toolCalls []map[string]any
	finishes  []string
	usage     map[string]any
	errObj    map[string]any
}

// completionStream posts a streaming chat completion and reads it to the end.
func (s *testServer) completionStream(t *testing.T, body map[string]any, headers ...string) *oaStream {
	t.Helper()
	body["stream"] = true
	resp := s.post(t, "/v1/chat/completions", body, headers...)
	raw := readAll(t, resp)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/chat/completions: status %d: %s", resp.StatusCode, raw)
	}
	st := &oaStream{resp: resp, raw: string(raw), events: readEvents(t, bytes.NewReader(raw))}
	for i, e := range st.events {
		if e.Data == "[DONE]" {
			if i != len(st.events)-1 {
				t.Fatalf("[DONE] is event %d of %d", i+1, len(st.events))
			}
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(e.Data), &m); err != nil {
			t.Fatalf("event %d is not JSON: %v: %s", i, err, e.Data)
		}
		st.chunks = append(st.chunks, m)
		if eo, ok := m["error"].(map[string]any); ok {
			st.errObj = eo
			continue
		}
		if u, ok := m["usage"].(map[string]any); ok {
			st.usage = u
		}
		choices, _ := m["choices"].([]any)
		for _, c := range choices {
			c := c.(map[string]any)
			d := c["delta"].(map[string]any)
			if s, ok := d["content"].(string); ok {
				st.content += s
			}
			if s, ok := d["reasoning_content"].(string); ok {
				st.reasoning += s
			}
			if tcs, ok := d["tool_calls"].([]any); ok {
				for _, tc := range tcs {
					st.toolCalls = append(st.toolCalls, tc.(map[string]any))
				}
			}
			if f, ok := c["finish_reason"].(string); ok {
				st.finishes = append(st.finishes, f)
			}
		}
	}
	if n := len(st.events); n == 0 || st.events[n-1].Data != "[DONE]" {
		t.Fatalf("the stream does not end with data: [DONE]:\n%s", oaTail(st.raw, 600))
	}
	return st
}

// completionJSON posts a non-streaming chat completion.
func (s *testServer) completionJSON(t *testing.T, body map[string]any, headers ...string) (*http.Response, map[string]any) {
	t.Helper()
	resp := s.post(t, "/v1/chat/completions", body, headers...)
	b := readAll(t, resp)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("status %d, body not JSON: %v: %s", resp.StatusCode, err, b)
	}
	return resp, m
}

func (s *testServer) oaGet(t *testing.T, path string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp, readAll(t, resp)
}

// storedResponse returns the ChatResponse behind a completion.
func (s *testServer) storedResponse(t *testing.T, resp *http.Response) documents.ChatResponse {
	t.Helper()
	id := resp.Header.Get("X-Docstream-Response-Id")
	if id == "" {
		t.Fatal("no X-Docstream-Response-Id header")
	}
	r, b := s.oaGet(t, "/v1/chat/"+id)
	if r.StatusCode != 200 {
		t.Fatalf("GET /v1/chat/%s: %d %s", id, r.StatusCode, b)
	}
	var cr documents.ChatResponse
	if err := json.Unmarshal(b, &cr); err != nil {
		t.Fatal(err)
	}
	return cr
}

// checkRendersResponse checks that content is the markdown rendering of
// every document of the stored response, each exactly once and nothing
// else: nothing lost, nothing duplicated. (Documents are rendered in the
// order they finish, which is not sequence order for parallel tools.)
func checkRendersResponse(t *testing.T, content string, cr documents.ChatResponse) {
	t.Helper()
	if len(cr.Documents) == 0 {
		t.Fatal("the stored response has no documents")
	}
	total := 0
	for _, d := range cr.Documents {
		r := &openai.Renderer{Mode: openai.RenderMarkdown, Reasoning: openai.ReasoningOff}
		r.Event(documents.DocumentStart{ID: d.ID, Type: d.Type, Sequence: d.Sequence, Metadata: d.Metadata})
		if d.Type.IsText() && d.Content != nil {
			r.Event(documents.ContentDelta{DocumentID: d.ID, Delta: *d.Content})
		}
		r.Event(documents.DocumentEnd{DocumentID: d.ID, FinalContent: d.Content, Metadata: d.Metadata})
		md := r.Content()
		if !strings.Contains(content, md) {
			t.Errorf("document %s (%s) is missing from the content: %q", d.ID, d.Type, oaClip(md))
		}
		total += len(md)
	}
	// What is left is the blank lines between documents.
	if extra := len(content) - total; extra < 0 || extra > 2*len(cr.Documents) {
		t.Errorf("the content has %d bytes, its %d documents render to %d: text lost or duplicated", len(content), len(cr.Documents), total)
	}
}

// checkOpenAIError checks an error answer in OpenAI's shape:
// {"error":{"message","type","param","code"}} as application/json, with
// param null.
func checkOpenAIError(t *testing.T, resp *http.Response, body []byte, status int, typ, code string) {
	t.Helper()
	checkOpenAIErrorParam(t, resp, body, status, typ, code, "")
}

// checkOpenAIErrorParam is checkOpenAIError for an error whose param names
// the parameter at fault (null when param is "").
func checkOpenAIErrorParam(t *testing.T, resp *http.Response, body []byte, status int, typ, code, param string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status %d, want %d: %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var m map[string]map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("error body is not {\"error\":{…}}: %v: %s", err, body)
	}
	e, ok := m["error"]
	if !ok || len(m) != 1 {
		t.Fatalf("error body %s: want exactly one member, error", body)
	}
	var keys []string
	for k := range e {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if !slices.Equal(keys, []string{"code", "message", "param", "type"}) {
		t.Errorf("error members %v, want code, message, param, type: %s", keys, body)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Errorf("error without a message: %s", body)
	}
	if e["type"] != typ {
		t.Errorf("error type %v, want %s: %s", e["type"], typ, body)
	}
	if code != "" && e["code"] != code {
		t.Errorf("error code %v, want %s: %s", e["code"], code, body)
	}
	if param == "" && e["param"] != nil {
		t.Errorf("param %v, want null", e["param"])
	}
	if param != "" && e["param"] != param {
		t.Errorf("param %v, want %s", e["param"], param)
	}
}

func oaClip(s string) string {
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return strings.ReplaceAll(s, "\n", `\n`)
}

// oaDiff shows where two strings first differ.
func oaDiff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-80)
	return fmt.Sprintf("at byte %d:\n  got: %q\n want: %q", i, a[from:min(len(a), i+80)], b[from:min(len(b), i+80)])
}

func oaTail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func userMsg(text string) map[string]any { return map[string]any{"role": "user", "content": text} }

// TestOpenAIStreamChunks checks the chunk stream of the tour against
// OpenAI's wire format, and its content against the stored response.
func TestOpenAIStreamChunks(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	start := time.Now().Unix()
	st := s.completionStream(t, map[string]any{"model": "auto", "messages": []any{userMsg("tour")}})

	h := st.resp.Header
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Content-Type %q", ct)
	}
	if h.Get("Cache-Control") != "no-cache" || h.Get("X-Accel-Buffering") != "no" {
		t.Errorf("stream headers: Cache-Control %q, X-Accel-Buffering %q", h.Get("Cache-Control"), h.Get("X-Accel-Buffering"))
	}
	for _, line := range strings.Split(st.raw, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.HasPrefix(line, "event:") || strings.HasPrefix(line, "id:") {
			t.Fatalf("OpenAI chunks carry no event: or id: field, got %q", line)
		}
	}
	for _, e := range st.events {
		if e.Name != "" || e.ID != "" {
			t.Fatalf("event with name %q id %q", e.Name, e.ID)
		}
	}
	if len(st.chunks) < 10 {
		t.Fatalf("only %d chunks", len(st.chunks))
	}
	first := st.chunks[0]
	id, _ := first["id"].(string)
	created, _ := first["created"].(float64)
	if !strings.HasPrefix(id, "chatcmpl-") {
		t.Errorf("id %q", id)
	}
	if int64(created) < start-5 || int64(created) > time.Now().Unix()+5 {
		t.Errorf("created %v is not the unix time now", created)
	}
	for i, c := range st.chunks {
		if c["object"] != "chat.completion.chunk" || c["id"] != id || c["created"] != created || c["model"] != "auto" {
			t.Fatalf("chunk %d: object %v id %v created %v model %v; want chat.completion.chunk %s %v auto", i, c["object"], c["id"], c["created"], c["model"], id, created)
		}
		if _, ok := c["usage"]; ok {
			t.Errorf("chunk %d has usage without include_usage", i)
		}
		choices, _ := c["choices"].([]any)
		if len(choices) != 1 {
			t.Fatalf("chunk %d has %d choices", i, len(choices))
		}
		ch := choices[0].(map[string]any)
		if ch["index"] != 0.0 {
			t.Errorf("chunk %d: index %v", i, ch["index"])
		}
		if v, ok := ch["logprobs"]; !ok || v != nil {
			t.Errorf("chunk %d: logprobs %v, want null", i, v)
		}
		if v, ok := ch["finish_reason"]; !ok || (v != nil && i != len(st.chunks)-1) {
			t.Errorf("chunk %d: finish_reason %v before the last chunk", i, v)
		}
		d := ch["delta"].(map[string]any)
		if i == 0 {
			if d["role"] != "assistant" || d["content"] != "" {
				t.Errorf("first delta %v, want role assistant and content \"\"", d)
			}
		} else if _, ok := d["role"]; ok {
			t.Errorf("chunk %d repeats the role", i)
		}
		if _, hasC := d["content"]; hasC {
			if _, hasR := d["reasoning_content"]; hasR {
				t.Errorf("chunk %d has content and reasoning_content in one delta", i)
			}
		}
	}
	if !slices.Equal(st.finishes, []string{"stop"}) {
		t.Errorf("finish reasons %v, want exactly one stop", st.finishes)
	}
	last := st.chunks[len(st.chunks)-1]["choices"].([]any)[0].(map[string]any)
	if d := last["delta"].(map[string]any); len(d) != 0 || last["finish_reason"] != "stop" {
		t.Errorf("the last chunk is %v, want an empty delta with finish_reason stop", last)
	}

	// The tour shows every document type in the markdown.
	for _, want := range []string{
		"I'll give you a tour",                             // text
		"`src/main.py:12-14`\n```python\ndef greet(name):", // code reference
		"```diff\n",   // file edit
		"**Edited `",  // file edit header
		"**Deleted `", // file deletion
		"```shell\n$ python src/main.py Docstream\nHello, Docstream!\n```\nexit code 0", // terminal command
		"`$ rm -rf build/` — rejected, not run",                                         // rejected command
		"> `read_file`",                                           // tool call line
		"### Plan: Configurable greeting",                         // plan
		"- [ ] Move settings into src/config.py",                  // plan checklist
		"**Tasks:**\n- [x] Move settings into src/config.py",      // todo update
		"1. Where should the greeting be configured?\n   - `env`", // clarification
		"```python\n\"\"\"Settings shared by the greeter.\"\"\"",  // code block
	} {
		if !strings.Contains(st.content, want) {
			t.Errorf("the content lacks %q", want)
		}
	}
	if st.reasoning == "" || strings.Contains(st.content, st.reasoning[:20]) {
		t.Errorf("reasoning %q: want it in reasoning_content only", oaClip(st.reasoning))
	}
	// Nothing lost, nothing duplicated.
	checkRendersResponse(t, st.content, s.storedResponse(t, st.resp))
	// The same run without streaming gives the same content.
	resp, m := s.completionJSON(t, map[string]any{"model": "auto", "messages": []any{userMsg("tour")}})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, m)
	}
	if c := m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]; c != st.content {
		t.Errorf("non-streaming content differs from the streamed one %s", oaDiff(fmt.Sprint(c), st.content))
	}
}

func TestOpenAIStreamIncludeUsage(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	st := s.completionStream(t, map[string]any{"model": "sim-fast", "messages": []any{userMsg("hello there")},
		"stream_options": map[string]any{"include_usage": true}})
	n := len(st.chunks)
	if n < 3 {
		t.Fatalf("%d chunks", n)
	}
	u := st.chunks[n-1]
	if ch, ok := u["choices"].([]any); !ok || len(ch) != 0 {
		t.Errorf("the usage chunk has choices %v, want []", u["choices"])
	}
	if u["object"] != "chat.completion.chunk" || u["id"] != st.chunks[0]["id"] || u["model"] != "sim-fast" {
		t.Errorf("usage chunk %v", u)
	}
	for i, c := range st.chunks[:n-1] {
		if v, ok := c["usage"]; ok && v != nil {
			t.Errorf("chunk %d carries usage %v", i, v)
		}
	}
	fin := st.chunks[n-2]["choices"].([]any)[0].(map[string]any)
	if fin["finish_reason"] != "stop" {
		t.Errorf("the chunk before the usage chunk is %v, want the stop chunk", fin)
	}
	cr := s.storedResponse(t, st.resp)
	want := openai.UsageOf(cr.Usage)
	if !cr.Usage.Reported || want.PromptTokens == 0 || want.CompletionTokens == 0 {
		t.Fatalf("the simulator reported no usage: %+v", cr.Usage)
	}
	got := st.usage
	details, _ := got["prompt_tokens_details"].(map[string]any)
	if got["prompt_tokens"] != float64(want.PromptTokens) || got["completion_tokens"] != float64(want.CompletionTokens) ||
		got["total_tokens"] != float64(want.TotalTokens) || details["cached_tokens"] != float64(cr.Usage.CacheReadTokens) {
		t.Errorf("usage %v, want %+v from %+v", got, want, cr.Usage)
	}
	if want.PromptTokens != cr.Usage.PromptTokens+cr.Usage.CacheReadTokens+cr.Usage.CacheWriteTokens {
		t.Errorf("prompt_tokens %d does not include the cached tokens of %+v", want.PromptTokens, cr.Usage)
	}
	if !strings.Contains(st.content, "> hello there") {
		t.Errorf("content %q", oaClip(st.content))
	}
}

func TestOpenAINonStreaming(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	resp, m := s.completionJSON(t, map[string]any{"model": "auto", "messages": []any{userMsg("tour")}})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %v", resp.StatusCode, m)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
	id, _ := m["id"].(string)
	if !strings.HasPrefix(id, "chatcmpl-") || m["object"] != "chat.completion" || m["model"] != "auto" {
		t.Errorf("id %v object %v model %v", m["id"], m["object"], m["model"])
	}
	if c, _ := m["created"].(float64); int64(c) < time.Now().Unix()-60 {
		t.Errorf("created %v", m["created"])
	}
	choices, _ := m["choices"].([]any)
	if len(choices) != 1 {
		t.Fatalf("choices %v", m["choices"])
	}
	ch := choices[0].(map[string]any)
	msg := ch["message"].(map[string]any)
	if ch["index"] != 0.0 || ch["finish_reason"] != "stop" || msg["role"] != "assistant" {
		t.Errorf("choice %v", ch)
	}
	if v, ok := msg["refusal"]; !ok || v != nil {
		t.Errorf("message.refusal %v, want null", v)
	}
	content, _ := msg["content"].(string)
	cr := s.storedResponse(t, resp)
	checkRendersResponse(t, content, cr)
	if h := resp.Header.Get("X-Docstream-Conversation-Id"); cr.ConversationID == nil || h != *cr.ConversationID {
		t.Errorf("X-Docstream-Conversation-Id %q: want the conversation, which a client sends as conversation_id", h)
	}
	if r, _ := msg["reasoning_content"].(string); r == "" || strings.Contains(content, r[:20]) {
		t.Errorf("reasoning_content %q", r)
	}
	u, _ := m["usage"].(map[string]any)
	want := openai.UsageOf(cr.Usage)
	if u["prompt_tokens"] != float64(want.PromptTokens) || u["completion_tokens"] != float64(want.CompletionTokens) || u["total_tokens"] != float64(want.TotalTokens) {
		t.Errorf("usage %v, want %+v", u, want)
	}
}

// TestOpenAIIgnoresUnknownParameters sends what frontends send by default.
func TestOpenAIIgnoresUnknownParameters(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	body := map[string]any{
		"model": "auto", "messages": []any{userMsg("hello")},
		"temperature": 0.7, "top_p": 1, "n": 1, "user": "u-123", "presence_penalty": 0, "frequency_penalty": 0,
		"max_tokens": 256, "max_completion_tokens": 256, "seed": 7, "stop": []string{"\n\n\n"}, "logit_bias": map[string]any{},
		"response_format": map[string]any{"type": "text"}, "parallel_tool_calls": true, "store": false, "metadata": map[string]any{"a": "b"},
		"tools":       []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": map[string]any{"type": "object"}}}},
		"tool_choice": "auto", "logprobs": false, "reasoning_effort": "low", "service_tier": "auto",
	}
	resp, m := s.completionJSON(t, body)
	if resp.StatusCode != 200 {
		t.Fatalf("non-streaming: status %d: %v", resp.StatusCode, m)
	}
	st := s.completionStream(t, body)
	if !slices.Equal(st.finishes, []string{"stop"}) || st.content == "" {
		t.Errorf("streaming: finishes %v, content %q", st.finishes, oaClip(st.content))
	}
}

// TestOpenAIOneChoice: a completion has one choice, so n absent, null or 1
// is served as ever, and any other n is refused before the agent runs,
// streaming or not, naming the parameter (a client asking for three choices
// silently got one).
func TestOpenAIOneChoice(t *testing.T) {
	t.Parallel()
	s := startServer(t, simLogEnv)
	for _, n := range []any{3, 2, 0, -1, 1.5, "3", "1", true, []any{1}, map[string]any{"n": 1}} {
		raw, _ := json.Marshal(n)
		for _, stream := range []bool{false, true} {
			resp := s.post(t, "/v1/chat/completions", map[string]any{"model": "auto", "n": n, "stream": stream, "messages": []any{userMsg("hello")}})
			b := readAll(t, resp)
			t.Run(fmt.Sprintf("n=%s stream=%v", raw, stream), func(t *testing.T) {
				checkOpenAIErrorParam(t, resp, b, http.StatusBadRequest, "invalid_request_error", "unsupported_value", "n")
			})
		}
	}
	if n := len(s.simStarts(t)); n != 0 {
		t.Errorf("%d agents started for refused requests", n)
	}
	for _, n := range []any{nil, 1, 1.0} {
		resp, m := s.completionJSON(t, map[string]any{"model": "auto", "n": n, "messages": []any{userMsg("hello")}})
		if choices, _ := m["choices"].([]any); resp.StatusCode != 200 || len(choices) != 1 {
			t.Errorf("n=%v: status %d, %d choices: %v", n, resp.StatusCode, len(choices), m)
		}
		st := s.completionStream(t, map[string]any{"model": "auto", "n": n, "messages": []any{userMsg("hello")}})
		if !slices.Equal(st.finishes, []string{"stop"}) || st.content == "" {
			t.Errorf("n=%v, streaming: finishes %v, content %q", n, st.finishes, oaClip(st.content))
		}
	}
}

// TestOpenAIErrorMidStream: once the stream has started, a failed run ends
// with an error object as data, then [DONE].
func TestOpenAIErrorMidStream(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	st := s.completionStream(t, map[string]any{"messages": []any{userMsg("fault:crash")}})
	if len(st.finishes) != 0 {
		t.Errorf("finish reasons %v on a failed run", st.finishes)
	}
	if st.errObj == nil {
		t.Fatalf("no error object in the stream:\n%s", oaTail(st.raw, 800))
	}
	if n := len(st.chunks); st.chunks[n-1]["error"] == nil {
		t.Errorf("the error is not the last data before [DONE]")
	}
	msg, _ := st.errObj["message"].(string)
	if !strings.Contains(msg, "exited") || strings.Contains(msg, "```") || strings.Contains(msg, "**") {
		t.Errorf("error message %q: want the error document's text, plain", msg)
	}
	if st.errObj["type"] != "server_error" || st.errObj["code"] != "agent_exit" {
		t.Errorf("error %v", st.errObj)
	}
	if _, ok := st.errObj["param"]; !ok {
		t.Errorf("error without param: %v", st.errObj)
	}
	// What came before the failure is kept.
	if !strings.Contains(st.content, "**Error:**") {
		t.Errorf("content %q", oaClip(st.content))
	}

	// Non-streaming: a 502 in OpenAI's shape that SDKs must not retry.
	resp := s.post(t, "/v1/chat/completions", map[string]any{"messages": []any{userMsg("fault:crash")}})
	b := readAll(t, resp)
	checkOpenAIError(t, resp, b, http.StatusBadGateway, "server_error", "agent_exit")
	if resp.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("X-Should-Retry %q: a retry would run the agent again", resp.Header.Get("X-Should-Retry"))
	}
	if strings.Contains(string(b), "I'll build the project first") {
		t.Errorf("the error message holds the whole transcript: %s", b)
	}
}

func TestOpenAIErrorsBeforeStream(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	tests := []struct {
		name  string
		body  any
		code  string
		param string // the parameter the error names, "" for none
	}{
		{"not JSON", `{"messages": [`, "bad_json", ""},
		{"empty body", ``, "bad_json", ""},
		{"no messages", map[string]any{"model": "auto"}, "no_messages", "messages"},
		{"no user message", map[string]any{"messages": []any{map[string]any{"role": "system", "content": "Be brief."}}}, "no_user_message", ""},
		{"messages of the wrong type", map[string]any{"messages": "hello"}, "bad_field", "messages"},
		{"unknown model", map[string]any{"model": "gpt-nope", "messages": []any{userMsg("hi")}}, "unknown_model", "model"},
		{"unknown model, streaming", map[string]any{"model": "gpt-nope", "stream": true, "messages": []any{userMsg("hi")}}, "unknown_model", "model"},
		{"bad mode", map[string]any{"mode": "yolo", "messages": []any{userMsg("hi")}}, "", ""},
		{"a model that is not a name", map[string]any{"model": "--force", "messages": []any{userMsg("hi")}}, "bad_model", "model"},
		{"a model with a space", map[string]any{"model": "a b", "messages": []any{userMsg("hi")}}, "bad_model", "model"},
		{"content a number", map[string]any{"messages": []any{map[string]any{"role": "user", "content": 5}}}, "bad_field", "messages/0/content"},
		{"content an object", map[string]any{"messages": []any{map[string]any{"role": "user", "content": map[string]any{"a": 1}}}}, "bad_field", "messages/0/content"},
		{"content parts not objects", map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{1}}}}, "bad_field", "messages/0/content"},
		{"content null", map[string]any{"messages": []any{map[string]any{"role": "user", "content": nil}}}, "empty_prompt", ""},
		{"content blank", map[string]any{"messages": []any{userMsg("   ")}}, "empty_prompt", ""},
		{"content parts without text", map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "image_url"}}}}}, "empty_prompt", ""},
		{"stream a string", map[string]any{"stream": "yes", "messages": []any{userMsg("hi")}}, "bad_field", "stream"},
		{"role a number", map[string]any{"messages": []any{map[string]any{"role": 5, "content": "hi"}}}, "bad_field", "messages/0/role"},
		// The agent would run the user message before them again.
		{"ends with an assistant message", map[string]any{"messages": []any{userMsg("echo delete build/"), map[string]any{"role": "assistant", "content": "Deleted."}}}, "last_message_not_user", ""},
		{"ends with a tool result", map[string]any{"messages": []any{userMsg("echo delete build/"),
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "run", "arguments": "{}"}}}},
			map[string]any{"role": "tool", "tool_call_id": "c1", "content": "done"}}}, "last_message_not_user", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := s.post(t, "/v1/chat/completions", tt.body)
			b := readAll(t, resp)
			checkOpenAIErrorParam(t, resp, b, http.StatusBadRequest, "invalid_request_error", tt.code, tt.param)
			if strings.Contains(string(b), "<nil>") {
				t.Errorf("the message says nothing: %s", b)
			}
		})
	}
	if starts := s.agentProcesses(); len(starts) != 0 {
		t.Errorf("agents running after rejected requests: %v", starts)
	}
}

func TestOpenAIModels(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	resp, b := s.oaGet(t, "/v1/models")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /v1/models: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var list struct {
		Object string           `json:"object"`
		Data   []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range list.Data {
		id, _ := m["id"].(string)
		ids = append(ids, id)
		if m["object"] != "model" || m["owned_by"] == "" || m["created"] == nil {
			t.Errorf("model %v", m)
		}
	}
	if list.Object != "list" || !slices.Equal(ids, []string{"auto", "sim-fast", "sim-smart"}) {
		t.Errorf("object %q ids %v, want list of auto, sim-fast, sim-smart", list.Object, ids)
	}
	resp, b = s.oaGet(t, "/v1/models/sim-smart")
	var one map[string]any
	if err := json.Unmarshal(b, &one); err != nil || resp.StatusCode != 200 || one["id"] != "sim-smart" || one["object"] != "model" {
		t.Errorf("GET /v1/models/sim-smart: %d %s", resp.StatusCode, b)
	}
	resp, b = s.oaGet(t, "/v1/models/gpt-nope")
	checkOpenAIError(t, resp, b, http.StatusNotFound, "invalid_request_error", "model_not_found")

	// The other methods are answered 405 in OpenAI's shape, with Allow.
	for _, r := range []struct{ method, path, allow string }{
		{http.MethodGet, "/v1/chat/completions", "POST"}, {http.MethodPut, "/v1/chat/completions", "POST"},
		{http.MethodDelete, "/v1/chat/completions", "POST"}, {http.MethodPatch, "/v1/chat/completions", "POST"},
		{http.MethodPost, "/v1/models", "GET, HEAD"}, {http.MethodDelete, "/v1/models/sim-smart", "GET, HEAD"},
	} {
		resp, err := http.DefaultClient.Do(newRequest(t, r.method, s.URL+r.path, nil))
		if err != nil {
			t.Fatal(err)
		}
		b := readAll(t, resp)
		checkOpenAIError(t, resp, b, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed")
		if got := resp.Header.Get("Allow"); got != r.allow {
			t.Errorf("%s %s: Allow %q, want %q", r.method, r.path, got, r.allow)
		}
	}

	// A listed model is accepted and echoed in the chunks.
	st := s.completionStream(t, map[string]any{"model": "sim-smart", "messages": []any{userMsg("hi")}})
	if st.chunks[0]["model"] != "sim-smart" {
		t.Errorf("chunk model %v", st.chunks[0]["model"])
	}
}

// TestOpenAIRenderToolCalls asks for tool calls per request
// ("docstream_render"): tool documents become delta.tool_calls with ids
// free of control characters, and the choice finishes with "tool_calls".
func TestOpenAIRenderToolCalls(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	st := s.completionStream(t, map[string]any{"messages": []any{userMsg("tour")}, "docstream_render": "tool_calls"})
	if len(st.toolCalls) < 10 {
		t.Fatalf("%d tool calls in the tour", len(st.toolCalls))
	}
	names := map[string]bool{}
	for i, tc := range st.toolCalls {
		fn, _ := tc["function"].(map[string]any)
		name, _ := fn["name"].(string)
		args, _ := fn["arguments"].(string)
		if tc["index"] != float64(i) || tc["id"] == "" || tc["id"] == nil || tc["type"] != "function" || name == "" {
			t.Errorf("tool call %d: %v", i, tc)
		}
		if id, _ := tc["id"].(string); strings.ContainsAny(id, "\n\r\t ") {
			t.Errorf("tool call %d: id %q holds a control character", i, id)
		}
		var a map[string]any
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			t.Errorf("tool call %d arguments are not a JSON object: %q", i, args)
		}
		names[name] = true
	}
	for _, n := range []string{"list_dir", "read_file", "grep"} {
		if !names[n] {
			t.Errorf("no %s tool call; got %v", n, names)
		}
	}
	for i, c := range st.chunks {
		ch := c["choices"].([]any)[0].(map[string]any)
		d := ch["delta"].(map[string]any)
		if _, ok := d["tool_calls"]; ok {
			if _, ok := d["content"]; ok {
				t.Errorf("chunk %d has tool calls and content", i)
			}
		}
	}
	for _, no := range []string{"```diff", "```shell", "### Plan", "**Tasks:**", "> `read_file`"} {
		if strings.Contains(st.content, no) {
			t.Errorf("tool_calls mode renders %q in the content", no)
		}
	}
	if !strings.Contains(st.content, "I'll give you a tour") || !strings.Contains(st.content, "`src/main.py:12-14`") {
		t.Errorf("content %q", oaClip(st.content))
	}
	if !slices.Equal(st.finishes, []string{"tool_calls"}) {
		t.Errorf("finishes %v", st.finishes)
	}

	resp, m := s.completionJSON(t, map[string]any{"messages": []any{userMsg("tour")}, "docstream_render": "tool_calls"})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, m)
	}
	choice := m["choices"].([]any)[0].(map[string]any)
	msg := choice["message"].(map[string]any)
	if tcs, _ := msg["tool_calls"].([]any); len(tcs) != len(st.toolCalls) {
		t.Errorf("non-streaming: %d tool calls, streaming %d", len(tcs), len(st.toolCalls))
	}
	if choice["finish_reason"] != "tool_calls" {
		t.Errorf("non-streaming finish_reason %v", choice["finish_reason"])
	}
	// Without the field, the same server renders markdown and stops.
	plain := s.completionStream(t, map[string]any{"messages": []any{userMsg("tour")}})
	if len(plain.toolCalls) != 0 || !slices.Equal(plain.finishes, []string{"stop"}) || !strings.Contains(plain.content, "```") {
		t.Errorf("the default render sent %d tool calls, finishes %v", len(plain.toolCalls), plain.finishes)
	}
}

// TestOpenAIRefusesWhatItCannotHonour checks that a request asking what the
// agent cannot do is a 400 naming the parameter, never silently dropped:
// an image with the CLI backend, a tool choice other than auto or none, an
// unknown render; tools with auto are accepted.
func TestOpenAIRefusesWhatItCannotHonour(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	image := map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": "what is this?"},
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64,AAAA"}}}}
	tool := map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": map[string]any{"type": "object"}}}
	for _, c := range []struct {
		body        map[string]any
		code, param string
	}{
		{map[string]any{"messages": []any{userMsg("hi"), image}}, "unsupported_content", "messages/1/content/1"},
		{map[string]any{"messages": []any{userMsg("hi")}, "tools": []any{tool}, "tool_choice": "required"}, "unsupported_value", "tool_choice"},
		{map[string]any{"messages": []any{userMsg("hi")}, "tools": []any{tool},
			"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}}, "unsupported_value", "tool_choice"},
		{map[string]any{"messages": []any{userMsg("hi")}, "docstream_render": "html"}, "unsupported_value", "docstream_render"},
	} {
		resp, m := s.completionJSON(t, c.body)
		e, _ := m["error"].(map[string]any)
		if resp.StatusCode != 400 || e["code"] != c.code || e["param"] != c.param {
			t.Errorf("%v: %d %v, want 400 %s naming %s", c.body, resp.StatusCode, m, c.code, c.param)
		}
	}
	for _, choice := range []any{"auto", "none", nil} {
		body := map[string]any{"messages": []any{userMsg("hi")}, "tools": []any{tool}}
		if choice != nil {
			body["tool_choice"] = choice
		}
		if resp, m := s.completionJSON(t, body); resp.StatusCode != 200 {
			t.Errorf("tools with tool_choice %v: %d %v", choice, resp.StatusCode, m)
		}
	}
}

func TestOpenAIRenderTextOnlyThink(t *testing.T) {
	t.Parallel()
	s := startServer(t, "DOCSTREAM_OPENAI_RENDER=text-only", "DOCSTREAM_OPENAI_REASONING=think")
	st := s.completionStream(t, map[string]any{"messages": []any{userMsg("tour")}})
	if len(st.toolCalls) != 0 || st.reasoning != "" {
		t.Errorf("text-only sent %d tool calls, reasoning %q", len(st.toolCalls), st.reasoning)
	}
	for _, no := range []string{"```diff", "```shell", "### Plan", "**Tasks:**", "> `read_file`", "rejected, not run"} {
		if strings.Contains(st.content, no) {
			t.Errorf("text-only renders %q", no)
		}
	}
	for _, want := range []string{"I'll give you a tour", "`src/main.py:12-14`\n```python", "## Summary"} {
		if !strings.Contains(st.content, want) {
			t.Errorf("text-only lacks %q", want)
		}
	}
	if !strings.HasPrefix(st.content, "<think>\n") || strings.Count(st.content, "<think>") != strings.Count(st.content, "</think>") {
		t.Errorf("think tags unbalanced: %q", oaClip(st.content))
	}
	// A plan run shows nothing but thinking in text-only: the block is closed.
	st = s.completionStream(t, map[string]any{"mode": "plan", "messages": []any{userMsg("plan the work")}})
	if !strings.HasPrefix(st.content, "<think>\n") || !strings.HasSuffix(strings.TrimSpace(st.content), "</think>") {
		t.Errorf("plan in text-only with think tags: %q", st.content)
	}
	resp, m := s.completionJSON(t, map[string]any{"mode": "plan", "messages": []any{userMsg("plan the work")}})
	msg := m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if c, _ := msg["content"].(string); resp.StatusCode != 200 || c != st.content {
		t.Errorf("non-streaming content %q, streaming %q", c, st.content)
	}
}

func TestOpenAIReasoningThinkOff(t *testing.T) {
	t.Parallel()
	t.Run("think", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, "DOCSTREAM_OPENAI_REASONING=think")
		st := s.completionStream(t, map[string]any{"messages": []any{userMsg("hello")}})
		if st.reasoning != "" {
			t.Errorf("reasoning_content %q with think tags", st.reasoning)
		}
		if !strings.HasPrefix(st.content, "<think>\nThe user sent a prompt") || !strings.Contains(st.content, "</think>\n\nYou asked:") {
			t.Errorf("content %q", oaClip(st.content))
		}
		resp, m := s.completionJSON(t, map[string]any{"messages": []any{userMsg("hello")}})
		msg := m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
		if _, ok := msg["reasoning_content"]; ok || resp.StatusCode != 200 || msg["content"] != st.content {
			t.Errorf("non-streaming message %v", msg)
		}
	})
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, "DOCSTREAM_OPENAI_REASONING=off")
		st := s.completionStream(t, map[string]any{"messages": []any{userMsg("tour")}})
		if st.reasoning != "" || strings.Contains(st.content, "<think>") || strings.Contains(st.content, "The user wants a tour") {
			t.Errorf("reasoning off: reasoning %q content %q", st.reasoning, oaClip(st.content))
		}
		for i, c := range st.chunks {
			d := c["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
			if _, ok := d["reasoning_content"]; ok {
				t.Errorf("chunk %d has reasoning_content", i)
			}
		}
	})
}

// TestOpenAIKeepalive: heartbeats on the OpenAI route are SSE comments.
func TestOpenAIKeepalive(t *testing.T) {
	t.Parallel()
	s := startServer(t, "DOCSTREAM_AGENT_ARGS_PREFIX=agent-sim,--sim-speed=1", "DOCSTREAM_SERVER_HEARTBEAT=50ms")
	st := s.completionStream(t, map[string]any{"messages": []any{userMsg("long:3")}})
	if n := strings.Count(st.raw, ": keepalive\r\n\r\n"); n == 0 {
		t.Errorf("no keepalive comment in %s", oaTail(st.raw, 300))
	}
	for _, line := range strings.Split(st.raw, "\r\n") {
		if line != "" && !strings.HasPrefix(line, "data: ") && line != ": keepalive" {
			t.Errorf("unexpected line %q", line)
		}
	}
	if !slices.Equal(st.finishes, []string{"stop"}) || !strings.Contains(st.content, "\n\n") {
		t.Errorf("finishes %v content %q", st.finishes, oaClip(st.content))
	}
}

func TestOpenAICORSAndAuth(t *testing.T) {
	t.Parallel()
	const origin = "http://localhost:3000"
	s := startServer(t, "DOCSTREAM_AUTH_API_KEYS=k1,k2", "DOCSTREAM_SERVER_CORS_ORIGINS="+origin)
	for _, path := range []string{"/v1/chat/completions", "/v1/models"} {
		req, _ := http.NewRequest(http.MethodOptions, s.URL+path, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, x-stainless-os, x-stainless-lang, content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("OPTIONS %s without a key: %d, want 204", path, resp.StatusCode)
		}
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != origin {
			t.Errorf("OPTIONS %s: Access-Control-Allow-Origin %q", path, got)
		}
		allowed := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers"))
		for _, h := range []string{"authorization", "x-stainless-os", "x-stainless-lang", "content-type"} {
			if !strings.Contains(allowed, h) {
				t.Errorf("OPTIONS %s: %s not in Access-Control-Allow-Headers %q", path, h, allowed)
			}
		}
		if m := resp.Header.Get("Access-Control-Allow-Methods"); !strings.Contains(m, "POST") || !strings.Contains(m, "GET") {
			t.Errorf("OPTIONS %s: Access-Control-Allow-Methods %q", path, m)
		}
	}

	body := map[string]any{"messages": []any{userMsg("hi")}}
	resp := s.post(t, "/v1/chat/completions", body, "Origin", origin)
	b := readAll(t, resp)
	checkOpenAIError(t, resp, b, http.StatusUnauthorized, "authentication_error", "")
	if resp.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Errorf("the 401 is not readable by the page: no Access-Control-Allow-Origin")
	}
	resp = s.post(t, "/v1/chat/completions", body, "Authorization", "Bearer wrong")
	checkOpenAIError(t, resp, readAll(t, resp), http.StatusUnauthorized, "authentication_error", "")
	r, b := s.oaGet(t, "/v1/models")
	checkOpenAIError(t, r, b, http.StatusUnauthorized, "authentication_error", "")

	for _, h := range [][]string{{"Authorization", "Bearer k2"}, {"x-api-key", "k1"}} {
		resp, m := s.completionJSON(t, body, h...)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %v", h[0], resp.StatusCode, m)
		}
	}
	if r, b := s.oaGet(t, "/v1/models", "Authorization", "Bearer k1"); r.StatusCode != 200 {
		t.Errorf("GET /v1/models with a key: %d %s", r.StatusCode, b)
	}
}

// TestOpenAIAnyBearerWhileAuthOff: frontends always send some key.
func TestOpenAIAnyBearerWhileAuthOff(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for _, key := range []string{"sk-anything", "x", ""} {
		h := []string{"Authorization", "Bearer " + key}
		if r, b := s.oaGet(t, "/v1/models", h...); r.StatusCode != 200 {
			t.Errorf("GET /v1/models with bearer %q: %d %s", key, r.StatusCode, b)
		}
		if resp, m := s.completionJSON(t, map[string]any{"messages": []any{userMsg("hi")}}, h...); resp.StatusCode != 200 {
			t.Errorf("completion with bearer %q: %d %v", key, resp.StatusCode, m)
		}
	}
}

// TestOpenAIPromptFolding checks the prompt the agent gets for a message
// history, through the simulator's log.
func TestOpenAIPromptFolding(t *testing.T) {
	t.Parallel()
	s := startServer(t, simLogEnv)
	sys := map[string]any{"role": "system", "content": "Answer in French."}
	dev := map[string]any{"role": "developer", "content": "Be brief."}
	asst := map[string]any{"role": "assistant", "content": "Bonjour."}
	parts := map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": "echo the last"},
		map[string]any{"type": "text", "text": "question"},
	}}
	tests := []struct {
		name string
		msgs []any
		want string
	}{
		{"one user message, verbatim", []any{userMsg("echo  spaced\n\ttext ")}, "echo  spaced\n\ttext "},
		{"system and history folded, last message verbatim at the end", []any{sys, dev, userMsg("Say hello"), asst, parts},
			"<instructions>\nAnswer in French.\n\nBe brief.\n</instructions>\n\n" +
				"<conversation_so_far>\nuser: Say hello\n\nassistant: Bonjour.\n</conversation_so_far>\n\n" +
				"echo the last\nquestion"},
		{"system only", []any{sys, userMsg("echo x")}, "<instructions>\nAnswer in French.\n</instructions>\n\necho x"},
	}
	for _, tt := range tests {
		before := len(s.simStarts(t))
		resp, m := s.completionJSON(t, map[string]any{"messages": tt.msgs})
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v", tt.name, resp.StatusCode, m)
		}
		starts := s.simStarts(t)
		if len(starts) != before+1 {
			t.Fatalf("%s: %d agent starts logged, want %d (is DOCSTREAM_SIM_LOG reaching the simulator?)", tt.name, len(starts), before+1)
		}
		got, _ := starts[len(starts)-1]["prompt"].(string)
		if got != tt.want {
			t.Errorf("%s: prompt\n got %q\nwant %q", tt.name, got, tt.want)
		}
		if argv := argvOf(starts[len(starts)-1]); slices.Contains(argv, "--resume") {
			t.Errorf("%s: resumed a session: %v", tt.name, argv)
		}
	}

	// Bounded: a huge system prompt and history are clipped, the last
	// message still goes through whole, last.
	huge := strings.Repeat("word ", 60000)
	last := "echo " + strings.Repeat("q", 1000)
	resp, m := s.completionJSON(t, map[string]any{"messages": []any{
		map[string]any{"role": "system", "content": huge}, userMsg(huge), map[string]any{"role": "assistant", "content": huge}, userMsg(last)}})
	if resp.StatusCode != 200 {
		t.Fatalf("huge history: %d %v", resp.StatusCode, m)
	}
	starts := s.simStarts(t)
	got, _ := starts[len(starts)-1]["prompt"].(string)
	if len(got) > 128<<10 || !strings.HasSuffix(got, "\n\n"+last) || !strings.HasPrefix(got, "<instructions>\n") {
		t.Errorf("huge history folded into %d bytes (max %d), ends %q", len(got), 128<<10, oaTail(got, 40))
	}
}

// TestOpenAIResumeByHistory: a frontend that sends the history back resumes
// the agent session that produced it, with only the new message as prompt.
func TestOpenAIResumeByHistory(t *testing.T) {
	t.Parallel()
	s := startServer(t, simLogEnv)
	// The tour's parallel tools finish out of order: the reply the client
	// got is in finishing order, not in the order of documents[].
	for _, tt := range []struct {
		q1     string
		stream bool
	}{{"echo first json", false}, {"echo first stream", true}, {"tour", true}, {"tour please", false}} {
		q1, stream := tt.q1, tt.stream
		var reply string
		if stream {
			reply = s.completionStream(t, map[string]any{"messages": []any{userMsg(q1)}}).content
		} else {
			resp, m := s.completionJSON(t, map[string]any{"messages": []any{userMsg(q1)}})
			if resp.StatusCode != 200 {
				t.Fatalf("%d %v", resp.StatusCode, m)
			}
			reply = m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
		}
		first := s.simStarts(t)
		// At once, as a client does.
		resp, m := s.completionJSON(t, map[string]any{"messages": []any{userMsg(q1),
			map[string]any{"role": "assistant", "content": reply}, userMsg("echo second")}})
		if resp.StatusCode != 200 {
			t.Fatalf("%d %v", resp.StatusCode, m)
		}
		starts := s.simStarts(t)
		if len(starts) != len(first)+1 {
			t.Fatalf("starts: %d then %d", len(first), len(starts))
		}
		st := starts[len(starts)-1]
		if p, _ := st["prompt"].(string); p != "echo second" {
			t.Errorf("%q stream %v: resumed prompt %q, want only the new message", q1, stream, oaClip(p))
		}
		argv := argvOf(st)
		i := slices.Index(argv, "--resume")
		if i < 0 || i+1 >= len(argv) || argv[i+1] == "" {
			t.Errorf("%q stream %v: the known history did not resume its session: %v", q1, stream, argv)
		}
		// The second question edited (or regenerated): the session has
		// moved past that history, so it goes to a new session with the
		// history folded in, not to the session that holds the old turn.
		if resp, m := s.completionJSON(t, map[string]any{"messages": []any{userMsg(q1),
			map[string]any{"role": "assistant", "content": reply}, userMsg("echo second, edited")}}); resp.StatusCode != 200 {
			t.Fatalf("%d %v", resp.StatusCode, m)
		}
		edited := s.simStarts(t)
		if argv := argvOf(edited[len(edited)-1]); slices.Contains(argv, "--resume") {
			t.Errorf("%q stream %v: an edited turn resumed the session that holds the turn it replaces: %v", q1, stream, argv)
		}
	}
	// A history that was never answered here is folded instead.
	resp, m := s.completionJSON(t, map[string]any{"messages": []any{userMsg("echo a"),
		map[string]any{"role": "assistant", "content": "made up"}, userMsg("echo b")}})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, m)
	}
	starts := s.simStarts(t)
	if argv := argvOf(starts[len(starts)-1]); slices.Contains(argv, "--resume") {
		t.Errorf("an unknown history resumed a session: %v", argv)
	}
}

// TestOpenAIModelIDWithSlash checks that a listed model id holding '/' is
// found when a client escapes it as one path segment, as the SDKs do.
func TestOpenAIModelIDWithSlash(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	s.stop(t)
	cfg := "openai:\n  aliases:\n    team/fast: {model: sim-fast}\n"
	if err := os.WriteFile(filepath.Join(s.Dir, "config.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s.start(t)
	_, b := s.oaGet(t, "/v1/models")
	if !strings.Contains(string(b), `"team/fast"`) {
		t.Fatalf("the alias is not listed: %s", b)
	}
	for _, path := range []string{"/v1/models/team%2Ffast", "/v1/models/team%2ffast"} {
		resp, b := s.oaGet(t, path)
		var one map[string]any
		if err := json.Unmarshal(b, &one); err != nil || resp.StatusCode != 200 || one["id"] != "team/fast" {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
		}
	}
	resp, b := s.oaGet(t, "/v1/models/team%2Fslow")
	checkOpenAIError(t, resp, b, http.StatusNotFound, "invalid_request_error", "model_not_found")
}

// TestOpenAIResumeByHistoryThink checks that with the reasoning inline in
// <think> blocks, a history resent with or without them resumes.
func TestOpenAIResumeByHistoryThink(t *testing.T) {
	t.Parallel()
	s := startServer(t, simLogEnv, "DOCSTREAM_OPENAI_RENDER=text-only", "DOCSTREAM_OPENAI_REASONING=think")
	for _, strip := range []bool{false, true} {
		q1 := fmt.Sprintf("tour %v", strip)
		reply := s.completionStream(t, map[string]any{"messages": []any{userMsg(q1)}}).content
		if !strings.Contains(reply, "</think>") {
			t.Fatalf("the reply has no think block to test with: %q", oaClip(reply))
		}
		if strip {
			reply = regexp.MustCompile(`(?s)<think>.*?</think>`).ReplaceAllString(reply, "")
		}
		resp, m := s.completionJSON(t, map[string]any{"messages": []any{userMsg(q1),
			map[string]any{"role": "assistant", "content": reply}, userMsg("echo second")}})
		if resp.StatusCode != 200 {
			t.Fatalf("%d %v", resp.StatusCode, m)
		}
		starts := s.simStarts(t)
		if argv := argvOf(starts[len(starts)-1]); !slices.Contains(argv, "--resume") {
			t.Errorf("think blocks removed %v: the history did not resume its session: %v", strip, argv)
		}
	}
}

func argvOf(start map[string]any) []string {
	var out []string
	a, _ := start["argv"].([]any)
	for _, v := range a {
		s, _ := v.(string)
		out = append(out, s)
	}
	return out
}

// TestOpenAIErrorNonASCIIStderr: the agent's stderr is clipped into the
// streamed error; clipped within a character, it made the error object
// invalid JSON (the stream sent `{"error":{"message"` and [DONE]).
func TestOpenAIErrorNonASCIIStderr(t *testing.T) {
	t.Parallel()
	agent := scriptAgent(t, `awk 'BEGIN { s = "x"; for (i = 0; i < 3000; i++) s = s "é"; print s > "/dev/stderr" }'
exit 1`)
	s := startServer(t, "DOCSTREAM_AGENT_BINARY="+agent)
	st := s.completionStream(t, map[string]any{"messages": []any{userMsg("hi")}, "workspace": "main"})
	msg, _ := st.errObj["message"].(string)
	if st.errObj == nil || !strings.Contains(msg, "éé") || !utf8.ValidString(msg) {
		t.Fatalf("the error object: %v\n%s", st.errObj, oaTail(st.raw, 400))
	}
}

// TestOpenAIModelsAbandoned: the first GET /v1/models runs the agent's
// model listing; a client that hung up before it finished had its
// cancellation cached as the list (only "auto") for a minute.
func TestOpenAIModelsAbandoned(t *testing.T) {
	t.Parallel()
	agent := scriptAgent(t, `case "$*" in *models*) sleep 1; echo "m1 - Model One";; esac`)
	s := startServer(t, "DOCSTREAM_AGENT_BINARY="+agent)
	client := &http.Client{Timeout: 200 * time.Millisecond}
	if resp, err := client.Get(s.URL + "/v1/models"); err == nil {
		resp.Body.Close()
		t.Fatalf("the listing answered within 200 ms; the test needs it slower")
	}
	resp, b := s.oaGet(t, "/v1/models/m1")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/models/m1 after a client gave up: %d %s", resp.StatusCode, b)
	}
}

// TestAliasOnNativeChat checks that a configured alias, which /v1/models
// lists and an unknown model's error offers, runs its model on /v1/chat as
// on the OpenAI route (it reached the agent as the alias's own name).
func TestAliasOnNativeChat(t *testing.T) {
	t.Parallel()
	s := startServer(t, simLogEnv)
	s.stop(t)
	cfg := "openai:\n  aliases:\n    cursor-fast: {model: sim-fast}\n"
	if err := os.WriteFile(filepath.Join(s.Dir, "config.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s.start(t)
	modelArg := func() string {
		starts := s.simStarts(t)
		argv := argvOf(starts[len(starts)-1])
		if i := slices.Index(argv, "--model"); i >= 0 && i+1 < len(argv) {
			return argv[i+1]
		}
		return ""
	}
	r := s.chatJSON(t, map[string]any{"model": "cursor-fast", "prompt": "echo hi"})
	if r.Status != documents.StatusCompleted {
		t.Fatalf("/v1/chat with an alias: status %s", r.Status)
	}
	if m := modelArg(); m != "sim-fast" {
		t.Errorf("/v1/chat with an alias ran --model %q, want sim-fast", m)
	}
	if resp, m := s.completionJSON(t, map[string]any{"model": "cursor-fast", "messages": []any{userMsg("echo hi")}}); resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, m)
	}
	if m := modelArg(); m != "sim-fast" {
		t.Errorf("/v1/chat/completions with an alias ran --model %q, want sim-fast", m)
	}
}
