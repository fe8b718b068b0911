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
const DefaultMaxLine = 16 << 20

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
	KindInfo                      // interaction_query, connection, retry, other system events
	KindNotJSON                   // a line that is not a JSON object
	KindOversize                  // a line longer than the maximum, skipped
)

var kindNames = [...]string{"unknown", "init", "user", "thinking_delta", "thinking_done", "assistant", "tool_started", "tool_completed", "result", "error", "info", "not_json", "oversize"}

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

	// unique is set by a Decoder that found no object in Raw repeating a
	// member name.
	unique bool
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
	Args          jsontext.Value // nil when the event carried none
	Result        jsontext.Value // nil on started events
	Description   string
	StartedAtMs   int64
	CompletedAtMs int64
	DurationMs    int64 // the hyphenated dialect's duration_ms
}

// Decoder reads NDJSON agent lines from a reader and normalizes them.
type Decoder struct {
	r       *lineReader // nil once the input has ended
	long    bool        // a line longer than the buffer is being read
	size    int         // its length so far
	over    bool        // it is longer than max
	max     int
	buf     []byte   // a long line, assembled
	parts   [][]byte // the pieces of a long line being read
	line    int
	names   nameSet
	sessRaw []byte
	session string
	w       *wire             // scratch for one line, dropped while idle
	mcid    map[string]string // interned model_call_id values
}

// NewDecoder returns a Decoder reading from r. maxLine bounds the length of
// one line (DefaultMaxLine when ≤ 0); a longer line is skipped and reported
// as a KindOversize event.
func NewDecoder(r io.Reader, maxLine int) *Decoder {
	return newDecoder(r, maxLine, firstBufSize, readBufSize)
}

// A Decoder's read buffer starts at firstBufSize bytes, enough for most
// agent lines, so that a quiet run holds little memory, and grows to
// readBufSize when lines or bursts need it. Lines longer than the buffer
// are assembled in Decoder.buf.
const (
	firstBufSize = 2 << 10
	readBufSize  = 64 << 10
)

// newDecoder is NewDecoder with a read buffer of size bytes growing to max.
// It is not inlined, so that the Decoder is on the heap and not in the
// frame of the goroutine that reads with it, whose stack a quiet run keeps.
//
//go:noinline
func newDecoder(r io.Reader, maxLine, size, max int) *Decoder {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	return &Decoder{max: maxLine, r: newLineReader(r, size, max)}
}

// release gives the read buffer and the decoding scratch back at the end of
// the input.
func (d *Decoder) release() {
	d.r.release()
	d.r = nil
	if d.w != nil {
		d.w.reset()
		wires.Put(d.w)
		d.w = nil
	}
}

// ErrPending is what a reader returns when it has no input for now but may
// have more later (say, a pipe read whose deadline passed). Next returns it
// as it is, keeps the line read so far, and may be called again.
var ErrPending = errors.New("translate: no input for now")

// Idle gives the read buffer back while no input is buffered (after Next
// returned ErrPending), so that a quiet reader holds no buffer; the next
// call to Next takes one again.
func (d *Decoder) Idle() {
	if d.r != nil && !d.long && d.r.idle() && d.w != nil {
		d.w.reset()
		wires.Put(d.w)
		d.w = nil
	}
}

// Line returns the number of lines read so far.
func (d *Decoder) Line() int { return d.line }

// Buffered reports how many bytes are read from the source but not yet
// decoded, so a caller can flush its output when nothing more is waiting.
func (d *Decoder) Buffered() int {
	if d.r == nil {
		return 0
	}
	return d.r.Buffered()
}

// HasLine reports whether a whole line is read and waiting, so that Next
// returns without reading.
func (d *Decoder) HasLine() bool {
	return d.r != nil && !d.long && d.r.hasLine()
}

// Next returns the next event, or io.EOF at the end of the input. Empty lines
// are skipped. Other read errors are returned as they are.
func (d *Decoder) Next() (Event, error) {
	for {
		if d.r == nil {
			return Event{}, io.EOF
		}
		line, size, err := d.readLine()
		if errors.Is(err, io.EOF) {
			d.release()
		}
		if err != nil {
			return Event{}, err
		}
		d.line++
		if size > d.max {
			return Event{Kind: KindOversize, Size: size}, nil
		}
		line = trimSpace(line)
		if len(line) == 0 {
			continue
		}
		return d.decode(line), nil
	}
}

// readLine returns the next line without its newline and its full length.
// An over-long line is consumed but not kept. ErrPending in the middle of
// a long line keeps what was read of it.
func (d *Decoder) readLine() ([]byte, int, error) {
	if !d.long {
		if cap(d.buf) > keepLongBuf {
			d.buf = nil // the last line was long: its buffer is not kept for the rest of the run
		}
		chunk, err := d.r.ReadSlice('\n')
		if err == nil {
			return chunk[:len(chunk)-1], len(chunk) - 1, nil
		}
		if err != bufio.ErrBufferFull {
			if err == io.EOF && len(chunk) > 0 {
				return chunk, len(chunk), nil
			}
			return nil, 0, err
		}
		d.parts = append(d.parts[:0], bytes.Clone(chunk))
		d.long, d.size, d.over = true, len(chunk), false
	}
	for {
		chunk, err := d.r.ReadSlice('\n')
		if err == ErrPending {
			return nil, 0, err
		}
		n := len(chunk)
		if err == nil {
			n--
			chunk = chunk[:n]
		}
		d.size += n
		if !d.over {
			if d.size > d.max {
				d.over = true
				d.dropParts()
			} else if n > 0 {
				d.parts = append(d.parts, bytes.Clone(chunk))
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == nil || errors.Is(err, io.EOF):
			d.long = false
			return d.joinParts(), d.size, nil
		default:
			d.long = false
			d.dropParts()
			return nil, 0, err
		}
	}
}

// keepLongBuf is the largest buffer of a long line a Decoder keeps for the
// next one.
const keepLongBuf = 4 * readBufSize

// joinParts assembles a long line from its parts into d.buf (empty for a
// line over the maximum). The parts are copied as they come and joined
// once the line's size is known, so that a line of megabytes costs about
// twice its size, not the five times that growing one slice by append
// would allocate.
func (d *Decoder) joinParts() []byte {
	d.buf = d.buf[:0]
	if d.over {
		return d.buf
	}
	if cap(d.buf) < d.size {
		d.buf = make([]byte, 0, d.size)
	}
	for _, p := range d.parts {
		d.buf = append(d.buf, p...)
	}
	d.dropParts()
	return d.buf
}

// dropParts lets the collector have the parts of a long line.
func (d *Decoder) dropParts() {
	clear(d.parts)
	d.parts = d.parts[:0]
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
