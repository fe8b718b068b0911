package gateway_test

import (
	"bufio"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
)

const e2eTourConfig = "\"\"\"Settings shared by the greeter.\"\"\"\n\nDEFAULT_NAME = \"world\"\nGREETING = \"Hello\"\n"

// TestE2ETourMetadata streams the tour and checks every document type's
// content and metadata as a client receives them, the event kinds of text
// and tool documents, the parallel calls, and that the fold of the stream is
// exactly the stored response and equals the JSON answer of another run.
func TestE2ETourMetadata(t *testing.T) {
	t.Parallel()
	s := startE2E(t)
	st := s.e2eOpen(t, map[string]any{"prompt": "tour"})
	h := st.Resp.Header
	for name, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if !strings.HasPrefix(h.Get(name), want) {
			t.Errorf("header %s = %q, want %q", name, h.Get(name), want)
		}
	}
	evs := st.Rest()
	got := fold(t, evs)
	if got.Status != documents.StatusCompleted {
		t.Fatalf("status %s", got.Status)
	}
	if h.Get("X-Docstream-Response-Id") != got.ID || !strings.HasPrefix(got.ID, "chat_") {
		t.Errorf("X-Docstream-Response-Id %q, response id %q", h.Get("X-Docstream-Response-Id"), got.ID)
	}

	// Events per document, in stream order.
	starts := map[string]map[string]any{}
	names := map[string][]string{}
	var order []string
	for _, e := range evs {
		d := e2eData(t, e)
		switch e.Name {
		case documents.EventDocumentStart:
			id := d["id"].(string)
			starts[id] = d
			order = append(order, id)
			names[id] = append(names[id], e.Name)
		case documents.EventContentDelta, documents.EventToolCallStart, documents.EventToolCallArguments,
			documents.EventToolResult, documents.EventDocumentEnd:
			id := d["documentId"].(string)
			names[id] = append(names[id], e.Name)
		}
	}
	if len(order) != len(got.Documents) {
		t.Fatalf("%d document_start events, %d documents", len(order), len(got.Documents))
	}
	for i, d := range got.Documents {
		if d.Sequence != i+1 || d.ID != documents.DocID(i+1) || order[i] != d.ID {
			t.Errorf("document %d: id %s sequence %d (started as %s)", i, d.ID, d.Sequence, order[i])
		}
		evNames := names[d.ID]
		if evNames[len(evNames)-1] != documents.EventDocumentEnd {
			t.Errorf("%s (%s) does not end with document_end: %v", d.ID, d.Type, evNames)
		}
		if d.Type.IsText() {
			if !slices.Contains(evNames, documents.EventContentDelta) || slices.Contains(evNames, documents.EventToolCallStart) {
				t.Errorf("%s (%s) events %v: want content_delta and no tool events", d.ID, d.Type, evNames)
			}
		} else {
			for _, want := range []string{documents.EventToolCallStart, documents.EventToolCallArguments, documents.EventToolResult} {
				if !slices.Contains(evNames, want) {
					t.Errorf("%s (%s) events %v: no %s", d.ID, d.Type, evNames, want)
				}
			}
			if slices.Contains(evNames, documents.EventContentDelta) {
				t.Errorf("%s (%s) streams content_delta", d.ID, d.Type)
			}
		}
	}

	byType := map[documents.Type][]documents.Document{}
	for _, d := range got.Documents {
		byType[d.Type] = append(byType[d.Type], d)
	}
	if n := len(byType[documents.TypeError]); n != 0 {
		t.Errorf("%d error documents in the tour", n)
	}
	for _, d := range byType[documents.TypeText] {
		if m := e2eMeta(t, d); m["format"] != "markdown" {
			t.Errorf("text %s metadata %v", d.ID, m)
		}
	}

	// code_reference: the fence's start:end:path, without fence lines, and
	// its metadata already in document_start.
	if refs := byType[documents.TypeCodeReference]; len(refs) != 1 {
		t.Errorf("%d code_reference documents, want 1", len(refs))
	} else {
		d := refs[0]
		want := map[string]any{"filePath": "src/main.py", "startLine": 12.0, "endLine": 14.0, "language": "python"}
		for k, v := range want {
			if m := e2eMeta(t, d); m[k] != v {
				t.Errorf("code_reference %s = %v, want %v", k, m[k], v)
			}
			if sm, _ := starts[d.ID]["metadata"].(map[string]any); sm[k] != v {
				t.Errorf("code_reference document_start metadata %s = %v, want %v", k, sm[k], v)
			}
		}
		if c := str(d.Content); c != "def greet(name):\n    message = f\"{GREETING}, {name}!\"\n    print(message)" {
			t.Errorf("code_reference content %q", c)
		}
	}

	// code_block: language and purpose, content without the fence.
	blocks := map[string]documents.Document{}
	for _, d := range byType[documents.TypeCodeBlock] {
		m := e2eMeta(t, d)
		lang, _ := m["language"].(string)
		blocks[lang] = d
		if m["purpose"] != "new_code" {
			t.Errorf("code_block %s purpose %v", lang, m["purpose"])
		}
		if sm, _ := starts[d.ID]["metadata"].(map[string]any); sm["language"] != lang {
			t.Errorf("code_block document_start metadata %v, want language %q", sm, lang)
		}
		if strings.Contains(str(d.Content), "```") {
			t.Errorf("code_block %s keeps its fence: %q", lang, str(d.Content))
		}
	}
	if str(blocks["python"].Content) != strings.TrimSuffix(e2eTourConfig, "\n") || str(blocks["bash"].Content) != "python src/main.py Docstream" {
		t.Errorf("code blocks: python %q, bash %q", str(blocks["python"].Content), str(blocks["bash"].Content))
	}

	// file_edit: create (diff null), edit (diff of the first hunk and the
	// unified diff), delete (content null).
	edits := map[string]documents.Document{}
	for _, d := range byType[documents.TypeFileEdit] {
		edits[e2eMeta(t, d)["operation"].(string)] = d
	}
	if d, ok := edits["create"]; !ok {
		t.Errorf("no file_edit create")
	} else {
		m := e2eMeta(t, d)
		if diff, present := m["diff"]; !present || diff != nil {
			t.Errorf("create: diff %v (present %v), want null", diff, present)
		}
		if m["filePath"] != filepath.Join(s.Workspace, "src/config.py") || m["language"] != "python" || m["linesAdded"] != 4.0 {
			t.Errorf("create metadata %v", m)
		}
		if str(d.Content) != e2eTourConfig {
			t.Errorf("create content %q", str(d.Content))
		}
	}
	if d, ok := edits["edit"]; !ok {
		t.Errorf("no file_edit edit")
	} else {
		m := e2eMeta(t, d)
		diff, _ := m["diff"].(map[string]any)
		if diff == nil {
			t.Fatalf("edit: diff %v", m["diff"])
		}
		if diff["startLine"] != 3.0 || diff["endLine"] != 10.0 ||
			!strings.Contains(diff["oldString"].(string), "DEFAULT_NAME = \"world\"\nGREETING = \"Hello\"") ||
			!strings.Contains(diff["newString"].(string), "from config import DEFAULT_NAME, GREETING") ||
			strings.Contains(diff["newString"].(string), "GREETING = \"Hello\"") {
			t.Errorf("edit diff %v", diff)
		}
		ud, _ := m["unifiedDiff"].(string)
		if !strings.Contains(ud, "@@ -3,8 +3,7 @@") || !strings.Contains(ud, "\n+from config import DEFAULT_NAME, GREETING") ||
			!strings.Contains(ud, "\n-GREETING = \"Hello\"") {
			t.Errorf("edit unifiedDiff %q", ud)
		}
		if m["linesAdded"] != 1.0 || m["linesRemoved"] != 2.0 || m["filePath"] != filepath.Join(s.Workspace, "src/main.py") {
			t.Errorf("edit metadata %v", m)
		}
		if !strings.Contains(str(d.Content), "from config import DEFAULT_NAME, GREETING") {
			t.Errorf("edit content %q", str(d.Content))
		}
	}
	if d, ok := edits["delete"]; !ok {
		t.Errorf("no file_edit delete")
	} else if m := e2eMeta(t, d); d.Content != nil || m["diff"] != nil || m["filePath"] != filepath.Join(s.Workspace, "scripts/old_greeter.py") {
		t.Errorf("delete: content %v metadata %v", d.Content, m)
	}

	// terminal_command: exit code and output; the rejected one has a null
	// exit code and rejected: true.
	cmds := map[string]map[string]any{}
	cmdDocs := map[string]documents.Document{}
	for _, d := range byType[documents.TypeTerminalCommand] {
		m := e2eMeta(t, d)
		cmds[m["command"].(string)] = m
		cmdDocs[m["command"].(string)] = d
		if d.Content != nil {
			t.Errorf("terminal_command %v has content %q", m["command"], *d.Content)
		}
		if m["workingDirectory"] != s.Workspace {
			t.Errorf("terminal_command workingDirectory %v, want %s", m["workingDirectory"], s.Workspace)
		}
		if p, ok := m["permissions"].([]any); !ok || len(p) != 0 {
			t.Errorf("terminal_command permissions %v, want []", m["permissions"])
		}
	}
	if m := cmds["python src/main.py Docstream"]; m["exitCode"] != 0.0 || m["output"] != "Hello, Docstream!\n" || m["rejected"] != nil {
		t.Errorf("the run command: %v", m)
	}
	if m := cmds["rm -rf build/"]; m == nil {
		t.Errorf("no rejected command")
	} else if ec, present := m["exitCode"]; !present || ec != nil || m["rejected"] != true || m["reason"] == "" {
		t.Errorf("the rejected command: %v", m)
	}
	if m := cmds["ruff check src"]; m["exitCode"] != 0.0 ||
		m["output"] != "All checks passed!\nwarning: `ruff check` found a deprecated setting in pyproject.toml\n" {
		t.Errorf("ruff (stdout then stderr): %v", m)
	}

	// The parallel calls: both open at once, completed out of order.
	mypy, ruff := cmdDocs["mypy src"], cmdDocs["ruff check src"]
	if mypy.ID == "" || ruff.ID == "" {
		t.Fatalf("the parallel commands are missing: %v", cmds)
	}
	pos := func(name, id string) int {
		for i, e := range evs {
			if e.Name == name && (e2eData(t, e)["documentId"] == id || e2eData(t, e)["id"] == id) {
				return i
			}
		}
		t.Fatalf("no %s for %s", name, id)
		return -1
	}
	mypyStart, ruffStart := pos(documents.EventDocumentStart, mypy.ID), pos(documents.EventDocumentStart, ruff.ID)
	mypyEnd, ruffEnd := pos(documents.EventDocumentEnd, mypy.ID), pos(documents.EventDocumentEnd, ruff.ID)
	if mypy.Sequence > ruff.Sequence || ruffStart > mypyEnd || mypyStart > ruffEnd {
		t.Errorf("parallel calls not open at once: mypy %d..%d, ruff %d..%d", mypyStart, mypyEnd, ruffStart, ruffEnd)
	}
	if ruffEnd > mypyEnd {
		t.Errorf("the faster parallel call (ruff) ended after mypy: %d > %d", ruffEnd, mypyEnd)
	}

	// plan: title, overview, markdown content, todos with normalized
	// statuses and dependencies ([] when none).
	if plans := byType[documents.TypePlan]; len(plans) != 1 {
		t.Errorf("%d plans", len(plans))
	} else {
		var m documents.PlanMeta
		if err := json.Unmarshal(plans[0].Metadata, &m); err != nil {
			t.Fatal(err)
		}
		if m.Title != "Configurable greeting" || !strings.HasPrefix(m.Overview, "Finish moving the settings") ||
			!strings.HasPrefix(str(plans[0].Content), "# Configurable greeting") {
			t.Errorf("plan %+v content %q", m, str(plans[0].Content))
		}
		want := []documents.PlanTodo{
			{ID: "config", Content: "Move settings into src/config.py", Status: "pending", Dependencies: []string{}},
			{ID: "cli", Content: "Read the greeting from an environment variable", Status: "pending", Dependencies: []string{"config"}},
			{ID: "tests", Content: "Cover the new variable with tests", Status: "pending", Dependencies: []string{"cli"}},
			{ID: "release", Content: "Write the 2.2.0 release notes", Status: "pending", Dependencies: []string{"cli", "tests"}},
		}
		if !e2eSameJSON(t, m.Todos, want) {
			t.Errorf("plan todos %+v", m.Todos)
		}
		if !strings.Contains(string(plans[0].Metadata), `"dependencies":[]`) {
			t.Errorf("a todo without dependencies must have \"dependencies\":[]: %s", plans[0].Metadata)
		}
	}

	// todo_update.
	if ups := byType[documents.TypeTodoUpdate]; len(ups) != 1 {
		t.Errorf("%d todo_update documents", len(ups))
	} else {
		var m documents.TodoUpdateMeta
		if err := json.Unmarshal(ups[0].Metadata, &m); err != nil {
			t.Fatal(err)
		}
		if len(m.Todos) != 2 || m.Todos[0].ID != "config" || m.Todos[0].Status != "completed" ||
			m.Todos[1].ID != "cli" || m.Todos[1].Status != "in_progress" || ups[0].Content != nil {
			t.Errorf("todo_update %+v", m)
		}
	}

	// clarification: questions and options with ids and labels.
	if cls := byType[documents.TypeClarification]; len(cls) != 1 {
		t.Errorf("%d clarifications", len(cls))
	} else {
		var m documents.ClarificationMeta
		if err := json.Unmarshal(cls[0].Metadata, &m); err != nil {
			t.Fatal(err)
		}
		want := []documents.Question{{ID: "q1", Text: "Where should the greeting be configured?", Options: []documents.Option{
			{ID: "env", Label: "An environment variable (GREETER_GREETING)"},
			{ID: "flag", Label: "A command line flag (--greeting)"},
		}}}
		if !e2eSameJSON(t, m.Questions, want) || str(cls[0].Content) != "Greeting configuration" {
			t.Errorf("clarification %+v content %q", m.Questions, str(cls[0].Content))
		}
	}

	// tool_call: stable names, the agent's arguments, success results.
	tools := map[string]documents.ToolCallMeta{}
	for _, d := range byType[documents.TypeToolCall] {
		var m documents.ToolCallMeta
		if err := json.Unmarshal(d.Metadata, &m); err != nil {
			t.Fatal(err)
		}
		tools[m.ToolName] = m
		if d.Content != nil {
			t.Errorf("tool_call %s has content", m.ToolName)
		}
		if m.Result == nil || m.Result.Status != "success" || len(m.Result.Data) == 0 || m.ToolCallID == "" {
			t.Errorf("tool_call %s: result %+v id %q", m.ToolName, m.Result, m.ToolCallID)
		}
		var args map[string]any
		if err := json.Unmarshal(m.Arguments, &args); err != nil || len(args) == 0 {
			t.Errorf("tool_call %s arguments %s", m.ToolName, m.Arguments)
		}
		if _, ok := args["toolCallId"]; ok {
			t.Errorf("tool_call %s arguments keep toolCallId", m.ToolName)
		}
		if starts[d.ID] == nil {
			t.Errorf("no document_start for %s", d.ID)
		}
	}
	wantTools := map[string]string{"list_dir": "lsToolCall", "glob_file_search": "globToolCall", "read_file": "readToolCall",
		"grep": "grepToolCall", "mcp__docs__search_docs": "mcpToolCall", "web_fetch": "webFetchToolCall"}
	for name, kind := range wantTools {
		m, ok := tools[name]
		if !ok {
			t.Errorf("no tool_call %s; got %v", name, slices.Collect(maps.Keys(tools)))
			continue
		}
		if m.RawKind != kind {
			t.Errorf("tool_call %s rawKind %q, want %q", name, m.RawKind, kind)
		}
	}
	var args map[string]any
	_ = json.Unmarshal(tools["read_file"].Arguments, &args)
	if args["path"] != filepath.Join(s.Workspace, "src/main.py") {
		t.Errorf("read_file arguments %v", args)
	}
	args = nil
	_ = json.Unmarshal(tools["grep"].Arguments, &args)
	if args["pattern"] != "def greet" {
		t.Errorf("grep arguments %v", args)
	}

	// Response metadata: every tool invocation counted, usage reported.
	toolDocs := len(got.Documents) - len(byType[documents.TypeText]) - len(byType[documents.TypeCodeBlock]) - len(byType[documents.TypeCodeReference])
	if got.Metadata.ToolCallCount != toolDocs || got.Metadata.TurnCount < 2 {
		t.Errorf("toolCallCount %d (want %d), turnCount %d", got.Metadata.ToolCallCount, toolDocs, got.Metadata.TurnCount)
	}
	if u := got.Usage; !u.Reported || u.PromptTokens == 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage %+v", u)
	}
	if got.ConversationID == nil || got.Metadata.Agent == nil || got.Metadata.Agent.SessionID != *got.ConversationID {
		t.Errorf("conversationId %v, agent %+v", got.ConversationID, got.Metadata.Agent)
	}

	// The fold is exactly the response the gateway keeps for this run.
	if stored := s.e2eGetChat(t, got.ID); !e2eSameJSON(t, stored, got) {
		t.Errorf("GET /v1/chat/%s differs from the folded stream:\n%s\n%s", got.ID, clip(string(e2eJSON(t, stored))), clip(string(e2eJSON(t, got))))
	}
	// And another run of the same scenario answered as JSON has the same
	// documents, up to call ids and timings.
	full := s.chatJSON(t, map[string]any{"prompt": "tour"})
	if len(full.Documents) != len(got.Documents) {
		t.Fatalf("JSON answer has %d documents, the stream %d", len(full.Documents), len(got.Documents))
	}
	for i := range full.Documents {
		a, b := e2eNormalized(t, full.Documents[i]), e2eNormalized(t, got.Documents[i])
		if !e2eSameJSON(t, a, b) {
			t.Errorf("document %d differs:\nJSON   %s\nstream %s", i+1, clip(string(e2eJSON(t, a))), clip(string(e2eJSON(t, b))))
		}
	}
	if !e2eSameJSON(t, full.Usage, got.Usage) || full.Metadata.ToolCallCount != got.Metadata.ToolCallCount || full.Metadata.TurnCount != got.Metadata.TurnCount {
		t.Errorf("JSON answer usage %+v / %+v, stream %+v / %+v", full.Usage, full.Metadata, got.Usage, got.Metadata)
	}
}

func e2eJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// e2eNormalized is a document without what differs between two runs of one
// scenario: call ids and durations.
func e2eNormalized(t testing.TB, d documents.Document) map[string]any {
	t.Helper()
	m := e2eMeta(t, d)
	delete(m, "toolCallId")
	delete(m, "duration_ms")
	return map[string]any{"id": d.ID, "type": d.Type, "sequence": d.Sequence, "content": d.Content, "metadata": m}
}

// TestE2EStreamSelection checks that ?stream=true streams whatever the
// body says, and that the JSON answer carries the same headers.
func TestE2EStreamSelection(t *testing.T) {
	t.Parallel()
	s := startE2E(t)
	st := e2eNewStream(t, s.e2eDo(t, http.MethodPost, "/v1/chat?stream=true", map[string]any{"prompt": "echo by query"}))
	got := fold(t, st.Rest())
	if got.Status != documents.StatusCompleted || !strings.Contains(str(got.Documents[0].Content), `"prompt":"echo by query"`) {
		t.Errorf("?stream=true: status %s documents %+v", got.Status, got.Documents)
	}
	st = e2eNewStream(t, s.e2eDo(t, http.MethodPost, "/v1/chat?stream=true", map[string]any{"prompt": "echo query wins", "stream": false}))
	if got := fold(t, st.Rest()); got.Status != documents.StatusCompleted {
		t.Errorf("?stream=true with stream:false: %s", got.Status)
	}

	for _, q := range []string{"yes", "", "tru"} {
		resp := s.e2eDo(t, http.MethodPost, "/v1/chat?stream="+q+"&x=1", map[string]any{"prompt": "echo bad query"})
		if q == "" {
			readAll(t, resp) // no value: the body decides
			continue
		}
		if code, _ := e2eErrorBody(t, resp, http.StatusBadRequest); code != "bad_query" {
			t.Errorf("?stream=%s: %s", q, code)
		}
	}

	resp := s.e2eDo(t, http.MethodPost, "/v1/chat?stream=false", map[string]any{"prompt": "echo as json", "stream": true})
	b := readAll(t, resp)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("?stream=false: status %d Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var cr documents.ChatResponse
	if err := json.Unmarshal(b, &cr); err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("X-Docstream-Response-Id") != cr.ID || cr.ConversationID == nil ||
		resp.Header.Get("X-Docstream-Conversation-Id") != *cr.ConversationID || resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("JSON answer headers %v for response %s / %v", resp.Header, cr.ID, cr.ConversationID)
	}
}

// e2eEcho decodes the echo scenario's answer: what the simulator received.
type e2eEcho struct {
	Argv   []string `json:"argv"`
	Prompt string   `json:"prompt"`
	Resume string   `json:"resume"`
}

func e2eEchoOf(t testing.TB, cr documents.ChatResponse) e2eEcho {
	t.Helper()
	var e e2eEcho
	for _, d := range cr.Documents {
		if d.Type == documents.TypeText && json.Unmarshal([]byte(str(d.Content)), &e) == nil {
			return e
		}
	}
	t.Fatalf("no echo in %+v", cr.Documents)
	return e
}

// TestE2EConversations checks that the conversation id is the agent's
// session id from system/init, that sending it back resumes the session
// (--resume <id>) and keeps the id, the response headers, and that of
// `messages` only the last user message is the prompt of a resumed turn.
func TestE2EConversations(t *testing.T) {
	t.Parallel()
	s := startE2E(t)

	// A new conversation: the id is the session id of the agent's
	// system/init (metadata.agent.sessionId), known from response_start on.
	st := s.e2eOpen(t, map[string]any{"prompt": "echo first turn"})
	evs := st.Rest()
	first := fold(t, evs)
	if first.ConversationID == nil || *first.ConversationID == "" {
		t.Fatalf("no conversation id: %+v", first)
	}
	conv := *first.ConversationID
	if first.Metadata.Agent == nil || first.Metadata.Agent.SessionID != conv {
		t.Errorf("conversationId %q, agent %+v", conv, first.Metadata.Agent)
	}
	if rs := e2eData(t, evs[0]); rs["conversationId"] != conv {
		t.Errorf("response_start conversationId %v, want %s", rs["conversationId"], conv)
	}
	if args := e2eArgv(s.e2eSimStart(t, func(p string) bool { return p == "echo first turn" })); e2eResume(args) != "" {
		t.Errorf("a new conversation was started with --resume: %v", args)
	}

	// Resuming: --resume <id>, the same id in the headers and events.
	st = s.e2eOpen(t, map[string]any{"prompt": "echo second turn", "conversationId": conv})
	if h := st.Resp.Header.Get("X-Docstream-Conversation-Id"); h != conv {
		t.Errorf("X-Docstream-Conversation-Id %q, want %s", h, conv)
	}
	rid := st.Resp.Header.Get("X-Docstream-Response-Id")
	evs = st.Rest()
	second := fold(t, evs)
	if rid != second.ID || rid == first.ID || e2eData(t, evs[len(evs)-1])["id"] != rid {
		t.Errorf("response ids: header %s, response %s, first %s", rid, second.ID, first.ID)
	}
	if rs := e2eData(t, evs[0]); rs["conversationId"] != conv || rs["id"] != rid {
		t.Errorf("response_start %v", rs)
	}
	if second.ConversationID == nil || *second.ConversationID != conv || second.Status != documents.StatusCompleted {
		t.Errorf("resumed response: conversation %v status %s", second.ConversationID, second.Status)
	}
	args := e2eArgv(s.e2eSimStart(t, func(p string) bool { return p == "echo second turn" }))
	if e2eResume(args) != conv {
		t.Errorf("resumed agent argv %v, want --resume %s", args, conv)
	}
	if e := e2eEchoOf(t, second); e.Resume != conv {
		t.Errorf("the agent saw resume %q", e.Resume)
	}

	// JSON answers carry the conversation header too.
	resp := s.e2eDo(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": "echo third turn", "conversationId": conv})
	readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("X-Docstream-Conversation-Id") != conv || resp.Header.Get("X-Docstream-Response-Id") == "" {
		t.Errorf("JSON resume: status %d headers %v", resp.StatusCode, resp.Header)
	}

	// messages on a resumed conversation: only the last user message goes
	// to the agent, verbatim.
	last := "echo " + e2eMarker("last")
	cr := s.chatJSON(t, map[string]any{"conversationId": conv, "messages": []map[string]any{
		{"role": "user", "content": "an earlier question"},
		{"role": "assistant", "content": "an earlier answer"},
		{"role": "user", "content": last},
	}})
	start := s.e2eSimStart(t, func(p string) bool { return strings.Contains(p, last) })
	if start["prompt"] != last || e2eResume(e2eArgv(start)) != conv || e2eEchoOf(t, cr).Prompt != last {
		t.Errorf("messages with conversationId: the agent got %q (argv %v)", start["prompt"], e2eArgv(start))
	}

	// messages without a conversation: the history is folded in, the last
	// user message comes last and verbatim.
	last = e2eMarker("final")
	s.chatJSON(t, map[string]any{"messages": []map[string]any{
		{"role": "system", "content": "Answer briefly."},
		{"role": "user", "content": "an earlier question"},
		{"role": "assistant", "content": "an earlier answer"},
		{"role": "user", "content": []map[string]any{{"type": "text", "text": last}}},
	}})
	start = s.e2eSimStart(t, func(p string) bool { return strings.Contains(p, last) })
	p := start["prompt"].(string)
	if !strings.HasSuffix(p, last) || !strings.Contains(p, "an earlier answer") || !strings.Contains(p, "Answer briefly.") || e2eResume(e2eArgv(start)) != "" {
		t.Errorf("flattened history prompt %q argv %v", p, e2eArgv(start))
	}

	// A single user message is the prompt as it is.
	last = "echo " + e2eMarker("last")
	cr = s.chatJSON(t, map[string]any{"messages": []map[string]any{{"role": "user", "content": last}}})
	if e2eEchoOf(t, cr).Prompt != last {
		t.Errorf("single message: the agent got %q", e2eEchoOf(t, cr).Prompt)
	}
}

// TestE2EIncludeRawConversation checks, with include_raw, that the
// conversation id is the session_id of the agent's own system/init line.
func TestE2EIncludeRawConversation(t *testing.T) {
	t.Parallel()
	s := startE2E(t)
	_, evs := s.chatStream(t, map[string]any{"prompt": "echo raw", "include_raw": true})
	got := fold(t, evs)
	var initSession string
	lines := 0
	for _, e := range evs {
		d := e2eData(t, e)
		if e.Name != documents.EventAgentEvent {
			continue
		}
		// Every agent_event has the seed's id (the line's number) and a
		// timestamp, also the lines the agent stamps with none.
		lines++
		if ts, _ := d["timestamp"].(float64); d["id"] != fmt.Sprint(lines) || ts < 1e12 {
			t.Errorf("agent_event %d: id %v, timestamp %v", lines, d["id"], d["timestamp"])
		}
		if d["type"] == "system" && d["subtype"] == "init" {
			p, _ := d["payload"].(map[string]any)
			initSession, _ = p["session_id"].(string)
		}
	}
	if initSession == "" {
		t.Fatalf("no system/init agent_event")
	}
	if rs := e2eData(t, evs[0]); rs["conversationId"] != initSession {
		t.Errorf("response_start conversationId %v, system/init session_id %s", rs["conversationId"], initSession)
	}
	if got.ConversationID == nil || *got.ConversationID != initSession {
		t.Errorf("conversationId %v, system/init session_id %s", got.ConversationID, initSession)
	}
}

// TestE2EDisconnectEndsAgents checks that a client that goes away ends the
// agent's whole process group after the detach grace.
func TestE2EDisconnectEndsAgents(t *testing.T) {
	t.Parallel()
	for _, grace := range []time.Duration{0, time.Second} {
		t.Run("grace="+grace.String(), func(t *testing.T) {
			t.Parallel()
			s := startE2E(t, "DOCSTREAM_RUNS_DETACH_GRACE="+grace.String())
			st := s.e2eOpen(t, map[string]any{"prompt": "fault:hang-mid"})
			id := st.Resp.Header.Get("X-Docstream-Response-Id")
			st.Until(documents.EventContentDelta)
			if len(s.agentProcesses()) == 0 {
				t.Fatalf("no agent process while the run streams")
			}
			st.Close()
			closed := time.Now()
			if grace > 0 {
				// From the moment the gateway has seen the client leave
				// until the agent ends (timed below), the run is still
				// streaming. The status is read first: it is final only
				// once the agent has exited.
				s.e2eWaitDetached(t)
				for first := true; ; first = false {
					cr := s.e2eGetChat(t, id)
					if len(s.agentProcesses()) == 0 {
						if first {
							t.Errorf("the agent ended %s after the disconnect, within the grace of %s", time.Since(closed), grace)
						}
						break
					}
					if cr.Status != documents.StatusStreaming {
						t.Fatalf("status %s %s after the disconnect, the agent still running within the grace", cr.Status, time.Since(closed))
					}
					if time.Since(closed) > grace+4*time.Second {
						t.Fatalf("the agent still runs %s after the disconnect, with a grace of %s", time.Since(closed), grace)
					}
					time.Sleep(100 * time.Millisecond) // within the client's rate limit
				}
			}
			s.waitNoAgents(t, grace+4*time.Second)
			if grace > 0 && time.Since(closed) < grace {
				t.Errorf("the agent ended %s after the disconnect, before the grace of %s", time.Since(closed), grace)
			}
			cr := s.e2eWaitFinal(t, id, 5*time.Second)
			if cr.Status != documents.StatusError || cr.Metadata.StopReason != documents.StopCancelled {
				t.Errorf("after the disconnect: status %s stopReason %q", cr.Status, cr.Metadata.StopReason)
			}
		})
	}
	t.Run("grandchild", func(t *testing.T) {
		t.Parallel()
		// Paced, so that the run is still going when the client leaves.
		s := startE2E(t, "DOCSTREAM_RUNS_DETACH_GRACE=0s", "DOCSTREAM_AGENT_ARGS_PREFIX=agent-sim,--sim-speed=1")
		st := s.e2eOpen(t, map[string]any{"prompt": "fault:grandchild"})
		st.Until(documents.EventContentDelta)
		var sleeper bool
		for deadline := time.Now().Add(3 * time.Second); !sleeper && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			for _, pid := range s.agentProcesses() {
				sleeper = sleeper || e2eProcName(pid) == "sleep"
			}
		}
		if !sleeper {
			t.Fatalf("the agent's child process did not show up: %v", s.agentProcesses())
		}
		st.Close()
		s.waitNoAgents(t, 4*time.Second)
	})
	t.Run("grandchild completed", func(t *testing.T) {
		t.Parallel()
		s := startE2E(t)
		_, evs := s.chatStream(t, map[string]any{"prompt": "fault:grandchild"})
		if got := fold(t, evs); got.Status != documents.StatusCompleted {
			t.Errorf("status %s", got.Status)
		}
		s.waitNoAgents(t, 4*time.Second)
	})
}

// TestE2EAgentFaults checks how agent failures reach the client: an error
// document with the agent's words, status error, and done last; and that
// recoverable trouble (error events, oversize and garbage lines) leaves the
// run going to completion.
func TestE2EAgentFaults(t *testing.T) {
	t.Parallel()
	s := startE2E(t, "DOCSTREAM_AGENT_MAX_LINE_BYTES=1048576")
	type check func(t *testing.T, cr documents.ChatResponse, errs []documents.Document, metas []documents.ErrorMeta)
	lastIsError := func(code, content, details string, stop documents.StopReason) check {
		return func(t *testing.T, cr documents.ChatResponse, errs []documents.Document, metas []documents.ErrorMeta) {
			if cr.Status != documents.StatusError || cr.Metadata.StopReason != stop {
				t.Errorf("status %s stopReason %q, want error %q", cr.Status, cr.Metadata.StopReason, stop)
			}
			if len(errs) != 1 || errs[0].ID != cr.Documents[len(cr.Documents)-1].ID {
				t.Fatalf("want one error document, last; got %d of %d documents", len(errs), len(cr.Documents))
			}
			if metas[0].ErrorCode != code || !strings.Contains(str(errs[0].Content), content) || !strings.Contains(metas[0].Details, details) {
				t.Errorf("error document %q %+v, want %s containing %q with details containing %q", str(errs[0].Content), metas[0], code, content, details)
			}
		}
	}
	cases := []struct {
		prompt string
		check  check
	}{
		{"fault:crash", func(t *testing.T, cr documents.ChatResponse, errs []documents.Document, metas []documents.ErrorMeta) {
			lastIsError(documents.CodeAgentExited, "code 1", "Error: simulated crash", documents.StopAgentExit)(t, cr, errs, metas)
			if metas[0].Source != "cursor-agent" {
				t.Errorf("source %q", metas[0].Source)
			}
			// The tool call left open by the crash is closed, not dropped.
			for _, d := range cr.Documents {
				if d.Type == documents.TypeTerminalCommand {
					if m := e2eMeta(t, d); m["exitCode"] != nil || m["reason"] == nil {
						t.Errorf("the open command at the crash: %v", m)
					}
					return
				}
			}
			t.Errorf("the open command is missing")
		}},
		{"fault:no-result", lastIsError(documents.CodeNoResult, "", "", documents.StopAgentExit)},
		{"fault:exit-signal", lastIsError(documents.CodeAgentExited, "signal", "", documents.StopAgentExit)},
		{"fault:is-error", lastIsError(documents.CodeAgentError, "simulated agent error", "", documents.StopAgentError)},
		{"fault:error-event", func(t *testing.T, cr documents.ChatResponse, errs []documents.Document, metas []documents.ErrorMeta) {
			if cr.Status != documents.StatusCompleted || len(errs) != 1 || metas[0].ErrorCode != documents.CodeAgentError ||
				str(errs[0].Content) != "upstream hiccup" {
				t.Fatalf("status %s errors %d %+v", cr.Status, len(errs), metas)
			}
			last := cr.Documents[len(cr.Documents)-1]
			if last.Sequence <= errs[0].Sequence || !strings.Contains(str(last.Content), "The README describes") {
				t.Errorf("the run did not go on after the error event: last %s %q", last.Type, str(last.Content))
			}
		}},
		{"fault:oversize", func(t *testing.T, cr documents.ChatResponse, errs []documents.Document, metas []documents.ErrorMeta) {
			if cr.Status != documents.StatusCompleted || len(errs) != 1 || metas[0].ErrorCode != documents.CodeLineTooLong {
				t.Fatalf("status %s errors %+v", cr.Status, metas)
			}
			if !strings.Contains(metas[0].Details, "1048576") {
				t.Errorf("details %q do not name the configured limit", metas[0].Details)
			}
			last := cr.Documents[len(cr.Documents)-1]
			if last.Sequence <= errs[0].Sequence || !strings.Contains(str(last.Content), "10 MiB of numbered lines") {
				t.Errorf("the stream did not go on after the long line: last %s %q", last.Type, str(last.Content))
			}
		}},
		{"fault:garbage", func(t *testing.T, cr documents.ChatResponse, errs []documents.Document, metas []documents.ErrorMeta) {
			if cr.Status != documents.StatusCompleted || len(errs) != 0 {
				t.Fatalf("status %s errors %+v", cr.Status, metas)
			}
			var all strings.Builder
			for _, d := range cr.Documents {
				all.WriteString(str(d.Content))
			}
			if n := strings.Count(all.String(), "I'll check the repository status first."); n != 1 {
				t.Errorf("the text around the garbage appears %d times: %q", n, all.String())
			}
			if strings.Contains(all.String(), "T: [internal]") || strings.Contains(all.String(), "RetriableError") {
				t.Errorf("garbage reached the documents: %q", all.String())
			}
			m := s.e2eWaitMetrics(t, func(m map[string]float64) bool {
				return m[`docstream_agent_lines_skipped_total{reason="not_json"}`] >= 2 && m[`docstream_agent_lines_skipped_total{reason="unknown_type"}`] >= 1
			})
			if m[`docstream_agent_lines_skipped_total{reason="not_json"}`] < 2 || m[`docstream_agent_lines_skipped_total{reason="unknown_type"}`] < 1 {
				t.Errorf("skipped lines not counted: not_json %v unknown_type %v",
					m[`docstream_agent_lines_skipped_total{reason="not_json"}`], m[`docstream_agent_lines_skipped_total{reason="unknown_type"}`])
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.prompt, func(t *testing.T) {
			t.Parallel()
			_, evs := s.chatStream(t, map[string]any{"prompt": c.prompt})
			cr := fold(t, evs) // ids 1..n, one done, last
			done := e2eData(t, evs[len(evs)-1])
			if done["status"] != string(cr.Status) {
				t.Errorf("done status %v, response %s", done["status"], cr.Status)
			}
			errs, metas := e2eErrorDocs(t, cr)
			c.check(t, cr, errs, metas)
		})
	}
}

// TestE2EBadRequests checks that bad bodies are refused before any agent
// starts, with a 4xx and {"error":{"code","message"}}.
func TestE2EBadRequests(t *testing.T) {
	t.Parallel()
	s := startE2E(t)
	cases := []struct {
		name, body string
		status     int
		mention    string // the message must contain it
	}{
		{"broken JSON", `{"prompt": "hi"`, 400, ""},
		{"not JSON", `prompt=hi`, 400, ""},
		{"not an object", `["hi"]`, 400, ""},
		{"empty body", ``, 400, ""},
		{"trailing garbage", `{"prompt":"hi"} {"x":1}`, 400, ""},
		{"unknown field", `{"prompt":"hi","temperature":0.2}`, 400, "temperature"},
		{"prompt not a string", `{"prompt":42}`, 400, "prompt"},
		{"stream not a bool", `{"prompt":"hi","stream":"yes"}`, 400, "stream"},
		{"messages not a list", `{"messages":"hi"}`, 400, "messages"},
		{"no prompt", `{}`, 400, ""},
		{"empty prompt", `{"prompt":""}`, 400, ""},
		{"blank prompt", `{"prompt":"  \n\t "}`, 400, ""},
		{"no user message", `{"messages":[{"role":"assistant","content":"hi"}]}`, 400, ""},
		{"role in capitals", `{"messages":[{"role":"user","content":"echo a"},{"role":"Assistant","content":"b"}]}`, 400, "Assistant"},
		{"unknown role", `{"messages":[{"role":"bogus","content":"echo a"}]}`, 400, "bogus"},
		{"prompt and messages", `{"prompt":"echo a","messages":[{"role":"user","content":"echo b"}]}`, 400, "not both"},
		{"ends with a reply", `{"messages":[{"role":"user","content":"echo rm -r build"},{"role":"assistant","content":"Done."}]}`, 400, `"assistant"`},
		{"bad mode", `{"prompt":"hi","mode":"yolo"}`, 400, "yolo"},
		{"unknown workspace", `{"prompt":"hi","workspace":"nope"}`, 400, "nope"},
		{"workspace path", `{"prompt":"hi","workspace":"` + s.Workspace + `"}`, 400, ""},
		{"workspace relative path", `{"prompt":"hi","workspace":"../main"}`, 400, ""},
		{"conversationId flag", `{"prompt":"hi","conversationId":"-rf"}`, 400, "conversationId"},
		{"conversationId double dash", `{"prompt":"hi","conversationId":"--resume"}`, 400, "conversationId"},
		{"conversationId newline", `{"prompt":"hi","conversationId":"abc\ndef"}`, 400, "conversationId"},
		{"model flag", `{"prompt":"hi","model":"--force"}`, 400, ""},
		{"NUL in prompt", `{"prompt":"a\u0000b"}`, 400, ""},
	}
	for _, c := range cases {
		resp := s.e2eDo(t, http.MethodPost, "/v1/chat", c.body)
		code, msg := e2eErrorBody(t, resp, c.status)
		if !strings.Contains(msg, c.mention) {
			t.Errorf("%s: message %q does not mention %q", c.name, msg, c.mention)
		}
		if c.name == "unknown field" && code != "unknown_field" {
			t.Errorf("%s: code %q", c.name, code)
		}
	}
	if starts := s.simStarts(t); len(starts) != 0 {
		t.Errorf("bad requests started %d agents: %v", len(starts), starts)
	}
	if n := s.e2eMetrics(t)[`docstream_rejected_requests_total{reason="bad_request"}`]; n < float64(len(cases)) {
		t.Errorf("rejected bad_request = %v, want at least %d", n, len(cases))
	}
	// The server still works.
	if cr := s.chatJSON(t, map[string]any{"prompt": "echo still fine"}); cr.Status != documents.StatusCompleted {
		t.Errorf("status %s after the bad requests", cr.Status)
	}
}

// TestE2EHealthAndMetrics checks /healthz, /readyz (also of a --demo
// process) and that /metrics counts a run: outcome, documents by type, time
// to first document, tokens.
func TestE2EHealthAndMetrics(t *testing.T) {
	t.Parallel()
	t.Run("demo", func(t *testing.T) {
		t.Parallel()
		addr := freeAddr(t)
		cmd := exec.Command(binary, "--demo", "--addr", addr)
		cmd.Dir = t.TempDir()
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "DOCSTREAM_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, "DOCSTREAM_LOG_FORMAT=json")
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		})
		var ready map[string]any
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err == nil {
				b := readAll(t, resp)
				if resp.StatusCode == 200 && json.Unmarshal(b, &ready) == nil {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("--demo did not get ready:\n%s", out.String())
			}
		}
		agent, _ := ready["agent"].(map[string]any)
		if ready["status"] != "ready" || agent["simulator"] != true || ready["store"] != "ok" {
			t.Errorf("--demo /readyz %v", ready)
		}
		if !strings.Contains(out.String(), "simulator") {
			t.Errorf("--demo does not say that the agent is the simulator:\n%s", out.String())
		}
	})

	s := startE2E(t)
	var health map[string]any
	s.e2eGetJSON(t, "/healthz", 200, &health)
	if health["status"] != "ok" {
		t.Errorf("/healthz %v", health)
	}
	var ready map[string]any
	s.e2eGetJSON(t, "/readyz", 200, &ready)
	agent, _ := ready["agent"].(map[string]any)
	if ready["status"] != "ready" || ready["store"] != "ok" || agent["simulator"] != false || agent["binary"] != binary {
		t.Errorf("/readyz %v", ready)
	}

	text := s.metrics(t)
	for _, name := range []string{"docstream_http_requests_total", "docstream_http_request_duration_seconds", "docstream_runs_in_flight",
		"docstream_runs_limit", "docstream_run_queue_length", "docstream_runs_total", "docstream_run_duration_seconds",
		"docstream_time_to_first_document_seconds", "docstream_documents_total", "docstream_agent_lines_skipped_total",
		"docstream_tokens_total", "docstream_agent_exits_total", "docstream_agent_spawn_failures_total",
		"docstream_rejected_requests_total", "docstream_stream_subscribers",
		"docstream_connections_open", "docstream_connections_limit"} {
		if !strings.Contains(text, "# TYPE "+name+" ") {
			t.Errorf("/metrics has no %s", name)
		}
	}
	before := s.e2eMetrics(t)
	for _, o := range []string{"completed", "error", "cancelled", "timeout", "interrupted", "shutdown", "agent_exit", "agent_error"} {
		if _, ok := before[`docstream_runs_total{model="auto",outcome="`+o+`"}`]; !ok {
			t.Errorf(`docstream_runs_total{model="auto",outcome=%q} is not pre-initialised`, o)
		}
	}
	if before[`docstream_runs_limit`] != 16 {
		t.Errorf("docstream_runs_limit %v", before[`docstream_runs_limit`])
	}

	cr := s.chatJSON(t, map[string]any{"prompt": "tour"})
	// Some series move just after done: the request line when the handler
	// returns, the agent's exit after the result.
	after := s.e2eWaitMetrics(t, func(m map[string]float64) bool {
		return m[`docstream_http_requests_total{code="200",method="POST",route="/v1/chat"}`] > before[`docstream_http_requests_total{code="200",method="POST",route="/v1/chat"}`] &&
			e2eSum(m, "docstream_agent_exits_total{") > e2eSum(before, "docstream_agent_exits_total{") &&
			m["docstream_runs_in_flight"] == 0
	})
	delta := func(series string) float64 { return after[series] - before[series] }
	if d := delta(`docstream_runs_total{model="auto",outcome="completed"}`); d != 1 {
		t.Errorf("runs_total completed +%v, want +1", d)
	}
	if e2eSum(after, "docstream_build_info{") != 1 {
		t.Errorf("docstream_build_info is not exported once")
	}
	// A model the agent lists has a label of its own.
	if cr := s.chatJSON(t, map[string]any{"prompt": "hello", "model": "sim-fast"}); cr.Status != documents.StatusCompleted {
		t.Fatalf("a run of sim-fast: %s", cr.Status)
	}
	s.e2eWaitMetrics(t, func(m map[string]float64) bool {
		return m[`docstream_runs_total{model="sim-fast",outcome="completed"}`] == 1
	})
	count := map[documents.Type]float64{}
	for _, d := range cr.Documents {
		count[d.Type]++
	}
	for _, typ := range documents.Types {
		if d := delta(`docstream_documents_total{type="` + string(typ) + `"}`); d != count[typ] {
			t.Errorf("documents_total{type=%q} +%v, the response has %v", typ, d, count[typ])
		}
	}
	for _, h := range []string{"docstream_time_to_first_document_seconds_count", "docstream_run_duration_seconds_count"} {
		if d := delta(h); d != 1 {
			t.Errorf("%s +%v, want +1", h, d)
		}
	}
	if after["docstream_time_to_first_document_seconds_count"] <= 0 || after["docstream_time_to_first_document_seconds_sum"] <= 0 {
		t.Errorf("time to first document not observed")
	}
	if d := delta(`docstream_tokens_total{kind="prompt",model="auto"}`); d != float64(cr.Usage.PromptTokens) {
		t.Errorf("tokens_total prompt +%v, usage %d", d, cr.Usage.PromptTokens)
	}
	if d := e2eSum(after, "docstream_agent_exits_total{") - e2eSum(before, "docstream_agent_exits_total{"); d != 1 {
		t.Errorf("agent_exits_total +%v, want +1", d)
	}
	if after["docstream_runs_in_flight"] != 0 || after["docstream_stream_subscribers"] != 0 {
		t.Errorf("in flight %v, subscribers %v after the run", after["docstream_runs_in_flight"], after["docstream_stream_subscribers"])
	}
}

// TestE2ERequestLogs checks the request log: one JSON line per request with
// its request id, and never the prompt.
func TestE2ERequestLogs(t *testing.T) {
	t.Parallel()
	s := startE2E(t)
	secret := e2eMarker("PROMPT")
	ids := map[string]int{e2eMarker("req-json"): 200, e2eMarker("req-stream"): 200, e2eMarker("req-bad"): 400, e2eMarker("req-health"): 200}
	var responseID string
	for id, want := range ids {
		var resp *http.Response
		switch {
		case strings.HasPrefix(id, "req-json"):
			resp = s.e2eDo(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": "echo " + secret}, "X-Request-Id", id)
			responseID = resp.Header.Get("X-Docstream-Response-Id")
		case strings.HasPrefix(id, "req-stream"):
			resp = s.e2eDo(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": "tour " + secret, "stream": true}, "X-Request-Id", id)
		case strings.HasPrefix(id, "req-bad"):
			resp = s.e2eDo(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": secret, "bogus": secret}, "X-Request-Id", id)
		default:
			resp = s.e2eDo(t, http.MethodGet, "/healthz", nil, "X-Request-Id", id)
		}
		b := readAll(t, resp)
		if resp.StatusCode != want || resp.Header.Get("X-Request-Id") != id {
			t.Errorf("%s: status %d X-Request-Id %q: %s", id, resp.StatusCode, resp.Header.Get("X-Request-Id"), clip(string(b)))
		}
	}

	var lines []map[string]any
	deadline := time.Now().Add(5 * time.Second)
	for {
		lines = lines[:0]
		seen := 0
		sc := bufio.NewScanner(strings.NewReader(s.Logs()))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "{") {
				if !strings.HasPrefix(line, "docstream listening on ") {
					t.Errorf("a log line that is not JSON: %q", line)
				}
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			lines = append(lines, m)
			if _, ok := ids[e2eStr(m["request_id"])]; ok {
				seen++
			}
		}
		if seen >= len(ids) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	perID := map[string][]map[string]any{}
	for _, m := range lines {
		if m["message"] != "request" {
			continue
		}
		rid := e2eStr(m["request_id"])
		if rid == "" {
			t.Errorf("a request line without request_id: %v", m)
		}
		perID[rid] = append(perID[rid], m)
	}
	for id, status := range ids {
		ls := perID[id]
		if len(ls) != 1 {
			t.Errorf("%s: %d request lines, want 1", id, len(ls))
			continue
		}
		if ls[0]["status"] != float64(status) || ls[0]["level"] == nil || ls[0]["route"] == nil || ls[0]["method"] == nil {
			t.Errorf("%s: request line %v", id, ls[0])
		}
		if strings.HasPrefix(id, "req-json") && ls[0]["response_id"] != responseID {
			t.Errorf("%s: response_id %v, want %s", id, ls[0]["response_id"], responseID)
		}
		if strings.HasPrefix(id, "req-bad") && ls[0]["error"] != "unknown_field" {
			t.Errorf("%s: error %v", id, ls[0]["error"])
		}
	}
	if strings.Contains(s.Logs(), secret) {
		t.Errorf("the prompt reached the logs:\n%s", s.Logs())
	}
}

// e2eSum adds up the series whose names start with prefix.
func e2eSum(m map[string]float64, prefix string) float64 {
	var n float64
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			n += v
		}
	}
	return n
}

func e2eStr(v any) string {
	s, _ := v.(string)
	return s
}

// TestUnknownEnvWarned: a DOCSTREAM_* variable that nothing reads (a typo,
// which was silently ignored) is named in one warning at start, with the
// known name it is close to, and never with its value; the variables of the
// configuration, the simulator, the test harnesses and Kubernetes' service
// links are not.
func TestUnknownEnvWarned(t *testing.T) {
	t.Parallel()
	secret := e2eMarker("KEY")
	s := startServer(t, "DOCSTREAM_STORE_DRIVR=memory", "DOCSTREAM_AUTH_API_KEY="+secret, "DOCSTREAM_NOTHING_LIKE_IT=1")
	want := map[string]string{"DOCSTREAM_STORE_DRIVR": "DOCSTREAM_STORE_DRIVER", "DOCSTREAM_AUTH_API_KEY": "DOCSTREAM_AUTH_API_KEYS",
		"DOCSTREAM_NOTHING_LIKE_IT": ""}
	got := unknownEnvWarnings(t, s)
	for name, suggestion := range want {
		msgs := got[name]
		if len(msgs) != 1 {
			t.Errorf("%s: %d warnings, want 1: %q", name, len(msgs), msgs)
			continue
		}
		if hint := "did you mean " + suggestion + "?"; suggestion != "" && !strings.Contains(msgs[0], hint) {
			t.Errorf("%s: warning %q does not say %q", name, msgs[0], hint)
		}
		if suggestion == "" && strings.Contains(msgs[0], "did you mean") {
			t.Errorf("%s: warning %q suggests a name that is not close", name, msgs[0])
		}
	}
	if len(got) != len(want) {
		t.Errorf("warnings about %v, want only %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	if strings.Contains(s.Logs(), secret) {
		t.Errorf("the value of a variable reached the logs")
	}

	valid := startServer(t, "DOCSTREAM_SIM_SPEED=0", "DOCSTREAM_SIM_SCENARIO=tour", "DOCSTREAM_TEST_NORACE=1",
		"DOCSTREAM_BIN=/usr/local/bin/docstream", "DOCSTREAM_URL=http://127.0.0.1:1", "DOCSTREAM_STORE_DRIVER=memory",
		"DOCSTREAM_SERVICE_HOST=10.0.0.7", "DOCSTREAM_SERVICE_PORT=8080", "DOCSTREAM_SERVICE_PORT_HTTP=8080",
		"DOCSTREAM_PORT=tcp://10.0.0.7:8080", "DOCSTREAM_PORT_8080_TCP=tcp://10.0.0.7:8080", "DOCSTREAM_PORT_8080_TCP_PROTO=tcp",
		"DOCSTREAM_PORT_8080_TCP_PORT=8080", "DOCSTREAM_PORT_8080_TCP_ADDR=10.0.0.7")
	if got := unknownEnvWarnings(t, valid); len(got) != 0 {
		t.Errorf("warnings about known variables: %v", got)
	}
}

// unknownEnvWarnings returns the start-up warnings about unknown variables
// by the variable they name.
func unknownEnvWarnings(t *testing.T, s *testServer) map[string][]string {
	t.Helper()
	// The line saying it listens comes after the warnings.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(s.Logs(), `"message":"docstream listening"`); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no start-up line in the logs:\n%s", s.Logs())
		}
	}
	out := map[string][]string{}
	for _, line := range strings.Split(s.Logs(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["level"] != "warn" || !strings.Contains(e2eStr(m["message"]), "unknown environment variable") {
			continue
		}
		name := e2eStr(m["variable"])
		out[name] = append(out[name], e2eStr(m["message"]))
	}
	return out
}
