package translate_test

import (
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/translate"
)

// TestLongLineMemory checks what one assistant line of 10 MiB costs while
// it is read, decoded and segmented. Read in pieces, the line is joined
// once (twice its size allocated); its text is decoded once; the document
// takes one copy of the text, grown a few times, while the segment and the
// lexer keep none. Before, the line cost about six times its size (a copy
// in the segment, one in the lexer, and a document buffer grown by
// appends).
func TestLongLineMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes what is allocated")
	}
	const size = 10 << 20
	for _, tc := range []struct {
		name, text string
		limit      float64
	}{
		// The line as read in pieces, the line joined, and its text; the
		// documents are views of the text.
		{"one paragraph", strings.Repeat("a", size), 3.25},
		// The same, and one delta event per line of text (~50 bytes each).
		{"lines", strings.Repeat("word word word word word word word\n", size/35), 4.75},
	} {
		in := `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"` + strings.ReplaceAll(tc.text, "\n", `\n`) + `"}]}}` + "\n" +
			`{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"short"}]}}` + "\n"
		r := strings.NewReader(in)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		d := translate.NewDecoder(r, 16<<20)
		content := 0
		seg := translate.NewSegmenter(translate.Options{}, func(ev documents.Event) {
			if e, ok := ev.(documents.ContentDelta); ok {
				content = len(e.Content)
			}
		})
		ev, err := d.Next()
		if err != nil || len(ev.Text) != len(tc.text) {
			t.Fatalf("%s: %d bytes of text, %v", tc.name, len(ev.Text), err)
		}
		seg.Feed(ev)
		seg.EndSegment()
		runtime.ReadMemStats(&after)
		if content < len(tc.text)-1 {
			t.Fatalf("%s: the document holds %d bytes", tc.name, content)
		}
		got := float64(after.TotalAlloc-before.TotalAlloc) / size
		t.Logf("%s: %.2f× the line allocated", tc.name, got)
		if got > tc.limit {
			t.Errorf("%s: a 10 MiB line allocated %.2f× its size, want ≤ %.2f×", tc.name, got, tc.limit)
		}
		if ev, err := d.Next(); err != nil || ev.Text != "short" {
			t.Fatalf("the next line: %q, %v", ev.Text, err)
		}
		if _, err := d.Next(); err != io.EOF {
			t.Errorf("end: %v", err)
		}
	}
}
