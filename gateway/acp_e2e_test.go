package gateway_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/simulator"
)

// startACP starts a server whose agent runs in ACP mode.
func startACP(t *testing.T, extra ...string) *testServer {
	t.Helper()
	return startE2E(t, append([]string{"DOCSTREAM_AGENT_PROTOCOL=acp", "DOCSTREAM_AGENT_IDLE_TIMEOUT=3s"}, extra...)...)
}

// acpStream is a stream whose events are kept for folding.
type acpStream struct {
	*e2eStream
	evs []event
}

func (s *testServer) acpOpen(t *testing.T, body map[string]any) *acpStream {
	return &acpStream{e2eStream: s.e2eOpen(t, body)}
}

// waiting reads the stream up to the next document_update whose metadata
// waits (awaiting_approval or awaiting), and returns that metadata.
func (st *acpStream) waiting(t *testing.T) map[string]any {
	t.Helper()
	for {
		evs := st.Until(documents.EventDocumentUpdate)
		st.evs = append(st.evs, evs...)
		m := e2eData(t, evs[len(evs)-1])["metadata"].(map[string]any)
		if m["status"] == documents.StatusAwaitingApproval || m["awaiting"] == true {
			return m
		}
	}
}

// all reads the rest of the stream and returns every event.
func (st *acpStream) all() []event { return append(st.evs, st.Rest()...) }

// respond posts an answer and checks the status it gets.
func (s *testServer) respond(t *testing.T, id string, body any, want int) map[string]any {
	t.Helper()
	resp := s.e2eDo(t, http.MethodPost, "/v1/chat/"+id+"/respond", body)
	b := readAll(t, resp)
	if resp.StatusCode != want {
		t.Fatalf("respond %v: status %d, want %d: %s", body, resp.StatusCode, want, b)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// acpDocs returns the response's documents of a type.
func acpDocs(cr documents.ChatResponse, typ documents.Type) []documents.Document {
	var out []documents.Document
	for _, d := range cr.Documents {
		if d.Type == typ {
			out = append(out, d)
		}
	}
	return out
}

// TestACPAskAndAnswer: an interactive run's clarification waits, takes
// one answer per question, and the agent goes on with them.
func TestACPAskAndAnswer(t *testing.T) {
	s := startACP(t)
	st := s.acpOpen(t, map[string]any{"prompt": "ask", "interactive": true})
	id := st.Resp.Header.Get("X-Docstream-Response-Id")
	m := st.waiting(t)
	if qs := m["questions"].([]any); len(qs) != 2 {
		t.Fatalf("the waiting clarification has %d questions: %v", len(qs), m)
	}
	if got := s.respond(t, id, map[string]any{"questionId": "q1", "optionIds": []string{"jwt"}}, 200); got["status"] != "answered" {
		t.Fatalf("respond: %v", got)
	}
	s.respond(t, id, map[string]any{"questionId": "q1", "optionIds": []string{"jwt"}}, http.StatusConflict)
	s.respond(t, id, map[string]any{"questionId": "q2", "optionIds": []string{"mysql"}}, http.StatusBadRequest)
	s.respond(t, id, map[string]any{"questionId": "q2", "optionIds": []string{"postgres"}, "text": "the managed one"}, 200)
	cr := fold(t, st.all())
	if cr.Status != documents.StatusCompleted {
		t.Fatalf("status %s", cr.Status)
	}
	var cm documents.ClarificationMeta
	if err := json.Unmarshal(acpDocs(cr, documents.TypeClarification)[0].Metadata, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Awaiting || cm.Rejected || len(cm.Answers) != 2 || cm.Answers[1].Text != "the managed one" || cm.Answers[0].By != "client" {
		t.Fatalf("clarification metadata: %+v", cm)
	}
	texts := acpDocs(cr, documents.TypeText)
	if last := *texts[len(texts)-1].Content; !strings.Contains(last, "JSON Web Tokens") || !strings.Contains(last, "PostgreSQL") {
		t.Fatalf("the agent did not go on with the answers: %q", last)
	}
	s.respond(t, id, map[string]any{"questionId": "q1", "optionIds": []string{"jwt"}}, http.StatusConflict)
	s.waitNoAgents(t, 10*time.Second)
}

// TestACPPermissions: one command approved and one rejected mid-run, and
// every bad answer gets its status.
func TestACPPermissions(t *testing.T) {
	s := startACP(t)
	s.respond(t, "chat_unknown", map[string]any{"toolCallId": "x", "optionId": "allow-once"}, http.StatusNotFound)
	st := s.acpOpen(t, map[string]any{"prompt": "permissions", "interactive": true})
	id := st.Resp.Header.Get("X-Docstream-Response-Id")
	m := st.waiting(t)
	call := m["toolCallId"].(string)
	if m["command"] != "npm test" || len(m["options"].([]any)) != 3 {
		t.Fatalf("the waiting command: %v", m)
	}
	for _, bad := range []map[string]any{
		{},
		{"toolCallId": call},
		{"toolCallId": call, "optionId": "allow-once", "questionId": "q1"},
		{"toolCallId": call, "optionId": "allow-once", "text": "yes"},
		{"toolCallId": call, "optionId": "maybe"},
		{"toolCallId": call, "optionId": "allow-once", "extra": 1},
	} {
		s.respond(t, id, bad, http.StatusBadRequest)
	}
	s.respond(t, id, map[string]any{"toolCallId": "not-asked", "optionId": "allow-once"}, http.StatusConflict)
	s.respond(t, id, map[string]any{"questionId": "q1", "optionIds": []string{"a"}}, http.StatusConflict)
	if got := s.respond(t, id, map[string]any{"toolCallId": call, "optionId": "allow-once"}, 200); got["status"] != documents.StatusApproved {
		t.Fatalf("respond: %v", got)
	}
	s.respond(t, id, map[string]any{"toolCallId": call, "optionId": "allow-once"}, http.StatusConflict)
	m = st.waiting(t)
	if m["command"] != "rm -rf build/" {
		t.Fatalf("the second waiting command: %v", m)
	}
	if got := s.respond(t, id, map[string]any{"toolCallId": m["toolCallId"], "optionId": "reject-once"}, 200); got["status"] != documents.StatusRejected {
		t.Fatalf("respond: %v", got)
	}
	cr := fold(t, st.all())
	cmds := acpDocs(cr, documents.TypeTerminalCommand)
	var ran, refused documents.TerminalCommandMeta
	_ = json.Unmarshal(cmds[0].Metadata, &ran)
	_ = json.Unmarshal(cmds[1].Metadata, &refused)
	if ran.Status != documents.StatusApproved || ran.ExitCode == nil || ran.Output != "12 passing\n" || ran.Answer.By != "client" {
		t.Fatalf("the approved command: %+v", ran)
	}
	if refused.Status != documents.StatusRejected || !refused.Rejected || refused.ExitCode != nil || refused.Answer.OptionID != "reject-once" {
		t.Fatalf("the rejected command: %+v", refused)
	}
	s.respond(t, id, map[string]any{"toolCallId": call, "optionId": "allow-once"}, http.StatusConflict)
	s.waitNoAgents(t, 10*time.Second)
}

// TestACPAnswerTimeout: what no one answers is refused, or skipped, after
// agent.answer_timeout, and the documents say so.
func TestACPAnswerTimeout(t *testing.T) {
	// The agent is silent for longer than its idle timeout while it waits:
	// that is not idleness.
	s := startACP(t, "DOCSTREAM_AGENT_ANSWER_TIMEOUT=2500ms", "DOCSTREAM_AGENT_IDLE_TIMEOUT=1s")
	cr := fold(t, s.e2eOpen(t, map[string]any{"prompt": "tour", "interactive": true}).Rest())
	if cr.Status != documents.StatusCompleted {
		t.Fatalf("status %s", cr.Status)
	}
	var cmd documents.TerminalCommandMeta
	for _, d := range acpDocs(cr, documents.TypeTerminalCommand) {
		if _ = json.Unmarshal(d.Metadata, &cmd); cmd.Command == "rm -rf build/" {
			break
		}
	}
	if cmd.Status != documents.StatusRejected || cmd.Answer == nil || cmd.Answer.By != "timeout" || !strings.Contains(cmd.Reason, "answer_timeout") {
		t.Fatalf("the command nobody approved: %+v", cmd)
	}
	var cm documents.ClarificationMeta
	_ = json.Unmarshal(acpDocs(cr, documents.TypeClarification)[0].Metadata, &cm)
	if !cm.Rejected || cm.Awaiting || !strings.Contains(cm.Reason, "skipped") {
		t.Fatalf("the question nobody answered: %+v", cm)
	}
}

// TestACPCancelWhileWaiting: a run cancelled while it waits ends with one
// done, the waiting document answered as cancelled, and no process left.
func TestACPCancelWhileWaiting(t *testing.T) {
	s := startACP(t)
	st := s.acpOpen(t, map[string]any{"prompt": "permissions", "interactive": true})
	id := st.Resp.Header.Get("X-Docstream-Response-Id")
	m := st.waiting(t)
	resp := s.e2eDo(t, http.MethodPost, "/v1/chat/"+id+"/cancel", nil)
	readAll(t, resp)
	cr := fold(t, st.all())
	if cr.Status != documents.StatusError || cr.Metadata.StopReason != documents.StopCancelled {
		t.Fatalf("status %s, stop reason %s", cr.Status, cr.Metadata.StopReason)
	}
	var cmd documents.TerminalCommandMeta
	_ = json.Unmarshal(acpDocs(cr, documents.TypeTerminalCommand)[0].Metadata, &cmd)
	if cmd.Status != documents.StatusRejected || cmd.Answer == nil || cmd.Answer.By != "cancel" {
		t.Fatalf("the command waiting at the cancel: %+v", cmd)
	}
	s.respond(t, id, map[string]any{"toolCallId": m["toolCallId"], "optionId": "allow-once"}, http.StatusConflict)
	s.waitNoAgents(t, 10*time.Second)
}

// TestACPReattachWhileWaiting: a client that comes back reads the waiting
// state again and can answer it.
func TestACPReattachWhileWaiting(t *testing.T) {
	s := startACP(t, "DOCSTREAM_AGENT_IDLE_TIMEOUT=30s")
	st := s.acpOpen(t, map[string]any{"prompt": "permissions", "interactive": true})
	id := st.Resp.Header.Get("X-Docstream-Response-Id")
	st.waiting(t)
	st.Close()
	again := &acpStream{e2eStream: s.e2eReattach(t, id, 0, false)}
	m := again.waiting(t)
	s.respond(t, id, map[string]any{"toolCallId": m["toolCallId"], "optionId": "reject-once"}, 200)
	m = again.waiting(t)
	s.respond(t, id, map[string]any{"toolCallId": m["toolCallId"], "optionId": "reject-once"}, 200)
	if cr := fold(t, again.all()); cr.Status != documents.StatusCompleted {
		t.Fatalf("status %s", cr.Status)
	}
}

// TestACPPolicy: a client that cannot answer never waits: the allow list
// and agent.permissions decide, questions are skipped.
func TestACPPolicy(t *testing.T) {
	s := startACP(t, "DOCSTREAM_AGENT_ALLOW_COMMANDS=npm test")
	cr := s.chatJSON(t, map[string]any{"prompt": "permissions"})
	cmds := acpDocs(cr, documents.TypeTerminalCommand)
	var a, b documents.TerminalCommandMeta
	_ = json.Unmarshal(cmds[0].Metadata, &a)
	_ = json.Unmarshal(cmds[1].Metadata, &b)
	if a.Status != documents.StatusApproved || a.Answer.By != "policy" || b.Status != documents.StatusRejected || !b.Rejected {
		t.Fatalf("policy: %+v / %+v", a, b)
	}
	if u := cr.Usage; !u.Reported || u.PromptTokens == 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens || u.CacheReadTokens == 0 {
		t.Fatalf("the prompt result's usage: %+v", u)
	}
	// The next turn loads the session; what the agent replays of it is not
	// said again.
	next := s.chatJSON(t, map[string]any{"prompt": "hello again", "conversationId": *cr.ConversationID})
	if next.Status != documents.StatusCompleted || *next.ConversationID != *cr.ConversationID {
		t.Fatalf("the next turn: %s in %v", next.Status, next.ConversationID)
	}
	for _, d := range next.Documents {
		if d.Content != nil && strings.Contains(*d.Content, "earlier answer") {
			t.Fatalf("the replayed conversation became a document: %q", *d.Content)
		}
	}
	resp := s.e2eDo(t, http.MethodPost, "/v1/chat/completions", map[string]any{"model": "auto", "messages": []map[string]string{{"role": "user", "content": "ask"}}})
	if b := readAll(t, resp); resp.StatusCode != 200 || !strings.Contains(string(b), "could not get answers") {
		t.Fatalf("chat completions: %d %s", resp.StatusCode, b)
	}
}

// TestACPFaultsAgreeWithPrint: every scenario ends with one done and no
// process left in ACP mode, and its documents are those print mode gives
// (but for the approval states).
func TestACPFaultsAgreeWithPrint(t *testing.T) {
	env := []string{"DOCSTREAM_AGENT_IDLE_TIMEOUT=10s", "DOCSTREAM_AGENT_MAX_LINE_BYTES=8388608"}
	print, acpS := startE2E(t, env...), startACP(t, env...)
	for _, c := range []struct {
		s    *testServer
		body map[string]any
		code string
	}{
		{print, map[string]any{"prompt": "ask", "interactive": true}, "not_interactive"},
		{acpS, map[string]any{"prompt": "ask", "include_raw": true}, "no_raw_events"},
	} {
		resp := c.s.e2eDo(t, http.MethodPost, "/v1/chat", c.body)
		if b := readAll(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), c.code) {
			t.Errorf("%v: %d %s, want 400 %s", c.body, resp.StatusCode, b, c.code)
		}
	}
	var prompts []string
	for _, sc := range simulator.Scenarios() {
		if !strings.Contains(sc.Name, "<") && sc.Name != "echo" {
			prompts = append(prompts, sc.Name)
		}
	}
	var wg sync.WaitGroup
	for _, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, pe := print.chatStream(t, map[string]any{"prompt": p})
			_, ae := acpS.chatStream(t, map[string]any{"prompt": p})
			want, got := docSummary(fold(t, pe), print.Workspace), docSummary(fold(t, ae), acpS.Workspace)
			if len(want) != len(got) {
				t.Errorf("%s: print has %d documents, ACP %d:\n%s\n---\n%s", p, len(want), len(got), strings.Join(want, "\n"), strings.Join(got, "\n"))
				return
			}
			for i := range want {
				if want[i] != got[i] {
					t.Errorf("%s: document %d differs:\nprint %s\nACP   %s", p, i+1, want[i], got[i])
				}
			}
		}()
	}
	wg.Wait()
	acpS.waitNoAgents(t, 15*time.Second)
}

// docSummary renders what print and ACP mode are to agree on: each
// document's type, content and the metadata that does not depend on the
// protocol (not ids, durations, details or approval states), with the
// server's workspace written as WS.
func docSummary(cr documents.ChatResponse, ws string) []string {
	var out []string
	for _, d := range cr.Documents {
		var m map[string]any
		_ = json.Unmarshal(d.Metadata, &m)
		// A command's result holds what its protocol reports of it (its
		// exitCode and output are compared); an edit's diff is the changed
		// lines rather than the first hunk with its context.
		for _, k := range []string{"toolCallId", "duration_ms", "details", "status", "options", "answer", "awaiting", "answers",
			"diff", "unifiedDiff", "linesAdded", "linesRemoved", "reason"} {
			delete(m, k)
		}
		if d.Type != documents.TypeToolCall {
			delete(m, "rawKind")
		}
		b, _ := json.Marshal(m, json.Deterministic(true))
		c := ""
		if d.Content != nil && d.Type != documents.TypeFileEdit {
			c = *d.Content
		}
		out = append(out, strings.ReplaceAll(string(d.Type)+" "+string(b)+" "+c, ws, "WS"))
	}
	return out
}

// TestACPWebSocketRespond: a socket answers its turn's waiting command
// with {"type":"respond"}; a bad answer is an error message, not the end.
func TestACPWebSocketRespond(t *testing.T) {
	s := startACP(t)
	c := s.dialWS(t)
	c.send(map[string]any{"type": "chat", "prompt": "permissions", "interactive": true})
	var errs, responded int
	for m := c.read(); m.Type != documents.EventDone; m = c.read() {
		switch m.Type {
		case "error":
			if !strings.Contains(string(m.Data), "unknown_option") {
				t.Fatalf("error: %s", m.Data)
			}
			errs++
		case "responded":
			if !strings.Contains(string(m.Data), documents.StatusApproved) {
				t.Fatalf("responded: %s", m.Data)
			}
			responded++
		case documents.EventDocumentUpdate:
			var u documents.DocumentUpdate
			var meta documents.TerminalCommandMeta
			if json.Unmarshal(m.Data, &u) == nil && json.Unmarshal(u.Metadata, &meta) == nil && meta.Status == documents.StatusAwaitingApproval {
				c.send(map[string]any{"type": "respond", "toolCallId": meta.ToolCallID, "optionId": "never"})
				c.send(map[string]any{"type": "respond", "toolCallId": meta.ToolCallID, "optionId": "allow-once"})
			}
		}
	}
	if errs != 2 || responded != 2 {
		t.Fatalf("%d errors and %d answers, want 2 of each", errs, responded)
	}
}
