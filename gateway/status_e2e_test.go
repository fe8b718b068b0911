package gateway_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
)

// reconnectCase is the real capture in which the agent reconnects three
// times and then gives up.
const reconnectCase = "error-server-rejects-option-reconnect-retry-no-result"

// reconnectStates are its status events, as "state attempt".
var reconnectStates = []string{
	"reconnecting 1", "retrying 1", "reconnected 1",
	"reconnecting 2", "retrying 2", "reconnected 2",
	"reconnecting 3", "retrying 3", "reconnected 3",
}

// startReplay starts a server whose agent is the conformance kit's
// stand-in, which replays the real captures.
func startReplay(t *testing.T) *testServer {
	t.Helper()
	agent, err := filepath.Abs("../../shared/conformance/agent")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(agent); err != nil {
		t.Skipf("the conformance kit is not beside the checkout: %v", err)
	}
	return startE2E(t, "DOCSTREAM_AGENT_BINARY="+agent, "DOCSTREAM_AGENT_ARGS_PREFIX=", "DOCSTREAM_AUTH_RATE_PER_MINUTE=0")
}

// statusStates returns the status events among evs as "state attempt".
func statusStates(t *testing.T, evs []event) []string {
	t.Helper()
	var out []string
	for _, e := range evs {
		if e.Name != documents.EventStatus {
			continue
		}
		var s struct {
			State   string `json:"state"`
			Attempt int    `json:"attempt"`
		}
		if err := json.Unmarshal([]byte(e.Data), &s, json.RejectUnknownMembers(true)); err != nil {
			t.Fatalf("status data %s: %v", e.Data, err)
		}
		out = append(out, s.State+" "+strconv.Itoa(s.Attempt))
	}
	return out
}

// TestStatusWhileReconnecting replays a run in which the agent reconnects
// three times: the SSE stream, a re-attached stream and the WebSocket carry
// the status events, the response has no trace of them, and the OpenAI
// stream says them as comments.
func TestStatusWhileReconnecting(t *testing.T) {
	t.Parallel()
	s := startReplay(t)
	prompt := "replay:" + reconnectCase

	_, evs := s.chatStream(t, map[string]any{"prompt": prompt})
	if got := statusStates(t, evs); !slices.Equal(got, reconnectStates) {
		t.Fatalf("SSE status events %q, want %q", got, reconnectStates)
	}
	folded := fold(t, evs)
	// The status events come after response_start and before the end.
	first := slices.IndexFunc(evs, func(e event) bool { return e.Name == documents.EventStatus })
	if first < 1 {
		t.Fatalf("the first status event is event %d", first)
	}
	var start struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(evs[0].Data), &start); err != nil {
		t.Fatal(err)
	}

	// The stored response is the folded stream: no document for a status.
	stored := s.e2eGetChat(t, start.ID)
	if !e2eSameJSON(t, stored.Documents, folded.Documents) {
		t.Errorf("GET /v1/chat/{id} documents differ from the folded stream")
	}
	for _, d := range stored.Documents {
		if d.Content != nil && strings.Contains(*d.Content, "reconnect") {
			t.Errorf("a document mentions the reconnects: %+v", d)
		}
	}

	// Re-attached after the first status event, the stream replays the
	// rest of them, with the ids they had.
	rest := s.e2eReattach(t, start.ID, first+1, false).Rest()
	if !slices.Equal(rest, evs[first+1:]) {
		t.Errorf("re-attached after event %d: got %d events, want the %d after it", first+1, len(rest), len(evs)-first-1)
	}
	if got := statusStates(t, rest); !slices.Equal(got, reconnectStates[1:]) {
		t.Errorf("re-attached status events %q, want %q", got, reconnectStates[1:])
	}

	// The WebSocket carries the same events.
	c := s.dialWS(t)
	c.send(map[string]any{"type": "chat", "prompt": prompt})
	msgs := c.turn()
	wsEvs := make([]event, len(msgs))
	for i, m := range msgs {
		wsEvs[i] = event{ID: strconv.Itoa(m.ID), Name: m.Type, Data: string(m.Data)}
	}
	if got := statusStates(t, wsEvs); !slices.Equal(got, reconnectStates) {
		t.Errorf("WebSocket status events %q, want %q", got, reconnectStates)
	}
	if ws := wsFold(t, msgs); !e2eSameJSON(t, ws.Documents, folded.Documents) {
		t.Errorf("the WebSocket turn folds to other documents than the SSE stream")
	}

	// The OpenAI stream says each as a comment, never as content.
	st := s.completionStream(t, map[string]any{"model": "auto", "messages": []map[string]any{userMsg(prompt)}})
	var comments []string
	for _, line := range strings.Split(st.raw, "\r\n") {
		if c, ok := strings.CutPrefix(line, ": "); ok && c != "keepalive" && !strings.HasPrefix(c, "docstream") {
			comments = append(comments, c)
		}
	}
	want := make([]string, len(reconnectStates))
	for i, s := range reconnectStates {
		state, attempt, _ := strings.Cut(s, " ")
		want[i] = state + " attempt=" + attempt
	}
	if !slices.Equal(comments, want) {
		t.Errorf("OpenAI stream comments %q, want %q", comments, want)
	}
	if strings.Contains(st.content, "reconnect") || strings.Contains(st.content, "attempt") {
		t.Errorf("the OpenAI content mentions the reconnects: %q", st.content)
	}
	if st.errObj == nil {
		t.Errorf("the run failed, but the OpenAI stream has no error object")
	}
}

// TestStatusThenText replays a run that reconnects and then goes on to
// its result: the status events come between its documents, and the
// OpenAI content is the same as without them.
func TestStatusThenText(t *testing.T) {
	t.Parallel()
	s := startReplay(t)
	const c = "glob-edit-read-reconnect-usage-excerpt"
	_, evs := s.chatStream(t, map[string]any{"prompt": "replay:" + c})
	if got, want := statusStates(t, evs), []string{"reconnecting 1", "retrying 1"}; !slices.Equal(got, want) {
		t.Fatalf("status events %q, want %q", got, want)
	}
	if cr := fold(t, evs); cr.Status != documents.StatusCompleted {
		t.Errorf("status %q, want completed", cr.Status)
	}
	st := s.completionStream(t, map[string]any{"model": "auto", "messages": []map[string]any{userMsg("replay:" + c)}})
	if !strings.Contains(st.raw, ": reconnecting attempt=1\r\n\r\n") || !strings.Contains(st.raw, ": retrying attempt=1\r\n\r\n") {
		t.Errorf("the OpenAI stream has no status comments:\n%s", oaTail(st.raw, 2000))
	}
	if len(st.finishes) != 1 || st.finishes[0] != "stop" {
		t.Errorf("finish reasons %q, want stop", st.finishes)
	}
}
