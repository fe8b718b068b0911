package openai_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/openai"
	"github.com/docstream/docstream/sse"
)

// events builds a document stream the way the segmenter emits it.
type events struct {
	evs []documents.Event
	n   int
}

func (s *events) nextID() string {
	s.n++
	return documents.DocID(s.n)
}

// text adds a text-like document (text, code_block, code_reference, error)
// whose content arrives in deltas.
func (s *events) text(typ documents.Type, meta string, deltas ...string) *events {
	id := s.nextID()
	start := documents.DocumentStart{ID: id, Type: typ, Sequence: s.n}
	if typ == documents.TypeCodeBlock || typ == documents.TypeCodeReference {
		start.Metadata = jsontext.Value(meta)
	}
	s.evs = append(s.evs, start)
	for _, d := range deltas {
		s.evs = append(s.evs, documents.ContentDelta{DocumentID: id, Delta: d})
	}
	content := strings.Join(deltas, "")
	s.evs = append(s.evs, documents.DocumentEnd{DocumentID: id, FinalContent: &content, Metadata: jsontext.Value(meta)})
	return s
}

// tool adds a tool-derived document: start, tool name, arguments, result
// and its end with the full metadata and content (nil for none).
func (s *events) tool(typ documents.Type, name, callID, args, meta string, content *string) *events {
	id := s.nextID()
	s.evs = append(s.evs,
		documents.DocumentStart{ID: id, Type: typ, Sequence: s.n},
		documents.ToolCallStart{DocumentID: id, ToolName: name, ToolCallID: callID},
		documents.ToolCallArguments{DocumentID: id, Arguments: jsontext.Value(args)},
		documents.ToolResultEvent{DocumentID: id, Result: documents.ToolResult{Status: "success", Data: jsontext.Value(`{}`)}},
		documents.DocumentEnd{DocumentID: id, FinalContent: content, Metadata: jsontext.Value(meta)},
	)
	return s
}

func (s *events) think(delta string) *events {
	s.evs = append(s.evs, documents.ThinkingDelta{Delta: delta})
	return s
}

func (s *events) done() *events {
	s.evs = append(s.evs, documents.Done{ID: "chat_1", Status: documents.StatusCompleted})
	return s
}

func ptr(s string) *string { return &s }

// rendered is what a Renderer made of a stream.
type rendered struct {
	content   string // Renderer.Content()
	pieces    string // the content pieces joined: what a client receives
	reasoning string
	toolCalls []openai.ToolCallDelta
	comments  []string
}

func render(t *testing.T, mode, reasoning string, evs []documents.Event) rendered {
	t.Helper()
	r := &openai.Renderer{Mode: mode, Reasoning: reasoning}
	var out rendered
	for _, ev := range evs {
		for _, p := range r.Event(ev) {
			n := 0
			if p.Content != "" {
				n++
				out.pieces += p.Content
			}
			if p.Reasoning != "" {
				n++
				out.reasoning += p.Reasoning
			}
			if p.ToolCall != nil {
				n++
				out.toolCalls = append(out.toolCalls, *p.ToolCall)
			}
			if p.Comment != "" {
				n++
				out.comments = append(out.comments, p.Comment)
			}
			if n != 1 {
				t.Errorf("a piece must carry exactly one of content, reasoning, tool call, comment: %+v", p)
			}
		}
	}
	out.content = r.Content()
	if out.pieces != out.content {
		t.Errorf("the pieces do not add up to the content (text lost or duplicated):\npieces:  %q\ncontent: %q", out.pieces, out.content)
	}
	return out
}

func TestRenderMarkdown(t *testing.T) {
	const (
		codeMeta = `{"language":"go","purpose":"new_code"}`
		refMeta  = `{"filePath":"src/main.py","startLine":12,"endLine":14,"language":"python"}`
	)
	tests := []struct {
		name string
		evs  *events
		want string
	}{{
		name: "text as is",
		evs:  new(events).text(documents.TypeText, `{"format":"markdown"}`, "Hello ", "**world**", ", a `b` and\n\n- a list"),
		want: "Hello **world**, a `b` and\n\n- a list",
	}, {
		name: "text documents are separated by a blank line",
		evs:  new(events).text(documents.TypeText, `{}`, "One.").text(documents.TypeText, `{}`, "Two.\n").text(documents.TypeText, `{}`, "Three."),
		want: "One.\n\nTwo.\n\nThree.",
	}, {
		name: "code block fenced with its language",
		evs: new(events).text(documents.TypeText, `{}`, "Here:").
			text(documents.TypeCodeBlock, codeMeta, "package main\n\n", "func main() {}").
			text(documents.TypeText, `{}`, "Done."),
		want: "Here:\n\n```go\npackage main\n\nfunc main() {}\n```\n\nDone.",
	}, {
		name: "code block without a language",
		evs:  new(events).text(documents.TypeCodeBlock, `{"language":"","purpose":"example"}`, "$ make"),
		want: "```\n$ make\n```\n",
	}, {
		name: "code reference with its path:start-end caption",
		evs:  new(events).text(documents.TypeCodeReference, refMeta, "def greet(name):\n", "    return name"),
		want: "`src/main.py:12-14`\n```python\ndef greet(name):\n    return name\n```\n",
	}, {
		name: "file edit with a unified diff",
		evs: new(events).tool(documents.TypeFileEdit, "edit_file", "call_1", `{"path":"src/a.go"}`,
			`{"filePath":"src/a.go","operation":"edit","language":"go","diff":{"oldString":"old","newString":"new","startLine":1,"endLine":1},"unifiedDiff":"--- a/src/a.go\n+++ b/src/a.go\n@@ -1 +1 @@\n-old\n+new\n","linesAdded":1,"linesRemoved":1}`,
			ptr("new")),
		want: "**Edited `src/a.go`** (+1 −1)\n```diff\n--- a/src/a.go\n+++ b/src/a.go\n@@ -1 +1 @@\n-old\n+new\n```\n\n",
	}, {
		name: "file edit with old and new strings only",
		evs: new(events).tool(documents.TypeFileEdit, "edit_file", "call_1", `{}`,
			`{"filePath":"b.txt","operation":"edit","language":"","diff":{"oldString":"a\nb","newString":"c","startLine":3,"endLine":4}}`, ptr("c")),
		want: "**Edited `b.txt`**\n```diff\n-a\n-b\n+c\n```\n\n",
	}, {
		name: "file created: its content fenced with its language",
		evs: new(events).tool(documents.TypeFileEdit, "edit_file", "call_1", `{}`,
			`{"filePath":"src/config.py","operation":"create","language":"python","diff":null,"linesAdded":1,"linesRemoved":0}`, ptr("GREETING = \"Hello\"\n")),
		want: "**Created `src/config.py`** (+1 −0)\n```python\nGREETING = \"Hello\"\n```\n\n",
	}, {
		name: "file deleted",
		evs: new(events).tool(documents.TypeFileEdit, "delete_file", "call_1", `{}`,
			`{"filePath":"old.py","operation":"delete","language":"python","diff":null}`, nil),
		want: "**Deleted `old.py`**\n\n",
	}, {
		name: "file edit rejected",
		evs: new(events).tool(documents.TypeFileEdit, "edit_file", "call_1", `{}`,
			`{"filePath":"x.go","operation":"edit","language":"go","diff":null,"rejected":true,"reason":"user rejected"}`, nil),
		want: "**File edit rejected:** `x.go` (not applied)\n\n",
	}, {
		name: "terminal command: shell block, output, exit code",
		evs: new(events).tool(documents.TypeTerminalCommand, "run_terminal_cmd", "call_1", `{"command":"go test ./..."}`,
			`{"command":"go test ./...","workingDirectory":"/w","exitCode":0,"output":"ok  \tpkg\t0.1s\n","duration_ms":1500,"permissions":[]}`, nil),
		want: "```shell\n$ go test ./...\nok  \tpkg\t0.1s\n```\nexit code 0 · 1.5 s\n\n",
	}, {
		name: "terminal command that failed",
		evs: new(events).tool(documents.TypeTerminalCommand, "run_terminal_cmd", "call_1", `{}`,
			`{"command":"false","workingDirectory":"/w","exitCode":1,"output":"","duration_ms":0,"permissions":[]}`, nil),
		want: "```shell\n$ false\n```\nexit code 1\n\n",
	}, {
		name: "terminal command rejected",
		evs: new(events).tool(documents.TypeTerminalCommand, "run_terminal_cmd", "call_1", `{}`,
			`{"command":"rm -rf build/","workingDirectory":"/w","exitCode":null,"output":"","duration_ms":0,"permissions":[],"rejected":true}`, nil),
		want: "`$ rm -rf build/` — rejected, not run\n\n",
	}, {
		name: "plan as a checklist",
		evs: new(events).tool(documents.TypePlan, "create_plan", "call_1", `{}`,
			`{"title":"Ship it","overview":"Two steps.","todos":[{"id":"a","content":"Write the code","status":"completed","dependencies":[]},{"id":"b","content":"Test it","status":"pending","dependencies":["a"]},{"id":"c","content":"Drop it","status":"cancelled","dependencies":[]}],"format":"markdown"}`,
			ptr("# Ship it")),
		want: "### Plan: Ship it\nTwo steps.\n\n- [x] Write the code\n- [ ] Test it (after: a)\n- [ ] ~~cancelled~~ Drop it\n\n",
	}, {
		name: "todo update as a checklist",
		evs: new(events).tool(documents.TypeTodoUpdate, "todo_write", "call_1", `{}`,
			`{"todos":[{"id":"a","status":"completed","content":"Write the code"},{"id":"b","status":"in_progress"}]}`, nil),
		want: "**Tasks:**\n- [x] Write the code\n- [ ] (in progress) b\n\n",
	}, {
		name: "clarification as numbered questions with options",
		evs: new(events).tool(documents.TypeClarification, "ask_question", "call_1", `{}`,
			`{"questions":[{"id":"q1","text":"Which auth?","options":[{"id":"jwt","label":"JSON Web Tokens"},{"id":"session","label":"Sessions"}]},{"id":"q2","text":"Which database?","options":[{"id":"pg","label":"PostgreSQL"}]}]}`,
			ptr("Two choices")),
		want: "**Two choices**\n1. Which auth?\n   - `jwt` JSON Web Tokens\n   - `session` Sessions\n2. Which database?\n   - `pg` PostgreSQL\n\n",
	}, {
		name: "other tool calls as one compact line",
		evs: new(events).
			tool(documents.TypeToolCall, "read_file", "call_1", `{"path":"src/main.py"}`,
				`{"toolName":"read_file","toolCallId":"call_1","arguments":{"path":"src/main.py"},"result":{"status":"success","data":{"content":"x"}},"duration_ms":3}`, nil).
			tool(documents.TypeToolCall, "grep", "call_2", `{"pattern":"def greet"}`,
				`{"toolName":"grep","toolCallId":"call_2","arguments":{"pattern":"def greet"},"result":{"status":"error","data":{"error":"boom"}},"duration_ms":3}`, nil).
			tool(documents.TypeToolCall, "list_dir", "call_3", `{}`,
				`{"toolName":"list_dir","toolCallId":"call_3","arguments":{},"result":{"status":"error","data":null},"duration_ms":0,"rejected":true}`, nil),
		want: "> `read_file` `src/main.py` — ok\n\n> `grep` `def greet` — error\n\n> `list_dir` — rejected\n\n",
	}, {
		name: "error document",
		evs: new(events).text(documents.TypeText, `{}`, "Working.").
			text(documents.TypeError, `{"errorCode":"AGENT_EXITED","source":"cursor-agent","details":"Error: simulated crash\n"}`, "the agent exited with code 1"),
		want: "Working.\n\n**Error:** the agent exited with code 1 (AGENT_EXITED)\n```\nError: simulated crash\n```\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := tt.evs.done().evs
			for _, reasoning := range []string{openai.ReasoningContent, openai.ReasoningThink, openai.ReasoningOff} {
				got := render(t, openai.RenderMarkdown, reasoning, evs)
				if got.content != tt.want {
					t.Errorf("reasoning %s:\n got: %q\nwant: %q", reasoning, got.content, tt.want)
				}
				if len(got.toolCalls) != 0 || got.reasoning != "" {
					t.Errorf("markdown mode sent tool calls or reasoning: %+v", got)
				}
			}
			// The default mode is markdown.
			if got := render(t, "", "", evs); got.content != tt.want {
				t.Errorf("the zero Renderer does not render markdown:\n got: %q\nwant: %q", got.content, tt.want)
			}
		})
	}
}

// TestMarkdownClips keeps huge outputs out of a chat window.
func TestMarkdownClips(t *testing.T) {
	out := strings.Repeat("x", 20000)
	meta := fmt.Sprintf(`{"command":"cat big","workingDirectory":"/w","exitCode":0,"output":%q,"duration_ms":0,"permissions":[]}`, out)
	md := openai.Markdown(documents.TypeTerminalCommand, "", jsontext.Value(meta))
	if len(md) > 9000 || !strings.Contains(md, "… (cut)") || !strings.HasSuffix(md, "exit code 0\n\n") {
		t.Errorf("a 20000-byte output rendered as %d bytes, ending %q", len(md), md[max(0, len(md)-40):])
	}
}

// tourLike is a stream with text, code and every tool-derived type.
func tourLike() *events {
	return new(events).
		think("Looking around.").
		text(documents.TypeText, `{}`, "Let me look.").
		tool(documents.TypeToolCall, "read_file", "call_r", `{"path":"a.go"}`,
			`{"toolName":"read_file","toolCallId":"call_r","arguments":{"path":"a.go"},"result":{"status":"success","data":{}},"duration_ms":1}`, nil).
		text(documents.TypeCodeBlock, `{"language":"go","purpose":"new_code"}`, "x := 1").
		tool(documents.TypeFileEdit, "edit_file", "call_e", `{"path":"a.go","streamContent":"y"}`,
			`{"filePath":"a.go","operation":"edit","language":"go","diff":{"oldString":"x","newString":"y","startLine":1,"endLine":1}}`, ptr("y")).
		tool(documents.TypeTerminalCommand, "", "call_t", `{"command":"go vet"}`,
			`{"command":"go vet","workingDirectory":"/w","exitCode":0,"output":"","duration_ms":10,"permissions":[]}`, nil).
		think("All good.").
		text(documents.TypeText, `{}`, "Done.").
		done()
}

func TestRenderToolCalls(t *testing.T) {
	got := render(t, openai.RenderToolCalls, openai.ReasoningContent, tourLike().evs)
	if want := "Let me look.\n\n```go\nx := 1\n```\n\nDone."; got.content != want {
		t.Errorf("content:\n got: %q\nwant: %q", got.content, want)
	}
	want := []openai.ToolCallDelta{
		{Index: 0, ID: "call_r", Type: "function", Function: openai.FunctionCall{Name: "read_file", Arguments: `{"path":"a.go"}`}},
		{Index: 1, ID: "call_e", Type: "function", Function: openai.FunctionCall{Name: "edit_file", Arguments: `{"path":"a.go","streamContent":"y"}`}},
		// Without a tool name the document type names the call.
		{Index: 2, ID: "call_t", Type: "function", Function: openai.FunctionCall{Name: "terminal_command", Arguments: `{"command":"go vet"}`}},
	}
	if len(got.toolCalls) != len(want) {
		t.Fatalf("tool calls: got %+v, want %+v", got.toolCalls, want)
	}
	for i := range want {
		if got.toolCalls[i] != want[i] {
			t.Errorf("tool call %d:\n got %+v\nwant %+v", i, got.toolCalls[i], want[i])
		}
	}
	// Each delta is a complete call, as OpenAI's first delta of a call is:
	// index, id, type and function.name, and JSON arguments.
	b, err := json.Marshal(got.toolCalls[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"index":0,"id":"call_r","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.go\"}"}}`; string(b) != want {
		t.Errorf("tool call JSON:\n got %s\nwant %s", b, want)
	}
	if got.reasoning != "Looking around.\n\nAll good." {
		t.Errorf("reasoning: %q", got.reasoning)
	}

	// Arguments never seen: an empty object, not an empty string.
	evs := []documents.Event{
		documents.DocumentStart{ID: "doc_001", Type: documents.TypeToolCall, Sequence: 1},
		documents.ToolCallStart{DocumentID: "doc_001", ToolName: "list_dir", ToolCallID: "c"},
		documents.DocumentEnd{DocumentID: "doc_001", Metadata: jsontext.Value(`{"toolName":"list_dir"}`)},
	}
	if got := render(t, openai.RenderToolCalls, openai.ReasoningOff, evs); len(got.toolCalls) != 1 || got.toolCalls[0].Function.Arguments != "{}" {
		t.Errorf("tool call without arguments: %+v", got.toolCalls)
	}
}

func TestRenderTextOnly(t *testing.T) {
	got := render(t, openai.RenderTextOnly, openai.ReasoningOff, tourLike().evs)
	if want := "Let me look.\n\n```go\nx := 1\n```\n\nDone."; got.content != want {
		t.Errorf("content:\n got: %q\nwant: %q", got.content, want)
	}
	if len(got.toolCalls) != 0 || got.reasoning != "" {
		t.Errorf("text-only sent tool calls or reasoning: %+v", got)
	}
	// Errors still show.
	evs := new(events).text(documents.TypeError, `{"errorCode":"CANCELLED","source":"gateway","details":""}`, "the run was cancelled").done().evs
	if got := render(t, openai.RenderTextOnly, openai.ReasoningOff, evs); got.content != "**Error:** the run was cancelled (CANCELLED)\n" {
		t.Errorf("error in text-only: %q", got.content)
	}
}

func TestRenderReasoning(t *testing.T) {
	t.Run("reasoning_content", func(t *testing.T) {
		got := render(t, openai.RenderMarkdown, openai.ReasoningContent, tourLike().evs)
		// Separate thinking blocks stay separate paragraphs.
		if got.reasoning != "Looking around.\n\nAll good." {
			t.Errorf("reasoning: %q", got.reasoning)
		}
		if strings.Contains(got.content, "Looking around") || strings.Contains(got.content, "<think>") {
			t.Errorf("reasoning leaked into the content: %q", got.content)
		}
		// The empty setting means reasoning_content.
		if got := render(t, openai.RenderMarkdown, "", tourLike().evs); got.reasoning != "Looking around.\n\nAll good." {
			t.Errorf("default reasoning: %q", got.reasoning)
		}
	})
	t.Run("think", func(t *testing.T) {
		evs := new(events).think("Let me ").think("see.").text(documents.TypeText, `{}`, "Hi.").think("More.").text(documents.TypeText, `{}`, "Bye.").done().evs
		got := render(t, openai.RenderMarkdown, openai.ReasoningThink, evs)
		want := "<think>\nLet me see.\n</think>\n\nHi.\n\n<think>\nMore.\n</think>\n\nBye."
		if got.content != want || got.reasoning != "" {
			t.Errorf("content:\n got: %q\nwant: %q (reasoning %q)", got.content, want, got.reasoning)
		}
	})
	t.Run("think block still open at the end", func(t *testing.T) {
		// Text-only hides the plan: the run shows only thinking, and the
		// block must still be closed.
		evs := new(events).think("Planning.").
			tool(documents.TypePlan, "create_plan", "c", `{}`, `{"title":"P","overview":"","todos":[],"format":"markdown"}`, ptr("# P")).
			think("Done planning.").done().evs
		got := render(t, openai.RenderTextOnly, openai.ReasoningThink, evs)
		if want := "<think>\nPlanning.\n\nDone planning.\n</think>\n"; got.content != want {
			t.Errorf("content:\n got: %q\nwant: %q", got.content, want)
		}
	})
	t.Run("off", func(t *testing.T) {
		got := render(t, openai.RenderMarkdown, openai.ReasoningOff, tourLike().evs)
		if got.reasoning != "" || strings.Contains(got.content, "Looking") {
			t.Errorf("reasoning off still sent it: %+v", got)
		}
	})
}

func TestUsageOf(t *testing.T) {
	u := openai.UsageOf(documents.Usage{PromptTokens: 120, CompletionTokens: 30, TotalTokens: 150, CacheReadTokens: 4000, CacheWriteTokens: 50, Reported: true})
	if u.PromptTokens != 4170 || u.CompletionTokens != 30 || u.TotalTokens != 4200 {
		t.Errorf("usage %+v: want prompt 120+4000+50 = 4170, completion 30, total 4200", u)
	}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"prompt_tokens":4170,"completion_tokens":30,"total_tokens":4200,"prompt_tokens_details":{"cached_tokens":4000}}`; string(b) != want {
		t.Errorf("usage JSON:\n got %s\nwant %s", b, want)
	}
	// No usage reported: zeros, and the details are still an object.
	b, _ = json.Marshal(openai.UsageOf(documents.Usage{}))
	if want := `{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0,"prompt_tokens_details":{"cached_tokens":0}}`; string(b) != want {
		t.Errorf("zero usage JSON:\n got %s\nwant %s", b, want)
	}
}

// A chunk stream as OpenAI sends it: the first delta names the role, text
// follows in delta.content, the finish chunk has an empty delta, the usage
// chunk has no choices, and [DONE] ends the stream. Events have no event:
// or id: field.
func ExampleChunk() {
	var w bytes.Buffer
	chunk := func(d openai.ChunkDelta, finish *string) {
		b, _ := json.Marshal(openai.Chunk{ID: "chatcmpl-1", Object: "chat.completion.chunk", Created: 1767225600, Model: "auto",
			Choices: []openai.ChunkChoice{{Delta: d, FinishReason: finish}}})
		_ = sse.WriteData(&w, b)
	}
	empty, hello, stop := "", "Hello", "stop"
	chunk(openai.ChunkDelta{Role: "assistant", Content: &empty}, nil)
	chunk(openai.ChunkDelta{Content: &hello}, nil)
	chunk(openai.ChunkDelta{}, &stop)
	u := openai.UsageOf(documents.Usage{PromptTokens: 10, CompletionTokens: 2, CacheReadTokens: 5})
	b, _ := json.Marshal(openai.Chunk{ID: "chatcmpl-1", Object: "chat.completion.chunk", Created: 1767225600, Model: "auto",
		Choices: []openai.ChunkChoice{}, Usage: &u})
	_ = sse.WriteData(&w, b)
	_ = sse.WriteData(&w, []byte("[DONE]"))
	// Lines end with CRLF on the wire.
	fmt.Print(strings.ReplaceAll(w.String(), "\r\n", "\n"))
	// Output:
	// data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"auto","system_fingerprint":null,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}
	//
	// data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"auto","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}
	//
	// data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"auto","system_fingerprint":null,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}
	//
	// data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1767225600,"model":"auto","system_fingerprint":null,"choices":[],"usage":{"prompt_tokens":15,"completion_tokens":2,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":5}}}
	//
	// data: [DONE]
}

// TestRenderStatus checks that the agent reconnecting becomes a comment in
// every mode, and nothing of the content.
func TestRenderStatus(t *testing.T) {
	for _, mode := range []string{openai.RenderMarkdown, openai.RenderToolCalls, openai.RenderTextOnly} {
		evs := []documents.Event{
			documents.DocumentStart{ID: "doc_001", Type: documents.TypeText, Sequence: 1},
			documents.ContentDelta{DocumentID: "doc_001", Delta: "Hello"},
			documents.StatusEvent{State: documents.StateReconnecting, Attempt: 2},
			documents.StatusEvent{State: documents.StateRetrying, Attempt: 2},
			documents.StatusEvent{State: documents.StateReconnected, Attempt: 2},
			documents.ContentDelta{DocumentID: "doc_001", Delta: " world"},
			documents.DocumentEnd{DocumentID: "doc_001", FinalContent: ptr("Hello world")},
			documents.Done{ID: "chat_1", Status: documents.StatusCompleted},
		}
		got := render(t, mode, openai.ReasoningContent, evs)
		if got.content != "Hello world" {
			t.Errorf("%s: content %q, want %q", mode, got.content, "Hello world")
		}
		want := []string{"reconnecting attempt=2", "retrying attempt=2", "reconnected attempt=2"}
		if !slices.Equal(got.comments, want) {
			t.Errorf("%s: comments %q, want %q", mode, got.comments, want)
		}
	}
}
