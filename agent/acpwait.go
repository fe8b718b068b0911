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
	for _, p := range s.b.cfg.AllowCommands {
		if c.Kind == "execute" && (cmd == p || strings.HasPrefix(cmd, p+" ")) {
			return PermissionsAllow
		}
	}
	for _, t := range s.b.cfg.AllowMCPTools {
		if in.Provider != "" && (t == in.Provider+":"+in.Tool || t == in.Provider+":*") {
			return PermissionsAllow
		}
	}
	switch p := cmp.Or(s.b.cfg.Permissions, PermissionsAsk); {
	case p == PermissionsAsk && !s.spec.Interactive:
		return PermissionsDeny
	default:
		return p
	}
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
	opts := make([]documents.PermissionOption, len(p.Options))
	for i, o := range p.Options {
		opts[i] = documents.PermissionOption{OptionID: o.OptionID, Name: o.Name, Kind: o.Kind}
	}
	w := &wait{id: m.ID, callID: c.ToolCallID, options: p.Options}
	switch s.policy(c) {
	case PermissionsAsk:
		s.mu.Lock()
		w.deadline = time.Now().Add(s.answerTimeout())
		s.waits[c.ToolCallID] = w
		s.arm()
		s.mu.Unlock()
		s.seg.SetApproval(c.ToolCallID, documents.Approval{Status: documents.StatusAwaitingApproval, Options: opts})
	case PermissionsAllow:
		s.decide(w, "allow", "policy", "")
	default:
		s.decide(w, "reject", "policy", reasonPolicy)
	}
}

// decide answers a permission with the first option of the given kind
// ("allow" or "reject"), or with option id itself.
func (s *acpSession) decide(w *wait, option, by, reason string) {
	i := slices.IndexFunc(w.options, func(o acp.PermissionOption) bool {
		return o.OptionID == option || strings.HasPrefix(o.Kind, option)
	})
	if i < 0 {
		s.permissionEnd(w, "", by, cmp.Or(reason, reasonPolicy))
		return
	}
	if !strings.HasPrefix(w.options[i].Kind, "allow") {
		reason = cmp.Or(reason, "rejected by the client")
	}
	s.permissionEnd(w, w.options[i].OptionID, by, reason)
}

// permissionEnd answers the agent (cancelled without an option) and
// records the answer in the tool's document.
func (s *acpSession) permissionEnd(w *wait, option, by, reason string) {
	out := acp.Outcome{Outcome: "cancelled"}
	if option != "" {
		out = acp.Outcome{Outcome: "selected", OptionID: option}
	}
	_ = s.w.Reply(w.id, acp.Reply{Outcome: out})
	status := documents.StatusApproved
	if reason != "" {
		status = documents.StatusRejected
		s.calls[w.callID].rejected = reason
	}
	opts := make([]documents.PermissionOption, len(w.options))
	for i, o := range w.options {
		opts[i] = documents.PermissionOption{OptionID: o.OptionID, Name: o.Name, Kind: o.Kind}
	}
	s.seg.SetApproval(w.callID, documents.Approval{Status: status, Options: opts, Answer: &documents.PermissionAnswer{OptionID: option, By: by}})
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
	s.mu.Lock()
	w.deadline = time.Now().Add(s.answerTimeout())
	s.waits[id] = w
	s.arm()
	s.mu.Unlock()
	s.seg.SetAnswers(id, true, nil)
}

// askEnd answers a question request ("answered", "skipped" or
// "cancelled") and ends its clarification.
func (s *acpSession) askEnd(w *wait, outcome, reason string) {
	out := acp.Outcome{Outcome: outcome, Reason: reason}
	for _, a := range w.answers {
		out.Answers = append(out.Answers, acp.QuestionAnswer{QuestionID: a.QuestionID, SelectedOptionIDs: a.OptionIDs, Text: a.Text})
	}
	if outcome != "answered" {
		out.Answers = nil
	}
	_ = s.w.Reply(w.id, acp.Reply{Outcome: out})
	res := `{"success":{}}`
	if outcome != "answered" {
		b, _ := json.Marshal(map[string]map[string]string{"rejected": {"reason": reason}})
		res = string(b)
	}
	s.seg.SetAnswers(w.callID, false, w.answers)
	s.seg.Feed(translate.Event{Kind: translate.KindToolCompleted, CallID: w.callID, Tool: &translate.ToolCall{Kind: "askQuestionToolCall", Result: []byte(res)}})
}

// answered hands the client's answers to the agent.
func (s *acpSession) answered() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, w := range s.waits {
		switch {
		case w.questions == nil && w.chosen != "":
			delete(s.waits, id)
			s.decide(w, w.chosen, "client", "")
		case w.questions != nil && len(w.answers) == len(w.questions):
			delete(s.waits, id)
			s.askEnd(w, "answered", "")
		case w.questions != nil && len(w.answers) > 0:
			s.seg.SetAnswers(id, true, w.answers)
		}
	}
	s.arm()
}

// expire answers what waited past agent.answer_timeout: permissions are
// rejected, questions skipped.
func (s *acpSession) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for id, w := range s.waits {
		if now.Before(w.deadline) {
			continue
		}
		delete(s.waits, id)
		reason := fmt.Sprintf("no answer came within agent.answer_timeout (%s)", s.answerTimeout())
		if w.questions != nil {
			s.askEnd(w, "skipped", reason+"; the questions were skipped")
		} else {
			s.decide(w, "reject", "timeout", reason)
		}
	}
	s.arm()
}

// cancelWaits answers everything that waits as cancelled.
func (s *acpSession) cancelWaits() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, w := range s.waits {
		delete(s.waits, id)
		if w.questions != nil {
			w.answers = nil
			s.askEnd(w, "cancelled", reasonCancelled)
		} else {
			s.permissionEnd(w, "", "cancel", reasonCancelled)
		}
	}
}

// arm sets the timer to the first deadline of what waits, and marks the
// agent waiting, not idle, while something does; s.mu is held.
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

func (s *acpSession) answerTimeout() time.Duration {
	return cmp.Or(s.b.cfg.AnswerTimeout, 10*time.Minute)
}
