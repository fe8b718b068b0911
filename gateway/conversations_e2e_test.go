package gateway_test

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
)

// e2eConversationList is the body of GET /v1/conversations.
type e2eConversationList struct {
	Conversations []map[string]jsontext.Value `json:"conversations"`
	HasMore       bool                        `json:"hasMore"`
	NextCursor    *string                     `json:"nextCursor"`
}

// ids returns the ids of a page's conversations, in order.
func (l e2eConversationList) ids(t testing.TB) []string {
	t.Helper()
	out := []string{}
	for _, c := range l.Conversations {
		var id string
		if err := json.Unmarshal(c["id"], &id); err != nil {
			t.Fatalf("a listed conversation's id: %v", err)
		}
		out = append(out, id)
	}
	return out
}

// listConversations reads GET /v1/conversations?query with the headers.
func (s *testServer) listConversations(t testing.TB, query string, headers ...string) e2eConversationList {
	t.Helper()
	resp := s.e2eDo(t, http.MethodGet, "/v1/conversations?"+query, nil, headers...)
	b := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/conversations?%s: status %d: %s", query, resp.StatusCode, b)
	}
	var l e2eConversationList
	if err := json.Unmarshal(b, &l, json.RejectUnknownMembers(true)); err != nil {
		t.Fatalf("GET /v1/conversations?%s: %v: %s", query, err, b)
	}
	if l.HasMore != (l.NextCursor != nil) {
		t.Errorf("hasMore %v with nextCursor %v", l.HasMore, l.NextCursor)
	}
	return l
}

// listAllConversations pages through GET /v1/conversations, limit at a
// time, and returns the ids and the sizes of the pages.
func (s *testServer) listAllConversations(t testing.TB, query string, limit string, headers ...string) (ids []string, pages []int) {
	t.Helper()
	q := url.Values{"limit": {limit}}
	if query != "" {
		extra, _ := url.ParseQuery(query)
		for k, v := range extra {
			q[k] = v
		}
	}
	for range 50 {
		page := s.listConversations(t, q.Encode(), headers...)
		ids = append(ids, page.ids(t)...)
		pages = append(pages, len(page.Conversations))
		if !page.HasMore {
			return ids, pages
		}
		q.Set("cursor", *page.NextCursor)
	}
	t.Fatal("the listing does not end")
	return nil, nil
}

// TestConversationsListAndDelete checks GET /v1/conversations through the
// binary (the most recently active first, paging with a cursor, the
// workspace filter, bad parameters) and DELETE /v1/conversations/{id}: 204,
// after which the conversation, its responses (also one the registry still
// held), its re-attach and its OpenAI history are unknown; 409 while a turn
// runs; 404 as for an unknown id.
func TestConversationsListAndDelete(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	main, other := filepath.Join(dir, "main"), filepath.Join(dir, "other")
	for _, d := range []string{main, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := startE2E(t, "DOCSTREAM_RUNS_KEEP_FINISHED=10m", "DOCSTREAM_AUTH_RATE_PER_MINUTE=0",
		"DOCSTREAM_AGENT_WORKSPACES=main="+main+",other="+other, "DOCSTREAM_AGENT_DEFAULT_WORKSPACE=main")

	if l := s.listConversations(t, ""); len(l.Conversations) != 0 || l.HasMore {
		t.Fatalf("an empty store lists %+v", l)
	}
	// Five conversations, in main and other; then a turn of the first
	// makes it the most recently active.
	var convs, rids []string
	for i, ws := range []string{"main", "other", "main", "other", "main"} {
		cr := s.chatJSON(t, map[string]any{"prompt": "echo conversation " + string(rune('1'+i)), "workspace": ws})
		convs, rids = append(convs, *cr.ConversationID), append(rids, cr.ID)
	}
	s.chatJSON(t, map[string]any{"prompt": "echo again", "conversationId": convs[0]})
	order := []string{convs[0], convs[4], convs[3], convs[2], convs[1]}

	all := s.listConversations(t, "")
	if got := all.ids(t); !slices.Equal(got, order) || all.HasMore {
		t.Fatalf("listing %v (hasMore %v), want %v", got, all.HasMore, order)
	}
	var one struct {
		ID        string    `json:"id"`
		SessionID string    `json:"sessionId"`
		Backend   string    `json:"backend"`
		Workspace string    `json:"workspace"`
		Model     string    `json:"model"`
		Created   time.Time `json:"created"`
		Updated   time.Time `json:"updated"`
	}
	raw, _ := json.Marshal(all.Conversations[1])
	if err := json.Unmarshal(raw, &one, json.RejectUnknownMembers(true)); err != nil {
		t.Fatalf("a listed conversation: %v: %s", err, raw)
	}
	if one.ID != convs[4] || one.Backend != "cli" || one.Workspace != "main" || one.Model == "" || one.Created.IsZero() || one.Updated.Before(one.Created) {
		t.Errorf("a listed conversation: %+v", one)
	}
	for _, limit := range []string{"1", "2", "4", "5", "100"} {
		ids, pages := s.listAllConversations(t, "", limit)
		if !slices.Equal(ids, order) {
			t.Errorf("limit %s: pages %v list %v, want %v", limit, pages, ids, order)
		}
	}
	if ids, _ := s.listAllConversations(t, "workspace=other", "1"); !slices.Equal(ids, []string{convs[3], convs[1]}) {
		t.Errorf("workspace=other lists %v, want %v", ids, []string{convs[3], convs[1]})
	}
	if l := s.listConversations(t, "workspace=gone"); len(l.Conversations) != 0 {
		t.Errorf("workspace=gone lists %v", l.ids(t))
	}
	if resp := s.e2eDo(t, http.MethodHead, "/v1/conversations", nil); resp.StatusCode != 200 {
		t.Errorf("HEAD /v1/conversations: %d", resp.StatusCode)
	} else {
		resp.Body.Close()
	}
	for _, c := range []struct{ query, code, names string }{
		{"limit=0", "bad_limit", "limit"},
		{"limit=101", "bad_limit", "limit"},
		{"limit=ten", "bad_limit", "limit"},
		{"limit=-1", "bad_limit", "limit"},
		{"cursor=!!", "bad_cursor", "cursor"},
		{"cursor=" + base64.RawURLEncoding.EncodeToString([]byte("yesterday\nc1")), "bad_cursor", "cursor"},
		{"cursor=" + base64.RawURLEncoding.EncodeToString([]byte("2026-01-01T00:00:00Z")), "bad_cursor", "cursor"},
		{"workspace=../etc", "bad_workspace", "workspace"},
	} {
		code, msg := e2eErrorBody(t, s.e2eDo(t, http.MethodGet, "/v1/conversations?"+c.query, nil), 400)
		if code != c.code || !strings.Contains(msg, c.names) {
			t.Errorf("?%s: %s %q; want %s naming %s", c.query, code, msg, c.code, c.names)
		}
	}

	// Deleting: 204, then everything of the conversation is unknown, also
	// its response the registry still holds for re-attaching clients.
	unknownGet := answerOf(t, s.e2eDo(t, http.MethodGet, "/v1/conversations/no-such-conversation-1", nil), "no-such-conversation-1")
	unknownDelete := answerOf(t, s.e2eDo(t, http.MethodDelete, "/v1/conversations/no-such-conversation-1", nil), "no-such-conversation-1")
	if unknownGet.Status != 404 || unknownDelete != unknownGet {
		t.Errorf("DELETE of an unknown conversation: %+v; GET: %+v; want the same 404", unknownDelete, unknownGet)
	}
	if resp := s.e2eDo(t, http.MethodGet, "/v1/chat/"+rids[1]+"/stream", nil); resp.StatusCode != 200 {
		t.Fatalf("re-attaching to a finished run before the delete: %d", resp.StatusCode)
	} else {
		readAll(t, resp)
	}
	resp := s.e2eDo(t, http.MethodDelete, "/v1/conversations/"+convs[1], nil)
	if b := readAll(t, resp); resp.StatusCode != 204 || len(b) != 0 {
		t.Fatalf("DELETE: %d %s, want 204", resp.StatusCode, b)
	}
	if got := answerOf(t, s.e2eDo(t, http.MethodGet, "/v1/conversations/"+convs[1], nil), convs[1]); got != unknownGet {
		t.Errorf("GET of the deleted conversation: %+v, want %+v", got, unknownGet)
	}
	if got := answerOf(t, s.e2eDo(t, http.MethodDelete, "/v1/conversations/"+convs[1], nil), convs[1]); got != unknownGet {
		t.Errorf("DELETE of the deleted conversation: %+v, want %+v", got, unknownGet)
	}
	if code, _ := e2eErrorBody(t, s.e2eDo(t, http.MethodGet, "/v1/chat/"+rids[1], nil), 404); code != "not_found" {
		t.Errorf("GET of the deleted conversation's response: %s", code)
	}
	if resp := s.e2eDo(t, http.MethodGet, "/v1/chat/"+rids[1]+"/stream", nil); resp.StatusCode != 204 {
		t.Errorf("re-attaching to the deleted conversation's run: %d, want 204", resp.StatusCode)
		resp.Body.Close()
	}
	followUp := s.e2eDo(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": "echo after the delete", "conversationId": convs[1]})
	if code, _ := e2eErrorBody(t, followUp, 404); code != "unknown_conversation" {
		t.Errorf("a follow-up of the deleted conversation: %s", code)
	}
	order = slices.DeleteFunc(order, func(id string) bool { return id == convs[1] })
	if ids, _ := s.listAllConversations(t, "", "2"); !slices.Equal(ids, order) {
		t.Errorf("listing after the delete: %v, want %v", ids, order)
	}
	if got := s.e2eGetChat(t, rids[2]); got.ID != rids[2] {
		t.Errorf("another conversation's response after the delete: %+v", got)
	}

	// The methods of the routes.
	for path, allow := range map[string]string{"/v1/conversations": "GET, HEAD", "/v1/conversations/" + convs[0]: "DELETE, GET, HEAD"} {
		resp := s.e2eDo(t, http.MethodPut, path, nil)
		readAll(t, resp)
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != allow {
			t.Errorf("PUT %s: %d Allow %q, want 405 %q", path, resp.StatusCode, resp.Header.Get("Allow"), allow)
		}
	}

	// A conversation with a running turn is busy; once the turn ends it
	// is deleted.
	st := s.e2eOpen(t, map[string]any{"prompt": "fault:hang-mid"})
	start := e2eData(t, st.Until(documents.EventResponseStart)[0])
	running, _ := start["conversationId"].(string)
	rid, _ := start["id"].(string)
	if running == "" {
		t.Fatalf("response_start without a conversation: %v", start)
	}
	code, msg := e2eErrorBody(t, s.e2eDo(t, http.MethodDelete, "/v1/conversations/"+running, nil), 409)
	if code != "conversation_busy" || !strings.Contains(msg, rid) {
		t.Errorf("DELETE while a turn runs: %s %q, want conversation_busy naming %s", code, msg, rid)
	}
	if resp := s.e2eDo(t, http.MethodPost, "/v1/chat/"+rid+"/cancel", map[string]any{"signal": "KILL"}); resp.StatusCode/100 != 2 {
		t.Fatalf("cancel: %d %s", resp.StatusCode, readAll(t, resp))
	} else {
		readAll(t, resp)
	}
	st.Rest()
	s.e2eWaitFinal(t, rid, 10*time.Second)
	if resp := s.e2eDo(t, http.MethodDelete, "/v1/conversations/"+running, nil); resp.StatusCode != 204 {
		t.Errorf("DELETE after the turn ended: %d %s", resp.StatusCode, readAll(t, resp))
	} else {
		readAll(t, resp)
	}
	if code, _ := e2eErrorBody(t, s.e2eDo(t, http.MethodGet, "/v1/chat/"+rid, nil), 404); code != "not_found" {
		t.Errorf("GET of the cancelled turn after the delete: %s", code)
	}

	// An OpenAI conversation: once deleted, its history resumes nothing.
	a := e2eMarker("echo A")
	cresp := s.e2eDo(t, http.MethodPost, "/v1/chat/completions", map[string]any{"model": "auto", "messages": []map[string]any{userMsg(a)}})
	var completion e2eCompletion
	if err := json.Unmarshal(readAll(t, cresp), &completion); err != nil || cresp.StatusCode != 200 || len(completion.Choices) != 1 {
		t.Fatalf("completion: %d %v", cresp.StatusCode, err)
	}
	conv := s.e2eGetChat(t, cresp.Header.Get("X-Docstream-Response-Id")).ConversationID
	if conv == nil {
		t.Fatal("the completion has no conversation")
	}
	if resp := s.e2eDo(t, http.MethodDelete, "/v1/conversations/"+*conv, nil); resp.StatusCode != 204 {
		t.Fatalf("DELETE of the completion's conversation: %d %s", resp.StatusCode, readAll(t, resp))
	} else {
		readAll(t, resp)
	}
	b := e2eMarker("echo B")
	history := []map[string]any{userMsg(a), {"role": "assistant", "content": completion.Choices[0].Message.Content}, userMsg(b)}
	if resp := s.e2eDo(t, http.MethodPost, "/v1/chat/completions", map[string]any{"model": "auto", "messages": history}); resp.StatusCode != 200 {
		t.Fatalf("resending the history: %d %s", resp.StatusCode, readAll(t, resp))
	} else {
		readAll(t, resp)
	}
	startB := s.e2eSimStart(t, func(p string) bool { return strings.Contains(p, b) })
	if r := e2eResume(e2eArgv(startB)); r != "" || !strings.Contains(startB["prompt"].(string), a) {
		t.Errorf("resending a deleted conversation's history: --resume %q, prompt %q; want a new session with the history", r, startB["prompt"])
	}
}

// TestConversationsIsolated checks the listing and the delete with
// auth.isolate_keys: a key lists its own conversations alone, and another
// key's conversation, also one with a running turn, is deleted no more
// than an unknown one; without isolation every key lists them all.
func TestConversationsIsolated(t *testing.T) {
	t.Parallel()
	tn := startTenants(t, true)
	s, A, B := tn.s, tn.keyA, tn.keyB
	var mine []string
	for range 3 {
		mine = append(mine, *tn.chat(t, A, map[string]any{"prompt": "echo a"}).ConversationID)
	}
	theirs := *tn.chat(t, B, map[string]any{"prompt": "echo b"}).ConversationID
	slices.Reverse(mine)
	if ids, _ := s.listAllConversations(t, "", "2", "Authorization", "Bearer "+A); !slices.Equal(ids, mine) {
		t.Errorf("A lists %v, want its own %v", ids, mine)
	}
	if ids, _ := s.listAllConversations(t, "", "2", "Authorization", "Bearer "+B); !slices.Equal(ids, []string{theirs}) {
		t.Errorf("B lists %v, want its own %s", ids, theirs)
	}
	// A cursor made from A's conversation pages B's listing, no more.
	page := s.listConversations(t, "limit=1", "Authorization", "Bearer "+A)
	if l := s.listConversations(t, "cursor="+url.QueryEscape(*page.NextCursor), "Authorization", "Bearer "+B); len(l.Conversations) != 0 {
		t.Errorf("B with A's cursor lists %v", l.ids(t))
	}
	if resp := tn.do(t, "", http.MethodGet, "/v1/conversations", nil); resp.StatusCode != 401 {
		t.Errorf("listing without a key: %d", resp.StatusCode)
	} else {
		readAll(t, resp)
	}

	del := func(key, id string) *http.Response {
		return tn.do(t, key, http.MethodDelete, "/v1/conversations/"+id, nil)
	}
	tn.sameAsUnknown(t, "DELETE /v1/conversations/{id}", 404, del, mine[0], "no-such-conversation-1")
	// A's conversation with a running turn: B is told it is unknown, not busy.
	st := tn.s.e2eStreamWith(t, A, map[string]any{"prompt": "fault:hang-mid"})
	start := e2eData(t, st.Until(documents.EventResponseStart)[0])
	running, rid := start["conversationId"].(string), start["id"].(string)
	tn.sameAsUnknown(t, "DELETE of a conversation with a running turn", 404, del, running, "no-such-conversation-1")
	if code, _ := e2eErrorBody(t, del(A, running), 409); code != "conversation_busy" {
		t.Errorf("A's DELETE while its turn runs: %s", code)
	}
	if resp := tn.do(t, A, http.MethodPost, "/v1/chat/"+rid+"/cancel", map[string]any{"signal": "KILL"}); resp.StatusCode/100 != 2 {
		t.Fatalf("cancel: %d", resp.StatusCode)
	} else {
		readAll(t, resp)
	}
	st.Rest()
	if resp := tn.do(t, A, http.MethodGet, "/v1/conversations/"+mine[0], nil); resp.StatusCode != 200 {
		t.Fatalf("A's conversation after B's DELETE: %d", resp.StatusCode)
	} else {
		readAll(t, resp)
	}
	if resp := del(A, mine[0]); resp.StatusCode != 204 {
		t.Errorf("A's DELETE of its conversation: %d %s", resp.StatusCode, readAll(t, resp))
	} else {
		readAll(t, resp)
	}
	if ids, _ := s.listAllConversations(t, "", "10", "Authorization", "Bearer "+A); slices.Contains(ids, mine[0]) || !slices.Contains(ids, running) {
		t.Errorf("A lists %v after deleting %s", ids, mine[0])
	}

	// Without isolation, every key lists every conversation.
	open := startTenants(t, false)
	x := *open.chat(t, open.keyA, map[string]any{"prompt": "echo a"}).ConversationID
	y := *open.chat(t, open.keyB, map[string]any{"prompt": "echo b"}).ConversationID
	for _, key := range []string{open.keyA, open.keyB} {
		if l := open.s.listConversations(t, "", "Authorization", "Bearer "+key); !slices.Equal(l.ids(t), []string{y, x}) {
			t.Errorf("without isolation a key lists %v, want %v", l.ids(t), []string{y, x})
		}
	}
}

// e2eStreamWith opens a streaming /v1/chat request with the key.
func (s *testServer) e2eStreamWith(t testing.TB, key string, body map[string]any) *e2eStream {
	t.Helper()
	body["stream"] = true
	return e2eNewStream(t, s.e2eDo(t, http.MethodPost, "/v1/chat", body, "Authorization", "Bearer "+key))
}
