package documents

import (
	"bytes"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

func strp(s string) *string { return &s }

// encodeCases are responses with every field set, unset, and set to what
// needs escaping or formatting.
func encodeCases() map[string]*ChatResponse {
	full := &ChatResponse{
		ID: "chat_1", ConversationID: strp("conv-1"), Model: "auto", Mode: "agent", Created: "2026-11-26T15:00:00Z",
		Status: StatusCompleted,
		Documents: []Document{
			{ID: "doc_001", Type: TypeText, Sequence: 1, Content: strp("Hello <b>&</b> \"quoted\"\n\ttab \u2028 \x00 é"), Metadata: jsontext.Value(`{"format":"markdown"}`)},
			{ID: "doc_002", Type: TypeToolCall, Sequence: 2, Metadata: jsontext.Value(" {\n \"toolName\" : \"grep\", \"arguments\": {\"q\":\"\\u0041\\/\"}, \"n\": [1, 2.50, -0e3] } ")},
			{ID: "doc_003", Type: TypeError, Sequence: 3, Content: strp("")},
		},
		Usage: Usage{PromptTokens: 10, CompletionTokens: 20, TotalTokens: 30, CacheReadTokens: 5, CacheWriteTokens: 6, Reported: true},
		Metadata: ResponseMetadata{DurationMs: 1234, ToolCallCount: 2, TurnCount: 1, StopReason: StopAgentExit, SkippedLines: 3,
			Agent: &AgentInfo{SessionID: "s", Cwd: "/w", Model: "gpt", PermissionMode: "default", RequestID: "r", DurationAPIMs: 7},
			Cloud: &CloudInfo{AgentID: "bc-1", Status: "FINISHED", Summary: "done", BranchName: "b", PRURL: "https://x/pr/1", URL: "https://x", Repository: "o/r"}},
	}
	partial := *full
	partial.Metadata.Agent = &AgentInfo{Cwd: "/w"}
	partial.Metadata.Cloud = &CloudInfo{}
	return map[string]*ChatResponse{
		"zero":    {},
		"empty":   {Documents: []Document{}},
		"full":    full,
		"partial": &partial,
		"invalid utf-8": {ID: "chat_\xff", Created: "\xc3", Documents: []Document{
			{ID: "doc_001", Content: strp("a\xffb\xe2\x82"), Metadata: jsontext.Value("{\"k\":\"v\xff\"}")}}},
	}
}

// TestEncodeResponse checks that every case encodes to valid JSON, text
// that is not valid UTF-8 included.
func TestEncodeResponse(t *testing.T) {
	for name, r := range encodeCases() {
		b, err := EncodeResponse(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !jsontext.Value(b).IsValid() {
			t.Errorf("%s: not valid JSON: %s", name, b)
		}
	}
}

// TestEncodeResponseBadMetadata checks that metadata that is not JSON, or
// that repeats a member name, fails the encoding.
func TestEncodeResponseBadMetadata(t *testing.T) {
	for _, meta := range []string{"", "{", `{"a":1}x`, `{"a":1,"a":2}`, "\x01"} {
		r := &ChatResponse{ID: "chat_1", Documents: []Document{{ID: "doc_001", Metadata: jsontext.Value(meta)}}}
		if b, err := EncodeResponse(r); err == nil {
			t.Errorf("metadata %q: got %s, want an error", meta, b)
		}
	}
}

// BenchmarkEncodeResponse encodes a finished response of one long text
// document and a tool call, as a run's end does.
func BenchmarkEncodeResponse(b *testing.B) {
	text := bytes.Repeat([]byte("[ts:1795705414754366517] "), 200)
	r := &ChatResponse{ID: "chat_63182984cdd3e9dbef927540", ConversationID: strp("3391cf87-7b49-b752-4ac5-3f8b5edd1a57"),
		Model: "auto", Mode: "agent", Created: "2026-11-26T15:03:34Z", Status: StatusCompleted,
		Documents: []Document{
			{ID: "doc_001", Type: TypeText, Sequence: 1, Content: strp(string(text)), Metadata: jsontext.Value(`{"format":"markdown"}`)},
			{ID: "doc_002", Type: TypeToolCall, Sequence: 2, Metadata: jsontext.Value(`{"toolName":"grep","toolCallId":"call_1","arguments":{"pattern":"func main","path":"."},"result":{"status":"success","data":{"matches":12}},"duration_ms":31}`)},
		},
		Usage:    Usage{PromptTokens: 8194, CompletionTokens: 512, TotalTokens: 8706, Reported: true},
		Metadata: ResponseMetadata{DurationMs: 2000, ToolCallCount: 1, TurnCount: 1, Agent: &AgentInfo{SessionID: "s", Cwd: "/w", Model: "auto"}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeResponse(r); err != nil {
			b.Fatal(err)
		}
	}
}
