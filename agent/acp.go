package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
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

var (
	errStopped     = errors.New("the run was stopped")
	errOutputEnded = errors.New("the agent's output ended")
)

// acpSession is one run of `agent acp`: the run's goroutine drives it,
// reading the agent's messages while its own requests are pending, and the
// gateway's goroutines answer what waits through Respond.
type acpSession struct {
	b     *Backend
	spec  *runs.Spec
	seg   *translate.Segmenter
	p     *proc
	w     *acp.Writer
	in    <-chan inbound
	done  <-chan struct{} // the run's context
	kill  <-chan struct{}
	grace <-chan time.Time // set once the run is cancelled

	next      int64
	session   string
	replaying bool // session/load replays the conversation: not a new turn
	thinking  bool
	plans     int // the ACP plan updates so far
	calls     map[string]*acpCall

	mu      sync.Mutex
	waits   map[string]*wait // by tool call id
	wake    chan struct{}
	timer   *time.Timer
	stopped bool
}

// inbound is one line of the agent's output.
type inbound struct {
	msg  acp.Message
	line []byte // a line that is not a message
	size int    // a line over the limit
	err  error
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
	options   []acp.PermissionOption
	questions []acp.Question
	chosen    string // the option the client chose
	answers   []documents.QuestionAnswer
	deadline  time.Time
	handled   bool
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
func (b *Backend) Respond(runID string, a Answer) (string, error) {
	b.acpMu.Lock()
	s := b.acpRuns[runID]
	b.acpMu.Unlock()
	if s == nil {
		return "", ErrNothingPending
	}
	return s.respond(a)
}

func (s *acpSession) respond(a Answer) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.QuestionID == "" {
		w := s.waits[a.ToolCallID]
		if w == nil || w.questions != nil || w.chosen != "" || s.stopped {
			return "", ErrNothingPending
		}
		i := slices.IndexFunc(w.options, func(o acp.PermissionOption) bool { return o.OptionID == a.OptionID })
		if i < 0 {
			return "", &BadAnswerError{fmt.Sprintf("tool call %q offers no option %q", a.ToolCallID, a.OptionID)}
		}
		w.chosen = a.OptionID
		s.signal()
		return approvalStatus(w.options[i].Kind), nil
	}
	for _, w := range s.waits {
		for _, q := range w.questions {
			if q.ID != a.QuestionID || s.stopped || slices.ContainsFunc(w.answers, func(x documents.QuestionAnswer) bool { return x.QuestionID == q.ID }) {
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
			s.signal()
			return "answered", nil
		}
	}
	return "", ErrNothingPending
}

// signal wakes the run's goroutine; s.mu is held.
func (s *acpSession) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func approvalStatus(kind string) string {
	if strings.HasPrefix(kind, "allow") {
		return documents.StatusApproved
	}
	return documents.StatusRejected
}

// acpArgs is the command line of `agent acp`, after the binary.
func (b *Backend) acpArgs(spec *runs.Spec) []string {
	args := append([]string(nil), b.cfg.ArgsPrefix...)
	if spec.Model != "" && spec.Model != "auto" {
		args = append(args, "--model", spec.Model)
	}
	if b.cfg.Force {
		args = append(args, "--force")
	}
	if b.cfg.Trust {
		args = append(args, "--trust")
	}
	if b.cfg.ApproveMCPs {
		args = append(args, "--approve-mcps")
	}
	for _, h := range b.cfg.Headers {
		args = append(args, "-H", h)
	}
	return append(args, "acp")
}

// runACP runs the agent in ACP mode for spec.
func (b *Backend) runACP(ctx context.Context, spec *runs.Spec, seg *translate.Segmenter) translate.End {
	start := time.Now()
	if err := b.Ready(); err != nil {
		b.metrics.SpawnFailures.Inc()
		return translate.End{Err: err, Elapsed: time.Since(start).Milliseconds()}
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return translate.End{Err: fmt.Errorf("creating a pipe: %w", err)}
	}
	// The process is stopped after session/cancel had its grace, not at
	// once with the run.
	pctx, pstop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer pstop(nil)
	p, err := b.spawn(pctx, spec, start, b.acpArgs(spec), stdinR)
	stdinR.Close()
	if err != nil {
		stdinW.Close()
		return translate.End{Err: err, Elapsed: time.Since(start).Milliseconds()}
	}
	in, quit := make(chan inbound), make(chan struct{})
	go p.readACP(in, quit)
	s := &acpSession{b: b, spec: spec, seg: seg, p: p, w: acp.NewWriter(stdinW), in: in, done: ctx.Done(),
		calls: map[string]*acpCall{}, waits: map[string]*wait{}, wake: make(chan struct{}, 1), timer: time.NewTimer(time.Hour)}
	if spec.Kill != nil {
		s.kill = spec.Kill.KillNow()
	}
	b.acpMu.Lock()
	b.acpRuns[spec.ResponseID] = s
	b.acpMu.Unlock()
	err = s.converse()
	s.cancelWaits() // what still waits when the agent died
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	b.acpMu.Lock()
	delete(b.acpRuns, spec.ResponseID)
	b.acpMu.Unlock()
	if ctx.Err() != nil {
		pstop(context.Cause(ctx))
	}
	stdinW.Close() // the agent exits at the end of its input
	close(quit)
	end := p.end(seg, nil)
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
// quit is closed.
func (p *proc) readACP(in chan<- inbound, quit <-chan struct{}) {
	defer close(p.readDone)
	send := func(m inbound) {
		select {
		case in <- m:
		case <-quit:
		}
	}
	err := acp.ReadLines(p.stdout, cmp.Or(p.b.cfg.MaxLineBytes, DefaultMaxLineBytes), func(l acp.Line) {
		p.lastLine.Store(int64(time.Since(p.start)))
		if l.Data == nil {
			send(inbound{size: l.Size})
			return
		}
		m, err := acp.Parse(l.Data)
		if err != nil {
			send(inbound{line: append([]byte(nil), l.Data...)})
			return
		}
		send(inbound{msg: m})
	})
	if errors.Is(err, os.ErrClosed) {
		err = nil
	}
	send(inbound{err: cmp.Or(err, errOutputEnded)})
	close(in)
}

// converse runs the session: the handshake, then the prompt turn.
func (s *acpSession) converse() error {
	var init acp.InitializeResult
	caps := acp.InitializeParams{ProtocolVersion: acp.ProtocolVersion, ClientInfo: acp.Implementation{Name: "docstream"}}
	if err := s.call(acp.MethodInitialize, caps, &init, handshakeTimeout); err != nil {
		return err
	}
	if slices.ContainsFunc(init.AuthMethods, func(m acp.AuthMethod) bool { return m.ID == "cursor_login" }) {
		if err := s.call(acp.MethodAuthenticate, acp.AuthenticateParams{MethodID: "cursor_login"}, nil, handshakeTimeout); err != nil {
			return err
		}
	}
	model := ""
	if id := s.spec.SessionID; id != "" {
		s.replaying = true
		err := s.call(acp.MethodLoadSession, acp.SessionParams{SessionID: id, Cwd: s.spec.Workspace, MCPServers: []any{}}, nil, handshakeTimeout)
		s.replaying = false
		if err != nil {
			return err
		}
		s.session = id
	} else {
		var res acp.NewSessionResult
		if err := s.call(acp.MethodNewSession, acp.SessionParams{Cwd: s.spec.Workspace, MCPServers: []any{}}, &res, handshakeTimeout); err != nil {
			return err
		}
		s.session = res.SessionID
		if res.Models != nil {
			model = res.Models.CurrentModelID
		}
	}
	s.seg.Feed(translate.Event{Kind: translate.KindInit, Init: &translate.Init{SessionID: s.session, Cwd: s.spec.Workspace, Model: model}})
	if s.spec.Mode == "plan" || s.spec.Mode == "ask" {
		if err := s.call(acp.MethodSetMode, acp.SetModeParams{SessionID: s.session, ModeID: s.spec.Mode}, nil, handshakeTimeout); err != nil {
			return err
		}
	}
	var res acp.PromptResult
	err := s.call(acp.MethodPrompt, acp.PromptParams{SessionID: s.session, Prompt: []acp.ContentBlock{{Type: "text", Text: s.spec.Prompt}}}, &res, 0)
	var rpcErr *acp.Error
	switch {
	case errors.As(err, &rpcErr):
		s.result(&translate.Result{IsError: true, Error: rpcErr.Message})
		return nil
	case err != nil:
		return err
	case res.StopReason == "cancelled" && s.grace != nil:
		return errStopped
	case res.StopReason == "end_turn" || res.StopReason == "":
		r := &translate.Result{}
		if u := res.Usage; u != nil {
			r.Usage = &translate.AgentUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
				CacheReadTokens: u.CachedReadTokens, CacheWriteTokens: u.CachedWriteTokens}
		}
		s.result(r)
	default:
		s.result(&translate.Result{IsError: true, Error: "the agent stopped the turn: " + res.StopReason})
	}
	return nil
}

// result ends the response with the prompt's result, after the calls
// still waiting are answered as cancelled.
func (s *acpSession) result(r *translate.Result) {
	s.cancelWaits()
	s.endThinking()
	r.DurationMs = time.Since(s.p.start).Milliseconds()
	s.seg.Feed(translate.Event{Kind: translate.KindResult, Result: r})
}

// call sends a request and runs the session until its answer comes; a
// timeout > 0 bounds the wait.
func (s *acpSession) call(method string, params, result any, timeout time.Duration) error {
	s.next++
	id := acp.ID(s.next)
	if err := s.w.Request(id, method, params); err != nil {
		return fmt.Errorf("writing %s: %w", method, err)
	}
	var limit <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		limit = t.C
	}
	for {
		select {
		case m, ok := <-s.in:
			if !ok {
				return errOutputEnded
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
			if m.err != nil {
				return m.err
			}
			s.inbound(m)
		case <-s.wake:
			s.answered()
		case <-s.timer.C:
			s.expire()
		case <-limit:
			return context.DeadlineExceeded
		case <-s.done:
			s.done = nil
			s.cancel()
		case <-s.grace:
			return errStopped
		case <-s.kill:
			return errStopped
		}
	}
}

// cancel sends session/cancel and answers what waits as cancelled; the
// prompt then has the kill grace to end.
func (s *acpSession) cancel() {
	if s.session != "" {
		_ = s.w.Notify(acp.MethodCancel, acp.CancelParams{SessionID: s.session})
	}
	s.cancelWaits()
	grace := cmp.Or(s.b.cfg.KillGrace, time.Second)
	if s.session == "" {
		grace = 0 // no prompt to end
	}
	s.grace = time.After(grace)
}

// inbound handles one message of the agent that is not the answer awaited.
func (s *acpSession) inbound(m inbound) {
	switch {
	case m.size > 0:
		s.seg.Feed(translate.Event{Kind: translate.KindOversize, Size: m.size})
		return
	case m.line != nil:
		s.seg.Feed(translate.Event{Kind: translate.KindNotJSON, Raw: m.line})
		return
	}
	msg := m.msg
	switch msg.Method {
	case "":
		if msg.Error != nil && (len(msg.ID) == 0 || msg.ID.Kind() == 'n') {
			s.seg.Feed(translate.Event{Kind: translate.KindError, Text: msg.Error.Message})
		}
	case acp.MethodUpdate:
		var n acp.Notification
		if json.Unmarshal(msg.Params, &n) == nil && !s.replaying {
			s.update(n.Update)
		}
	case acp.MethodRequestPermission:
		s.permission(msg)
	case acp.MethodAskQuestion:
		s.ask(msg)
	case acp.MethodCreatePlan:
		var p acp.PlanParams
		_ = json.Unmarshal(msg.Params, &p)
		s.toolDoc(cmp.Or(p.ToolCallID, "plan"), "createPlanToolCall", msg.Params, `{"success":{}}`)
		_ = s.w.Reply(msg.ID, acp.Reply{Outcome: acp.Outcome{Outcome: "accepted"}})
	case acp.MethodUpdateTodos:
		var p acp.TodosParams
		_ = json.Unmarshal(msg.Params, &p)
		s.toolDoc(cmp.Or(p.ToolCallID, "todos"), "updateTodosToolCall", msg.Params, `{"success":{}}`)
		if msg.IsRequest() {
			_ = s.w.Reply(msg.ID, struct{}{})
		}
	default:
		// Every request is answered: one left waiting would stall the agent.
		switch {
		case !msg.IsRequest():
		case strings.HasPrefix(msg.Method, "cursor/"):
			_ = s.w.Reply(msg.ID, acp.Reply{Outcome: acp.Outcome{Outcome: "cancelled"}})
		default:
			_ = s.w.Fail(msg.ID, acp.CodeMethodNotFound, "Docstream does not serve "+msg.Method)
		}
	}
}

// update handles one session update.
func (s *acpSession) update(u acp.Update) {
	if u.SessionUpdate != "agent_thought_chunk" {
		s.endThinking()
	}
	switch u.SessionUpdate {
	case "agent_message_chunk", "agent_thought_chunk":
		var c acp.ContentBlock
		if json.Unmarshal(u.Content, &c) != nil || c.Type != "text" {
			return
		}
		kind := translate.KindAssistant
		if u.SessionUpdate == "agent_thought_chunk" {
			kind, s.thinking = translate.KindThinkingDelta, true
		}
		s.seg.Feed(translate.Event{Kind: kind, Text: c.Text, HasTimestamp: true})
	case "tool_call", "tool_call_update":
		c := s.call1(u.ToolCall)
		switch {
		case u.Status == "completed" || u.Status == "failed":
			s.open(c)
			s.complete(c)
		case len(c.RawInput) > 2:
			s.open(c)
		}
	case "plan":
		todos := make([]acp.Todo, len(u.Entries))
		for i, e := range u.Entries {
			todos[i] = acp.Todo{ID: fmt.Sprintf("plan-%d", i+1), Content: e.Content, Status: e.Status}
		}
		s.plans++
		id := fmt.Sprintf("acp-plan-%d", s.plans)
		if s.plans == 1 {
			args, _ := json.Marshal(acp.PlanParams{Name: "Plan", Todos: todos})
			s.toolDoc(id, "createPlanToolCall", args, `{"success":{}}`)
			return
		}
		args, _ := json.Marshal(acp.TodosParams{Todos: todos})
		s.toolDoc(id, "updateTodosToolCall", args, `{"success":{}}`)
	case "user_message_chunk", "available_commands_update", "current_mode_update", "config_option_update",
		"session_info_update", "usage_update":
	default:
		s.seg.Feed(translate.Event{Kind: translate.KindUnknown})
	}
}

func (s *acpSession) endThinking() {
	if s.thinking {
		s.thinking = false
		s.seg.Feed(translate.Event{Kind: translate.KindThinkingDone})
	}
}

// toolDoc adds a whole tool document: started and completed at once.
func (s *acpSession) toolDoc(id, kind string, args jsontext.Value, result string) {
	tool := &translate.ToolCall{Kind: kind, Args: args}
	s.seg.Feed(translate.Event{Kind: translate.KindToolStarted, CallID: id, Tool: tool})
	s.seg.Feed(translate.Event{Kind: translate.KindToolCompleted, CallID: id, Tool: &translate.ToolCall{Kind: kind, Result: jsontext.Value(result)}})
}

// call1 merges a tool call or update into what is known of the call.
func (s *acpSession) call1(u acp.ToolCall) *acpCall {
	c := s.calls[u.ToolCallID]
	if c == nil {
		c = &acpCall{}
		s.calls[u.ToolCallID] = c
	}
	if c.ToolCallID == "" {
		c.ToolCallID = u.ToolCallID
	}
	c.Title, c.Kind, c.Status = cmp.Or(u.Title, c.Title), cmp.Or(u.Kind, c.Kind), cmp.Or(u.Status, c.Status)
	if u.Content != nil {
		c.Content = u.Content
	}
	if u.Locations != nil {
		c.Locations = u.Locations
	}
	if len(u.RawInput) > 2 || c.RawInput == nil {
		c.RawInput = u.RawInput
	}
	if u.RawOutput != nil {
		c.RawOutput = u.RawOutput
	}
	return c
}

// open opens the document of a tool call, once.
func (s *acpSession) open(c *acpCall) {
	if c.opened {
		return
	}
	c.opened = true
	kind, args := printKind(c)
	s.seg.Feed(translate.Event{Kind: translate.KindToolStarted, CallID: c.ToolCallID, TimestampMs: time.Now().UnixMilli(),
		Tool: &translate.ToolCall{Kind: kind, Name: c.Title, Args: args}})
}

// complete ends the document of a tool call with its result.
func (s *acpSession) complete(c *acpCall) {
	kind, args := printKind(c)
	var body any = c.RawOutput
	if c.RawOutput.Kind() != '{' {
		body = map[string]any{}
	}
	var diffs []acp.ToolCallContent
	_ = json.Unmarshal(c.Content, &diffs)
	for _, d := range diffs {
		if d.Type == "diff" {
			b := map[string]any{"path": d.Path, "afterFullFileContent": d.NewText}
			if d.OldText != nil {
				b["beforeFullFileContent"] = *d.OldText
				args = withArgs(args, changedLines(*d.OldText, d.NewText))
			}
			body = b
			break
		}
	}
	var res any = map[string]any{"success": body}
	switch {
	case c.rejected != "":
		res = map[string]any{"rejected": map[string]string{"reason": c.rejected}}
	case c.Status == "failed":
		res = map[string]any{"error": cmp.Or[any](c.RawOutput, map[string]string{"error": contentText(c.Content)})}
	}
	r, _ := json.Marshal(res)
	s.seg.Feed(translate.Event{Kind: translate.KindToolCompleted, CallID: c.ToolCallID, TimestampMs: time.Now().UnixMilli(),
		Tool: &translate.ToolCall{Kind: kind, Args: args, Result: r}})
}

// printKind names a tool call as print mode does, from its ACP kind and
// the arguments it carries, and returns its arguments.
func printKind(c *acpCall) (string, jsontext.Value) {
	var in map[string]jsontext.Value
	_ = json.Unmarshal(c.RawInput, &in)
	has := func(k string) bool { _, ok := in[k]; return ok }
	args := c.RawInput
	if args.Kind() != '{' {
		args = jsontext.Value("{}")
	}
	switch {
	case has("providerIdentifier"):
		return "mcpToolCall", args
	case c.Kind == "execute":
		if !has("command") {
			args = withArgs(args, map[string]string{"command": strings.Trim(c.Title, "`")})
		}
		return "shellToolCall", args
	case c.Kind == "edit" || c.Kind == "delete" || c.Kind == "move":
		if !has("path") && len(c.Locations) > 0 {
			args = withArgs(args, map[string]string{"path": c.Locations[0].Path})
		}
		if c.Kind == "delete" {
			return "deleteToolCall", args
		}
		return "editToolCall", args
	case c.Kind == "read" && has("ignore"):
		return "lsToolCall", args
	case c.Kind == "read" && has("paths"):
		return "readLintsToolCall", args
	case c.Kind == "read":
		return "readToolCall", args
	case c.Kind == "search" && has("globPattern"):
		return "globToolCall", args
	case c.Kind == "search" && has("targetDirectories"):
		return "semSearchToolCall", args
	case c.Kind == "search":
		return "grepToolCall", args
	case c.Kind == "fetch" && has("url"):
		return "webFetchToolCall", args
	case c.Kind == "fetch":
		return "webSearchToolCall", args
	}
	return "function", args
}

// withArgs returns args with the given members set.
func withArgs(args jsontext.Value, set map[string]string) jsontext.Value {
	m := map[string]jsontext.Value{}
	_ = json.Unmarshal(args, &m)
	for k, v := range set {
		m[k], _ = json.Marshal(v)
	}
	b, err := json.Marshal(m, json.Deterministic(true))
	if err != nil {
		return args
	}
	return b
}

// changedLines returns the lines an edit replaced, as old_string and
// new_string: what lies between the lines both texts begin and end with.
func changedLines(before, after string) map[string]string {
	a, b := strings.SplitAfter(before, "\n"), strings.SplitAfter(after, "\n")
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	j := 0
	for j < len(a)-i && j < len(b)-i && a[len(a)-1-j] == b[len(b)-1-j] {
		j++
	}
	return map[string]string{"old_string": strings.Join(a[i:len(a)-j], ""), "new_string": strings.Join(b[i:len(b)-j], "")}
}

func contentText(content jsontext.Value) string {
	var items []acp.ToolCallContent
	_ = json.Unmarshal(content, &items)
	var b strings.Builder
	for _, it := range items {
		if it.Content != nil {
			b.WriteString(it.Content.Text)
		}
	}
	return cmp.Or(b.String(), "the tool failed")
}
