package cloud

import (
	"strings"
	"testing"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/translate"
)

// TestCloudMessagesGrowOnce feeds a cloud agent's messages as polls see
// them: a message that grows after a later one appeared adds only its new
// text; it used to be streamed whole again in a new document.
func TestCloudMessagesGrowOnce(t *testing.T) {
	var b documents.Builder
	seg := translate.NewSegmenter(translate.Options{ResponseID: "chat_test"}, func(ev documents.Event) { b.Add(ev) })
	seg.Start()
	seg.SetConversation("bc_1")
	c := cloudMessages{seg: seg, sent: map[string]string{}}
	for _, m := range []Message{
		{ID: "m1", Type: AssistantMessage, Text: "One."},
		{ID: "m2", Type: AssistantMessage, Text: "Two."},
		{ID: "m1", Type: AssistantMessage, Text: "One. More."},
		{ID: "m1", Type: AssistantMessage, Text: "One. More. Again."},
		{ID: "m2", Type: AssistantMessage, Text: "Two. Three."},
		{ID: "m3", Type: AssistantMessage, Text: "Rewritten?"},
		{ID: "m3", Type: AssistantMessage, Text: "Rewritten."},
	} {
		c.take(&m)
		c.take(&m) // a poll that sees nothing new
	}
	seg.EndSegment()
	seg.Complete(1)
	var all []string
	for _, d := range b.Response().Documents {
		if d.Content != nil {
			all = append(all, strings.TrimSpace(*d.Content))
		}
	}
	if n := b.Response().Metadata.TurnCount; n != 3 {
		t.Errorf("turnCount %d, want the 3 messages", n)
	}
	got := strings.Join(all, "|")
	if want := "One.|Two.|More. Again.|Three.|Rewritten?|Rewritten."; got != want {
		t.Errorf("documents %q, want %q", got, want)
	}
}
