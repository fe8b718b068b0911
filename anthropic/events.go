package anthropic

import (
	"net/http"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/openai"
)

// Message is a Messages API message: the non-streamed answer, and in
// message_start the message before its content.
type Message struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	Content      []Block `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        Usage   `json:"usage"`
}

// NewMessage returns an empty assistant message.
func NewMessage(id, model string) Message {
	return Message{ID: id, Type: "message", Role: "assistant", Model: model, Content: []Block{}}
}

// Block is a text block ({"type":"text","text"}) or a thinking block
// ({"type":"thinking","thinking","signature"}; the signature is empty: the
// agent's thinking is not signed).
type Block struct {
	Type      string  `json:"type"`
	Text      *string `json:"text,omitzero"`
	Thinking  *string `json:"thinking,omitzero"`
	Signature *string `json:"signature,omitzero"`
}

// Delta is a text_delta ({"text"}) or a thinking_delta ({"thinking"}).
type Delta struct {
	Type     string  `json:"type"`
	Text     *string `json:"text,omitzero"`
	Thinking *string `json:"thinking,omitzero"`
}

// Usage is Anthropic's usage: input_tokens excludes the cached tokens.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// UsageOf maps the document model's usage to Anthropic's.
func UsageOf(u documents.Usage) Usage {
	return Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
		CacheCreationInputTokens: u.CacheWriteTokens, CacheReadInputTokens: u.CacheReadTokens}
}

// Event is one event of a Messages stream; its SSE event name is its type.
type Event interface{ EventType() string }

// The events of a Messages stream.
type (
	// MessageStart opens the stream with the message before its content.
	MessageStart struct {
		Type    string  `json:"type"`
		Message Message `json:"message"`
	}
	// ContentBlockStart opens a content block.
	ContentBlockStart struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock Block  `json:"content_block"`
	}
	// ContentBlockDelta adds to the open content block.
	ContentBlockDelta struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta Delta  `json:"delta"`
	}
	// ContentBlockStop closes a content block.
	ContentBlockStop struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	// MessageDelta says why the message stopped, and its usage.
	MessageDelta struct {
		Type  string      `json:"type"`
		Delta StopDetails `json:"delta"`
		Usage Usage       `json:"usage"`
	}
	// MessageStop ends the stream of a completed message.
	MessageStop struct {
		Type string `json:"type"`
	}
	// Ping is the stream's heartbeat.
	Ping struct {
		Type string `json:"type"`
	}
	// ErrorBody is an error: the body of a failed request, and the error
	// event of a stream that fails.
	ErrorBody struct {
		Type      string `json:"type"`
		Error     Error  `json:"error"`
		RequestID string `json:"request_id,omitzero"`
	}
)

// StopDetails is message_delta's delta.
type StopDetails struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// Error is the error object of an ErrorBody.
type Error struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// EventType implements Event.
func (e MessageStart) EventType() string      { return e.Type }
func (e ContentBlockStart) EventType() string { return e.Type }
func (e ContentBlockDelta) EventType() string { return e.Type }
func (e ContentBlockStop) EventType() string  { return e.Type }
func (e MessageDelta) EventType() string      { return e.Type }
func (e MessageStop) EventType() string       { return e.Type }
func (e Ping) EventType() string              { return e.Type }
func (e ErrorBody) EventType() string         { return e.Type }

// Start returns the message_start event of message m.
func Start(m Message) MessageStart { return MessageStart{Type: "message_start", Message: m} }

// NewPing returns a ping event, the stream's heartbeat.
func NewPing() Ping { return Ping{Type: "ping"} }

// Blocks turns a run's rendered pieces into content block events:
// consecutive text fills one text block, consecutive reasoning one
// thinking block.
type Blocks struct {
	open  string // the type of the open block, "" when none is
	index int    // the index of the open block, or of the next one
}

// Add returns the events that add piece p: the open block closed and a new
// one started when p is of another kind, and p's delta. Comments add
// nothing.
func (b *Blocks) Add(p openai.Piece) []Event {
	typ, text := "text", p.Content
	if p.Reasoning != "" {
		typ, text = "thinking", p.Reasoning
	}
	if text == "" {
		return nil
	}
	var evs []Event
	if b.open != typ {
		evs = b.Close()
		b.open = typ
		evs = append(evs, ContentBlockStart{Type: "content_block_start", Index: b.index, ContentBlock: emptyBlock(typ)})
	}
	d := Delta{Type: "text_delta", Text: &text}
	if typ == "thinking" {
		d = Delta{Type: "thinking_delta", Thinking: &text}
	}
	return append(evs, ContentBlockDelta{Type: "content_block_delta", Index: b.index, Delta: d})
}

// Close returns the event that closes the open block, if one is.
func (b *Blocks) Close() []Event {
	if b.open == "" {
		return nil
	}
	b.open = ""
	b.index++
	return []Event{ContentBlockStop{Type: "content_block_stop", Index: b.index - 1}}
}

// Apply folds a content block event into m, as a client folds the stream.
func (m *Message) Apply(ev Event) {
	switch e := ev.(type) {
	case ContentBlockStart:
		m.Content = append(m.Content, emptyBlock(e.ContentBlock.Type))
	case ContentBlockDelta:
		blk := &m.Content[e.Index]
		if e.Delta.Text != nil {
			*blk.Text += *e.Delta.Text
		}
		if e.Delta.Thinking != nil {
			*blk.Thinking += *e.Delta.Thinking
		}
	}
}

// emptyBlock returns a new empty block of type text or thinking.
func emptyBlock(typ string) Block {
	if typ == "thinking" {
		return Block{Type: typ, Thinking: new(string), Signature: new(string)}
	}
	return Block{Type: typ, Text: new(string)}
}

// End returns the events that end a completed message: message_delta with
// stop_reason end_turn and the usage, and message_stop.
func End(u documents.Usage) []Event {
	return []Event{
		MessageDelta{Type: "message_delta", Delta: StopDetails{StopReason: EndTurn}, Usage: UsageOf(u)},
		MessageStop{Type: "message_stop"},
	}
}

// EndTurn is the stop reason of every completed message.
const EndTurn = "end_turn"

// StatusOverloaded is Anthropic's status for an API that sheds load.
const StatusOverloaded = 529

// NewError returns the error body of an HTTP status, with Anthropic's
// error type for it.
func NewError(status int, message string) ErrorBody {
	typ, ok := map[int]string{http.StatusUnauthorized: "authentication_error", http.StatusForbidden: "permission_error",
		http.StatusNotFound: "not_found_error", http.StatusRequestEntityTooLarge: "request_too_large",
		http.StatusTooManyRequests: "rate_limit_error", StatusOverloaded: "overloaded_error"}[status]
	switch {
	case ok:
	case status >= 500:
		typ = "api_error"
	default:
		typ = "invalid_request_error"
	}
	return ErrorBody{Type: "error", Error: Error{Type: typ, Message: message}}
}
