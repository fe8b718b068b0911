package responses

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/openai"
)

// Meta is what a response says of its request.
type Meta struct {
	ID                 string // resp_…
	Model              string // as the request named it
	CreatedAt          int64  // Unix seconds
	Instructions       string
	PreviousResponseID string
	Background         bool
	Store              bool
	Reasoning          *Reasoning
	Metadata           map[string]string
}

// Response is OpenAI's Response object.
type Response struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Background         bool              `json:"background"`
	Error              *Error            `json:"error"`
	IncompleteDetails  *struct{}         `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	Metadata           map[string]string `json:"metadata"`
	Model              string            `json:"model"`
	Output             []any             `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Reasoning          *Reasoning        `json:"reasoning"`
	Store              bool              `json:"store"`
	Temperature        *float64          `json:"temperature"`
	ToolChoice         string            `json:"tool_choice"`
	Tools              []struct{}        `json:"tools"`
	TopP               *float64          `json:"top_p"`
	Usage              *Usage            `json:"usage"`
}

// The statuses of a Response.
const (
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
)

// Error is a failed response's error: the run's stop reason as its code
// and its last error document as its message.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Usage is the agent's own token usage in the Responses API's terms:
// input_tokens counts cached tokens too, as chat completions'
// prompt_tokens does.
type Usage struct {
	InputTokens         int64            `json:"input_tokens"`
	InputTokensDetails  map[string]int64 `json:"input_tokens_details"`
	OutputTokens        int64            `json:"output_tokens"`
	OutputTokensDetails map[string]int64 `json:"output_tokens_details"`
	TotalTokens         int64            `json:"total_tokens"`
}

// messageItem is an assistant message output item.
type messageItem struct {
	ID      string     `json:"id"`
	Type    string     `json:"type"`
	Status  string     `json:"status"`
	Role    string     `json:"role"`
	Content []textPart `json:"content"`
}

type textPart struct {
	Type        string     `json:"type"`
	Text        string     `json:"text"`
	Annotations []struct{} `json:"annotations"`
}

// reasoningItem is a reasoning output item: the agent's thinking as its
// summary.
type reasoningItem struct {
	ID      string        `json:"id"`
	Type    string        `json:"type"`
	Summary []summaryPart `json:"summary"`
}

type summaryPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// item is an output item as the encoder builds it.
type item struct {
	id        string
	reasoning bool
	text      strings.Builder
	status    string
}

// wire is the item as it goes out: with its part once it has one.
func (it *item) wire(withPart bool) any {
	if it.reasoning {
		ri := reasoningItem{ID: it.id, Type: "reasoning"}
		if withPart {
			ri.Summary = []summaryPart{{Type: "summary_text", Text: it.text.String()}}
		}
		return ri
	}
	mi := messageItem{ID: it.id, Type: "message", Status: it.status, Role: "assistant"}
	if withPart {
		mi.Content = []textPart{{Type: "output_text", Text: it.text.String()}}
	}
	return mi
}

// Event is one stream event: its type, sequence number and JSON. An event
// with Comment set is an SSE comment instead, outside the numbered events.
type Event struct {
	Type     string
	Sequence int
	Data     []byte
	Comment  string
}

// header begins every stream event.
type header struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
}

func (h header) head() header { return h }

type (
	responseEvent struct {
		header
		Response Response `json:"response"`
	}
	itemEvent struct {
		header
		OutputIndex int `json:"output_index"`
		Item        any `json:"item"`
	}
	partEvent struct {
		header
		ItemID       string `json:"item_id"`
		OutputIndex  int    `json:"output_index"`
		ContentIndex int    `json:"content_index"`
		Part         any    `json:"part"`
	}
	textEvent struct {
		header
		ItemID       string     `json:"item_id"`
		OutputIndex  int        `json:"output_index"`
		ContentIndex int        `json:"content_index"`
		Delta        *string    `json:"delta,omitzero"`
		Text         *string    `json:"text,omitzero"`
		Logprobs     []struct{} `json:"logprobs"`
	}
	errorEvent struct {
		header
		Code    string  `json:"code"`
		Message string  `json:"message"`
		Param   *string `json:"param"`
	}
	summaryPartEvent struct {
		header
		ItemID       string      `json:"item_id"`
		OutputIndex  int         `json:"output_index"`
		SummaryIndex int         `json:"summary_index"`
		Part         summaryPart `json:"part"`
	}
	summaryTextEvent struct {
		header
		ItemID       string  `json:"item_id"`
		OutputIndex  int     `json:"output_index"`
		SummaryIndex int     `json:"summary_index"`
		Delta        *string `json:"delta,omitzero"`
		Text         *string `json:"text,omitzero"`
	}
)

// Encoder turns one run's document events, in order, into Responses stream
// events, and keeps the Response they make. Documents become markdown as
// on chat completions; each stretch of thinking between them becomes a
// reasoning item, each stretch of text a message item.
type Encoder struct {
	resp     Response // without its output
	renderer openai.Renderer
	items    []*item
	open     *item // the item being streamed, nil between items
	seq      int
	out      []Event
}

// NewEncoder returns an encoder of the response m describes.
func NewEncoder(m Meta) *Encoder {
	r := Response{ID: m.ID, Object: "response", CreatedAt: m.CreatedAt, Status: StatusInProgress, Background: m.Background,
		Metadata: m.Metadata, Model: m.Model, ParallelToolCalls: true, Reasoning: m.Reasoning, Store: m.Store, ToolChoice: "auto"}
	if m.Instructions != "" {
		r.Instructions = &m.Instructions
	}
	if m.PreviousResponseID != "" {
		r.PreviousResponseID = &m.PreviousResponseID
	}
	return &Encoder{resp: r, renderer: openai.Renderer{Mode: openai.RenderMarkdown, Reasoning: openai.ReasoningContent}}
}

// Start returns the stream's first events: response.created and
// response.in_progress.
func (e *Encoder) Start() []Event {
	e.add(responseEvent{header: e.next("response.created"), Response: e.Response()})
	e.add(responseEvent{header: e.next("response.in_progress"), Response: e.Response()})
	return e.flush()
}

// Event renders one document event into stream events; done ends the
// stream with response.completed, or response.failed carrying the error.
func (e *Encoder) Event(ev documents.Event) []Event {
	for _, p := range e.renderer.Event(ev) {
		switch {
		case p.Comment != "":
			e.out = append(e.out, Event{Comment: p.Comment})
		case p.Reasoning != "":
			e.write(true, p.Reasoning)
		case p.Content != "":
			e.write(false, p.Content)
		}
	}
	if d, ok := ev.(documents.Done); ok {
		e.finish(d)
	}
	return e.flush()
}

// Response returns the response as it stands.
func (e *Encoder) Response() Response {
	r := e.resp
	r.Output = []any{}
	for _, it := range e.items {
		r.Output = append(r.Output, it.wire(true))
	}
	return r
}

// write adds a piece of thinking or text: to the open item of its kind,
// or to a new one after the open one is closed. A new item's leading
// newlines (the blank line between blocks) are left out.
func (e *Encoder) write(reasoning bool, s string) {
	if e.open != nil && e.open.reasoning != reasoning {
		e.close(StatusCompleted)
	}
	if e.open == nil {
		if s = strings.TrimLeft(s, "\n"); s == "" {
			return
		}
		e.begin(reasoning)
	}
	it, idx := e.open, len(e.items)-1
	it.text.WriteString(s)
	if reasoning {
		e.add(summaryTextEvent{header: e.next("response.reasoning_summary_text.delta"), ItemID: it.id, OutputIndex: idx, Delta: &s})
		return
	}
	e.add(textEvent{header: e.next("response.output_text.delta"), ItemID: it.id, OutputIndex: idx, Delta: &s})
}

// begin opens a new item with its one part.
func (e *Encoder) begin(reasoning bool) {
	kind := "msg"
	if reasoning {
		kind = "rs"
	}
	it := &item{id: fmt.Sprintf("%s_%s_%d", kind, strings.TrimPrefix(e.resp.ID, "resp_"), len(e.items)), reasoning: reasoning, status: StatusInProgress}
	e.items, e.open = append(e.items, it), it
	idx := len(e.items) - 1
	e.add(itemEvent{header: e.next("response.output_item.added"), OutputIndex: idx, Item: it.wire(false)})
	if reasoning {
		e.add(summaryPartEvent{header: e.next("response.reasoning_summary_part.added"), ItemID: it.id, OutputIndex: idx, Part: summaryPart{Type: "summary_text"}})
		return
	}
	e.add(partEvent{header: e.next("response.content_part.added"), ItemID: it.id, OutputIndex: idx, Part: textPart{Type: "output_text"}})
}

// close ends the open item with its part.
func (e *Encoder) close(status string) {
	it, idx := e.open, len(e.items)-1
	e.open = nil
	it.status = status
	text := it.text.String()
	if it.reasoning {
		e.add(summaryTextEvent{header: e.next("response.reasoning_summary_text.done"), ItemID: it.id, OutputIndex: idx, Text: &text})
		e.add(summaryPartEvent{header: e.next("response.reasoning_summary_part.done"), ItemID: it.id, OutputIndex: idx, Part: summaryPart{Type: "summary_text", Text: text}})
	} else {
		e.add(textEvent{header: e.next("response.output_text.done"), ItemID: it.id, OutputIndex: idx, Text: &text})
		e.add(partEvent{header: e.next("response.content_part.done"), ItemID: it.id, OutputIndex: idx, Part: textPart{Type: "output_text", Text: text}})
	}
	e.add(itemEvent{header: e.next("response.output_item.done"), OutputIndex: idx, Item: it.wire(true)})
}

// finish closes the open item and ends the response as the run ended.
func (e *Encoder) finish(d documents.Done) {
	u := openai.UsageOf(d.Usage)
	e.resp.Usage = &Usage{InputTokens: u.PromptTokens, InputTokensDetails: map[string]int64{"cached_tokens": d.Usage.CacheReadTokens},
		OutputTokens: u.CompletionTokens, OutputTokensDetails: map[string]int64{"reasoning_tokens": 0}, TotalTokens: u.TotalTokens}
	status, itemStatus, kind := StatusCompleted, StatusCompleted, "response.completed"
	if d.Status != documents.StatusCompleted {
		status, itemStatus, kind = StatusFailed, "incomplete", "response.failed"
		if d.Metadata.StopReason == documents.StopCancelled {
			status = StatusCancelled
		}
		e.resp.Error = &Error{Code: cmp.Or(string(d.Metadata.StopReason), "agent_error"), Message: openai.ErrorMessage(e.renderer.Content())}
	}
	if e.open != nil {
		e.close(itemStatus)
	}
	e.resp.Status = status
	e.add(responseEvent{header: e.next(kind), Response: e.Response()})
}

// Error returns an error event: the stream ends without its last events
// (the run's log no longer holds them).
func (e *Encoder) Error(code, message string) []Event {
	e.add(errorEvent{header: e.next("error"), Code: code, Message: message})
	return e.flush()
}

// next is the header of the next event.
func (e *Encoder) next(typ string) header {
	h := header{Type: typ, SequenceNumber: e.seq}
	e.seq++
	return h
}

// add encodes an event.
func (e *Encoder) add(v interface{ head() header }) {
	b, _ := json.Marshal(v, jsontext.AllowInvalidUTF8(true))
	h := v.head()
	e.out = append(e.out, Event{Type: h.Type, Sequence: h.SequenceNumber, Data: b})
}

func (e *Encoder) flush() []Event {
	out := e.out
	e.out = nil
	return out
}

// FromChat returns the Response of a ChatResponse, with the events that
// make it: its documents rendered again in their order (its thinking is
// not kept), ended as the response ended, or in progress.
func FromChat(m Meta, cr documents.ChatResponse) ([]Event, Response) {
	if m.CreatedAt == 0 {
		if t, err := time.Parse(time.RFC3339, cr.Created); err == nil {
			m.CreatedAt = t.Unix()
		}
	}
	m.Model = cmp.Or(m.Model, cr.Model)
	e := NewEncoder(m)
	evs := e.Start()
	for _, d := range cr.Documents {
		evs = append(evs, e.Event(documents.DocumentStart{ID: d.ID, Type: d.Type, Sequence: d.Sequence, Metadata: d.Metadata})...)
		if d.Type.IsText() && d.Content != nil {
			evs = append(evs, e.Event(documents.ContentDelta{DocumentID: d.ID, Delta: *d.Content})...)
		}
		evs = append(evs, e.Event(documents.DocumentEnd{DocumentID: d.ID, FinalContent: d.Content, Metadata: d.Metadata})...)
	}
	if cr.Status != documents.StatusStreaming {
		evs = append(evs, e.Event(documents.Done{ID: cr.ID, ConversationID: cr.ConversationID, Status: cr.Status, Usage: cr.Usage, Metadata: cr.Metadata})...)
	}
	return evs, e.Response()
}

// Reply returns the reply of a ChatResponse as its Response's messages
// say it, joined by a blank line.
func Reply(cr documents.ChatResponse) string {
	_, r := FromChat(Meta{}, cr)
	var texts []string
	for _, it := range r.Output {
		if m, ok := it.(messageItem); ok {
			texts = append(texts, m.Content[0].Text)
		}
	}
	return strings.Join(texts, "\n\n")
}
