package anthropic

import (
	"errors"
	"slices"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/openai"
)

func TestThread(t *testing.T) {
	var req Request
	body := `{"system":[{"type":"text","text":"Be brief."},{"type":"text","text":"Use Go.","cache_control":{"type":"ephemeral"}}],
		"messages":[
			{"role":"user","content":[{"type":"text","text":"<reminder/>"},{"type":"text","text":"first"}]},
			{"role":"system","content":"cwd: /tmp"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":""},{"type":"text","text":"one "},{"type":"text","text":"two"},{"type":"tool_use","id":"t","name":"x","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"},{"type":"image","source":{}}]},
			{"role":"user","content":"second"}]}`
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	system, turns, err := req.Thread()
	if err != nil {
		t.Fatal(err)
	}
	texts := func(ms []openai.Message) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Role+": "+m.Text())
		}
		return out
	}
	if got, want := texts(system), []string{"system: Be brief.\nUse Go.", "system: cwd: /tmp"}; !slices.Equal(got, want) {
		t.Errorf("system %q, want %q", got, want)
	}
	// An assistant turn's text blocks are joined as they were streamed.
	if got, want := texts(turns), []string{"user: <reminder/>\nfirst", "assistant: one two", "user: ", "user: second"}; !slices.Equal(got, want) {
		t.Errorf("turns %q, want %q", got, want)
	}
}

func TestThreadRefuses(t *testing.T) {
	for body, param := range map[string]string{
		`{"messages":[]}`: "messages",
		`{"messages":[{"role":"tool","content":"x"}]}`:                                                 "messages/0/role",
		`{"messages":[{"role":"user","content":{}}]}`:                                                  "messages/0/content",
		`{"messages":[{"role":"user","content":[{"text":"no type"}]}]}`:                                "messages/0/content/0",
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"document"}]}]}`:    "messages/0/content/1",
		`{"system":5,"messages":[{"role":"user","content":"x"}]}`:                                      "system",
		`{"thinking":{"type":"on"},"messages":[{"role":"user","content":"x"}]}`:                        "thinking/type",
		`{"thinking":{"type":"adaptive","display":"full"},"messages":[{"role":"user","content":"x"}]}`: "thinking/display",
		`{"tool_choice":{"type":"tool","name":"Bash"},"messages":[{"role":"user","content":"x"}]}`:     "tool_choice",
	} {
		var req Request
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		_, _, err := req.Thread()
		var ie *InvalidError
		if !errors.As(err, &ie) || ie.Param != param {
			t.Errorf("%s: error %v, want one naming %s", body, err, param)
		}
	}
}

// TestBlocks checks that pieces become blocks of their kind, each started,
// filled and stopped in order, and that folding the events gives the
// pieces back.
func TestBlocks(t *testing.T) {
	pieces := []openai.Piece{{Reasoning: "think "}, {Reasoning: "more"}, {Comment: "reconnecting attempt=2"},
		{Content: "Hello"}, {Content: ""}, {Content: " world"}, {Reasoning: "again"}, {Content: "bye"}}
	var b Blocks
	var evs []Event
	for _, p := range pieces {
		evs = append(evs, b.Add(p)...)
	}
	evs = append(evs, b.Close()...)
	var types []string
	m := NewMessage("msg_1", "auto")
	for _, e := range evs {
		types = append(types, e.Type)
		m.Apply(e)
	}
	want := []string{"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_stop"}
	if !slices.Equal(types, want) {
		t.Errorf("events %v, want %v", types, want)
	}
	got, _ := json.Marshal(m.Content)
	if string(got) != `[{"type":"thinking","thinking":"think more","signature":""},{"type":"text","text":"Hello world"},{"type":"thinking","thinking":"again","signature":""},{"type":"text","text":"bye"}]` {
		t.Errorf("content %s", got)
	}
	// The events keep what they said: folding does not write into them.
	if start := evs[0]; *start.ContentBlock.Thinking != "" {
		t.Errorf("the start event's block was changed: %q", *start.ContentBlock.Thinking)
	}
}
