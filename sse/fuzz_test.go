package sse_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	gosse "github.com/tmaxmax/go-sse"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/sse"
)

type parsed struct {
	ID, Name, Data string
}

// parse reads SSE bytes back with go-sse's parser, as a client would.
func parse(t *testing.T, b []byte) []parsed {
	t.Helper()
	var out []parsed
	for ev, err := range gosse.Read(bytes.NewReader(b), &gosse.ReadConfig{MaxEventSize: 16 << 20}) {
		if err != nil {
			t.Fatalf("parsing %q: %v", b, err)
		}
		out = append(out, parsed{ev.LastEventID, ev.Type, ev.Data})
	}
	return out
}

// lineBreaks are what SSE ends a line with; an event's data comes back with
// each of them as "\n", and no name or id can hold one.
var lineBreaks = strings.NewReplacer("\r\n", "\n", "\r", "\n")

// FuzzFrame checks that for any name and data, the bytes a Frame writes
// parse back into exactly one event with the same id, name and data (line
// breaks in data come back as "\n", the only one SSE carries), and that
// nothing in name or data can inject a field or a second event.
func FuzzFrame(f *testing.F) {
	f.Add(1, "content_delta", []byte(`{"documentId":"doc_001","delta":"Hi"}`))
	f.Add(2, "done", []byte(`{}`))
	f.Add(3, "x", []byte("a\nb\r\nc\rd"))
	f.Add(4, "content_delta\ndata: injected", []byte("x\n\nid: 99\nevent: done\ndata: y"))
	f.Add(5, "a\r\nid: 7", []byte(""))
	f.Add(6, " spaced", []byte(" leading space"))
	f.Add(7, "", []byte("\n"))
	f.Add(8, "nul\x00name", []byte("nul\x00data"))
	f.Add(1<<30, "ünïcode", []byte("\xff\xfe invalid utf-8"))
	f.Fuzz(func(t *testing.T, id int, name string, data []byte) {
		var buf bytes.Buffer
		if _, err := (sse.Frame{ID: id, Name: name, Data: data}).WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		evs := parse(t, buf.Bytes())
		if len(evs) != 1 {
			t.Fatalf("name %q data %q: %d events parsed from %q, want 1", name, data, len(evs), buf.Bytes())
		}
		got := evs[0]
		if got.ID != strconv.Itoa(id) {
			t.Errorf("id: got %q, want %d", got.ID, id)
		}
		wantName := name
		if strings.ContainsAny(name, "\r\n") {
			// A name cannot hold a line break: it must not spill over into
			// other fields; what is left of it is the name.
			wantName = strings.NewReplacer("\r", "", "\n", "").Replace(name)
		}
		if got.Name != wantName {
			t.Errorf("name: got %q, want %q (bytes %q)", got.Name, wantName, buf.Bytes())
		}
		if want := lineBreaks.Replace(string(data)); got.Data != want {
			t.Errorf("data: got %q, want %q (bytes %q)", got.Data, want, buf.Bytes())
		}
	})
}

// FuzzWriteData checks OpenAI-style data-only events the same way.
func FuzzWriteData(f *testing.F) {
	f.Add([]byte(`{"id":"chatcmpl-1","choices":[]}`))
	f.Add([]byte("[DONE]"))
	f.Add([]byte("a\r\n\r\nevent: done\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var buf bytes.Buffer
		if err := sse.WriteData(&buf, data); err != nil {
			t.Fatal(err)
		}
		evs := parse(t, buf.Bytes())
		if len(evs) != 1 {
			t.Fatalf("data %q: %d events parsed from %q, want 1", data, len(evs), buf.Bytes())
		}
		if evs[0].Name != "" || evs[0].ID != "" {
			t.Errorf("data %q: got name %q id %q, want neither", data, evs[0].Name, evs[0].ID)
		}
		if want := lineBreaks.Replace(string(data)); evs[0].Data != want {
			t.Errorf("data: got %q, want %q", evs[0].Data, want)
		}
	})
}

// FuzzComment checks that a comment (a heartbeat) never parses as an event
// and never sets the last event id, whatever its text.
func FuzzComment(f *testing.F) {
	f.Add("ping")
	f.Add("docstream chat_abc")
	f.Add("x\ndata: injected\n\n")
	f.Add("x\rid: 5\r\r")
	f.Fuzz(func(t *testing.T, text string) {
		var buf bytes.Buffer
		if err := sse.WriteComment(&buf, text); err != nil {
			t.Fatal(err)
		}
		// A real event after the comment must still parse alone and whole.
		if _, err := (sse.Frame{ID: 1, Name: "done", Data: []byte("{}")}).WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		evs := parse(t, buf.Bytes())
		if len(evs) != 1 || evs[0] != (parsed{"1", "done", "{}"}) {
			t.Fatalf("comment %q: parsed %+v from %q, want only the done event", text, evs, buf.Bytes())
		}
	})
}

// FuzzDecodeFrame feeds arbitrary frames to DecodeFrame: it may refuse
// them, never panic, and what it accepts encodes back to a frame that
// decodes to the same event.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []struct{ name, data string }{
		{documents.EventResponseStart, `{"id":"chat_1","conversationId":null,"model":"auto","mode":"agent","created":"2026-01-01T00:00:00Z"}`},
		{documents.EventDocumentStart, `{"id":"doc_001","type":"text","sequence":1}`},
		{documents.EventContentDelta, `{"documentId":"doc_001","delta":"Hi"}`},
		{documents.EventDone, `{"id":"chat_1","status":"completed","usage":{"promptTokens":1}}`},
		{"unknown", `{}`},
		{documents.EventContentDelta, `{"documentId":`},
	} {
		f.Add(s.name, []byte(s.data))
	}
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		ev, err := sse.DecodeFrame(sse.Frame{Name: name, Data: data})
		if err != nil || ev == nil {
			return
		}
		fr, err := sse.NewFrame(1, ev)
		if err != nil {
			t.Fatalf("re-encoding %T: %v", ev, err)
		}
		if fr.Name != name {
			t.Fatalf("decoded %q as %T, which encodes as %q", name, ev, fr.Name)
		}
		ev2, err := sse.DecodeFrame(fr)
		if err != nil {
			t.Fatalf("decoding the re-encoded frame %s %s: %v", fr.Name, fr.Data, err)
		}
		fr2, err := sse.NewFrame(1, ev2)
		if err != nil || !bytes.Equal(fr.Data, fr2.Data) {
			t.Fatalf("not stable: %s then %s (%v)", fr.Data, fr2.Data, err)
		}
		// The bytes NewFrame keeps are those of a frame of the same fields.
		var got, want bytes.Buffer
		fr.WriteTo(&got)
		sse.Frame{ID: fr.ID, Name: fr.Name, Data: fr.Data}.WriteTo(&want)
		if got.String() != want.String() {
			t.Fatalf("NewFrame writes %q, its fields %q", got.Bytes(), want.Bytes())
		}
	})
}

// FuzzDeltaFrame checks that a content delta's frame carries the JSON that
// json.Marshal writes for it, also for text that is not valid UTF-8.
func FuzzDeltaFrame(f *testing.F) {
	f.Add("doc_001", "Hi")
	f.Add("doc_002", "<a href=\"x\">&amp;</a>\u2028\u2029\t\x00\x7f")
	f.Add("doc\xff", "\xff\xfe invalid \xe2\x82 utf-8 é")
	f.Fuzz(func(t *testing.T, id, delta string) {
		ev := documents.ContentDelta{DocumentID: id, Delta: delta, Content: "not on the wire"}
		want, err := json.Marshal(ev, jsontext.AllowInvalidUTF8(true))
		if err != nil {
			t.Fatal(err)
		}
		f, err := sse.NewFrame(1, ev)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(f.Data, want) {
			t.Fatalf("frame data %q, json.Marshal %q", f.Data, want)
		}
	})
}
