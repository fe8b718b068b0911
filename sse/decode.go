package sse

import (
	"fmt"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
)

// decoders decode a frame's data by its event name.
var decoders = map[string]func([]byte) (documents.Event, error){
	documents.EventResponseStart:     decodeAs[documents.ResponseStart],
	documents.EventDocumentStart:     decodeAs[documents.DocumentStart],
	documents.EventContentDelta:      decodeAs[documents.ContentDelta],
	documents.EventToolCallStart:     decodeAs[documents.ToolCallStart],
	documents.EventToolCallArguments: decodeAs[documents.ToolCallArguments],
	documents.EventToolResult:        decodeAs[documents.ToolResultEvent],
	documents.EventDocumentEnd:       decodeAs[documents.DocumentEnd],
	documents.EventDone:              decodeAs[documents.Done],
	documents.EventThinkingDelta:     decodeAs[documents.ThinkingDelta],
	documents.EventAgentEvent:        decodeAs[documents.AgentEvent],
	documents.EventStatus:            decodeAs[documents.StatusEvent],
	documents.EventDocumentUpdate:    decodeAs[documents.DocumentUpdate],
}

// DecodeFrame turns a logged frame back into its document event.
func DecodeFrame(f Frame) (documents.Event, error) {
	decode := decoders[f.Name]
	if decode == nil {
		return nil, fmt.Errorf("unknown event %q", f.Name)
	}
	ev, err := decode(f.Data)
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
