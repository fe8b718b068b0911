package sse

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
)

// encodeSlow is what Encode gives every event: json.Marshal's bytes.
func encodeSlow(ev documents.Event) []byte {
	b, err := json.Marshal(ev, encodeOpts)
	if err != nil {
		panic(err)
	}
	return b
}

func checkFastEncode(t *testing.T, id, delta string) {
	t.Helper()
	for _, ev := range []documents.Event{
		documents.ContentDelta{DocumentID: id, Delta: delta},
		documents.ThinkingDelta{Delta: delta},
	} {
		got, err := Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		if want := encodeSlow(ev); !bytes.Equal(got, want) {
			t.Fatalf("Encode(%#v) = %q, json.Marshal gives %q", ev, got, want)
		}
	}
}

func TestEncodeDeltasAsMarshal(t *testing.T) {
	for _, s := range []string{"", "Hi", " [ts:1795351699463666049]", "a\"b\\c", "line\nbreak\r\ttab",
		"\x00\x01\x1f\x7f", "<script>&amp;</script>", "\u2028\u2029", "naïve café → 日本語 😀",
		"\xff\xfe", "ok\xc3", "\xed\xa0\x80", string([]byte{0xe2, 0x82}), "\ufffd"} {
		checkFastEncode(t, "doc_001", s)
		checkFastEncode(t, s, s)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 64)
	for i := 0; i < 20000; i++ {
		n := rng.IntN(len(buf))
		for j := range buf[:n] {
			buf[j] = byte(rng.IntN(256))
		}
		checkFastEncode(t, "doc_042", string(buf[:n]))
	}
}

func FuzzEncodeDeltas(f *testing.F) {
	f.Add("doc_001", "Hello, world")
	f.Add("doc_002", "\xff<\u2028>\"\\\n")
	f.Fuzz(func(t *testing.T, id, delta string) {
		checkFastEncode(t, id, delta)
	})
}

func BenchmarkEncodeContentDelta(b *testing.B) {
	ev := documents.ContentDelta{DocumentID: "doc_001", Delta: " [ts:1795351699463666049]"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// runEvents are the events besides deltas of a run with one text
// document: what Encode writes without reflection besides the deltas.
func runEvents() []documents.Event {
	conv, text := "3391cf87-7b49-b752-4ac5-3f8b5edd1a57", strings.Repeat("[ts:1795705414754366517] ", 200)
	meta := jsontext.Value(`{"format":"markdown"}`)
	return []documents.Event{
		documents.ResponseStart{ID: "chat_63182984cdd3e9dbef927540", ConversationID: &conv, Model: "auto", Mode: "agent", Created: "2026-11-27T03:00:00Z"},
		documents.DocumentStart{ID: "doc_001", Type: documents.TypeText, Sequence: 1, Metadata: meta},
		documents.DocumentEnd{DocumentID: "doc_001", FinalContent: &text, Metadata: meta},
		documents.Done{ID: "chat_63182984cdd3e9dbef927540", ConversationID: &conv, Status: documents.StatusCompleted,
			Usage: documents.Usage{PromptTokens: 8194, CompletionTokens: 19, TotalTokens: 8213, CacheReadTokens: 4096, Reported: true},
			Metadata: documents.ResponseMetadata{DurationMs: 2010, TurnCount: 1,
				Agent: &documents.AgentInfo{SessionID: conv, Cwd: "/tmp/ws", Model: "Auto", PermissionMode: "default", RequestID: "fcbbd7fa-a945-b092-25e7-654ca22fac26"}}},
	}
}

// BenchmarkEncodeRunEvents encodes the events of runEvents, with Encode
// and, for comparison, with json.Marshal.
func BenchmarkEncodeRunEvents(b *testing.B) {
	evs := runEvents()
	for _, c := range []struct {
		name string
		enc  func(documents.Event) ([]byte, error)
	}{{"Encode", Encode}, {"json.Marshal", func(ev documents.Event) ([]byte, error) { return json.Marshal(ev, encodeOpts) }}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, ev := range evs {
					if _, err := c.enc(ev); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

func TestEncodeRunEventsAsMarshal(t *testing.T) {
	for _, ev := range runEvents() {
		got, err := Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		if want := encodeSlow(ev); !bytes.Equal(got, want) {
			t.Errorf("Encode(%T) = %s\njson.Marshal gives %s", ev, got, want)
		}
	}
}
