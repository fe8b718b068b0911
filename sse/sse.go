// Package sse writes Server-Sent Events: document events as frames,
// data-only and named events, and comments (heartbeats).
package sse

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
)

// Frame is one encoded event of a document stream: its id (1..n per
// response), its event name and its JSON data.
type Frame struct {
	ID   int
	Name string
	Data []byte
	wire []byte // the whole event as WriteTo writes it, when NewFrame made it
}

// encodeOpts keeps agent text that is not valid UTF-8 from failing a stream.
var encodeOpts = jsontext.AllowInvalidUTF8(true)

// Encode returns the JSON data of a document event.
func Encode(ev documents.Event) ([]byte, error) {
	return json.Marshal(ev, encodeOpts)
}

// NewFrame encodes ev as the frame with the given id, once for all the
// streams that write it: its Data is part of its wire bytes.
func NewFrame(id int, ev documents.Event) (Frame, error) {
	buf := scratch.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 64<<10 { // a large one is not kept
			scratch.Put(buf)
		}
	}()
	if d, ok := ev.(documents.ContentDelta); ok {
		buf.Write(appendDelta(buf.AvailableBuffer(), d))
	} else if err := json.MarshalWrite(buf, ev, encodeOpts); err != nil {
		return Frame{}, err
	}
	data := buf.Bytes()
	f := Frame{ID: id, Name: ev.Name(), Data: data}
	f.wire = f.append(make([]byte, 0, len(data)+len(f.Name)+48))
	end := len(f.wire) - 2*len(eol) // compact JSON has no line break: data is the last line
	f.Data = f.wire[end-len(data) : end : end]
	return f, nil
}

// appendDelta appends d's JSON as Encode writes it. Deltas are most of a
// stream's frames, and quoting two strings costs a fraction of
// json.Marshal's call when the caches are cold, as between agent lines.
func appendDelta(b []byte, d documents.ContentDelta) []byte {
	b = append(b, `{"documentId":`...)
	b, _ = jsontext.AppendQuote(b, d.DocumentID) // invalid UTF-8 becomes U+FFFD, as under encodeOpts
	b = append(b, `,"delta":`...)
	b, _ = jsontext.AppendQuote(b, d.Delta)
	return append(b, '}')
}

// scratch holds the JSON of frames being made.
var scratch = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Lines end with CRLF, which every SSE parser accepts, so that each event
// ends with a blank line even to readers that split on "\r\n\r\n".
const eol = "\r\n"

// WriteTo writes the frame as one SSE event, lines ending in CRLF:
//
//	id: 3
//	event: content_delta
//	data: {"documentId":"doc_001","delta":"Hi"}
//
// followed by a blank line. Data lines are split at line breaks.
func (f Frame) WriteTo(w io.Writer) (int64, error) {
	b := f.wire
	if b == nil {
		b = f.append(make([]byte, 0, len(f.Data)+len(f.Name)+32))
	}
	n, err := w.Write(b)
	return int64(n), err
}

// append appends the frame's SSE event to b.
func (f Frame) append(b []byte) []byte {
	b = append(b, "id: "...)
	b = strconv.AppendInt(b, int64(f.ID), 10)
	b = append(b, eol...)
	return appendEvent(b, f.Name, f.Data)
}

// appendEvent appends an event's name and data and the blank line that ends it.
func appendEvent(b []byte, name string, data []byte) []byte {
	b = append(b, "event: "...)
	b = append(b, noBreaks.Replace(name)...)
	b = append(b, eol...)
	b = appendData(b, data)
	return append(b, eol...)
}

// noBreaks drops line breaks: a field cannot hold one, and a name or
// comment with one would inject fields into the stream.
var noBreaks = strings.NewReplacer("\r", "", "\n", "")

// appendData appends data as "data:" lines, one per line of data.
func appendData(b, data []byte) []byte {
	for {
		b = append(b, "data: "...)
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			b = append(b, data...)
			return append(b, eol...)
		}
		b = append(b, data[:i]...)
		b = append(b, eol...)
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
}

// WriteData writes one unnamed SSE event that carries only data, the way
// OpenAI streams chunks: "data: …" and a blank line.
func WriteData(w io.Writer, data []byte) error {
	b := appendData(make([]byte, 0, len(data)+16), data)
	b = append(b, eol...)
	_, err := w.Write(b)
	return err
}

// WriteEvent writes one named SSE event without an id, for what a stream
// says about itself rather than about its run: a client's Last-Event-ID
// stays the id of the last frame it got.
func WriteEvent(w io.Writer, name string, data []byte) error {
	_, err := w.Write(appendEvent(make([]byte, 0, len(data)+len(name)+24), name, data))
	return err
}

// WriteComment writes an SSE comment line, used as a heartbeat: ": ping".
func WriteComment(w io.Writer, text string) error {
	_, err := io.WriteString(w, ": "+noBreaks.Replace(text)+eol+eol)
	return err
}
