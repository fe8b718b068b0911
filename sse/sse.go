// Package sse owns Docstream's wire encodings: document events as
// Server-Sent Events, OpenAI chat.completion.chunk frames, heartbeats, and
// the per-run replayable event log that streams are served from.
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
}

// encodeOpts keeps agent text that is not valid UTF-8 from failing a stream.
var encodeOpts = jsontext.AllowInvalidUTF8(true)

// Encode returns the JSON data of a document event.
func Encode(ev documents.Event) ([]byte, error) {
	if n, ok := fastSize(ev); ok {
		return appendFast(make([]byte, 0, n), ev), nil
	}
	if b, ok, err := documents.AppendEvent(make([]byte, 0, eventSize(ev)), ev); ok {
		return b, err
	}
	return json.Marshal(ev, encodeOpts)
}

// eventSize is about how many bytes documents.AppendEvent takes for ev.
func eventSize(ev documents.Event) int {
	switch e := ev.(type) {
	case documents.DocumentStart:
		return 64 + len(e.Metadata)
	case documents.DocumentEnd:
		n := 64 + len(e.Metadata)
		if e.FinalContent != nil {
			n += len(*e.FinalContent) + len(*e.FinalContent)/8
		}
		return n
	}
	return 256
}

// fastSize reports whether ev is encoded without reflection (deltas, most
// of a stream's events) and about how many bytes that takes.
func fastSize(ev documents.Event) (int, bool) {
	switch e := ev.(type) {
	case documents.ContentDelta:
		return len(`{"documentId":"","delta":""}`) + len(e.DocumentID) + len(e.Delta) + len(e.Delta)/8, true
	case documents.ThinkingDelta:
		return len(`{"delta":""}`) + len(e.Delta) + len(e.Delta)/8, true
	}
	return 0, false
}

// appendFast appends the JSON data of an event fastSize accepts, the bytes
// json.Marshal gives it.
func appendFast(b []byte, ev documents.Event) []byte {
	switch e := ev.(type) {
	case documents.ContentDelta:
		b = append(b, `{"documentId":`...)
		b = documents.AppendString(b, e.DocumentID)
		b = append(b, `,"delta":`...)
		b = documents.AppendString(b, e.Delta)
	case documents.ThinkingDelta:
		b = append(b, `{"delta":`...)
		b = documents.AppendString(b, e.Delta)
	}
	return append(b, '}')
}

// NewFrame encodes ev as the frame with the given id.
func NewFrame(id int, ev documents.Event) (Frame, error) {
	data, err := Encode(ev)
	if err != nil {
		return Frame{}, err
	}
	return Frame{ID: id, Name: ev.Name(), Data: data}, nil
}

// Lines end with CRLF, which every SSE parser accepts, so that each event
// ends with a blank line even to readers that split on "\r\n\r\n".
const eol = "\r\n"

var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// maxPooled is the largest buffer given back to bufs: one that grew for a
// frame of megabytes (a huge tool result) is left to the collector rather
// than kept in the pool.
const maxPooled = 64 << 10

// putBuf gives a frame buffer back to bufs.
func putBuf(bp *[]byte, b []byte) {
	if cap(b) > maxPooled {
		return
	}
	*bp = b
	bufs.Put(bp)
}

// WriteTo writes the frame as one SSE event, lines ending in CRLF:
//
//	id: 3
//	event: content_delta
//	data: {"documentId":"doc_001","delta":"Hi"}
//
// followed by a blank line. Data lines are split at line breaks.
func (f Frame) WriteTo(w io.Writer) (int64, error) {
	bp := bufs.Get().(*[]byte)
	b := (*bp)[:0]
	b = append(b, "id: "...)
	b = strconv.AppendInt(b, int64(f.ID), 10)
	b = append(b, eol+"event: "...)
	b = appendLine(b, f.Name)
	b = append(b, eol...)
	b = appendData(b, f.Data)
	b = append(b, eol...)
	n, err := w.Write(b)
	putBuf(bp, b)
	return int64(n), err
}

// appendLine appends s without its line breaks: a field cannot hold one,
// and a name or comment with one would inject fields into the stream.
func appendLine(b []byte, s string) []byte {
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			return append(b, s...)
		}
		b = append(b, s[:i]...)
		s = s[i+1:]
	}
}

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
	bp := bufs.Get().(*[]byte)
	b := appendData((*bp)[:0], data)
	b = append(b, eol...)
	_, err := w.Write(b)
	putBuf(bp, b)
	return err
}

// WriteEvent writes one named SSE event without an id, for what a stream
// says about itself rather than about its run: a client's Last-Event-ID
// stays the id of the last frame it got.
func WriteEvent(w io.Writer, name string, data []byte) error {
	bp := bufs.Get().(*[]byte)
	b := append((*bp)[:0], "event: "...)
	b = appendLine(b, name)
	b = append(b, eol...)
	b = appendData(b, data)
	b = append(b, eol...)
	_, err := w.Write(b)
	putBuf(bp, b)
	return err
}

// WriteComment writes an SSE comment line, used as a heartbeat: ": ping".
func WriteComment(w io.Writer, text string) error {
	_, err := io.WriteString(w, ": "+string(appendLine(nil, text))+eol+eol)
	return err
}
