package sse

import (
	"fmt"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
)

// DecodeFrame turns a logged frame back into its document event.
func DecodeFrame(f Frame) (documents.Event, error) {
	var ev documents.Event
	var err error
	switch f.Name {
	case documents.EventResponseStart:
		ev, err = decodeAs[documents.ResponseStart](f.Data)
	case documents.EventDocumentStart:
		ev, err = decodeAs[documents.DocumentStart](f.Data)
	case documents.EventContentDelta:
		ev, err = decodeAs[documents.ContentDelta](f.Data)
	case documents.EventToolCallStart:
		ev, err = decodeAs[documents.ToolCallStart](f.Data)
	case documents.EventToolCallArguments:
		ev, err = decodeAs[documents.ToolCallArguments](f.Data)
	case documents.EventToolResult:
		ev, err = decodeAs[documents.ToolResultEvent](f.Data)
	case documents.EventDocumentEnd:
		ev, err = decodeAs[documents.DocumentEnd](f.Data)
	case documents.EventDone:
		ev, err = decodeAs[documents.Done](f.Data)
	case documents.EventThinkingDelta:
		ev, err = decodeAs[documents.ThinkingDelta](f.Data)
	case documents.EventAgentEvent:
		ev, err = decodeAs[documents.AgentEvent](f.Data)
	case documents.EventStatus:
		ev, err = decodeAs[documents.StatusEvent](f.Data)
	case documents.EventDocumentUpdate:
		ev, err = decodeAs[documents.DocumentUpdate](f.Data)
	default:
		return nil, fmt.Errorf("unknown event %q", f.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", f.Name, err)
	}
	return ev, nil
}

// decodeAs decodes data as the event type T.
func decodeAs[T documents.Event](data []byte) (documents.Event, error) {
	var e T
	err := json.Unmarshal(data, &e)
	return e, err
}
