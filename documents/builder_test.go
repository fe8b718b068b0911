package documents

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
)

func TestBuilderFolds(t *testing.T) {
	conv := "conv-1"
	final := "whole text"
	var b Builder
	for _, ev := range []Event{
		ResponseStart{ID: "chat_1", ConversationID: &conv, Model: "auto", Mode: "agent", Created: "2026-01-01T00:00:00Z"},
		DocumentStart{ID: "doc_002", Type: TypeToolCall, Sequence: 2, Metadata: jsontext.Value(`{"toolName":"grep"}`)},
		DocumentStart{ID: "doc_001", Type: TypeText, Sequence: 1},
		ContentDelta{DocumentID: "doc_001", Delta: "whole "},
		ContentDelta{DocumentID: "doc_404", Delta: "for no document"},
		ContentDelta{DocumentID: "doc_001", Delta: "txt"},
		DocumentEnd{DocumentID: "doc_001", FinalContent: &final},
		DocumentEnd{DocumentID: "doc_002"},
		DocumentStart{ID: "doc_003", Type: TypeError, Sequence: 3},
		DocumentEnd{DocumentID: "doc_003", Metadata: jsontext.Value(`{"errorCode":"NO_RESULT"}`)},
		Done{ID: "chat_1", Status: StatusError, Usage: Usage{PromptTokens: 1, TotalTokens: 1, Reported: true},
			Metadata: ResponseMetadata{StopReason: StopAgentExit}},
	} {
		b.Add(ev)
	}
	r := b.Response()
	if !b.Done() || r.Status != StatusError || r.Metadata.StopReason != StopAgentExit || r.Usage.PromptTokens != 1 {
		t.Errorf("done %v, status %q, metadata %+v, usage %+v", b.Done(), r.Status, r.Metadata, r.Usage)
	}
	if r.ConversationID == nil || *r.ConversationID != conv {
		t.Errorf("done without a conversation id dropped the one from response_start: %v", r.ConversationID)
	}
	want := []struct {
		id, content, meta string
		null              bool
	}{
		{"doc_001", "whole text", "{}", false},
		{"doc_002", "", `{"toolName":"grep"}`, true},
		{"doc_003", "", `{"errorCode":"NO_RESULT"}`, false},
	}
	if len(r.Documents) != len(want) {
		t.Fatalf("%d documents, want %d", len(r.Documents), len(want))
	}
	for i, w := range want {
		d := r.Documents[i]
		if d.ID != w.id || string(d.Metadata) != w.meta || (d.Content == nil) != w.null || (d.Content != nil && *d.Content != w.content) {
			t.Errorf("document %d: %s %v %s, want %s %q %s", i+1, d.ID, deref(d.Content), d.Metadata, w.id, w.content, w.meta)
		}
	}
}

// TestBuilderKeepsOneCopy checks that an ended document's text is held
// once, as its final content, whether or not that repeats its deltas.
func TestBuilderKeepsOneCopy(t *testing.T) {
	var b Builder
	same, other := "one two", "one two three"
	b.Add(DocumentStart{ID: "doc_001", Type: TypeText, Sequence: 1})
	b.Add(ContentDelta{DocumentID: "doc_001", Delta: "one "})
	b.Add(ContentDelta{DocumentID: "doc_001", Delta: "two"})
	b.Add(DocumentEnd{DocumentID: "doc_001", FinalContent: &same})
	b.Add(DocumentStart{ID: "doc_002", Type: TypeText, Sequence: 2})
	b.Add(ContentDelta{DocumentID: "doc_002", Delta: "one two"})
	b.Add(DocumentEnd{DocumentID: "doc_002", FinalContent: &other})
	for _, id := range []string{"doc_001", "doc_002"} {
		if n := b.docs[id].content.Len(); n != 0 {
			t.Errorf("%s: the deltas' copy is kept beside the final content (%d bytes)", id, n)
		}
	}
	r := b.Response()
	if got := deref(r.Documents[0].Content); got != same {
		t.Errorf("content %q, want %q", got, same)
	}
	if got := deref(r.Documents[1].Content); got != other {
		t.Errorf("content %q, want %q", got, other)
	}
}

// TestBuilderSharesContent checks that deltas carrying their document's
// content so far are folded without a copy, and that a delta whose content
// does not extend what was folded, or which carries none, is appended.
func TestBuilderSharesContent(t *testing.T) {
	var b Builder
	all := "alpha beta gamma delta"
	b.Add(DocumentStart{ID: "doc_001", Type: TypeText, Sequence: 1})
	b.Add(ContentDelta{DocumentID: "doc_001", Delta: "alpha ", Content: all[:6]})
	b.Add(ContentDelta{DocumentID: "doc_001", Delta: "beta ", Content: all[:11]})
	d := b.docs["doc_001"]
	if d.content.Len() != 0 || unsafe.StringData(d.shared) != unsafe.StringData(all) {
		t.Fatalf("deltas with their content so far were copied (%d bytes)", d.content.Len())
	}
	if got := deref(b.Response().Documents[0].Content); got != "alpha beta " {
		t.Errorf("open document %q", got)
	}
	// A content from elsewhere, not a view of the same string, that
	// extends what was folded is kept too.
	b.Add(ContentDelta{DocumentID: "doc_001", Delta: "gamma", Content: strings.Clone(all[:16])})
	if d.content.Len() != 0 || d.shared != "alpha beta gamma" {
		t.Errorf("an equal content elsewhere: shared %q, copied %d bytes", d.shared, d.content.Len())
	}
	// Contents that do not extend the fold, or are absent, are not taken.
	b.Add(ContentDelta{DocumentID: "doc_001", Delta: " x", Content: "alpha beta GAMMA x"})
	b.Add(ContentDelta{DocumentID: "doc_001", Delta: " y", Content: "too short"})
	b.Add(ContentDelta{DocumentID: "doc_001", Delta: " z"})
	b.Add(ContentDelta{DocumentID: "doc_001", Delta: "!", Content: "alpha beta gamma x y z!"})
	if got, want := deref(b.Response().Documents[0].Content), "alpha beta gamma x y z!"; got != want {
		t.Errorf("content %q, want %q", got, want)
	}
	if d.content.Len() == 0 {
		t.Errorf("after a delta without its content, the fold should hold its own copy")
	}
	final := "alpha beta gamma x y z!"
	b.Add(DocumentEnd{DocumentID: "doc_001", FinalContent: &final})
	if d.content.Len() != 0 || unsafe.StringData(d.shared) != unsafe.StringData(final) {
		t.Errorf("a final content that repeats the deltas: %d bytes and %q kept beside it", d.content.Len(), d.shared)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestDocID(t *testing.T) {
	for n, want := range map[int]string{1: "doc_001", 42: "doc_042", 999: "doc_999", 1000: "doc_1000", 12345: "doc_12345"} {
		if got := DocID(n); got != want {
			t.Errorf("DocID(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestIsText(t *testing.T) {
	text := map[Type]bool{TypeText: true, TypeCodeBlock: true, TypeCodeReference: true, TypeError: true}
	for _, typ := range Types {
		if typ.IsText() != text[typ] {
			t.Errorf("%s.IsText() = %v", typ, typ.IsText())
		}
	}
}

// BenchmarkBuilderAddMany adds deltas to many builders in turn, as a
// gateway with many slow streams does: each builder is cold in the cache.
func BenchmarkBuilderAddMany(b *testing.B) {
	const builders = 4096
	bs := make([]Builder, builders)
	reset := func() {
		for i := range bs {
			bs[i] = Builder{}
			bs[i].Add(DocumentStart{ID: "doc_001", Type: TypeToolCall, Sequence: 1})
			bs[i].Add(DocumentStart{ID: "doc_002", Type: TypeText, Sequence: 2})
		}
	}
	reset()
	ev := ContentDelta{DocumentID: "doc_002", Delta: " a word"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		bs[i%builders].Add(ev)
		if i++; i%(builders*64) == 0 {
			b.StopTimer()
			reset()
			b.StartTimer()
		}
	}
}
