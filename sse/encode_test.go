package sse

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/go-json-experiment/json"

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
