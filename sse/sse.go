// Package sse owns Docstream's wire encodings: document events as
// Server-Sent Events, OpenAI chat.completion.chunk frames, heartbeats, and
// the per-run replayable event log that streams are served from.
package sse

import (
	"io"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	gosse "github.com/tmaxmax/go-sse"

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
	return json.Marshal(ev, encodeOpts)
}

// NewFrame encodes ev as the frame with the given id.
func NewFrame(id int, ev documents.Event) (Frame, error) {
	data, err := Encode(ev)
	if err != nil {
		return Frame{}, err
	}
	return Frame{ID: id, Name: ev.Name(), Data: data}, nil
}

// WriteTo writes the frame as one SSE event:
//
//	id: 3
//	event: content_delta
//	data: {"documentId":"doc_001","delta":"Hi"}
//
// followed by a blank line.
func (f Frame) WriteTo(w io.Writer) (int64, error) {
	m := gosse.Message{ID: gosse.ID(strconv.Itoa(f.ID)), Type: gosse.Type(f.Name)}
	m.AppendData(string(f.Data))
	return m.WriteTo(w)
}

// WriteData writes one unnamed SSE event that carries only data, the way
// OpenAI streams chunks: "data: …" and a blank line.
func WriteData(w io.Writer, data []byte) error {
	var m gosse.Message
	m.AppendData(string(data))
	_, err := m.WriteTo(w)
	return err
}

// WriteComment writes an SSE comment line, used as a heartbeat: ": ping".
func WriteComment(w io.Writer, text string) error {
	var m gosse.Message
	m.AppendComment(text)
	_, err := m.WriteTo(w)
	return err
}
