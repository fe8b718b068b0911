package translate_test

import (
	"strings"
	"testing"
	"time"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/translate"
)

// TestHeldInputIsLinear feeds 200 KB in one-byte deltas where the lexer or
// the segmenter must hold input back (whitespace, a fence line without its
// line break, a long run of fence characters). Held input is scanned once,
// not again for every delta: the quadratic version took seconds here.
func TestHeldInputIsLinear(t *testing.T) {
	const n = 200_000
	for _, c := range []struct{ name, text string }{
		{"whitespace before text", strings.Repeat(" \n", n/2) + "x"},
		{"whitespace after text", "x" + strings.Repeat(" \n", n/2)},
		{"fence line without a line break", "```" + strings.Repeat("a", n) + "\ncode"},
		{"fence run inside a block", "```\n" + strings.Repeat("`", n) + "x"},
		{"blanks after a closing fence", "```\nx\n```" + strings.Repeat(" ", n)},
		{"spaces at a line start", strings.Repeat(" ", n) + "x"},
	} {
		start := time.Now()
		var docs int
		seg := translate.NewSegmenter(translate.Options{ResponseID: "chat_test"}, func(ev documents.Event) {
			if _, ok := ev.(documents.DocumentStart); ok {
				docs++
			}
		})
		for i := range len(c.text) {
			seg.Feed(translate.Event{Kind: translate.KindAssistant, Text: c.text[i : i+1], HasTimestamp: true})
		}
		seg.Feed(translate.Event{Kind: translate.KindResult, Result: &translate.Result{}})
		limit := 2 * time.Second
		if raceEnabled {
			limit = 20 * time.Second // the quadratic version takes minutes here
		}
		if d := time.Since(start); d > limit {
			t.Errorf("%s: %v for %d one-byte deltas", c.name, d, len(c.text))
		}
		if docs == 0 {
			t.Errorf("%s: no document", c.name)
		}
	}
}
