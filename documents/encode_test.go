package documents

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// marshalResponse is what AppendResponse must equal.
func marshalResponse(r *ChatResponse) ([]byte, error) {
	return json.Marshal(r, jsontext.AllowInvalidUTF8(true))
}

func strp(s string) *string { return &s }

// encodeCases are responses with every field set, unset, and set to what
// needs escaping or formatting.
func encodeCases() map[string]*ChatResponse {
	full := &ChatResponse{
		ID: "chat_1", ConversationID: strp("conv-1"), Model: "auto", Mode: "agent", Created: "2026-11-26T15:00:00Z",
		Status: StatusCompleted,
		Documents: []Document{
			{ID: "doc_001", Type: TypeText, Sequence: 1, Content: strp("Hello <b>&</b> \"quoted\"\n\ttab \u2028 \x00 é"), Metadata: jsontext.Value(`{"format":"markdown"}`)},
			{ID: "doc_002", Type: TypeToolCall, Sequence: 2, Metadata: jsontext.Value(" {\n \"toolName\" : \"grep\", \"arguments\": {\"q\":\"\\u0041\\/\"}, \"n\": [1, 2.50, -0e3] } ")},
			{ID: "doc_003", Type: TypeError, Sequence: 3, Content: strp("")},
		},
		Usage: Usage{PromptTokens: 10, CompletionTokens: 20, TotalTokens: 30, CacheReadTokens: 5, CacheWriteTokens: 6, Reported: true},
		Metadata: ResponseMetadata{DurationMs: 1234, ToolCallCount: 2, TurnCount: 1, StopReason: StopAgentExit, SkippedLines: 3,
			Agent: &AgentInfo{SessionID: "s", Cwd: "/w", Model: "gpt", PermissionMode: "default", RequestID: "r", DurationAPIMs: 7},
			Cloud: &CloudInfo{AgentID: "bc-1", Status: "FINISHED", Summary: "done", BranchName: "b", PRURL: "https://x/pr/1", URL: "https://x", Repository: "o/r"}},
	}
	partial := *full
	partial.Metadata.Agent = &AgentInfo{Cwd: "/w"}
	partial.Metadata.Cloud = &CloudInfo{}
	return map[string]*ChatResponse{
		"zero":    {},
		"empty":   {Documents: []Document{}},
		"full":    full,
		"partial": &partial,
		"invalid utf-8": {ID: "chat_\xff", Created: "\xc3", Documents: []Document{
			{ID: "doc_001", Content: strp("a\xffb\xe2\x82"), Metadata: jsontext.Value("{\"k\":\"v\xff\"}")}}},
	}
}

// TestAppendResponseMatchesMarshal checks that AppendResponse writes the
// bytes json.Marshal writes, after what b already holds.
func TestAppendResponseMatchesMarshal(t *testing.T) {
	for name, r := range encodeCases() {
		want, err := marshalResponse(r)
		if err != nil {
			t.Fatalf("%s: marshal: %v", name, err)
		}
		got, err := AppendResponse([]byte("prefix"), r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Errorf("%s:\n got %s\nwant prefix%s", name, got, want)
		}
	}
}

// TestAppendResponseBadMetadata checks that metadata that is not JSON fails
// the encoding, as it fails json.Marshal, and leaves b as it was.
func TestAppendResponseBadMetadata(t *testing.T) {
	for _, meta := range []string{"", "{", `{"a":1}x`, `{"a":1,"a":2}`, "\x01"} {
		r := &ChatResponse{ID: "chat_1", Documents: []Document{{ID: "doc_001", Metadata: jsontext.Value(meta)}}}
		if _, err := marshalResponse(r); err == nil {
			t.Fatalf("metadata %q: json.Marshal took it", meta)
		}
		got, err := AppendResponse([]byte("prefix"), r)
		if err == nil || string(got) != "prefix" {
			t.Errorf("metadata %q: got %q, %v; want an error and the prefix alone", meta, got, err)
		}
	}
}

// TestAppendResponseFields fails when a type AppendResponse writes gains or
// loses a field: the encoder must be told.
func TestAppendResponseFields(t *testing.T) {
	for typ, n := range map[reflect.Type]int{
		reflect.TypeFor[ChatResponse](): 9, reflect.TypeFor[Document](): 5, reflect.TypeFor[Usage](): 6,
		reflect.TypeFor[ResponseMetadata](): 7, reflect.TypeFor[AgentInfo](): 6, reflect.TypeFor[CloudInfo](): 7,
	} {
		if typ.NumField() != n {
			t.Errorf("%s has %d fields, AppendResponse writes %d: update it (and encodeCases)", typ, typ.NumField(), n)
		}
	}
}

// FuzzAppendResponse compares AppendResponse with json.Marshal on
// responses made of arbitrary strings, numbers and metadata.
func FuzzAppendResponse(f *testing.F) {
	for _, r := range encodeCases() {
		var meta []byte
		content := ""
		for _, d := range r.Documents {
			meta = d.Metadata
			if d.Content != nil {
				content = *d.Content
			}
		}
		f.Add(r.ID, content, []byte(meta), r.Usage.PromptTokens, r.Metadata.DurationMs, r.Metadata.Agent != nil, r.ConversationID == nil)
	}
	f.Fuzz(func(t *testing.T, s, content string, meta []byte, n, dur int64, agent, nilConv bool) {
		r := &ChatResponse{ID: s, Model: content, Mode: s, Created: s, Status: Status(content),
			Documents: []Document{{ID: s, Type: Type(s), Sequence: int(n), Content: &content, Metadata: meta}, {ID: content}},
			Usage:     Usage{PromptTokens: n, CompletionTokens: dur, TotalTokens: n, CacheReadTokens: dur, CacheWriteTokens: n, Reported: agent},
			Metadata:  ResponseMetadata{DurationMs: dur, ToolCallCount: int(n), TurnCount: int(dur), StopReason: StopReason(s), SkippedLines: int(n)}}
		if !nilConv {
			r.ConversationID = &content
		}
		if agent {
			r.Metadata.Agent = &AgentInfo{SessionID: s, Cwd: content, DurationAPIMs: n}
			r.Metadata.Cloud = &CloudInfo{Summary: content, Repository: s}
		}
		want, werr := marshalResponse(r)
		got, err := AppendResponse(nil, r)
		if (err != nil) != (werr != nil) {
			t.Fatalf("error %v, json.Marshal's %v", err, werr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	})
}

// eventCases are the events AppendEvent encodes, with their fields set,
// unset, and set to what needs escaping or formatting.
func eventCases() []Event {
	var evs []Event
	for _, r := range encodeCases() {
		evs = append(evs,
			ResponseStart{ID: r.ID, ConversationID: r.ConversationID, Model: r.Model, Mode: r.Mode, Created: r.Created},
			Done{ID: r.ID, ConversationID: r.ConversationID, Status: r.Status, Usage: r.Usage, Metadata: r.Metadata})
		for _, d := range r.Documents {
			evs = append(evs,
				DocumentStart{ID: d.ID, Type: d.Type, Sequence: d.Sequence, Metadata: d.Metadata},
				DocumentEnd{DocumentID: d.ID, FinalContent: d.Content, Metadata: d.Metadata})
		}
	}
	return append(evs, DocumentStart{}, DocumentEnd{}, DocumentEnd{FinalContent: strp("")},
		DocumentStart{ID: "doc_001", Metadata: jsontext.Value("{}")})
}

// checkAppendEvent checks that AppendEvent writes json.Marshal's bytes
// after what b holds, and fails exactly when json.Marshal fails, leaving b
// as it was.
func checkAppendEvent(t *testing.T, ev Event) {
	t.Helper()
	want, werr := json.Marshal(ev, jsontext.AllowInvalidUTF8(true))
	got, ok, err := AppendEvent([]byte("prefix"), ev)
	if !ok {
		t.Fatalf("%#v: not encoded", ev)
	}
	if (err != nil) != (werr != nil) {
		t.Fatalf("%#v: error %v, json.Marshal's %v", ev, err, werr)
	}
	if err != nil {
		want = nil
	}
	if !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("%#v:\n got %s\nwant prefix%s", ev, got, want)
	}
}

func TestAppendEventMatchesMarshal(t *testing.T) {
	for _, ev := range eventCases() {
		checkAppendEvent(t, ev)
	}
	for _, meta := range []string{"", "{", `{"a":1}x`, "[1,]", "\"\xff"} {
		checkAppendEvent(t, DocumentStart{ID: "doc_001", Metadata: jsontext.Value(meta)})
		checkAppendEvent(t, DocumentEnd{DocumentID: "doc_001", Metadata: jsontext.Value(meta)})
	}
	for _, ev := range []Event{ContentDelta{Delta: "x"}, ThinkingDelta{}, ToolCallStart{}, AgentEvent{}} {
		if b, ok, err := AppendEvent([]byte("prefix"), ev); ok || err != nil || string(b) != "prefix" {
			t.Errorf("AppendEvent(%T) = %q, %v, %v; want it left to json.Marshal", ev, b, ok, err)
		}
	}
}

// TestAppendEventFields guards the field-by-field encoders against a field
// added to an event they write.
func TestAppendEventFields(t *testing.T) {
	for typ, n := range map[reflect.Type]int{
		reflect.TypeFor[ResponseStart](): 5,
		reflect.TypeFor[DocumentStart](): 4,
		reflect.TypeFor[DocumentEnd]():   3,
		reflect.TypeFor[Done]():          5,
	} {
		if typ.NumField() != n {
			t.Errorf("%s has %d fields; AppendEvent writes %d", typ, typ.NumField(), n)
		}
	}
}

func FuzzAppendEvent(f *testing.F) {
	for _, ev := range eventCases() {
		switch e := ev.(type) {
		case DocumentStart:
			f.Add(e.ID, string(e.Type), []byte(e.Metadata), int64(e.Sequence), e.Metadata == nil)
		case DocumentEnd:
			f.Add(e.DocumentID, "", []byte(e.Metadata), int64(0), e.FinalContent == nil)
		}
	}
	f.Fuzz(func(t *testing.T, s, content string, meta []byte, n int64, null bool) {
		var m jsontext.Value = meta
		c := &content
		if null {
			m, c = nil, nil
		}
		checkAppendEvent(t, ResponseStart{ID: s, ConversationID: c, Model: content, Mode: s, Created: content})
		checkAppendEvent(t, DocumentStart{ID: s, Type: Type(content), Sequence: int(n), Metadata: m})
		checkAppendEvent(t, DocumentEnd{DocumentID: s, FinalContent: c, Metadata: m})
		checkAppendEvent(t, Done{ID: content, ConversationID: c, Status: Status(s),
			Usage:    Usage{PromptTokens: n, TotalTokens: -n, CacheReadTokens: n, Reported: null},
			Metadata: ResponseMetadata{DurationMs: n, StopReason: StopReason(s), Agent: &AgentInfo{Cwd: content}}})
	})
}

// BenchmarkAppendResponse encodes a finished response of one long text
// document and a tool call, as a run's end does, beside json.Marshal.
func BenchmarkAppendResponse(b *testing.B) {
	text := bytes.Repeat([]byte("[ts:1795705414754366517] "), 200)
	r := &ChatResponse{ID: "chat_63182984cdd3e9dbef927540", ConversationID: strp("3391cf87-7b49-b752-4ac5-3f8b5edd1a57"),
		Model: "auto", Mode: "agent", Created: "2026-11-26T15:03:34Z", Status: StatusCompleted,
		Documents: []Document{
			{ID: "doc_001", Type: TypeText, Sequence: 1, Content: strp(string(text)), Metadata: jsontext.Value(`{"format":"markdown"}`)},
			{ID: "doc_002", Type: TypeToolCall, Sequence: 2, Metadata: jsontext.Value(`{"toolName":"grep","toolCallId":"call_1","arguments":{"pattern":"func main","path":"."},"result":{"status":"success","data":{"matches":12}},"duration_ms":31}`)},
		},
		Usage:    Usage{PromptTokens: 8194, CompletionTokens: 512, TotalTokens: 8706, Reported: true},
		Metadata: ResponseMetadata{DurationMs: 2000, ToolCallCount: 1, TurnCount: 1, Agent: &AgentInfo{SessionID: "s", Cwd: "/w", Model: "auto"}}}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = AppendResponse(buf[:0], r)
		}
	})
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			marshalResponse(r)
		}
	})
}

// quoteCases are strings that take each path of AppendString: runs of eight
// bytes and the bytes after them, every control character, quotes,
// backslashes, HTML and JavaScript characters (left as they are), and
// valid and invalid UTF-8 at each position of a word.
func quoteCases() []string {
	cs := []string{"", "a", "plain text of some length", `"quoted" \back\slash/`, "<b>&amp;</b>",
		"line 1\nline 2\r\n\ttab", "é日本\U0001F600 \u2028\u2029", "\xff", "a\xffb\xe2\x82", "\xed\xa0\x80 surrogate",
		"\xc0\xaf overlong", "\xf4\x90\x80\x80 beyond U+10FFFF", "12345678\"12345678\\12345678\x7f"}
	for c := range 0x20 {
		cs = append(cs, string(rune(c)), "1234567"+string(rune(c))+"9")
	}
	for i := range 9 {
		pad := "12345678"[:i]
		cs = append(cs, pad+"é"+pad, pad+"\xe2\x82"+pad, pad+"\"", pad+"\x1f"+pad+pad)
	}
	return cs
}

// TestAppendString checks that AppendString writes the bytes of
// jsontext.AppendQuote.
func TestAppendString(t *testing.T) {
	for _, s := range quoteCases() {
		checkAppendString(t, s)
	}
}

// FuzzAppendString compares AppendString with jsontext.AppendQuote.
func FuzzAppendString(f *testing.F) {
	for _, s := range quoteCases() {
		f.Add(s)
	}
	f.Fuzz(checkAppendString)
}

func checkAppendString(t *testing.T, s string) {
	want, _ := jsontext.AppendQuote([]byte("x"), s)
	if got := AppendString([]byte("x"), s); !bytes.Equal(got, want) {
		t.Fatalf("AppendString(%q) = %q, want %q", s, got, want)
	}
}

// BenchmarkAppendString quotes a tool's output of some kilobytes (lines of
// ASCII, a tab and a newline in each) and a token-sized delta.
func BenchmarkAppendString(b *testing.B) {
	for name, s := range map[string]string{
		"output": string(bytes.Repeat([]byte("ok  \tgithub.com/x/y/package\t0.012s coverage: 81.2% of statements\n"), 64)),
		"delta":  " the quick",
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			buf := make([]byte, 0, 2*len(s)+2)
			for b.Loop() {
				buf = AppendString(buf[:0], s)
			}
		})
		b.Run(name+"/jsontext", func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			buf := make([]byte, 0, 2*len(s)+2)
			for b.Loop() {
				buf, _ = jsontext.AppendQuote(buf[:0], s)
			}
		})
	}
}
