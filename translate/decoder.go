// Package translate turns cursor-agent's stream-json output into document
// stream events: a Decoder normalizes every dialect of agent lines into
// Events, and a Segmenter turns those into documents.Event values.
//
// The package does no I/O of its own beyond reading the io.Reader it is given.
package translate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// DefaultMaxLine is the default longest agent line the Decoder accepts.
const DefaultMaxLine = 8 << 20

// Kind classifies a normalized agent event.
type Kind uint8

// The kinds of agent events.
const (
	KindUnknown       Kind = iota // a JSON line of a type Docstream does not use
	KindInit                      // system/init
	KindUser                      // the prompt echo
	KindThinkingDelta             // thinking/delta (or thinking without subtype)
	KindThinkingDone              // thinking/completed
	KindAssistant                 // assistant text (delta or snapshot)
	KindToolStarted               // tool_call/started, tool-call-started
	KindToolCompleted             // tool_call/completed, tool-call-completed
	KindResult                    // result/success, result/error
	KindError                     // {"type":"error"}
	KindInfo                      // interaction_query, other connection and system events
	KindNotJSON                   // a line that is not a JSON object
	KindOversize                  // a line longer than the maximum, skipped
	KindStatus                    // connection/reconnecting, connection/reconnected, retry/*
)

var kindNames = [...]string{"unknown", "init", "user", "thinking_delta", "thinking_done", "assistant", "tool_started", "tool_completed", "result", "error", "info", "not_json", "oversize", "status"}

// String returns the kind's name.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Event is one agent line, normalized across dialects. Fields that do not
// apply to its Kind are zero. Raw aliases the Decoder's buffer and is valid
// until the next call to Next.
type Event struct {
	Kind    Kind
	Type    string
	Subtype string

	SessionID    string
	Text         string // assistant, thinking and error text
	Details      string // an error's code or details
	ModelCallID  string
	TimestampMs  int64
	HasTimestamp bool

	CallID string    // tool events
	Tool   *ToolCall // tool events

	Init   *Init   // KindInit
	Result *Result // KindResult

	Raw  []byte // the whole line, without its newline
	Size int    // the line's length in bytes (also for oversize lines)
}

// Init is the content of a system/init event.
type Init struct {
	SessionID      string
	Cwd            string
	Model          string
	PermissionMode string
	APIKeySource   string
}

// Result is the content of a result event.
type Result struct {
	Subtype       string
	IsError       bool
	DurationMs    int64
	DurationAPIMs int64
	Text          string // result.result
	Error         string // result.error
	RequestID     string
	Usage         *AgentUsage
}

// AgentUsage is the agent's token usage as it reports it.
type AgentUsage struct {
	InputTokens      int64 `json:"inputTokens"`
	OutputTokens     int64 `json:"outputTokens"`
	CacheReadTokens  int64 `json:"cacheReadTokens"`
	CacheWriteTokens int64 `json:"cacheWriteTokens"`
}

// ToolCall is a tool invocation in any dialect. Kind is the agent's key
// ("shellToolCall"), the hyphenated dialect's tool name ("Shell") or
// "function"; Name is a function's or named tool's own name.
type ToolCall struct {
	Kind          string
	Name          string
	Args          jsontext.Value // nil when the event carried none; as written, repeated names and all
	Result        jsontext.Value // nil on started events; as written
	Description   string
	StartedAtMs   int64
	CompletedAtMs int64
	DurationMs    int64 // the hyphenated dialect's duration_ms
}

// Decoder reads NDJSON agent lines from a reader and normalizes them.
type Decoder struct {
	br  *bufio.Reader // nil once the input has ended
	max int
	// A line is decoded by dec, reading from in; last holds the ids of
	// the line before.
	last lineIDs
	dec  jsontext.Decoder
	in   bytes.Buffer
}

// readBufSize is the size of a Decoder's read buffer; longer lines are
// assembled from its pieces.
const readBufSize = 4 << 10

// NewDecoder returns a Decoder reading from r. maxLine bounds the length of
// one line (DefaultMaxLine when ≤ 0); a longer line is skipped and reported
// as a KindOversize event.
func NewDecoder(r io.Reader, maxLine int) *Decoder {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	return &Decoder{br: bufio.NewReaderSize(r, readBufSize), max: maxLine}
}

// Next returns the next event, or io.EOF at the end of the input. Empty lines
// are skipped. Other read errors are returned as they are.
func (d *Decoder) Next() (Event, error) {
	for {
		if d.br == nil {
			return Event{}, io.EOF
		}
		line, size, err := d.readLine()
		if errors.Is(err, io.EOF) {
			d.br = nil
		}
		if err != nil {
			return Event{}, err
		}
		if size > d.max {
			return Event{Kind: KindOversize, Size: size}, nil
		}
		line = bytes.Trim(line, " \t\r")
		if len(line) == 0 {
			continue
		}
		ev := d.decode(line)
		if size > d.br.Size() {
			// A long line is let go of once decoded: only its event holds it.
			d.in = bytes.Buffer{}
			d.dec.Reset(&d.in, decodeOpts)
		}
		return ev, nil
	}
}

// readLine returns the next line without its newline and its full length;
// a line longer than the maximum is read but not kept.
func (d *Decoder) readLine() ([]byte, int, error) {
	var parts [][]byte // the pieces of a line longer than the read buffer
	size := 0
	for {
		chunk, err := d.br.ReadSlice('\n')
		if err == nil && parts == nil && size == 0 {
			return chunk[:len(chunk)-1], len(chunk) - 1, nil
		}
		if err == nil {
			chunk = chunk[:len(chunk)-1]
		}
		size += len(chunk)
		if size <= d.max {
			parts = append(parts, bytes.Clone(chunk))
		} else {
			parts = nil
		}
		switch {
		case err == bufio.ErrBufferFull:
		case err == nil || errors.Is(err, io.EOF) && size > 0:
			// Copied as they came, the parts are joined once: a line of
			// megabytes costs about twice its size, and no buffer is
			// kept for the next line.
			return bytes.Join(parts, nil), size, nil
		default:
			return nil, 0, err
		}
	}
}

// Pump reads every event from dec and feeds it to seg until the input ends.
// It returns nil at the end of the input and any other read error as is;
// it does not close seg.
func Pump(dec *Decoder, seg *Segmenter) error {
	for {
		ev, err := dec.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		seg.Feed(ev)
	}
}
