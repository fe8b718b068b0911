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

// TestSnapshotIgnoresWhitespaceDifferences checks that a flush that repeats
// the streamed deltas with other whitespace neither duplicates the text nor
// loses what it adds, while a different text still starts a new segment.
func TestSnapshotIgnoresWhitespaceDifferences(t *testing.T) {
	run := func(deltas []string, snapshot string) string {
		var b documents.Builder
		seg := translate.NewSegmenter(translate.Options{ResponseID: "chat_test"}, b.Add)
		for _, d := range deltas {
			seg.Feed(translate.Event{Kind: translate.KindAssistant, Text: d, HasTimestamp: true})
		}
		seg.Feed(translate.Event{Kind: translate.KindAssistant, Text: snapshot, ModelCallID: "m1", HasTimestamp: true})
		seg.Feed(translate.Event{Kind: translate.KindResult, Result: &translate.Result{}})
		var all []string
		for _, d := range b.Response().Documents {
			if d.Content != nil {
				all = append(all, *d.Content)
			}
		}
		return strings.Join(all, "|")
	}
	for _, c := range []struct {
		deltas         []string
		snapshot, want string
	}{
		{[]string{"Hello ", "world."}, "Hello world.", "Hello world."},
		{[]string{"Hello  ", "world."}, "Hello world.", "Hello  world."},
		{[]string{"Hello ", "world."}, "Hello\nworld. More.", "Hello world. More."},
		{[]string{"Hello ", "world."}, "Something else.", "Hello world.|Something else."},
	} {
		if got := run(c.deltas, c.snapshot); got != c.want {
			t.Errorf("deltas %q + snapshot %q: got %q, want %q", c.deltas, c.snapshot, got, c.want)
		}
	}
}
