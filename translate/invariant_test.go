package translate_test

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/translate"
)

// checkStream reports the first way in which evs breaks the stream-level
// contract: response_start first, exactly one done and it last, document
// ids doc_001… with sequences 1..n in document_start order, every document
// ended exactly once, content deltas only for open text-like documents and
// tool events only for open tool-derived ones, a text-like document's final
// content equal to its deltas, thinking and agent events only when asked
// for.
func checkStream(evs []documents.Event, opts translate.Options) error {
	if len(evs) == 0 {
		return fmt.Errorf("no events")
	}
	if _, ok := evs[0].(documents.ResponseStart); !ok {
		return fmt.Errorf("event 1 is %s, want response_start", evs[0].Name())
	}
	type open struct {
		typ     documents.Type
		deltas  strings.Builder
		content string // what the last delta carried as the content so far
		ended   bool
	}
	docs := map[string]*open{}
	seq := 0
	for i, ev := range evs {
		n := i + 1
		switch e := ev.(type) {
		case documents.ResponseStart:
			if i != 0 {
				return fmt.Errorf("event %d: a second response_start", n)
			}
			if e.ID != opts.ResponseID {
				return fmt.Errorf("event %d: response id %q, want %q", n, e.ID, opts.ResponseID)
			}
		case documents.DocumentStart:
			seq++
			if e.Sequence != seq || e.ID != documents.DocID(seq) {
				return fmt.Errorf("event %d: document_start %s with sequence %d, want %s with %d", n, e.ID, e.Sequence, documents.DocID(seq), seq)
			}
			if !slicesContains(documents.Types, e.Type) {
				return fmt.Errorf("event %d: unknown document type %q", n, e.Type)
			}
			if len(e.Metadata) > 0 && !e.Metadata.IsValid(metaOpts) {
				return fmt.Errorf("event %d: metadata is not JSON: %s", n, e.Metadata)
			}
			docs[e.ID] = &open{typ: e.Type}
		case documents.ContentDelta:
			d := docs[e.DocumentID]
			switch {
			case d == nil || d.ended:
				return fmt.Errorf("event %d: content_delta for %s, which is not open", n, e.DocumentID)
			case !d.typ.IsText():
				return fmt.Errorf("event %d: content_delta for %s of type %s", n, e.DocumentID, d.typ)
			case e.Delta == "":
				return fmt.Errorf("event %d: empty content_delta for %s", n, e.DocumentID)
			}
			d.deltas.WriteString(e.Delta)
			// The content so far a delta carries (for the fold) is the
			// deltas so far: its length and end here, all of it at the end.
			if e.Content != "" || d.content != "" {
				if len(e.Content) != d.deltas.Len() || !strings.HasSuffix(e.Content, e.Delta) {
					return fmt.Errorf("event %d: content_delta for %s carries %d bytes of content ending %q; its deltas give %d", n, e.DocumentID, len(e.Content), tail(e.Content), d.deltas.Len())
				}
				d.content = e.Content
			}
		case documents.ToolCallStart, documents.ToolCallArguments, documents.ToolResultEvent:
			id := toolEventDoc(e)
			d := docs[id]
			switch {
			case d == nil || d.ended:
				return fmt.Errorf("event %d: %s for %s, which is not open", n, ev.Name(), id)
			case d.typ.IsText():
				return fmt.Errorf("event %d: %s for %s of type %s", n, ev.Name(), id, d.typ)
			}
		case documents.DocumentEnd:
			d := docs[e.DocumentID]
			if d == nil || d.ended {
				return fmt.Errorf("event %d: document_end for %s, which is not open", n, e.DocumentID)
			}
			d.ended = true
			if d.typ.IsText() {
				if e.FinalContent == nil {
					return fmt.Errorf("event %d: document_end of %s %s has no finalContent", n, d.typ, e.DocumentID)
				}
				if d.content != "" && d.content != d.deltas.String() {
					return fmt.Errorf("event %d: the last delta of %s carried content %q, its deltas give %q", n, e.DocumentID, d.content, d.deltas.String())
				}
				if *e.FinalContent != d.deltas.String() {
					return fmt.Errorf("event %d: finalContent of %s is %q, its deltas give %q", n, e.DocumentID, *e.FinalContent, d.deltas.String())
				}
				if nonSpace(*e.FinalContent) == "" {
					return fmt.Errorf("event %d: %s %s has only whitespace", n, d.typ, e.DocumentID)
				}
			}
			if len(e.Metadata) == 0 || !e.Metadata.IsValid(metaOpts) {
				return fmt.Errorf("event %d: document_end of %s has no valid metadata: %q", n, e.DocumentID, e.Metadata)
			}
		case documents.Done:
			if i != len(evs)-1 {
				return fmt.Errorf("event %d: done is followed by %d more events", n, len(evs)-1-i)
			}
			if e.ID != opts.ResponseID {
				return fmt.Errorf("event %d: done id %q, want %q", n, e.ID, opts.ResponseID)
			}
			for id, d := range docs {
				if !d.ended {
					return fmt.Errorf("event %d: done while %s is open", n, id)
				}
			}
			if u := e.Usage; u.PromptTokens < 0 || u.CompletionTokens < 0 || u.CacheReadTokens < 0 || u.CacheWriteTokens < 0 {
				return fmt.Errorf("event %d: a negative token count in %+v", n, u)
			}
			if e.Usage.TotalTokens != e.Usage.PromptTokens+e.Usage.CompletionTokens {
				return fmt.Errorf("event %d: totalTokens %d is not promptTokens + completionTokens", n, e.Usage.TotalTokens)
			}
			switch e.Status {
			case documents.StatusCompleted:
				if e.Metadata.StopReason != "" {
					return fmt.Errorf("event %d: completed with stopReason %q", n, e.Metadata.StopReason)
				}
			case documents.StatusError:
				if e.Metadata.StopReason == "" {
					return fmt.Errorf("event %d: status error without stopReason", n)
				}
			default:
				return fmt.Errorf("event %d: done with status %q", n, e.Status)
			}
		case documents.ThinkingDelta:
			if !opts.Thinking {
				return fmt.Errorf("event %d: thinking_delta without Options.Thinking", n)
			}
		case documents.AgentEvent:
			if !opts.IncludeRaw {
				return fmt.Errorf("event %d: agent_event without Options.IncludeRaw", n)
			}
		case documents.StatusEvent:
			switch {
			case e.State != documents.StateReconnecting && e.State != documents.StateRetrying && e.State != documents.StateReconnected:
				return fmt.Errorf("event %d: status with state %q", n, e.State)
			case e.Attempt < 1:
				return fmt.Errorf("event %d: status with attempt %d", n, e.Attempt)
			}
		default:
			return fmt.Errorf("event %d: unexpected event %T", n, ev)
		}
	}
	if _, ok := evs[len(evs)-1].(documents.Done); !ok {
		return fmt.Errorf("the stream ends with %s, not done", evs[len(evs)-1].Name())
	}
	return nil
}

// tail is the end of s, for messages.
func tail(s string) string {
	return s[max(0, len(s)-20):]
}

func toolEventDoc(ev documents.Event) string {
	switch e := ev.(type) {
	case documents.ToolCallStart:
		return e.DocumentID
	case documents.ToolCallArguments:
		return e.DocumentID
	case documents.ToolResultEvent:
		return e.DocumentID
	}
	return ""
}

func slicesContains(ts []documents.Type, t documents.Type) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// metaOpts is how metadata must be valid: raw agent JSON is copied into it
// as it is, and its invalid UTF-8 becomes U+FFFD when it is encoded, but a
// repeated member name (compared as the encoder compares them) cannot be
// encoded at all.
var metaOpts = jsontext.AllowInvalidUTF8(true)

// TestStreamInvariants checks the stream contract on every golden case.
func TestStreamInvariants(t *testing.T) {
	for _, c := range loadGolden(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			evs := c.translate(t, bytes.NewReader(c.input))
			if err := checkStream(evs, c.segmenterOptions()); err != nil {
				t.Error(err)
			}
		})
	}
}

// twoPieces returns input as two reads: input[:i], then the rest.
type twoPieces struct {
	input []byte
	i     int
	n     int
}

func (r *twoPieces) Read(p []byte) (int, error) {
	if r.n >= len(r.input) {
		return 0, io.EOF
	}
	end := len(r.input)
	if r.n < r.i {
		end = r.i
	}
	k := copy(p, r.input[r.n:end])
	r.n += k
	return k, nil
}

// TestSplitReads feeds every golden input split at every byte offset, one
// byte at a time, and through a 16-byte read buffer: the events must be
// identical to those of one read. The race detector slows the byte loops
// tenfold and this test has nothing concurrent to check, so with -race it
// splits at every line boundary, next to it, and at every 7th byte.
func TestSplitReads(t *testing.T) {
	for _, c := range loadGolden(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			want := c.translate(t, bytes.NewReader(c.input))
			same := func(how string, got []documents.Event) {
				t.Helper()
				if !sameEvents(got, want) {
					t.Fatalf("%s: the stream differs at %s", how, firstDiff(renderSSE(t, got), renderSSE(t, want)))
				}
			}
			for i := 1; i < len(c.input); i++ {
				if raceEnabled && i%7 != 0 && c.input[i-1] != '\n' && c.input[i] != '\n' {
					continue
				}
				same("split at byte "+strconv.Itoa(i), c.translate(t, &twoPieces{input: c.input, i: i}))
			}
			same("one byte at a time", c.translate(t, iotest.OneByteReader(bytes.NewReader(c.input))))
			opts := c.segmenterOptions()
			var got []documents.Event
			seg := translate.NewSegmenter(opts, func(ev documents.Event) { got = append(got, ev) })
			seg.Start()
			dec := translate.NewDecoderSize(iotest.OneByteReader(bytes.NewReader(c.input)), opts.MaxLine, 16)
			if err := translate.Pump(dec, seg); err != nil {
				t.Fatal(err)
			}
			seg.Close(c.end())
			same("a 16-byte buffer, one byte at a time", got)
		})
	}
}

// sameEvents reports whether two streams are equal event by event.
func sameEvents(a, b []documents.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameEvent(a[i], b[i]) {
			return false
		}
	}
	return true
}

func sameEvent(a, b documents.Event) bool {
	switch x := a.(type) {
	case documents.ResponseStart:
		y, ok := b.(documents.ResponseStart)
		return ok && x.ID == y.ID && sameString(x.ConversationID, y.ConversationID) && x.Model == y.Model && x.Mode == y.Mode && x.Created == y.Created
	case documents.DocumentStart:
		y, ok := b.(documents.DocumentStart)
		return ok && x.ID == y.ID && x.Type == y.Type && x.Sequence == y.Sequence && bytes.Equal(x.Metadata, y.Metadata)
	case documents.ContentDelta:
		return x == b
	case documents.ToolCallStart:
		return x == b
	case documents.ToolCallArguments:
		y, ok := b.(documents.ToolCallArguments)
		return ok && x.DocumentID == y.DocumentID && bytes.Equal(x.Arguments, y.Arguments)
	case documents.ToolResultEvent:
		y, ok := b.(documents.ToolResultEvent)
		return ok && x.DocumentID == y.DocumentID && x.Result.Status == y.Result.Status && bytes.Equal(x.Result.Data, y.Result.Data)
	case documents.DocumentEnd:
		y, ok := b.(documents.DocumentEnd)
		return ok && x.DocumentID == y.DocumentID && sameString(x.FinalContent, y.FinalContent) && bytes.Equal(x.Metadata, y.Metadata)
	case documents.ThinkingDelta:
		return x == b
	}
	return reflect.DeepEqual(a, b) // done and agent_event: rare
}

func sameString(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// TestFoldSSE reads each golden sse.txt as a client would, folds it with
// documents.Builder, and compares the result with documents.json: the
// stream carries everything the non-streaming answer holds.
func TestFoldSSE(t *testing.T) {
	for _, c := range loadGolden(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			raw, ok := c.section("sse.txt")
			if !ok {
				t.Skip("no sse.txt section")
			}
			evs, err := parseSSE(raw)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkStream(evs, c.segmenterOptions()); err != nil {
				t.Errorf("sse.txt: %v", err)
			}
			want, _ := c.section("documents.json")
			if d := firstDiff(renderDocuments(t, fold(evs)), want); d != "" {
				t.Errorf("folding sse.txt differs from documents.json at %s", d)
			}
		})
	}
}

// parseSSE decodes an SSE document stream into its events; lines may end
// in CRLF, LF or CR, as the SSE specification allows. Ids must run 1..n.
func parseSSE(b []byte) ([]documents.Event, error) {
	text := strings.ReplaceAll(strings.ReplaceAll(string(b), "\r\n", "\n"), "\r", "\n")
	var evs []documents.Event
	for i, block := range strings.Split(strings.TrimSuffix(text, "\n\n"), "\n\n") {
		var id, name, data string
		for _, line := range strings.Split(block, "\n") {
			k, v, ok := strings.Cut(line, ": ")
			if !ok {
				return nil, fmt.Errorf("frame %d: bad line %q", i+1, line)
			}
			switch k {
			case "id":
				id = v
			case "event":
				name = v
			case "data":
				data += v
			default:
				return nil, fmt.Errorf("frame %d: unknown field %q", i+1, k)
			}
		}
		if id != strconv.Itoa(i+1) {
			return nil, fmt.Errorf("frame %d has id %q", i+1, id)
		}
		ev, err := decodeEvent(name, []byte(data))
		if err != nil {
			return nil, fmt.Errorf("frame %d: %w", i+1, err)
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// decodeEvent decodes the JSON data of a named document event.
func decodeEvent(name string, data []byte) (documents.Event, error) {
	var err error
	unmarshal := func(v any) { err = json.Unmarshal(data, v, json.RejectUnknownMembers(true)) }
	var ev documents.Event
	switch name {
	case documents.EventResponseStart:
		var e documents.ResponseStart
		unmarshal(&e)
		ev = e
	case documents.EventDocumentStart:
		var e documents.DocumentStart
		unmarshal(&e)
		ev = e
	case documents.EventContentDelta:
		var e documents.ContentDelta
		unmarshal(&e)
		ev = e
	case documents.EventToolCallStart:
		var e documents.ToolCallStart
		unmarshal(&e)
		ev = e
	case documents.EventToolCallArguments:
		var e documents.ToolCallArguments
		unmarshal(&e)
		ev = e
	case documents.EventToolResult:
		var e documents.ToolResultEvent
		unmarshal(&e)
		ev = e
	case documents.EventDocumentEnd:
		var e documents.DocumentEnd
		unmarshal(&e)
		ev = e
	case documents.EventDone:
		var e documents.Done
		unmarshal(&e)
		ev = e
	case documents.EventThinkingDelta:
		var e documents.ThinkingDelta
		unmarshal(&e)
		ev = e
	case documents.EventAgentEvent:
		var e documents.AgentEvent
		unmarshal(&e)
		ev = e
	case documents.EventStatus:
		var e documents.StatusEvent
		unmarshal(&e)
		ev = e
	default:
		return nil, fmt.Errorf("unknown event %q", name)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", name, err)
	}
	return ev, nil
}
