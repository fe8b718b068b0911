package agent

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/acp"
	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/translate"
)

// The answers to agent.permissions.
const (
	PermissionsAsk   = "ask"
	PermissionsAllow = "allow"
	PermissionsDeny  = "deny"
)

// policy says what a permission request gets without asking: "allow" for
// a command or MCP tool on the allow lists, else what agent.permissions
// says; "ask" only for a client that can answer.
func (s *acpSession) policy(c *acpCall) string {
	var in struct {
		Command  string `json:"command"`
		Provider string `json:"providerIdentifier"`
		Tool     string `json:"toolName"`
	}
	_ = json.Unmarshal(c.RawInput, &in)
	cmd := cmp.Or(in.Command, strings.Trim(c.Title, "`"))
	command := func(p string) bool { return cmd == p || strings.HasPrefix(cmd, p+" ") }
	mcp := s.b.cfg.AllowMCPTools
	switch {
	case c.Kind == "execute" && slices.ContainsFunc(s.b.cfg.AllowCommands, command),
		in.Provider != "" && (slices.Contains(mcp, in.Provider+":"+in.Tool) || slices.Contains(mcp, in.Provider+":*")):
		return PermissionsAllow
	case s.b.cfg.Permissions == PermissionsAsk && !s.spec.Interactive:
		return PermissionsDeny
	}
	return s.b.cfg.Permissions
}

// permission takes session/request_permission: the policy answers it, or
// the tool's document waits for the client.
func (s *acpSession) permission(m acp.Message) {
	var p acp.PermissionParams
	if json.Unmarshal(m.Params, &p) != nil || p.ToolCall.ToolCallID == "" || len(p.Options) == 0 {
		_ = s.w.Reply(m.ID, acp.Reply{Outcome: acp.Outcome{Outcome: "cancelled"}})
		return
	}
	c := s.call1(p.ToolCall)
	s.open(c)
	w := &wait{id: m.ID, callID: c.ToolCallID}
	for _, o := range p.Options {
		w.options = append(w.options, documents.PermissionOption(o))
	}
	switch s.policy(c) {
	case PermissionsAsk:
		s.await(w)
		s.seg.SetApproval(c.ToolCallID, documents.Approval{Status: documents.StatusAwaitingApproval, Options: w.options})
	case PermissionsAllow:
		s.decide(w, "allow", "policy", "")
	default:
		s.decide(w, "reject", "policy", reasonPolicy)
	}
}

// decide answers a permission with an option, by id or the first of a kind
// ("allow", "reject"; "" cancels), records it in the tool's document and
// returns the document's new state.
func (s *acpSession) decide(w *wait, option, by, reason string) string {
	i := slices.IndexFunc(w.options, func(o documents.PermissionOption) bool {
		return option != "" && (o.OptionID == option || strings.HasPrefix(o.Kind, option))
	})
	out := acp.Outcome{Outcome: "cancelled"}
	if i < 0 {
		reason = cmp.Or(reason, reasonPolicy)
	} else {
		out = acp.Outcome{Outcome: "selected", OptionID: w.options[i].OptionID}
		if !strings.HasPrefix(w.options[i].Kind, "allow") {
			reason = cmp.Or(reason, "rejected by the client")
		}
	}
	_ = s.w.Reply(w.id, acp.Reply{Outcome: out})
	status := documents.StatusApproved
	if reason != "" {
		status = documents.StatusRejected
		s.calls[w.callID].rejected = reason
	}
	s.seg.SetApproval(w.callID, documents.Approval{Status: status, Options: w.options, Answer: &documents.PermissionAnswer{OptionID: out.OptionID, By: by}})
	return status
}

// ask takes cursor/ask_question: its clarification waits for the
// client's answers, or is skipped at once for a client that cannot answer.
func (s *acpSession) ask(m acp.Message) {
	var p acp.AskQuestionParams
	if json.Unmarshal(m.Params, &p) != nil || len(p.Questions) == 0 {
		_ = s.w.Reply(m.ID, acp.Reply{Outcome: acp.Outcome{Outcome: "skipped", Reason: reasonSkipped}})
		return
	}
	id := cmp.Or(p.ToolCallID, fmt.Sprintf("ask-%d", s.next))
	s.seg.Feed(translate.Event{Kind: translate.KindToolStarted, CallID: id, Tool: &translate.ToolCall{Kind: "askQuestionToolCall", Args: m.Params}})
	w := &wait{id: m.ID, callID: id, questions: p.Questions}
	if !s.spec.Interactive {
		s.askEnd(w, "skipped", reasonSkipped)
		return
	}
	s.await(w)
	s.seg.SetAnswers(id, true, nil)
}

// await has w wait for the client's answer until agent.answer_timeout.
func (s *acpSession) await(w *wait) {
	w.deadline = time.Now().Add(s.b.cfg.AnswerTimeout)
	s.waits[w.callID] = w
	s.arm()
}

// askEnd answers a question request ("answered", "skipped" or
// "cancelled") and ends its clarification.
func (s *acpSession) askEnd(w *wait, outcome, reason string) {
	out, res := acp.Outcome{Outcome: outcome, Reason: reason}, `{"success":{}}`
	if outcome == "answered" {
		for _, a := range w.answers {
			out.Answers = append(out.Answers, acp.QuestionAnswer{QuestionID: a.QuestionID, SelectedOptionIDs: a.OptionIDs, Text: a.Text})
		}
	} else {
		b, _ := json.Marshal(map[string]map[string]string{"rejected": {"reason": reason}})
		res = string(b)
	}
	_ = s.w.Reply(w.id, acp.Reply{Outcome: out})
	s.seg.SetAnswers(w.callID, false, w.answers)
	s.seg.Feed(translate.Event{Kind: translate.KindToolCompleted, CallID: w.callID, Tool: &translate.ToolCall{Kind: "askQuestionToolCall", Result: []byte(res)}})
}

// expire refuses permissions and skips questions that waited past
// agent.answer_timeout, or, when all, cancels everything that waits.
func (s *acpSession) expire(all bool) {
	reason := fmt.Sprintf("no answer came within agent.answer_timeout (%s)", s.b.cfg.AnswerTimeout)
	for id, w := range s.waits {
		switch {
		case all && w.questions != nil:
			w.answers = nil
			s.askEnd(w, "cancelled", reasonCancelled)
		case all:
			s.decide(w, "", "cancel", reasonCancelled)
		case time.Now().Before(w.deadline):
			continue
		case w.questions != nil:
			s.askEnd(w, "skipped", reason+"; the questions were skipped")
		default:
			s.decide(w, "reject", "timeout", reason)
		}
		delete(s.waits, id)
	}
	s.arm()
}

// arm sets the timer to the first deadline of what waits, and marks the
// agent waiting, not idle, while something does.
func (s *acpSession) arm() {
	waiting := len(s.waits) > 0
	if s.p.waiting.Swap(waiting) && !waiting {
		s.p.lastLine.Store(int64(time.Since(s.p.start))) // its silence starts again now
	}
	next := time.Hour
	for _, w := range s.waits {
		next = min(next, time.Until(w.deadline))
	}
	s.timer.Reset(max(next, 0))
}
