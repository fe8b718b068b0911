package documents_test

import (
	"fmt"
	"os"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
)

// A client folds the document stream of one response, event by event, into
// the ChatResponse that the non-streaming endpoint returns for the same run.
func ExampleBuilder() {
	conv := "5d0c3b7e-2a41-4f7e-9c55-0b8e1f6a2d94"
	text := "Running the tests."
	events := []documents.Event{
		documents.ResponseStart{ID: "chat_1", ConversationID: &conv, Model: "auto", Mode: "agent", Created: "2026-01-01T00:00:00Z"},
		documents.DocumentStart{ID: "doc_001", Type: documents.TypeText, Sequence: 1, Metadata: jsontext.Value(`{"format":"markdown"}`)},
		documents.ContentDelta{DocumentID: "doc_001", Delta: "Running "},
		documents.ContentDelta{DocumentID: "doc_001", Delta: "the tests."},
		documents.DocumentEnd{DocumentID: "doc_001", FinalContent: &text, Metadata: jsontext.Value(`{"format":"markdown"}`)},
		documents.DocumentStart{ID: "doc_002", Type: documents.TypeTerminalCommand, Sequence: 2, Metadata: jsontext.Value(`{"command":"go test ./...","workingDirectory":"/src"}`)},
		documents.ToolCallStart{DocumentID: "doc_002", ToolName: "run_terminal_cmd", ToolCallID: "call_1"},
		documents.ToolCallArguments{DocumentID: "doc_002", Arguments: jsontext.Value(`{"command":"go test ./..."}`)},
		documents.ToolResultEvent{DocumentID: "doc_002", Result: documents.ToolResult{Status: "success", Data: jsontext.Value(`{"exitCode":0}`)}},
		documents.DocumentEnd{DocumentID: "doc_002", Metadata: jsontext.Value(`{"command":"go test ./...","workingDirectory":"/src","exitCode":0,"output":"ok","duration_ms":812,"permissions":[]}`)},
		documents.Done{ID: "chat_1", ConversationID: &conv, Status: documents.StatusCompleted,
			Usage:    documents.Usage{PromptTokens: 120, CompletionTokens: 30, TotalTokens: 150, Reported: true},
			Metadata: documents.ResponseMetadata{DurationMs: 2400, ToolCallCount: 1, TurnCount: 1}},
	}
	var b documents.Builder
	for _, ev := range events {
		b.Add(ev)
	}
	out, err := json.Marshal(b.Response(), jsontext.Multiline(true), jsontext.WithIndent("  "))
	if err != nil {
		fmt.Println(err)
		return
	}
	os.Stdout.Write(append(out, '\n'))
	// Output:
	// {
	//   "id": "chat_1",
	//   "conversationId": "5d0c3b7e-2a41-4f7e-9c55-0b8e1f6a2d94",
	//   "model": "auto",
	//   "mode": "agent",
	//   "created": "2026-01-01T00:00:00Z",
	//   "status": "completed",
	//   "documents": [
	//     {
	//       "id": "doc_001",
	//       "type": "text",
	//       "sequence": 1,
	//       "content": "Running the tests.",
	//       "metadata": {
	//         "format": "markdown"
	//       }
	//     },
	//     {
	//       "id": "doc_002",
	//       "type": "terminal_command",
	//       "sequence": 2,
	//       "content": null,
	//       "metadata": {
	//         "command": "go test ./...",
	//         "workingDirectory": "/src",
	//         "exitCode": 0,
	//         "output": "ok",
	//         "duration_ms": 812,
	//         "permissions": []
	//       }
	//     }
	//   ],
	//   "usage": {
	//     "promptTokens": 120,
	//     "completionTokens": 30,
	//     "totalTokens": 150,
	//     "reported": true
	//   },
	//   "metadata": {
	//     "duration_ms": 2400,
	//     "toolCallCount": 1,
	//     "turnCount": 1
	//   }
	// }
}

// Before done, the response is "streaming" and an open text document holds
// what its deltas have brought so far; a tool document opened without
// metadata shows {} until it ends.
func ExampleBuilder_Response() {
	var b documents.Builder
	b.Add(documents.ResponseStart{ID: "chat_2", Model: "auto", Mode: "ask", Created: "2026-01-01T00:00:00Z"})
	b.Add(documents.DocumentStart{ID: "doc_001", Type: documents.TypeText, Sequence: 1})
	b.Add(documents.ContentDelta{DocumentID: "doc_001", Delta: "Half a sen"})
	b.Add(documents.DocumentStart{ID: "doc_002", Type: documents.TypeToolCall, Sequence: 2})

	r := b.Response()
	fmt.Println(b.Done(), r.Status, r.ConversationID == nil)
	for _, d := range r.Documents {
		content := "null"
		if d.Content != nil {
			content = fmt.Sprintf("%q", *d.Content)
		}
		fmt.Println(d.ID, d.Type, content, string(d.Metadata))
	}
	// Output:
	// false streaming true
	// doc_001 text "Half a sen" {}
	// doc_002 tool_call null {}
}
