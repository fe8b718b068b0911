// Package acp speaks the Agent Client Protocol's wire: JSON-RPC 2.0
// messages, one per line, as `agent acp` reads and writes them on stdio,
// and the parts of ACP v1 and Cursor's `cursor/*` extensions that
// Docstream uses.
package acp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Message is one JSON-RPC 2.0 message: a request (ID and Method), a
// notification (Method alone) or a response (ID with Result or Error).
type Message struct {
	JSONRPC string         `json:"jsonrpc"`
	ID      jsontext.Value `json:"id,omitzero"`
	Method  string         `json:"method,omitzero"`
	Params  jsontext.Value `json:"params,omitzero"`
	Result  jsontext.Value `json:"result,omitzero"`
	Error   *Error         `json:"error,omitzero"`
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    jsontext.Value `json:"data,omitzero"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s (JSON-RPC error %d)", e.Message, e.Code) }

// IsResponse reports whether m answers a request.
func (m *Message) IsResponse() bool { return m.Method == "" }

// IsRequest reports whether m is a request, which wants an answer.
func (m *Message) IsRequest() bool {
	return m.Method != "" && len(m.ID) > 0 && m.ID.Kind() != 'n'
}

// ErrNotMessage is the error of a line that is not a JSON-RPC message.
var ErrNotMessage = errors.New("acp: not a JSON-RPC 2.0 message")

// Parse reads one line as a message. Unknown members are ignored; a line
// that is not a JSON object with "jsonrpc":"2.0" and either a method or
// an id is ErrNotMessage.
func Parse(line []byte) (Message, error) {
	var m Message
	if err := json.Unmarshal(line, &m); err != nil {
		return Message{}, fmt.Errorf("%w: %w", ErrNotMessage, err)
	}
	switch k := m.ID.Kind(); {
	case m.JSONRPC != "2.0",
		m.Method == "" && k == 0,                   // neither a method nor an id
		k != 0 && k != '"' && k != '0' && k != 'n': // an id that is no string, number or null
		return Message{}, ErrNotMessage
	}
	return m, nil
}

// ID returns the JSON of request id n.
func ID(n int64) jsontext.Value { return jsontext.Value(strconv.FormatInt(n, 10)) }

// Writer writes messages, one per line; it is safe for concurrent use.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Request writes a request with the given id.
func (w *Writer) Request(id jsontext.Value, method string, params any) error {
	return w.write(method, id, params, nil, nil)
}

// Notify writes a notification.
func (w *Writer) Notify(method string, params any) error {
	return w.write(method, nil, params, nil, nil)
}

// Reply answers request id with result.
func (w *Writer) Reply(id jsontext.Value, result any) error {
	if result == nil {
		result = jsontext.Value("null")
	}
	return w.write("", id, nil, result, nil)
}

// Fail answers request id with an error.
func (w *Writer) Fail(id jsontext.Value, code int, msg string) error {
	return w.write("", id, nil, nil, &Error{Code: code, Message: msg})
}

func (w *Writer) write(method string, id jsontext.Value, params, result any, e *Error) error {
	m := struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      jsontext.Value `json:"id,omitzero"`
		Method  string         `json:"method,omitzero"`
		Params  any            `json:"params,omitzero"`
		Result  any            `json:"result,omitzero"`
		Error   *Error         `json:"error,omitzero"`
	}{"2.0", id, method, params, result, e}
	if e != nil && id == nil {
		m.ID = jsontext.Value("null")
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("acp: encoding %s: %w", method, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err = w.w.Write(append(b, '\n'))
	return err
}

// ReadLines reads r line by line and calls fn with each non-empty line and
// its length until r ends (nil) or fails; a line longer than max bytes
// comes as nil. The line is valid until fn returns.
func ReadLines(r io.Reader, max int, fn func(line []byte, size int)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	size := 0
	for {
		chunk, err := br.ReadSlice('\n')
		size += len(chunk)
		if size <= max+1 {
			buf = append(buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == nil {
			size-- // the newline ReadSlice found
		}
		switch line := bytes.TrimRight(buf, "\r\n"); {
		case size > max:
			fn(nil, size)
		case len(bytes.TrimSpace(line)) > 0:
			fn(line, len(line))
		}
		buf, size = buf[:0], 0
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
