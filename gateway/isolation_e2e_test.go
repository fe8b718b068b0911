package gateway_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/cloud/cloudtest"
	"github.com/docstream/docstream/documents"
)

// tenants is a server with two API keys, A (configured plain) and B
// (configured as its digest), and a client for each.
type tenants struct {
	s          *testServer
	keyA, keyB string
}

func startTenants(t *testing.T, isolate bool) *tenants {
	t.Helper()
	keyA, keyB := e2eMarker("key-a"), e2eMarker("key-b")
	sum := sha256.Sum256([]byte(keyB))
	env := []string{"DOCSTREAM_AUTH_API_KEYS=" + keyA + ",sha256:" + hex.EncodeToString(sum[:]), "DOCSTREAM_AUTH_RATE_PER_MINUTE=0"}
	if isolate {
		env = append(env, "DOCSTREAM_AUTH_ISOLATE_KEYS=true")
	}
	return &tenants{s: startE2E(t, env...), keyA: keyA, keyB: keyB}
}

// do sends a request with the key.
func (tn *tenants) do(t *testing.T, key, method, path string, body any) *http.Response {
	t.Helper()
	return tn.s.e2eDo(t, method, path, body, "Authorization", "Bearer "+key)
}

// chat posts a non-streaming /v1/chat request with the key.
func (tn *tenants) chat(t *testing.T, key string, body map[string]any) documents.ChatResponse {
	t.Helper()
	resp := tn.do(t, key, http.MethodPost, "/v1/chat", body)
	b := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("POST /v1/chat %v: status %d: %s", body, resp.StatusCode, b)
	}
	var cr documents.ChatResponse
	if err := json.Unmarshal(b, &cr); err != nil {
		t.Fatal(err)
	}
	return cr
}

// complete posts a non-streaming chat completion with the key and returns
// the reply and the response id.
func (tn *tenants) complete(t *testing.T, key string, body map[string]any) (string, string) {
	t.Helper()
	body["model"] = "auto"
	resp := tn.do(t, key, http.MethodPost, "/v1/chat/completions", body)
	b := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("completion: status %d: %s", resp.StatusCode, b)
	}
	var ans e2eCompletion
	if err := json.Unmarshal(b, &ans); err != nil || len(ans.Choices) != 1 {
		t.Fatalf("completion: %v %s", err, b)
	}
	return ans.Choices[0].Message.Content, resp.Header.Get("X-Docstream-Response-Id")
}

// answer is a response as a client can tell it apart from another: its
// status and body, with the id it was about replaced.
type answer struct {
	Status int
	Body   string
}

func answerOf(t *testing.T, resp *http.Response, id string) answer {
	t.Helper()
	b := readAll(t, resp)
	return answer{resp.StatusCode, strings.ReplaceAll(string(b), id, "<id>")}
}

// sameAsUnknown checks that what B is answered about A's object (id) is
// what B is answered about an unknown one, and that it is the want status.
func (tn *tenants) sameAsUnknown(t *testing.T, what string, want int, send func(key, id string) *http.Response, id, unknown string) {
	t.Helper()
	got := answerOf(t, send(tn.keyB, id), id)
	ref := answerOf(t, send(tn.keyB, unknown), unknown)
	if got != ref || got.Status != want {
		t.Errorf("%s: another key's object is answered %d %s; an unknown one %d %s; want both %d", what, got.Status, got.Body, ref.Status, ref.Body, want)
	}
}

// TestKeysAsTenants checks auth.isolate_keys through the binary: key B is
// answered about each of key A's responses, streams, runs and
// conversations exactly as about unknown ones (its follow-ups, answers,
// cancels, WebSocket turns and OpenAI histories included), while A is
// served; and the store holds the keys' ids, never the keys.
func TestKeysAsTenants(t *testing.T) {
	t.Parallel()
	tn := startTenants(t, true)
	s, A, B := tn.s, tn.keyA, tn.keyB

	// A's finished response, a conversation with a question to answer.
	asked := tn.chat(t, A, map[string]any{"prompt": "ask"})
	rid, conv := asked.ID, *asked.ConversationID
	const unknownRID, unknownConv = "chat_0000000000000000000000", "no-such-conversation-1"

	get := func(path string) func(key, id string) *http.Response {
		return func(key, id string) *http.Response {
			return tn.do(t, key, http.MethodGet, strings.ReplaceAll(path, "{id}", id), nil)
		}
	}
	head := func(key, id string) *http.Response { return tn.do(t, key, http.MethodHead, "/v1/chat/"+id, nil) }
	followUp := func(key, id string) *http.Response {
		return tn.do(t, key, http.MethodPost, "/v1/chat", map[string]any{"prompt": "echo b's turn", "conversationId": id})
	}
	answers := func(key, id string) *http.Response {
		return tn.do(t, key, http.MethodPost, "/v1/chat", map[string]any{"conversationId": id,
			"answers": []map[string]string{{"questionId": "q1", "optionId": "jwt"}}})
	}
	completion := func(key, id string) *http.Response {
		return tn.do(t, key, http.MethodPost, "/v1/chat/completions", map[string]any{"model": "auto", "conversation_id": id,
			"messages": []map[string]any{userMsg("echo b's completion")}})
	}
	cancel := func(key, id string) *http.Response {
		return tn.do(t, key, http.MethodPost, "/v1/chat/"+id+"/cancel", map[string]any{"signal": "KILL"})
	}
	tn.sameAsUnknown(t, "GET /v1/chat/{id}", 404, get("/v1/chat/{id}"), rid, unknownRID)
	tn.sameAsUnknown(t, "HEAD /v1/chat/{id}", 404, head, rid, unknownRID)
	tn.sameAsUnknown(t, "GET /v1/conversations/{id}", 404, get("/v1/conversations/{id}"), conv, unknownConv)
	tn.sameAsUnknown(t, "a follow-up", 404, followUp, conv, unknownConv)
	tn.sameAsUnknown(t, "answers", 404, answers, conv, unknownConv)
	tn.sameAsUnknown(t, "a completion naming the conversation", 404, completion, conv, unknownConv)

	// A is served all of it.
	if resp := get("/v1/chat/{id}")(A, rid); readAll(t, resp) == nil || resp.StatusCode != 200 {
		t.Errorf("A's GET of its response: %d", resp.StatusCode)
	}
	if resp := get("/v1/conversations/{id}")(A, conv); readAll(t, resp) == nil || resp.StatusCode != 200 {
		t.Errorf("A's GET of its conversation: %d", resp.StatusCode)
	}
	if got := tn.chat(t, A, map[string]any{"conversationId": conv, "answers": []map[string]string{{"questionId": "q1", "optionId": "jwt"}}}); got.Status != documents.StatusCompleted {
		t.Errorf("A's answers: %s", got.Status)
	}

	// A's running turn: B can neither re-attach, read, cancel it nor send
	// the conversation a turn (a 409 would tell B it is running).
	st := e2eNewStream(t, tn.do(t, A, http.MethodPost, "/v1/chat", map[string]any{"prompt": "fault:hang-mid tenant", "conversationId": conv, "stream": true}))
	running := st.Resp.Header.Get("X-Docstream-Response-Id")
	st.Until(documents.EventContentDelta)
	tn.sameAsUnknown(t, "GET /v1/chat/{id}/stream", 204, get("/v1/chat/{id}/stream"), running, unknownRID)
	tn.sameAsUnknown(t, "GET /v1/chat/{id} while it runs", 404, get("/v1/chat/{id}"), running, unknownRID)
	tn.sameAsUnknown(t, "a follow-up while it runs", 404, followUp, conv, unknownConv)
	tn.sameAsUnknown(t, "cancel", 404, cancel, running, unknownRID)
	if got := tn.chat(t, A, map[string]any{"prompt": "echo x"}); got.Status != documents.StatusCompleted {
		t.Fatalf("A's other run: %s", got.Status)
	}
	// The WebSocket: B's turns naming A's conversation are refused as for
	// an unknown one.
	ws := s.dialWS(t, "Authorization", "Bearer "+B)
	wsErr := func(body map[string]any) string {
		body["type"] = "chat"
		ws.send(body)
		m := ws.read()
		if m.Type != "error" {
			t.Fatalf("B's chat on the socket naming a conversation: %s %s, want an error", m.Type, m.Data)
		}
		return string(m.Data)
	}
	for _, body := range []func(id string) map[string]any{
		func(id string) map[string]any { return map[string]any{"prompt": "echo ws", "conversationId": id} },
		func(id string) map[string]any {
			return map[string]any{"conversationId": id, "answers": []map[string]string{{"questionId": "q1", "optionId": "jwt"}}}
		},
	} {
		got, ref := wsErr(body(conv)), wsErr(body(unknownConv))
		var g, r map[string]any
		if json.Unmarshal([]byte(strings.ReplaceAll(got, conv, "<id>")), &g) != nil || json.Unmarshal([]byte(strings.ReplaceAll(ref, unknownConv, "<id>")), &r) != nil ||
			!e2eSameJSON(t, g, r) || g["status"] != 404.0 {
			t.Errorf("on the socket, B naming A's conversation: %s; an unknown one: %s", got, ref)
		}
	}
	// A re-attaches and cancels its run.
	re := tn.do(t, A, http.MethodGet, "/v1/chat/"+running+"/stream", nil)
	if re.StatusCode != 200 {
		t.Errorf("A's re-attach: %d", re.StatusCode)
	}
	re.Body.Close()
	if resp := cancel(A, running); readAll(t, resp) == nil || resp.StatusCode/100 != 2 {
		t.Errorf("A's cancel: %d", resp.StatusCode)
	}
	st.Rest()
	// A's socket may go on with the conversation.
	wsA := s.dialWS(t, "Authorization", "Bearer "+A)
	wsA.send(map[string]any{"type": "chat", "prompt": "echo on the socket", "conversationId": conv})
	wsA.turn()

	// OpenAI histories: B resending A's history gets a session of its own,
	// with the history in its prompt; A resending it resumes A's session.
	a := e2eMarker("echo A")
	replyA, ridA := tn.complete(t, A, map[string]any{"messages": []map[string]any{userMsg(a)}})
	var first documents.ChatResponse
	if err := json.Unmarshal(readAll(t, get("/v1/chat/{id}")(A, ridA)), &first); err != nil || first.ConversationID == nil {
		t.Fatalf("A's completion: %v %+v", err, first)
	}
	history := []map[string]any{userMsg(a), {"role": "assistant", "content": replyA}}
	b := e2eMarker("echo B")
	tn.complete(t, B, map[string]any{"messages": append(history[:2:2], userMsg(b))})
	startB := s.e2eSimStart(t, func(p string) bool { return strings.Contains(p, b) })
	if r := e2eResume(e2eArgv(startB)); r != "" || !strings.Contains(startB["prompt"].(string), a) {
		t.Errorf("B resending A's history: --resume %q, prompt %q; want a new session with the history", r, startB["prompt"])
	}
	c := e2eMarker("echo C")
	tn.complete(t, A, map[string]any{"messages": append(history[:2:2], userMsg(c))})
	startC := s.e2eSimStart(t, func(p string) bool { return strings.Contains(p, c) })
	if r := e2eResume(e2eArgv(startC)); r != *first.ConversationID || startC["prompt"] != c {
		t.Errorf("A resending its history: --resume %q, prompt %q; want --resume %s", r, startC["prompt"], *first.ConversationID)
	}

	// The store holds the keys' ids, never the keys.
	s.stop(t)
	var db []byte
	for _, f := range []string{"docstream.db", "docstream.db-wal"} {
		b, err := os.ReadFile(filepath.Join(s.Dir, "data", f))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		db = append(db, b...)
	}
	for _, key := range []string{A, B} {
		if bytes.Contains(db, []byte(key)) {
			t.Errorf("the store holds an API key")
		}
		sum := sha256.Sum256([]byte(key))
		if id := hex.EncodeToString(sum[:8]); !bytes.Contains(db, []byte(id)) {
			t.Errorf("the store does not hold the key id %s", id)
		}
	}
}

// TestKeysShared checks that without auth.isolate_keys (the default) keys
// share everything, as before: B reads, continues and cancels A's
// conversation and runs, and resumes A's session through its history.
func TestKeysShared(t *testing.T) {
	t.Parallel()
	tn := startTenants(t, false)
	s, A, B := tn.s, tn.keyA, tn.keyB
	asked := tn.chat(t, A, map[string]any{"prompt": "ask"})
	rid, conv := asked.ID, *asked.ConversationID
	for _, path := range []string{"/v1/chat/" + rid, "/v1/conversations/" + conv} {
		if resp := tn.do(t, B, http.MethodGet, path, nil); readAll(t, resp) == nil || resp.StatusCode != 200 {
			t.Errorf("B's GET %s: %d", path, resp.StatusCode)
		}
	}
	if got := tn.chat(t, B, map[string]any{"conversationId": conv, "answers": []map[string]string{{"questionId": "q1", "optionId": "jwt"}}}); got.Status != documents.StatusCompleted {
		t.Errorf("B's answers: %s", got.Status)
	}
	st := e2eNewStream(t, tn.do(t, A, http.MethodPost, "/v1/chat", map[string]any{"prompt": "fault:hang-mid shared", "conversationId": conv, "stream": true}))
	running := st.Resp.Header.Get("X-Docstream-Response-Id")
	st.Until(documents.EventContentDelta)
	re := tn.do(t, B, http.MethodGet, "/v1/chat/"+running+"/stream", nil)
	if re.StatusCode != 200 {
		t.Errorf("B's re-attach: %d", re.StatusCode)
	}
	re.Body.Close()
	if resp := tn.do(t, B, http.MethodPost, "/v1/chat/"+running+"/cancel", map[string]any{"signal": "KILL"}); readAll(t, resp) == nil || resp.StatusCode/100 != 2 {
		t.Errorf("B's cancel: %d", resp.StatusCode)
	}
	st.Rest()

	a := e2eMarker("echo A")
	replyA, ridA := tn.complete(t, A, map[string]any{"messages": []map[string]any{userMsg(a)}})
	var first documents.ChatResponse
	if err := json.Unmarshal(readAll(t, tn.do(t, A, http.MethodGet, "/v1/chat/"+ridA, nil)), &first); err != nil || first.ConversationID == nil {
		t.Fatalf("A's completion: %v %+v", err, first)
	}
	b := e2eMarker("echo B")
	tn.complete(t, B, map[string]any{"messages": []map[string]any{userMsg(a), {"role": "assistant", "content": replyA}, userMsg(b)}})
	startB := s.e2eSimStart(t, func(p string) bool { return strings.Contains(p, b) })
	if r := e2eResume(e2eArgv(startB)); r != *first.ConversationID {
		t.Errorf("B resending A's history: --resume %q, want %s", r, *first.ConversationID)
	}
}

// TestKeysAsTenantsCloud checks auth.isolate_keys on the cloud backend and
// its pass-through routes: B is answered about A's cloud agent as about
// one the API does not know, its follow-ups are refused as for an unknown
// conversation, and the agent list B gets leaves A's agents out; A is
// served.
func TestKeysAsTenantsCloud(t *testing.T) {
	t.Parallel()
	keyA, keyB := e2eMarker("key-a"), e2eMarker("key-b")
	fake, s := startCloud(t, "", "20ms", "DOCSTREAM_AUTH_API_KEYS="+keyA+","+keyB, "DOCSTREAM_AUTH_ISOLATE_KEYS=true", "DOCSTREAM_AUTH_RATE_PER_MINUTE=0")
	tn := &tenants{s: s, keyA: keyA, keyB: keyB}
	A, B := keyA, keyB
	first := tn.chat(t, A, map[string]any{"backend": "cloud", "prompt": "add a README", "source": shop})
	if first.ConversationID == nil {
		t.Fatal("no conversation id")
	}
	agent := *first.ConversationID
	const unknownAgent = "bc_no-such-agent"
	fake.ResetCalls()
	get := func(path string) func(key, id string) *http.Response {
		return func(key, id string) *http.Response {
			return tn.do(t, key, http.MethodGet, strings.ReplaceAll(path, "{id}", id), nil)
		}
	}
	tn.sameAsUnknown(t, "GET /v1/cloud/agents/{id}", 404, get("/v1/cloud/agents/{id}"), agent, unknownAgent)
	tn.sameAsUnknown(t, "GET /v1/cloud/agents/{id}/conversation", 404, get("/v1/cloud/agents/{id}/conversation"), agent, unknownAgent)
	tn.sameAsUnknown(t, "POST /v1/cloud/agents/{id}/stop", 404, func(key, id string) *http.Response {
		return tn.do(t, key, http.MethodPost, "/v1/cloud/agents/"+id+"/stop", nil)
	}, agent, unknownAgent)
	tn.sameAsUnknown(t, "DELETE /v1/cloud/agents/{id}", 404, func(key, id string) *http.Response {
		return tn.do(t, key, http.MethodDelete, "/v1/cloud/agents/"+id, nil)
	}, agent, unknownAgent)
	tn.sameAsUnknown(t, "a cloud follow-up", 404, func(key, id string) *http.Response {
		return tn.do(t, key, http.MethodPost, "/v1/chat", map[string]any{"backend": "cloud", "prompt": "more", "conversationId": id})
	}, agent, unknownAgent)
	for route, n := range fake.Calls() {
		if n > 0 && route != cloudtest.RouteListAgents {
			t.Errorf("B's refused requests reached the API: %s %d times", route, n)
		}
	}
	listed := func(key string) []string {
		var l struct {
			Agents []struct {
				ID string `json:"id"`
			} `json:"agents"`
		}
		resp := tn.do(t, key, http.MethodGet, "/v1/cloud/agents", nil)
		if b := readAll(t, resp); resp.StatusCode != 200 || json.Unmarshal(b, &l) != nil {
			t.Fatalf("GET /v1/cloud/agents: %d %s", resp.StatusCode, b)
		}
		var ids []string
		for _, a := range l.Agents {
			ids = append(ids, a.ID)
		}
		return ids
	}
	if ids := listed(B); len(ids) != 0 {
		t.Errorf("B's agent list: %v, want none of A's", ids)
	}
	if ids := listed(A); len(ids) != 1 || ids[0] != agent {
		t.Errorf("A's agent list: %v, want [%s]", ids, agent)
	}
	for _, path := range []string{"/v1/cloud/agents/" + agent, "/v1/cloud/agents/" + agent + "/conversation"} {
		if resp := tn.do(t, A, http.MethodGet, path, nil); readAll(t, resp) == nil || resp.StatusCode != 200 {
			t.Errorf("A's GET %s: %d", path, resp.StatusCode)
		}
	}
	if follow := tn.chat(t, A, map[string]any{"backend": "cloud", "conversationId": agent, "prompt": "also add a licence"}); follow.Status != documents.StatusCompleted {
		t.Errorf("A's follow-up: %s", follow.Status)
	}
}
