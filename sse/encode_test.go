package sse

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
)

func BenchmarkEncodeContentDelta(b *testing.B) {
	ev := documents.ContentDelta{DocumentID: "doc_001", Delta: " [ts:1795351699463666049]"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// runEvents are the events besides deltas of a run with one text document.
func runEvents() []documents.Event {
	conv, text := "3391cf87-7b49-b752-4ac5-3f8b5edd1a57", strings.Repeat("[ts:1795705414754366517] ", 200)
	meta := jsontext.Value(`{"format":"markdown"}`)
	return []documents.Event{
		documents.ResponseStart{ID: "chat_63182984cdd3e9dbef927540", ConversationID: &conv, Model: "auto", Mode: "agent", Created: "2026-11-27T03:00:00Z"},
		documents.DocumentStart{ID: "doc_001", Type: documents.TypeText, Sequence: 1, Metadata: meta},
		documents.DocumentEnd{DocumentID: "doc_001", FinalContent: &text, Metadata: meta},
		documents.Done{ID: "chat_63182984cdd3e9dbef927540", ConversationID: &conv, Status: documents.StatusCompleted,
			Usage: documents.Usage{PromptTokens: 8194, CompletionTokens: 19, TotalTokens: 8213, CacheReadTokens: 4096, Reported: true},
			Metadata: documents.ResponseMetadata{DurationMs: 2010, TurnCount: 1,
				Agent: &documents.AgentInfo{SessionID: conv, Cwd: "/tmp/ws", Model: "Auto", PermissionMode: "default", RequestID: "fcbbd7fa-a945-b092-25e7-654ca22fac26"}}},
	}
}

// BenchmarkEncodeRunEvents encodes the events of runEvents.
func BenchmarkEncodeRunEvents(b *testing.B) {
	evs := runEvents()
	b.ReportAllocs()
	for b.Loop() {
		for _, ev := range evs {
			if _, err := Encode(ev); err != nil {
				b.Fatal(err)
			}
		}
	}
}
