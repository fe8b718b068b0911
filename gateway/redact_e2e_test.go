package gateway_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// leakyAgent prints the key it was given (sk-live-0123456789) in a text
// cut across two lines, a shell tool's output, a code block and its
// result, as an agent talked into printing its environment would.
const leakyAgent = `printf '%s\n' '{"type":"system","subtype":"init","cwd":"/w","session_id":"s-leak","model":"auto"}'
printf '%s\n' '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"The key is sk-li"}]},"timestamp_ms":1}'
printf '%s\n' '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"ve-0123456789, and more.\n\n"}]},"timestamp_ms":2}'
printf '%s\n' '{"type":"tool_call","subtype":"started","call_id":"c1","tool_call":{"shellToolCall":{"args":{"command":"env"}}}}'
printf '%s\n' '{"type":"tool_call","subtype":"completed","call_id":"c1","tool_call":{"shellToolCall":{"args":{"command":"env"},"result":{"success":{"command":"env","exitCode":0,"stdout":"CURSOR_API_KEY=sk-live-0123456789\nHOME=/root\n","stderr":""}}}}}'
printf '%s\n' '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"` + "```" + `sh\nexport CURSOR_API_KEY=sk-live-0123456789\n` + "```" + `\n"}]},"timestamp_ms":3}'
printf '%s\n' '{"type":"result","subtype":"success","is_error":false,"result":"The key is sk-live-0123456789","session_id":"s-leak"}'
`

// TestSecretsNeverLeave runs an agent that prints its key on every surface
// and checks that no byte a client gets, and none the store keeps, holds it.
func TestSecretsNeverLeave(t *testing.T) {
	t.Parallel()
	const key = "sk-live-0123456789"
	agent := scriptAgent(t, leakyAgent)
	s := startE2E(t, "DOCSTREAM_AGENT_BINARY="+agent, "DOCSTREAM_AGENT_API_KEY="+key, "DOCSTREAM_AUTH_RATE_PER_MINUTE=0")
	check := func(what string, b []byte) {
		t.Helper()
		if bytes.Contains(b, []byte(key)) || bytes.Contains(b, []byte("0123456789")) {
			t.Errorf("%s holds the key:\n%s", what, b)
		}
		if !bytes.Contains(b, []byte("[redacted]")) {
			t.Errorf("%s shows no [redacted]:\n%s", what, b)
		}
	}
	resp := s.post(t, "/v1/chat", map[string]any{"prompt": "hi", "workspace": "main", "stream": true})
	id := resp.Header.Get("X-Docstream-Response-Id")
	stream := readAll(t, resp)
	check("the SSE stream", stream)
	if cr := s.e2eGetChat(t, id); len(cr.Documents) == 0 || !strings.Contains(str(cr.Documents[0].Content), "The key is [redacted], and more.") {
		t.Errorf("the text around the key is not kept: %+v", cr.Documents)
	}
	check("the JSON response", s.e2eGetJSON(t, "/v1/chat/"+id, 200, nil))
	check("the JSON answer", readAll(t, s.post(t, "/v1/chat", map[string]any{"prompt": "hi", "workspace": "main"})))
	check("the chat completion", readAll(t, s.post(t, "/v1/chat/completions",
		map[string]any{"model": "auto", "messages": []map[string]any{{"role": "user", "content": "hi"}}})))
	check("the chat completion chunks", readAll(t, s.post(t, "/v1/chat/completions",
		map[string]any{"model": "auto", "stream": true, "messages": []map[string]any{{"role": "user", "content": "hi"}}})))
	s.stop(t)
	files, _ := filepath.Glob(filepath.Join(s.Dir, "data", "docstream.db*"))
	if len(files) == 0 {
		t.Fatal("no store file")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(key)) {
			t.Errorf("the store (%s) holds the key", filepath.Base(f))
		}
	}
}
