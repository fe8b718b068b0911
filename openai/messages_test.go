package openai

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// FuzzFlattenHistory checks that the folded prompt always ends with the last
// user message verbatim and stays within the budget when that message fits.
func FuzzFlattenHistory(f *testing.F) {
	f.Add("be brief", "earlier question", "earlier answer", "the question", 512)
	f.Add("", "", "", "q", 300)
	f.Add(strings.Repeat("s", 2000), strings.Repeat("u", 3000), strings.Repeat("a", 3000), "last", 1024)
	f.Add("ünï", "\xff", "x", "--help", 260)
	f.Add(strings.Repeat("€", 60000), "", "", "h", 131071)
	f.Add("", strings.Repeat("日本", 400), strings.Repeat("€", 500), "q", 700)
	f.Fuzz(func(t *testing.T, system, user, assistant, last string, maxBytes int) {
		if maxBytes < 0 || maxBytes > 1<<20 {
			return
		}
		msgs := []Message{}
		add := func(role, text string) {
			v, err := json.Marshal(text, jsontext.AllowInvalidUTF8(true))
			if err != nil {
				t.Skip()
			}
			msgs = append(msgs, Message{Role: role, Content: v})
		}
		add("system", system)
		add("user", user)
		add("assistant", assistant)
		add("user", last)
		want := msgs[3].Text()
		got := FlattenHistory(msgs, maxBytes)
		if !strings.HasSuffix(got, want) {
			t.Fatalf("the last user message is not at the end: %q", Clip(got, 200))
		}
		if utf8.ValidString(system+user+assistant+last) && !utf8.ValidString(got) {
			t.Fatalf("valid UTF-8 in, invalid UTF-8 out: %q", got)
		}
		if len(want)+512 <= maxBytes && len(got) > maxBytes {
			t.Fatalf("folded prompt is %d bytes, over the budget of %d (last message %d bytes)", len(got), maxBytes, len(want))
		}
	})
}
