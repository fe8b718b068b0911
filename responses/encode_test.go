package responses

import (
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/openai"
)

// run feeds an encoder the events of a run: thinking, a text document,
// more thinking, a second text document, and done.
func run(t *testing.T, status documents.Status) ([]Event, Response) {
	t.Helper()
	e := NewEncoder(Meta{ID: "resp_1", Model: "auto"})
	evs := e.Start()
	text := func(id, s string) {
		evs = append(evs, e.Event(documents.DocumentStart{ID: id, Type: documents.TypeText})...)
		evs = append(evs, e.Event(documents.ContentDelta{DocumentID: id, Delta: s})...)
		evs = append(evs, e.Event(documents.DocumentEnd{DocumentID: id, FinalContent: &s})...)
	}
	evs = append(evs, e.Event(documents.ThinkingDelta{Delta: "Let me look."})...)
	text("d1", "First.")
	evs = append(evs, e.Event(documents.ThinkingDelta{Delta: "Now the rest."})...)
	text("d2", "Second.")
	evs = append(evs, e.Event(documents.Done{Status: status, Usage: documents.Usage{PromptTokens: 10, CacheReadTokens: 5, CompletionTokens: 3}})...)
	return evs, e.Response()
}

func TestEncoderOrder(t *testing.T) {
	evs, resp := run(t, documents.StatusCompleted)
	var names []string
	for i, ev := range evs {
		names = append(names, ev.Type)
		var m map[string]any
		if err := json.Unmarshal(ev.Data, &m); err != nil || m["type"] != ev.Type || m["sequence_number"] != float64(i) || ev.Sequence != i {
			t.Fatalf("event %d: %s (%v)", i, ev.Data, err)
		}
	}
	item := func(part, delta, done, partDone string) []string {
		return []string{"response.output_item.added", part, delta, done, partDone, "response.output_item.done"}
	}
	reasoning := item("response.reasoning_summary_part.added", "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done", "response.reasoning_summary_part.done")
	message := item("response.content_part.added", "response.output_text.delta", "response.output_text.done", "response.content_part.done")
	want := slices.Concat([]string{"response.created", "response.in_progress"}, reasoning, message, reasoning, message, []string{"response.completed"})
	if !slices.Equal(names, want) {
		t.Fatalf("events\n got %v\nwant %v", names, want)
	}
	if resp.Status != StatusCompleted || len(resp.Output) != 4 || resp.Usage.InputTokens != 15 || resp.Usage.InputTokensDetails["cached_tokens"] != 5 || resp.Usage.TotalTokens != 18 {
		t.Errorf("response %+v", resp)
	}
	// The second message starts without the blank line between blocks.
	if m := resp.Output[3].(messageItem); m.Content[0].Text != "Second." || m.ID != "msg_1_3" {
		t.Errorf("second message %+v", m)
	}
}

func TestEncoderFailed(t *testing.T) {
	evs, resp := run(t, documents.StatusError)
	if last := evs[len(evs)-1]; last.Type != "response.failed" || resp.Status != StatusFailed || resp.Error == nil || resp.Error.Code != "agent_error" {
		t.Errorf("last %s, response %+v", last.Type, resp)
	}
	if m := resp.Output[3].(messageItem); m.Status != "incomplete" {
		t.Errorf("the open message at a failure: %+v", m)
	}
}

// TestMessagesJoinReply checks that a reply sent back as several message
// items, reasoning between them, is one assistant message whose
// fingerprint is that of the reply as the client got it.
func TestMessagesJoinReply(t *testing.T) {
	_, resp := run(t, documents.StatusCompleted)
	items := []any{map[string]any{"role": "developer", "content": "Be brief."}, map[string]any{"role": "user", "content": "hi"}}
	for _, o := range resp.Output {
		items = append(items, o)
	}
	items = append(items, map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "more"}}})
	b, _ := json.Marshal(items)
	msgs, err := (&Request{Input: b, Instructions: "Answer in French."}).Messages(nil)
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	if !slices.Equal(roles, []string{"system", "developer", "user", "assistant", "user"}) {
		t.Fatalf("roles %v", roles)
	}
	reply := openai.Renderer{Mode: openai.RenderMarkdown, Reasoning: openai.ReasoningOff}
	for _, s := range []string{"First.", "Second."} {
		reply.Event(documents.DocumentStart{ID: s, Type: documents.TypeText})
		reply.Event(documents.ContentDelta{DocumentID: s, Delta: s})
		reply.Event(documents.DocumentEnd{DocumentID: s, FinalContent: &s})
	}
	if openai.Fingerprint(msgs[:4], "", "m") != openai.Fingerprint(msgs[:3], reply.Content(), "m") {
		t.Errorf("the joined reply %q does not fingerprint as %q", msgs[3].Text(), reply.Content())
	}
	if !strings.Contains(msgs[4].Text(), "more") {
		t.Errorf("last message %q", msgs[4].Text())
	}
}

func TestFromChat(t *testing.T) {
	s := "Hello."
	conv := "c1"
	cr := documents.ChatResponse{ID: "chat_1", ConversationID: &conv, Model: "auto", Created: "2026-01-02T03:04:05Z", Status: documents.StatusCompleted,
		Documents: []documents.Document{{ID: "d1", Type: documents.TypeText, Content: &s}}}
	evs, resp := FromChat(Meta{ID: "resp_1"}, cr)
	if resp.Status != StatusCompleted || resp.Model != "auto" || resp.CreatedAt != 1767323045 || len(resp.Output) != 1 || resp.Output[0].(messageItem).Content[0].Text != s {
		t.Errorf("response %+v", resp)
	}
	if evs[len(evs)-1].Type != "response.completed" {
		t.Errorf("last event %s", evs[len(evs)-1].Type)
	}
	cr.Status = documents.StatusStreaming
	if _, resp := FromChat(Meta{ID: "resp_1"}, cr); resp.Status != StatusInProgress || resp.Usage != nil {
		t.Errorf("in progress: %+v", resp)
	}
}

// TestMessagesItemReference checks that references to an earlier
// response's items are its reply, once, and that an unknown one is refused.
func TestMessagesItemReference(t *testing.T) {
	ref := func(id string) map[string]any { return map[string]any{"type": "item_reference", "id": id} }
	b, _ := json.Marshal([]any{map[string]any{"role": "user", "content": "hi"}, ref("rs_1_0"), ref("msg_1_1"),
		map[string]any{"type": "reasoning", "summary": []any{}}, ref("msg_1_3"),
		map[string]any{"role": "user", "content": "more"}})
	reply := func(id string) (string, bool) { return "the reply of " + id, id == "resp_1" }
	msgs, err := (&Request{Input: b}).Messages(reply)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 || msgs[1].Role != "assistant" || msgs[1].Text() != "the reply of resp_1" {
		t.Fatalf("messages %+v", msgs)
	}
	b, _ = json.Marshal([]any{map[string]any{"role": "user", "content": "hi"}, ref("msg_2_0"), map[string]any{"role": "user", "content": "more"}})
	_, err = (&Request{Input: b}).Messages(reply)
	if ie, ok := err.(*InputError); !ok || ie.Param != "input/1/id" {
		t.Errorf("an unknown reference: %v", err)
	}
}

// TestMessagesToolOutput checks that a tool's output is skipped in the
// history but refused after the last message.
func TestMessagesToolOutput(t *testing.T) {
	call := map[string]any{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
	out := map[string]any{"type": "function_call_output", "call_id": "c1", "output": "done"}
	user := map[string]any{"role": "user", "content": "hi"}
	b, _ := json.Marshal([]any{user, call, out, user})
	if msgs, err := (&Request{Input: b}).Messages(nil); err != nil || len(msgs) != 2 {
		t.Errorf("a tool output in the history: %v, %v", msgs, err)
	}
	b, _ = json.Marshal([]any{user, call, out})
	if _, err := (&Request{Input: b}).Messages(nil); err == nil || err.(*InputError).Code != "last_message_not_user" {
		t.Errorf("a tool output last: %v", err)
	}
}
