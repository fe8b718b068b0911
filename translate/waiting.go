package translate

import (
	"cmp"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
)

// SetApproval records the approval state of tool call id's open document,
// which its final metadata keeps, and emits document_update with its
// metadata so far.
func (s *Segmenter) SetApproval(id string, a documents.Approval) {
	st := s.tools[id]
	if s.done || st == nil || st.ended {
		return
	}
	st.approval = a
	m := map[string]jsontext.Value{}
	unmarshal(marshal(startMeta(st, &st.decoded, s.workspaceDir())), &m)
	unmarshal(marshal(a), &m)
	m["toolCallId"] = marshal(st.callID)
	if b, err := json.Marshal(m, json.Deterministic(true)); err == nil {
		s.emit(documents.DocumentUpdate{DocumentID: st.docID, Metadata: b})
	}
}

// SetAnswers records the state of clarification id's open document: still
// awaiting answers, or the answers given; its final metadata keeps them.
func (s *Segmenter) SetAnswers(id string, awaiting bool, answers []documents.QuestionAnswer) {
	st := s.tools[id]
	if s.done || st == nil || st.ended {
		return
	}
	st.awaiting, st.answers = awaiting, answers
	_, meta := clarificationMeta(st, &st.decoded, outcomePending, "")
	s.emit(documents.DocumentUpdate{DocumentID: st.docID, Metadata: marshal(meta)})
}

// clarificationMeta builds a clarification document's content and
// metadata.
func clarificationMeta(st *toolState, a *toolArgs, out outcome, reason string) (*string, documents.ClarificationMeta) {
	qs := make([]documents.Question, 0, len(a.Questions))
	for i, q := range a.Questions {
		opts := make([]documents.Option, 0, len(q.Options))
		for j, o := range q.Options {
			opts = append(opts, documents.Option{ID: cmp.Or(o.ID, strconv.Itoa(j+1)), Label: cmp.Or(o.Label, o.Text, o.ID)})
		}
		qs = append(qs, documents.Question{ID: cmp.Or(q.ID, "q"+strconv.Itoa(i+1)), Text: cmp.Or(q.Prompt, q.Text, q.Question), Options: opts, AllowMultiple: q.Multiple})
	}
	var content *string
	if a.Title != "" {
		content = new(a.Title)
	}
	m := documents.ClarificationMeta{Questions: qs, ToolCallID: st.callID, Awaiting: st.awaiting, Answers: st.answers}
	if out == outcomeRejected {
		m.Rejected, m.Reason = true, reason
	}
	return content, m
}
