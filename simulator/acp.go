package simulator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/acp"
)

// acpServer is `agent-sim acp`: the Agent Client Protocol on stdin and
// stdout, as Cursor's `agent acp` speaks it. Each session/prompt plays the
// scenario its prompt names, as in print mode.
type acpServer struct {
	ctx    context.Context
	cfg    *config
	opts   options
	getenv func(string) string
	w      *acp.Writer
	stdout io.Writer
	stderr io.Writer
	cwd    string

	mu      sync.Mutex
	waiting map[string]chan acp.Message // the answers to the simulator's requests, by id
	nextID  int64

	session string
	mode    string
	turn    *acpTurn
}

// acpTurn is one prompt turn of an acpServer: the run's events become
// session updates, its tool calls ask for permission where the CLI's allow
// list would, and Cursor's blocking requests wait for the client.
type acpTurn struct {
	srv      *acpServer
	id       jsontext.Value // the session/prompt request's
	cancel   context.CancelFunc
	ignore   bool // fault:ignore-term ignores session/cancel too
	replied  bool
	answers  map[string][]string // the question answers, by question id
	approved bool                // the last permission asked for was given
}

// exitNoReply is what a turn that ended without answering its prompt
// reports; the process exits 0.
const exitNoReply = -1

// serveACP serves ACP until stdin ends (then the running turn finishes
// first) or a scenario exits the process; it returns the exit code.
func serveACP(ctx context.Context, cfg *config, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string, opts options) int {
	cwd, err := workingDir(cfg.workspace, opts)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailure
	}
	s := &acpServer{ctx: ctx, cfg: cfg, opts: opts, getenv: getenv, w: acp.NewWriter(stdout), stdout: stdout, stderr: stderr,
		cwd: cwd, waiting: map[string]chan acp.Message{}, mode: cfg.mode}
	lines := make(chan acp.Message)
	go func() {
		defer close(lines)
		_ = acp.ReadLines(stdin, 64<<20, func(line []byte, _ int) {
			if m, err := acp.Parse(line); err == nil {
				lines <- m
			}
		})
	}()
	ended := make(chan int, 1)
	for {
		select {
		case m, ok := <-lines:
			if !ok {
				if t := s.current(); t != nil {
					return <-ended
				}
				return exitOK
			}
			s.handle(m, ended)
		case code := <-ended:
			s.mu.Lock()
			s.turn = nil
			s.mu.Unlock()
			if code == exitNoReply {
				return exitOK
			}
			if code != exitOK {
				return code
			}
		case <-ctx.Done():
			return cancelCode(ctx, stderr)
		}
	}
}

func (s *acpServer) current() *acpTurn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turn
}

// handle answers one message from the client.
func (s *acpServer) handle(m acp.Message, ended chan<- int) {
	if m.IsResponse() {
		s.mu.Lock()
		ch := s.waiting[string(m.ID)]
		delete(s.waiting, string(m.ID))
		s.mu.Unlock()
		if ch != nil {
			ch <- m
		}
		return
	}
	var err error
	switch m.Method {
	case acp.MethodInitialize:
		err = s.w.Reply(m.ID, acp.InitializeResult{ProtocolVersion: acp.ProtocolVersion,
			AgentCapabilities: acp.AgentCapabilities{LoadSession: true},
			AuthMethods:       []acp.AuthMethod{{ID: "cursor_login", Name: "Cursor Login"}}})
	case acp.MethodAuthenticate, acp.MethodSetMode:
		var p acp.SetModeParams
		if json.Unmarshal(m.Params, &p) == nil && p.ModeID != "" {
			s.mode = p.ModeID
		}
		err = s.w.Reply(m.ID, struct{}{})
	case acp.MethodNewSession:
		s.session = newUUID()
		res := acp.NewSessionResult{SessionID: s.session}
		res.Models.CurrentModelID = s.cfg.model.ID
		err = s.w.Reply(m.ID, res)
	case acp.MethodLoadSession:
		var p acp.SessionParams
		if json.Unmarshal(m.Params, &p) != nil || !validChatID(p.SessionID) {
			err = s.w.Fail(m.ID, -32602, "Invalid params: sessionId")
			break
		}
		// The agent replays the conversation before it answers.
		s.session = p.SessionID
		s.chunk("user_message_chunk", "(the earlier prompt)")
		s.chunk("agent_message_chunk", "(the earlier answer)")
		err = s.w.Reply(m.ID, struct{}{})
	case acp.MethodPrompt:
		s.prompt(m, ended)
	case acp.MethodCancel:
		if t := s.current(); t != nil && !t.ignore {
			t.cancel()
		}
	default:
		if m.IsRequest() {
			err = s.w.Fail(m.ID, acp.CodeMethodNotFound, "Method not found: "+m.Method)
		}
	}
	if err != nil {
		fmt.Fprintln(s.stderr, "simulator:", err)
	}
}

// chunk sends a text chunk of the given kind.
func (s *acpServer) chunk(kind, text string) {
	c, _ := json.Marshal(acp.ContentBlock{Type: "text", Text: text})
	_ = s.update(acp.Update{SessionUpdate: kind, ToolCall: acp.ToolCall{Content: c}})
}

func (s *acpServer) update(u acp.Update) error {
	return s.w.Notify(acp.MethodUpdate, acp.Notification{SessionID: s.session, Update: u})
}

// prompt starts the turn of a session/prompt.
func (s *acpServer) prompt(m acp.Message, ended chan<- int) {
	var p acp.PromptParams
	if json.Unmarshal(m.Params, &p) != nil || s.current() != nil {
		_ = s.w.Fail(m.ID, -32602, "Invalid params, or a prompt is already running")
		return
	}
	var text strings.Builder
	for _, b := range p.Prompt {
		text.WriteString(b.Text)
	}
	sel := selectScenario(text.String(), s.mode)
	if name := strings.TrimSpace(s.getenv(ScenarioEnv)); name != "" {
		if forced, ok := scenarioByWord(strings.ToLower(name)); ok {
			sel = forced
		}
	}
	ctx, cancel := context.WithCancel(s.ctx)
	t := &acpTurn{srv: s, id: m.ID, cancel: cancel, ignore: sel.name == "fault:ignore-term", answers: map[string][]string{}}
	s.mu.Lock()
	s.turn = t
	s.mu.Unlock()
	cfg := *s.cfg
	cfg.mode = s.mode
	sess := &session{cfg: &cfg, sel: sel, opts: s.opts, stdout: s.stdout, stderr: s.stderr, apiKeySource: apiKeySource(s.cfg, s.getenv),
		run: &run{ctx: ctx, out: s.stdout, format: "stream-json", partial: true, speed: s.cfg.speed, now: time.Now,
			sessionID: s.session, requestID: newUUID(), prompt: text.String(), cwd: s.cwd, start: time.Now(), acp: t}}
	go func() {
		defer cancel()
		code, err := sel.play(sess)
		switch {
		case code != exitOK:
		case err != nil && ctx.Err() != nil && s.ctx.Err() == nil:
			t.reply(acp.PromptResult{StopReason: "cancelled"})
		case err != nil && s.ctx.Err() == nil:
			fmt.Fprintf(s.stderr, "Error: %v\n", err)
			code = exitFailure
		case err == nil && !t.replied:
			code = exitNoReply // fault:no-result: the turn ends without its result, and so does the process
		}
		ended <- code
	}()
}

// reply answers the turn's session/prompt once.
func (t *acpTurn) reply(res acp.PromptResult) {
	if !t.replied {
		t.replied = true
		_ = t.srv.w.Reply(t.id, res)
	}
}

// request sends a request to the client and waits for its answer.
func (t *acpTurn) request(ctx context.Context, method string, params any) (acp.Outcome, error) {
	s := t.srv
	ch := make(chan acp.Message, 1)
	s.mu.Lock()
	s.nextID++
	id := acp.ID(s.nextID)
	s.waiting[string(id)] = ch
	s.mu.Unlock()
	if err := s.w.Request(id, method, params); err != nil {
		return acp.Outcome{}, err
	}
	select {
	case m := <-ch:
		var r acp.Reply
		if m.Error != nil || json.Unmarshal(m.Result, &r) != nil {
			return acp.Outcome{Outcome: "cancelled"}, nil
		}
		return r.Outcome, nil
	case <-ctx.Done():
		return acp.Outcome{}, ctx.Err()
	}
}

// event sends what a stream-json event of the run is in ACP: text and
// thinking deltas as chunks (the snapshots repeat them), the result as
// the answer to session/prompt, an error event as an error without id.
func (t *acpTurn) event(r *run, v any) error {
	s := t.srv
	switch e := v.(type) {
	case thinkingDelta:
		s.chunk("agent_thought_chunk", e.Text)
	case assistantEvent:
		if e.TimestampMs != 0 && e.ModelCallID == "" {
			s.chunk("agent_message_chunk", e.Message.Content[0].Text)
		}
	case resultEvent:
		if e.IsError {
			t.replied = true
			return s.w.Fail(t.id, acp.CodeInternal, e.Result)
		}
		u := r.usage()
		t.reply(acp.PromptResult{StopReason: "end_turn", Usage: &acp.Usage{InputTokens: int64(u.InputTokens), OutputTokens: int64(u.OutputTokens),
			TotalTokens: int64(u.InputTokens + u.OutputTokens), CachedReadTokens: int64(u.CacheReadTokens), CachedWriteTokens: int64(u.CacheWriteTokens)}})
	case errorEvent:
		return s.w.Fail(nil, acp.CodeInternal, e.Message)
	case mysteryEvent:
		return s.update(acp.Update{SessionUpdate: e.Type})
	}
	return r.ctx.Err()
}

// acpKinds maps the CLI's tool kinds to ACP's.
var acpKinds = map[string]string{"shellToolCall": "execute", "editToolCall": "edit", "deleteToolCall": "delete",
	"readToolCall": "read", "lsToolCall": "read", "readLintsToolCall": "read", "globToolCall": "search",
	"grepToolCall": "search", "semSearchToolCall": "search", "webFetchToolCall": "fetch", "webSearchToolCall": "fetch"}

// started sends a tool call's tool_call update, and asks for permission
// when the call is one the CLI's allow list does not hold.
func (t *acpTurn) started(r *run, c *toolCall) (acp.ToolCall, error) {
	args := c.args(c.callID)
	in, err := json.Marshal(args)
	if err != nil {
		return acp.ToolCall{}, err
	}
	tc := acp.ToolCall{ToolCallID: c.callID, Kind: acpKinds[c.kind], Status: "pending", RawInput: in,
		Title: strings.TrimSuffix(c.kind, "ToolCall")}
	if tc.Kind == "" {
		tc.Kind = "other"
	}
	if cmd, ok := args.get("command").(string); ok {
		tc.Title = "`" + cmd + "`"
	}
	if p, ok := args.get("path").(string); ok {
		tc.Title += " " + p
		tc.Locations = []acp.Location{{Path: p}}
	}
	if err := t.srv.update(acp.Update{SessionUpdate: "tool_call", ToolCall: tc}); err != nil {
		return tc, err
	}
	t.approved = !c.asks
	if c.asks {
		out, err := t.request(r.ctx, acp.MethodRequestPermission, acp.PermissionParams{SessionID: t.srv.session, ToolCall: tc,
			Options: []acp.PermissionOption{{OptionID: "allow-once", Name: "Allow once", Kind: "allow_once"},
				{OptionID: "allow-always", Name: "Allow always", Kind: "allow_always"}, {OptionID: "reject-once", Name: "Reject", Kind: "reject_once"}}})
		if err != nil {
			return tc, err
		}
		t.approved = out.Outcome == "selected" && strings.HasPrefix(out.OptionID, "allow")
	}
	return tc, nil
}

// tools plays one model step's tool calls in ACP: Cursor's own requests
// for questions and plans, its notification for todos, and tool_call
// updates for the rest, completed in the order they finish.
func (t *acpTurn) tools(r *run, calls []*toolCall) error {
	var open []*toolCall
	for i, c := range calls {
		c.callID = newCallID(r.step, i)
		if err := t.cursorCall(r, c); !errors.Is(err, errNotCursor) {
			if err != nil {
				return err
			}
			continue
		}
		if _, err := t.started(r, c); err != nil {
			return err
		}
		c.ran = t.approved
		open = append(open, c)
	}
	var elapsed time.Duration
	slices.SortStableFunc(open, func(a, b *toolCall) int { return cmp.Compare(a.duration, b.duration) })
	for _, c := range open {
		if err := r.sleep(c.duration - elapsed); err != nil {
			return err
		}
		elapsed = max(elapsed, c.duration)
		if err := t.completed(c); err != nil {
			return err
		}
	}
	return nil
}

// completed sends a tool call's last update: its output, or nothing for a
// call that was not allowed to run, as Cursor does.
func (t *acpTurn) completed(c *toolCall) error {
	u := acp.ToolCall{ToolCallID: c.callID, Status: "completed"}
	success, _ := c.result.get("success").(obj)
	switch {
	case !c.ran:
	case c.kind == "shellToolCall" && success == nil:
		u.RawOutput, _ = json.Marshal(o("exitCode", 0, "stdout", c.approvedOutput, "stderr", ""))
	case c.kind == "shellToolCall":
		u.RawOutput, _ = json.Marshal(o("exitCode", success.get("exitCode"), "stdout", success.get("stdout"), "stderr", success.get("stderr")))
	case c.kind == "editToolCall":
		d := acp.ToolCallContent{Type: "diff", Path: success.get("path").(string)}
		d.NewText, _ = success.get("afterFullFileContent").(string)
		if before, ok := success.get("beforeFullFileContent").(string); ok {
			d.OldText = &before
		}
		u.Content, _ = json.Marshal([]acp.ToolCallContent{d})
	default:
		u.RawOutput, _ = json.Marshal(success)
	}
	return t.srv.update(acp.Update{SessionUpdate: "tool_call_update", ToolCall: u})
}

var errNotCursor = errors.New("not one of Cursor's own calls")

// cursorCall plays the tool calls Cursor's ACP sends as its own methods.
func (t *acpTurn) cursorCall(r *run, c *toolCall) error {
	var method string
	switch c.kind {
	case "askQuestionToolCall":
		method = acp.MethodAskQuestion
	case "createPlanToolCall":
		method = acp.MethodCreatePlan
	case "updateTodosToolCall":
		method = acp.MethodUpdateTodos
	default:
		return errNotCursor
	}
	b, err := json.Marshal(append(obj{{"toolCallId", c.callID}}, c.args(c.callID)...))
	if err != nil {
		return err
	}
	var params any
	switch method {
	case acp.MethodUpdateTodos:
		var p acp.TodosParams
		err = json.Unmarshal(b, &p)
		for i := range p.Todos {
			p.Todos[i].Status = todoStatusACP(p.Todos[i].Status)
		}
		if err != nil {
			return err
		}
		return t.srv.w.Notify(method, p)
	case acp.MethodCreatePlan:
		var p acp.PlanParams
		err = json.Unmarshal(b, &p)
		for i := range p.Todos {
			p.Todos[i].Status = todoStatusACP(p.Todos[i].Status)
		}
		params = p
	default:
		var p acp.AskQuestionParams
		err = json.Unmarshal(b, &p)
		params = p
	}
	if err != nil {
		return err
	}
	if err := r.sleep(c.duration); err != nil {
		return err
	}
	out, err := t.request(r.ctx, method, params)
	for _, a := range out.Answers {
		t.answers[a.QuestionID] = a.SelectedOptionIDs
	}
	return err
}

// todoStatusACP turns TODO_STATUS_COMPLETED into completed.
func todoStatusACP(s string) string {
	return strings.ToLower(strings.TrimPrefix(s, "TODO_STATUS_"))
}
