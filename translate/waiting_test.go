package translate_test

import (
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/translate"
)

// TestWaiting: a tool call's approval and a clarification's answers go
// out as document_update events and stay in the documents' final metadata.
func TestWaiting(t *testing.T) {
	var b documents.Builder
	var updates []documents.DocumentUpdate
	seg := translate.NewSegmenter(translate.Options{ResponseID: "chat_1"}, func(ev documents.Event) {
		if u, ok := ev.(documents.DocumentUpdate); ok {
			updates = append(updates, u)
		}
		b.Add(ev)
	})
	shell := &translate.ToolCall{Kind: "shellToolCall", Args: []byte(`{"command":"npm test"}`)}
	seg.Feed(translate.Event{Kind: translate.KindToolStarted, CallID: "c1", Tool: shell})
	opts := []documents.PermissionOption{{OptionID: "allow-once", Name: "Allow once", Kind: "allow_once"}}
	seg.SetApproval("c1", documents.Approval{Status: documents.StatusAwaitingApproval, Options: opts})
	var waiting documents.TerminalCommandMeta
	if len(updates) != 1 || json.Unmarshal(updates[0].Metadata, &waiting) != nil ||
		waiting.Status != documents.StatusAwaitingApproval || waiting.Command != "npm test" || waiting.ToolCallID != "c1" {
		t.Fatalf("the waiting update: %s", updates)
	}
	if r := b.Response(); string(r.Documents[0].Metadata) != string(updates[0].Metadata) {
		t.Fatalf("the response does not show the waiting state: %s", r.Documents[0].Metadata)
	}
	seg.SetApproval("c1", documents.Approval{Status: documents.StatusRejected, Options: opts, Answer: &documents.PermissionAnswer{By: "timeout"}})
	seg.Feed(translate.Event{Kind: translate.KindToolCompleted, CallID: "c1", Tool: &translate.ToolCall{Kind: "shellToolCall", Result: []byte(`{"rejected":{"reason":"no answer"}}`)}})

	ask := &translate.ToolCall{Kind: "askQuestionToolCall", Args: []byte(`{"questions":[{"id":"q1","prompt":"Which?","options":[{"id":"a","label":"A"}]}]}`)}
	seg.Feed(translate.Event{Kind: translate.KindToolStarted, CallID: "c2", Tool: ask})
	seg.SetAnswers("c2", true, nil)
	answers := []documents.QuestionAnswer{{QuestionID: "q1", OptionIDs: []string{"a"}, By: "client"}}
	seg.SetAnswers("c2", false, answers)
	seg.Feed(translate.Event{Kind: translate.KindToolCompleted, CallID: "c2", Tool: &translate.ToolCall{Kind: "askQuestionToolCall", Result: []byte(`{"success":{}}`)}})
	seg.Complete(0)

	r := b.Response()
	var cmd documents.TerminalCommandMeta
	var clar documents.ClarificationMeta
	_ = json.Unmarshal(r.Documents[0].Metadata, &cmd)
	_ = json.Unmarshal(r.Documents[1].Metadata, &clar)
	if cmd.Status != documents.StatusRejected || !cmd.Rejected || cmd.Answer.By != "timeout" || cmd.Reason != "no answer" {
		t.Fatalf("the rejected command: %+v", cmd)
	}
	if clar.Awaiting || len(clar.Answers) != 1 || len(clar.Questions) != 1 || len(updates) != 4 {
		t.Fatalf("the answered clarification: %+v (%d updates)", clar, len(updates))
	}
}
