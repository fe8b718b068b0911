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

// Delta is content_block_delta's delta, a text_delta ({"text"}) or a
// thinking_delta ({"thinking"}), or message_delta's: its StopDetails.
type Delta struct {
	Type     string  `json:"type,omitzero"`
	Text     *string `json:"text,omitzero"`
	Thinking *string `json:"thinking,omitzero"`
	*StopDetails
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

// Event is one event of a Messages stream, its SSE event named by its
// type, which says the fields it has: message_start a message,
// content_block_start an index and a block, content_block_delta an index
// and a delta, content_block_stop an index, message_delta a delta and the
// usage, error an error; message_stop and ping none. An error event is also
// the body of a failed request.
type Event struct {
	Type         string   `json:"type"`
	Message      *Message `json:"message,omitzero"`
	Index        *int     `json:"index,omitzero"`
	ContentBlock *Block   `json:"content_block,omitzero"`
	Delta        Delta    `json:"delta,omitzero"`
	Usage        *Usage   `json:"usage,omitzero"`
	Error        *Error   `json:"error,omitzero"`
	RequestID    string   `json:"request_id,omitzero"`
}

// StopDetails is message_delta's delta.
type StopDetails struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// Error is the error object of an error event.
type Error struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Start returns the message_start event of message m.
func Start(m Message) Event { return Event{Type: "message_start", Message: &m} }

// NewPing returns a ping event, the stream's heartbeat.
func NewPing() Event { return Event{Type: "ping"} }

// Blocks turns a run's rendered pieces into content block events:
// consecutive text fills one text block, consecutive reasoning one
// thinking block.
type Blocks struct {
	open  string // the type of the open block, "" when none is
	index *int   // the index of the open block, which its events share
	count int    // the blocks started
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
		b.open, b.index = typ, new(b.count)
		b.count++
		blk := emptyBlock(typ)
		evs = append(evs, Event{Type: "content_block_start", Index: b.index, ContentBlock: &blk})
	}
	d := Delta{Type: "text_delta", Text: &text}
	if typ == "thinking" {
		d = Delta{Type: "thinking_delta", Thinking: &text}
	}
	return append(evs, Event{Type: "content_block_delta", Index: b.index, Delta: d})
}

// Close returns the event that closes the open block, if one is.
func (b *Blocks) Close() []Event {
	if b.open == "" {
		return nil
	}
	b.open = ""
	return []Event{{Type: "content_block_stop", Index: b.index}}
}

// Apply folds a content block event into m, as a client folds the stream.
func (m *Message) Apply(ev Event) {
	switch ev.Type {
	case "content_block_start":
		m.Content = append(m.Content, emptyBlock(ev.ContentBlock.Type))
	case "content_block_delta":
		blk := &m.Content[*ev.Index]
		if ev.Delta.Text != nil {
			*blk.Text += *ev.Delta.Text
		}
		if ev.Delta.Thinking != nil {
			*blk.Thinking += *ev.Delta.Thinking
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
	usage := UsageOf(u)
	return []Event{{Type: "message_delta", Delta: Delta{StopDetails: &StopDetails{StopReason: EndTurn}}, Usage: &usage},
		{Type: "message_stop"}}
}

// EndTurn is the stop reason of every completed message.
const EndTurn = "end_turn"

// StatusOverloaded is Anthropic's status for an API that sheds load.
const StatusOverloaded = 529

// NewError returns the error event of an HTTP status, with Anthropic's
// error type for it.
func NewError(status int, message string) Event {
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
	return Event{Type: "error", Error: &Error{Type: typ, Message: message}}
}
