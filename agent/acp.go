package agent

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/acp"
	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/translate"
)

// handshakeTimeout bounds each request before the prompt: an agent that is
// not logged in has been seen not to answer authenticate at all.
const handshakeTimeout = 30 * time.Second

// The no-answer reasons of questions and refused permissions.
const (
	reasonSkipped   = "Questions skipped by the user, continue with the information you already have"
	reasonPolicy    = "rejected by agent.permissions"
	reasonCancelled = "the run ended before an answer came"
)

// errEnded ends a session whose run was stopped or whose agent's output ended.
var errEnded = errors.New("the session ended")

// acpSession is one run of `agent acp`: the run's goroutine drives it,
// reading the agent's messages while its own requests are pending, and
// gives what waits the answers Respond hands it.
type acpSession struct {
	b     *Backend
	spec  *runs.Spec
	seg   *translate.Segmenter
	p     *proc
	w     *acp.Writer
	in    chan inbound
	done  <-chan struct{}  // the run's context
	grace <-chan time.Time // set once the run is cancelled

	next      int64
	session   string
	replaying bool // session/load replays the conversation: not a new turn
	thinking  bool
	plans     int // the ACP plan updates so far
	calls     map[string]*acpCall
	waits     map[string]*wait // by tool call id
	timer     *time.Timer      // at the first deadline of what waits

	answers chan func()   // Respond's work, done by the run's goroutine
	ended   chan struct{} // closed when the session no longer takes answers
}

// inbound is one line of the agent's output: a message, or the event of a
// line that is not one.
type inbound struct {
	msg acp.Message
	ev  *translate.Event
}

// acpCall is what is known of one tool call.
type acpCall struct {
	acp.ToolCall
	opened   bool
	rejected string // the reason, when the call was not allowed
}

// wait is a request of the agent that waits for the client: a permission
// or Cursor's questions.
type wait struct {
	id        jsontext.Value // the request's
	callID    string
	options   []documents.PermissionOption
	questions []acp.Question
	answers   []documents.QuestionAnswer
	deadline  time.Time
}

// Answer is a client's answer to what a run waits for: a permission (ToolCallID and
// OptionID) or a question (QuestionID, OptionIDs and or Text).
type Answer struct {
	ToolCallID string
	OptionID   string
	QuestionID string
	OptionIDs  []string
	Text       string
}

// ErrNothingPending answers an Answer for which the run waits for nothing.
var ErrNothingPending = errors.New("the run waits for no such answer")

// BadAnswerError refuses an answer that does not fit what is pending.
type BadAnswerError struct{ Msg string }

func (e *BadAnswerError) Error() string { return e.Msg }

// Respond gives a run's pending permission or question the client's
// answer; it returns the document's new state.
func (b *Backend) Respond(runID string, a Answer) (status string, err error) {
	v, ok := b.acpRuns.Load(runID)
	if !ok {
		return "", ErrNothingPending
	}
	s, done := v.(*acpSession), make(chan struct{})
	select {
	case s.answers <- func() { status, err = s.answer(a); close(done) }:
		<-done
		return status, err
	case <-s.ended:
		return "", ErrNothingPending
	}
}

// answer gives what waits the client's answer and returns the document's
// new state.
func (s *acpSession) answer(a Answer) (string, error) {
	if a.QuestionID == "" {
		w := s.waits[a.ToolCallID]
		if w == nil || w.questions != nil {
			return "", ErrNothingPending
		}
		if !slices.ContainsFunc(w.options, func(o documents.PermissionOption) bool { return o.OptionID == a.OptionID }) {
			return "", &BadAnswerError{fmt.Sprintf("tool call %q offers no option %q", a.ToolCallID, a.OptionID)}
		}
		delete(s.waits, w.callID)
		s.arm()
		return s.decide(w, a.OptionID, "client", ""), nil
	}
	for _, w := range s.waits {
		for _, q := range w.questions {
			if q.ID != a.QuestionID || slices.ContainsFunc(w.answers, func(x documents.QuestionAnswer) bool { return x.QuestionID == q.ID }) {
				continue
			}
			for _, id := range a.OptionIDs {
				if !slices.ContainsFunc(q.Options, func(o acp.QuestionOption) bool { return o.ID == id }) {
					return "", &BadAnswerError{fmt.Sprintf("question %q has no option %q", q.ID, id)}
				}
			}
			switch {
			case len(a.OptionIDs) == 0 && strings.TrimSpace(a.Text) == "":
				return "", &BadAnswerError{"an answer needs optionIds or text"}
			case len(a.OptionIDs) > 1 && !q.AllowMultiple:
				return "", &BadAnswerError{fmt.Sprintf("question %q takes one option", q.ID)}
			}
			w.answers = append(w.answers, documents.QuestionAnswer{QuestionID: q.ID, OptionIDs: append([]string{}, a.OptionIDs...), Text: a.Text, By: "client"})
			if len(w.answers) < len(w.questions) {
				s.seg.SetAnswers(w.callID, true, w.answers)
			} else {
				delete(s.waits, w.callID)
				s.arm()
				s.askEnd(w, "answered", "")
			}
			return "answered", nil
		}
	}
	return "", ErrNothingPending
}

// runACP drives the ACP session of a started agent.
func (p *proc) runACP(ctx context.Context, spec *runs.Spec, seg *translate.Segmenter) translate.End {
	s := &acpSession{b: p.b, spec: spec, seg: seg, p: p, w: acp.NewWriter(p.stdin), in: make(chan inbound), done: ctx.Done(),
		calls: map[string]*acpCall{}, waits: map[string]*wait{}, timer: time.NewTimer(time.Hour),
		answers: make(chan func()), ended: make(chan struct{})}
	go p.readACP(s.in, s.ended)
	p.b.acpRuns.Store(spec.ResponseID, s)
	err := s.converse()
	s.expire(true) // what still waits when the agent died
	p.b.acpRuns.Delete(spec.ResponseID)
	close(s.ended)
	if ctx.Err() != nil {
		p.stop(context.Cause(ctx))
	}
	p.stdin.Close() // the agent exits at the end of its input
	end := p.end()
	var rpcErr *acp.Error
	switch {
	case ctx.Err() != nil && end.Reason == "":
		end.Reason, end.Message, _ = runs.StopCause(ctx)
	case errors.As(err, &rpcErr):
		end.Reason, end.Message, end.Code = documents.StopAgentError, rpcErr.Message, documents.CodeAgentError
		end.Source = "cursor-agent"
	case errors.Is(err, context.DeadlineExceeded):
		end.Reason, end.Message = documents.StopTimeout, fmt.Sprintf("the agent did not answer within %s", handshakeTimeout)
	}
	return end
}

// readACP passes the agent's lines to the run until its output ends or
// the session ended.
func (p *proc) readACP(in chan<- inbound, ended <-chan struct{}) {
	defer close(p.readDone)
	defer close(in)
	_ = acp.ReadLines(p.stdout, cmp.Or(p.b.cfg.MaxLineBytes, DefaultMaxLineBytes), func(line []byte, size int) {
		p.lastLine.Store(int64(time.Since(p.start)))
		var m inbound
		msg, err := acp.Parse(line)
		switch {
		case line == nil:
			m.ev = &translate.Event{Kind: translate.KindOversize, Size: size}
		case err != nil:
			m.ev = &translate.Event{Kind: translate.KindNotJSON, Raw: bytes.Clone(line)}
		default:
			m.msg = msg
		}
		select {
		case in <- m:
		case <-ended:
		}
	})
}

// converse runs the session: the handshake, then the prompt turn.
func (s *acpSession) converse() error {
	var init acp.InitializeResult
	var sess acp.NewSessionResult
	err := s.call(acp.MethodInitialize, acp.InitializeParams{ProtocolVersion: acp.ProtocolVersion, ClientInfo: acp.Implementation{Name: "docstream"}}, &init)
	if err == nil && slices.ContainsFunc(init.AuthMethods, func(m acp.AuthMethod) bool { return m.ID == "cursor_login" }) {
		err = s.call(acp.MethodAuthenticate, acp.AuthenticateParams{MethodID: "cursor_login"}, nil)
	}
	switch {
	case err != nil:
		return err
	case s.spec.SessionID != "":
		s.replaying = true
		err = s.call(acp.MethodLoadSession, acp.SessionParams{SessionID: s.spec.SessionID, Cwd: s.spec.Workspace, MCPServers: []any{}}, nil)
		s.replaying, sess.SessionID = false, s.spec.SessionID
	default:
		err = s.call(acp.MethodNewSession, acp.SessionParams{Cwd: s.spec.Workspace, MCPServers: []any{}}, &sess)
	}
	if err != nil {
		return err
	}
	s.session = sess.SessionID
	s.seg.Feed(translate.Event{Kind: translate.KindInit,
		Init: &translate.Init{SessionID: s.session, Cwd: s.spec.Workspace, Model: sess.Models.CurrentModelID}})
	if s.spec.Mode == "plan" || s.spec.Mode == "ask" {
		if err := s.call(acp.MethodSetMode, acp.SetModeParams{SessionID: s.session, ModeID: s.spec.Mode}, nil); err != nil {
			return err
		}
	}
	var res acp.PromptResult
	err = s.call(acp.MethodPrompt, acp.PromptParams{SessionID: s.session, Prompt: []acp.ContentBlock{{Type: "text", Text: s.spec.Prompt}}}, &res)
	// The response ends with the prompt's result, after what still waits is
	// answered as cancelled.
	r := &translate.Result{IsError: true}
	var rpcErr *acp.Error
	switch {
	case errors.As(err, &rpcErr):
		r.Error = rpcErr.Message
	case err != nil:
		return err
	case res.StopReason == "cancelled" && s.grace != nil:
		return errEnded
	case res.StopReason == "end_turn" || res.StopReason == "":
		r.IsError = false
		if u := res.Usage; u != nil {
			r.Usage = &translate.AgentUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
				CacheReadTokens: u.CachedReadTokens, CacheWriteTokens: u.CachedWriteTokens}
		}
	default:
		r.Error = "the agent stopped the turn: " + res.StopReason
	}
	s.expire(true)
	s.endThinking()
	r.DurationMs = time.Since(s.p.start).Milliseconds()
	s.seg.Feed(translate.Event{Kind: translate.KindResult, Result: r})
	return nil
}

// call sends a request and runs the session until its answer comes;
// handshakeTimeout bounds the wait for each but the prompt's.
func (s *acpSession) call(method string, params, result any) error {
	s.next++
	id := acp.ID(s.next)
	if err := s.w.Request(id, method, params); err != nil {
		return fmt.Errorf("writing %s: %w", method, err)
	}
	var limit <-chan time.Time
	if method != acp.MethodPrompt {
		limit = time.After(handshakeTimeout)
	}
	for {
		select {
		case m, ok := <-s.in:
			if !ok {
				return errEnded
			}
			if m.msg.IsResponse() && string(m.msg.ID) == string(id) {
				if m.msg.Error != nil {
					return m.msg.Error
				}
				if result != nil && json.Unmarshal(m.msg.Result, result) != nil {
					return &acp.Error{Code: acp.CodeInternal, Message: "the agent's answer to " + method + " is malformed"}
				}
				return nil
			}
			s.inbound(m)
		case f := <-s.answers:
			f()
		case <-s.timer.C:
			s.expire(false)
		case <-limit:
			return context.DeadlineExceeded
		case <-s.done:
			s.done = nil
			s.cancel()
		case <-s.grace:
			return errEnded
		case <-s.p.killNow:
			return errEnded
		}
	}
}

// cancel sends session/cancel and answers what waits as cancelled; the
// prompt then has the kill grace to end.
func (s *acpSession) cancel() {
	grace := time.Duration(0) // no prompt to end
	if s.session != "" {
		_ = s.w.Notify(acp.MethodCancel, acp.CancelParams{SessionID: s.session})
		grace = cmp.Or(s.b.cfg.KillGrace, time.Second)
	}
	s.expire(true)
	s.grace = time.After(grace)
}

// inbound handles one message of the agent that is not the answer awaited.
func (s *acpSession) inbound(m inbound) {
	if m.ev != nil {
		s.seg.Feed(*m.ev)
		return
	}
	switch msg := m.msg; {
	case msg.Method == "": // an answer to no request of the session's
		if msg.Error != nil && (len(msg.ID) == 0 || msg.ID.Kind() == 'n') {
			s.seg.Feed(translate.Event{Kind: translate.KindError, Text: msg.Error.Message})
		}
	case msg.Method == acp.MethodUpdate:
		var n acp.Notification
		if json.Unmarshal(msg.Params, &n) == nil && !s.replaying {
			s.update(n.Update)
		}
	case msg.Method == acp.MethodRequestPermission:
		s.permission(msg)
	case msg.Method == acp.MethodAskQuestion:
		s.ask(msg)
	case msg.Method == acp.MethodCreatePlan:
		var p acp.PlanParams
		_ = json.Unmarshal(msg.Params, &p)
		s.toolDoc(cmp.Or(p.ToolCallID, "plan"), "createPlanToolCall", msg.Params)
		_ = s.w.Reply(msg.ID, acp.Reply{Outcome: acp.Outcome{Outcome: "accepted"}})
	case msg.Method == acp.MethodUpdateTodos:
		var p acp.TodosParams
		_ = json.Unmarshal(msg.Params, &p)
		s.toolDoc(cmp.Or(p.ToolCallID, "todos"), "updateTodosToolCall", msg.Params)
		if msg.IsRequest() {
			_ = s.w.Reply(msg.ID, struct{}{})
		}
	// Every other request is answered: one left waiting would stall the agent.
	case !msg.IsRequest():
	case strings.HasPrefix(msg.Method, "cursor/"):
		_ = s.w.Reply(msg.ID, acp.Reply{Outcome: acp.Outcome{Outcome: "cancelled"}})
	default:
		_ = s.w.Fail(msg.ID, acp.CodeMethodNotFound, "Docstream does not serve "+msg.Method)
	}
}
