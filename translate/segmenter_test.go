package translate_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/translate"
)

// heldInputs are texts the lexer or the segmenter must hold back while
// they arrive one byte at a time: whitespace, a fence line without its line
// break, a long run of fence characters.
func heldInputs(n int) []struct{ name, text string } {
	return []struct{ name, text string }{
		{"whitespace before text", strings.Repeat(" \n", n/2) + "x"},
		{"whitespace after text", "x" + strings.Repeat(" \n", n/2)},
		{"fence line without a line break", "```" + strings.Repeat("a", n) + "\ncode"},
		{"fence run inside a block", "```\n" + strings.Repeat("`", n) + "x"},
		{"blanks after a closing fence", "```\nx\n```" + strings.Repeat(" ", n)},
		{"spaces at a line start", strings.Repeat(" ", n) + "x"},
	}
}

// feedBytes feeds text as one-byte deltas and returns the documents made.
func feedBytes(text string) []documents.Document {
	var b documents.Builder
	seg := translate.NewSegmenter(translate.Options{ResponseID: "chat_test"}, b.Add)
	for i := range len(text) {
		seg.Feed(translate.Event{Kind: translate.KindAssistant, Text: text[i : i+1], HasTimestamp: true})
	}
	seg.Feed(translate.Event{Kind: translate.KindResult, Result: &translate.Result{}})
	return b.Response().Documents
}

// TestHeldInput checks that held-back input fed one byte at a time comes out
// whole: the same documents as the text fed at once.
func TestHeldInput(t *testing.T) {
	for _, c := range heldInputs(2000) {
		bytewise := feedBytes(c.text)
		var b documents.Builder
		seg := translate.NewSegmenter(translate.Options{ResponseID: "chat_test"}, b.Add)
		seg.Feed(translate.Event{Kind: translate.KindAssistant, Text: c.text})
		seg.Feed(translate.Event{Kind: translate.KindResult, Result: &translate.Result{}})
		whole := b.Response().Documents
		if len(bytewise) == 0 || len(bytewise) != len(whole) {
			t.Errorf("%s: %d documents byte by byte, %d at once", c.name, len(bytewise), len(whole))
			continue
		}
		for i := range whole {
			if *whole[i].Content != *bytewise[i].Content {
				t.Errorf("%s: document %d differs", c.name, i)
			}
		}
	}
}

// BenchmarkHeldInput measures held input fed one byte at a time at two
// sizes: the time per byte stays flat when held input is scanned once (the
// quadratic version took seconds for 200 KB).
func BenchmarkHeldInput(b *testing.B) {
	for _, n := range []int{20_000, 200_000} {
		for _, c := range heldInputs(n) {
			b.Run(fmt.Sprintf("%s/%d", c.name, n), func(b *testing.B) {
				b.SetBytes(int64(len(c.text)))
				for range b.N {
					feedBytes(c.text)
				}
			})
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
