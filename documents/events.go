package documents

import "github.com/go-json-experiment/json/jsontext"

// Event is one event of the document stream. Its Name is the SSE event name.
type Event interface {
	Name() string
}

// Event names as they appear in the SSE `event:` field.
const (
	EventResponseStart     = "response_start"
	EventDocumentStart     = "document_start"
	EventContentDelta      = "content_delta"
	EventToolCallStart     = "tool_call_start"
	EventToolCallArguments = "tool_call_arguments"
	EventToolResult        = "tool_result"
	EventDocumentEnd       = "document_end"
	EventDone              = "done"
	EventThinkingDelta     = "thinking_delta"
	EventAgentEvent        = "agent_event"
	EventStatus            = "status"
	EventDocumentUpdate    = "document_update"
)

// ResponseStart opens a response once its conversation id is known.
type ResponseStart struct {
	ID             string  `json:"id"`
	ConversationID *string `json:"conversationId"`
	Model          string  `json:"model"`
	Mode           string  `json:"mode"`
	Created        string  `json:"created"`
}

// DocumentStart opens a document; Metadata holds what is known so far.
type DocumentStart struct {
	ID       string         `json:"id"`
	Type     Type           `json:"type"`
	Sequence int            `json:"sequence"`
	Metadata jsontext.Value `json:"metadata,omitzero"`
}

// ContentDelta appends text to an open text-like document.
type ContentDelta struct {
	DocumentID string `json:"documentId"`
	Delta      string `json:"delta"`
	// Content, when set, is the document's whole content up to and
	// including Delta, as its producer holds it: a Builder keeps it instead
	// of a copy of the deltas. It is not part of the wire event.
	Content string `json:"-"`
}

// ToolCallStart names the tool behind an open tool-derived document.
type ToolCallStart struct {
	DocumentID string `json:"documentId"`
	ToolName   string `json:"toolName"`
	ToolCallID string `json:"toolCallId"`
}

// ToolCallArguments carries the arguments of a tool call.
type ToolCallArguments struct {
	DocumentID string         `json:"documentId"`
	Arguments  jsontext.Value `json:"arguments"`
}

// ToolResultEvent carries the result of a tool call.
type ToolResultEvent struct {
	DocumentID string     `json:"documentId"`
	Result     ToolResult `json:"result"`
}

// DocumentEnd closes a document. FinalContent is its whole content (absent
// when the content is null) and Metadata its full metadata.
type DocumentEnd struct {
	DocumentID   string         `json:"documentId"`
	FinalContent *string        `json:"finalContent,omitzero"`
	Metadata     jsontext.Value `json:"metadata,omitzero"`
}

// DocumentUpdate replaces an open document's metadata: a tool call that
// waits for the client's approval, a clarification that waits for its
// answers, and the answer when it comes.
type DocumentUpdate struct {
	DocumentID string         `json:"documentId"`
	Metadata   jsontext.Value `json:"metadata"`
}

// Done ends every response, exactly once, also on failure.
type Done struct {
	ID             string           `json:"id"`
	ConversationID *string          `json:"conversationId"`
	Status         Status           `json:"status"`
	Usage          Usage            `json:"usage"`
	Metadata       ResponseMetadata `json:"metadata"`
}

// ThinkingDelta carries a piece of the agent's thinking (opt-in).
type ThinkingDelta struct {
	Delta string `json:"delta"`
}

// AgentEvent carries one raw agent line (opt-in), shaped as the
// output-format seed stores events: ID is the line's number in the run
// (from "1"), Timestamp the agent's timestamp_ms, or for a line without one
// the latest before it (the run's start for the first lines). A line that
// is not JSON has Type "raw" and its text in Data.
type AgentEvent struct {
	ID        string         `json:"id"`
	ChatID    string         `json:"chatId,omitzero"`
	Timestamp int64          `json:"timestamp"`
	Type      string         `json:"type"`
	Subtype   string         `json:"subtype,omitzero"`
	Payload   jsontext.Value `json:"payload,omitzero"`
	Raw       string         `json:"raw,omitzero"`
	Data      string         `json:"data,omitzero"`
}

// StatusEvent says how the agent's connection is doing while it
// reconnects: State is StateReconnecting, StateRetrying or
// StateReconnected, and Attempt counts the reconnects within the run, from
// 1. It adds no document: a Builder ignores it.
type StatusEvent struct {
	State   string `json:"state"`
	Attempt int    `json:"attempt"`
}

// The states of a status event.
const (
	StateReconnecting = "reconnecting" // the agent lost its connection and reconnects
	StateRetrying     = "retrying"     // the agent starts its step again
	StateReconnected  = "reconnected"  // the connection is back
)

// Name returns "response_start".
func (ResponseStart) Name() string { return EventResponseStart }

// Name returns "document_start".
func (DocumentStart) Name() string { return EventDocumentStart }

// Name returns "content_delta".
func (ContentDelta) Name() string { return EventContentDelta }

// Name returns "tool_call_start".
func (ToolCallStart) Name() string { return EventToolCallStart }

// Name returns "tool_call_arguments".
func (ToolCallArguments) Name() string { return EventToolCallArguments }

// Name returns "tool_result".
func (ToolResultEvent) Name() string { return EventToolResult }

// Name returns "document_end".
func (DocumentEnd) Name() string { return EventDocumentEnd }

// Name returns "done".
func (Done) Name() string { return EventDone }

// Name returns "thinking_delta".
func (ThinkingDelta) Name() string { return EventThinkingDelta }

// Name returns "agent_event".
func (AgentEvent) Name() string { return EventAgentEvent }

// Name returns "status".
func (StatusEvent) Name() string { return EventStatus }

// Name returns "document_update".
func (DocumentUpdate) Name() string { return EventDocumentUpdate }
