package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"

	"github.com/docstream/docstream/agent"
	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/metrics"
	"github.com/docstream/docstream/openai"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/sse"
	"github.com/docstream/docstream/store"
)

// completionRequest is what Docstream reads of a chat completion request.
type completionRequest struct {
	Model         string           `json:"model"`
	Messages      []openai.Message `json:"messages"`
	Stream        bool             `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// N, the number of choices asked for, may only be 1.
	N              jsontext.Value `json:"n"`
	ConversationID string         `json:"conversation_id"`
	Workspace      string         `json:"workspace"`
	Mode           string         `json:"mode"`
	// Render is how this request's documents become its content:
	// markdown, text-only or tool_calls (default openai.render).
	Render string `json:"docstream_render"`
	// Tools are accepted and not given to the agent, which has its own;
	// ToolChoice may only leave the choice to the model (auto or none).
	Tools      jsontext.Value `json:"tools"`
	ToolChoice jsontext.Value `json:"tool_choice"`
}

// completion is a non-streaming chat.completion.
type completion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint *string            `json:"system_fingerprint"`
	Choices           []completionChoice `json:"choices"`
	Usage             openai.OpenAIUsage `json:"usage"`
}

type completionChoice struct {
	Index        int               `json:"index"`
	Message      completionMessage `json:"message"`
	Logprobs     *string           `json:"logprobs"`
	FinishReason string            `json:"finish_reason"`
}

type completionMessage struct {
	Role             string                 `json:"role"`
	Content          string                 `json:"content"`
	ReasoningContent string                 `json:"reasoning_content,omitzero"`
	ToolCalls        []openai.ToolCallDelta `json:"tool_calls,omitzero"`
	Refusal          *string                `json:"refusal"`
}

// completionRun is a prepared run of a chat completion or a message.
type completionRun struct {
	run      *runs.Run
	renderer *openai.Renderer
	remember func(documents.Event) // sees every event the client gets
	id       string
	created  int64
	model    string
	usage    bool // the stream ends with a usage chunk
	// codeInMessage ends a failure's message with its code (Anthropic's).
	codeInMessage bool
}

// handleCompletions serves POST /v1/chat/completions.
func (s *Server) handleCompletions(c echo.Context) error {
	var req completionRequest
	if err := s.decodeBody(c, &req, nil); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if err := oneChoice(req.N); err != nil {
		return err
	}
	if len(req.Messages) == 0 {
		return errBadRequest("no_messages", "messages must hold at least one message").naming("messages")
	}
	if err := checkMessages(req.Messages); err != nil {
		return err
	}
	if err := checkTools(req); err != nil {
		return err
	}
	model := cmp.Or(req.Model, "auto")
	turn := openAITurn{model: model, msgs: req.Messages, param: "messages", workspace: req.Workspace, mode: req.Mode,
		thinking: s.cfg.OpenAI.Reasoning != openai.ReasoningOff, conv: req.ConversationID}
	if req.ConversationID != "" {
		turn.unknown = &HTTPError{Status: http.StatusNotFound, Code: "unknown_conversation",
			Message: fmt.Sprintf("conversation %q is not known here", req.ConversationID)}
	}
	spec, thread, err := s.openAISpec(ctx, turn)
	if err != nil {
		return err
	}
	render := cmp.Or(req.Render, s.cfg.OpenAI.Render)
	run, err := s.prepare(ctx, spec)
	if err != nil {
		return err
	}
	cr := &completionRun{run: run, renderer: &openai.Renderer{Mode: render, Reasoning: s.cfg.OpenAI.Reasoning},
		remember: s.rememberReply(ctx, thread, model, render), id: "chatcmpl-" + strings.TrimPrefix(run.ID, "chat_"),
		created: time.Now().Unix(), model: model, usage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage}
	if req.Stream {
		return s.streamReply(c, run, 0, true, &completionStream{cr: cr})
	}
	return waitCompletion(c, cr)
}

// openAITurn is a turn asked for as OpenAI-style messages.
type openAITurn struct {
	model     string
	msgs      []openai.Message
	system    []openai.Message // system text kept apart from msgs (Anthropic's), folded into a new session's prompt
	param     string           // the request's name for msgs, in errors
	workspace string
	mode      string
	thinking  bool
	conv      string     // the conversation the request continues
	unknown   *HTTPError // the answer when conv is not known here
}

// openAISpec checks an OpenAI-shaped turn and makes its run's spec, resuming
// the conversation it names or whose history it resends, else folding the
// history into the prompt; it returns the thread that rememberReply stores.
func (s *Server) openAISpec(ctx context.Context, t openAITurn) (*runs.Spec, []openai.Message, error) {
	last, idx := openai.LastUserMessage(t.msgs)
	if idx < 0 {
		return nil, nil, errBadRequest("no_user_message", "%s has no user message", t.param)
	}
	if err := endsWithUser(t.msgs[idx+1:]); err != nil {
		return nil, nil, err
	}
	if strings.TrimSpace(last) == "" {
		return nil, nil, errBadRequest("empty_prompt", "the last user message has no text")
	}
	// An alias is the operator's name; any other model must be well formed.
	checked := t.model
	if _, ok := s.cfg.OpenAI.Aliases[checked]; ok {
		checked = ""
	}
	if err := validateCommon(t.mode, checked, t.conv); err != nil {
		return nil, nil, err
	}
	spec := &runs.Spec{ResponseID: runs.NewResponseID(), Created: runs.Now(), Mode: cmp.Or(t.mode, "agent"), Backend: "cli",
		Thinking: t.thinking, UserPrompt: last, Owner: ownerOf(ctx)}
	alias, isAlias := s.cfg.OpenAI.Aliases[t.model]
	spec.Model = t.model
	if isAlias {
		spec.Model = cmp.Or(alias.Model, "auto")
		if alias.Backend == "cloud" {
			spec.Backend = "cloud"
		}
	}
	if repo, ok := strings.CutPrefix(t.model, "cloud/"); ok {
		spec.Backend, spec.Model = "cloud", "auto"
		alias = openai.ModelAlias{Repository: "https://github.com/" + repo}
	}
	// Resume the session that produced this history, when it is known.
	history, historyKey := t.msgs[:idx], ""
	replied := slices.ContainsFunc(history, func(m openai.Message) bool { return m.Role == "assistant" })
	if t.conv == "" && replied && s.store != nil {
		historyKey = s.historyKey(ctx, openai.Fingerprint(history, "", t.model))
	}
	conv := t.conv
	if historyKey != "" {
		// A history sent twice at once gets a session of its own the second time.
		if id, err := s.store.Fingerprint(ctx, historyKey); err == nil {
			if _, busy := s.reg.RunningTurn(id); !busy {
				conv = id
			}
		}
	}
	if t.conv != "" {
		if s.store != nil && spec.Backend == "cli" {
			if _, err := s.store.ConversationInfo(ctx, t.conv); errors.Is(err, store.ErrNotFound) {
				return nil, nil, t.unknown
			}
		}
		if err := s.checkOwnConversation(ctx, t.conv, t.unknown); err != nil {
			return nil, nil, err
		}
	}
	if conv != "" {
		spec.ConversationID, spec.SessionID, spec.Prompt = conv, conv, last
	} else {
		spec.Prompt = openai.FlattenHistory(append(slices.Clip(t.system), t.msgs...), promptLimit(s.cfg.Server.MaxPromptBytes))
	}
	if he := checkText("the prompt", spec.Prompt, promptLimit(s.cfg.Server.MaxPromptBytes)); he != nil {
		return nil, nil, he.naming(t.param)
	}
	if i, j, ok := openai.ImagePart(t.msgs); ok && spec.Backend == "cli" {
		return nil, nil, errBadRequest("unsupported_content", "%s/%d/content/%d is an image: the cursor-agent CLI takes text only (images go to backend \"cloud\")", t.param, i, j).
			naming(fmt.Sprintf("%s/%d/content/%d", t.param, i, j))
	}
	if spec.Backend == "cloud" {
		creq := &ChatRequest{ConversationID: conv}
		if alias.Repository != "" {
			creq.Source, _ = json.Marshal(map[string]string{"repository": alias.Repository, "ref": alias.Ref})
		}
		var err error
		if spec, err = s.cloudSpec(ctx, spec, creq); err != nil {
			return nil, nil, err
		}
	} else {
		var prior store.Conversation
		if t.workspace == "" && s.store != nil {
			// A session, resumed or new for a history of it, runs where it ran.
			from := conv
			if from == "" && historyKey != "" {
				from, _ = s.store.HistoryConversation(ctx, historyKey)
			}
			if from != "" {
				if c, err := s.store.ConversationInfo(ctx, from); err == nil {
					prior = c
				}
			}
		}
		if err := s.placeRun(ctx, spec, t.workspace, prior, isAlias); err != nil {
			return nil, nil, err
		}
	}
	return spec, slices.Clone(t.msgs[:idx+1]), nil
}

// rememberReply returns what sees every event of a turn's reply and, once
// the turn completed, stores the fingerprint of the thread with the reply as
// the client got it: the history the client sends next resumes the session.
func (s *Server) rememberReply(ctx context.Context, thread []openai.Message, model, render string) func(documents.Event) {
	reply := &openai.Renderer{Mode: render, Reasoning: openai.ReasoningOff}
	return func(ev documents.Event) {
		reply.Event(ev)
		if d, ok := ev.(documents.Done); ok && d.ConversationID != nil && s.store != nil && d.Status == documents.StatusCompleted {
			s.reg.StoreWrote(s.store.PutFingerprint(context.Background(), s.historyKey(ctx, openai.Fingerprint(thread, reply.Content(), model)), *d.ConversationID))
		}
	}
}

// waitCompletion answers a run as one chat.completion once it is done.
func waitCompletion(c echo.Context, cr *completionRun) error {
	msg := completionMessage{Role: "assistant"}
	return cr.await(c, func(p openai.Piece) {
		msg.ReasoningContent += p.Reasoning
		if p.ToolCall != nil {
			msg.ToolCalls = append(msg.ToolCalls, *p.ToolCall)
		}
	}, func(done documents.Done) error {
		msg.Content = cr.renderer.Content()
		return writeJSON(c, http.StatusOK, completion{ID: cr.id, Object: "chat.completion", Created: cr.created, Model: cr.model,
			Choices: []completionChoice{{Message: msg, FinishReason: finishReason(len(msg.ToolCalls) > 0)}}, Usage: openai.UsageOf(done.Usage)})
	})
}

// await launches the run, giving take each piece of the reply as the run
// logs it; answer then writes the reply of a run that completed.
func (cr *completionRun) await(c echo.Context, take func(openai.Piece), answer func(documents.Done) error) error {
	var done documents.Done
	cr.run.Observe(func(ev documents.Event) {
		cr.remember(ev)
		for _, p := range cr.renderer.Event(ev) {
			take(p)
		}
		if d, ok := ev.(documents.Done); ok {
			done = d
		}
	})
	return await(c, cr.run, func() error {
		setRunHeaders(c, cr.run.ID, done.ConversationID)
		if done.Status != documents.StatusCompleted {
			return agentFailed(c, cr.failure(done))
		}
		return answer(done)
	})
}

// failure is the error of a run that did not complete.
func (cr *completionRun) failure(done documents.Done) *HTTPError {
	he := &HTTPError{Status: http.StatusBadGateway, Code: cmp.Or(string(done.Metadata.StopReason), "agent_error"),
		Message: openai.ErrorMessage(cr.renderer.Content())}
	if cr.codeInMessage {
		he.Message += " (" + he.Code + ")"
	}
	return he
}

// oneChoice refuses an n other than 1 (or none): a run gives one answer.
func oneChoice(n jsontext.Value) error {
	var f float64
	if len(n) == 0 || n.Kind() == 'n' || n.Kind() == '0' && json.Unmarshal(n, &f) == nil && f == 1 {
		return nil
	}
	_ = n.Compact()
	return &HTTPError{Status: http.StatusBadRequest, Code: "unsupported_value", Param: "n",
		Message: fmt.Sprintf("n is %s: a completion has one choice here, so n must be 1 or left out", openai.Clip(string(n), 40))}
}

// completionStream writes a run as chat.completion.chunk events.
type completionStream struct {
	cr        *completionRun
	st        *streamer
	toolCalls bool // a chunk carried tool calls
}

func (cs *completionStream) start(st *streamer) error {
	cs.st = st
	empty := ""
	return cs.chunk(openai.ChunkDelta{Role: "assistant", Content: &empty}, nil)
}

// write writes one chunk of the completion.
func (cs *completionStream) write(ch openai.Chunk) error {
	cr := cs.cr
	ch.ID, ch.Object, ch.Created, ch.Model = cr.id, "chat.completion.chunk", cr.created, cr.model
	b, err := json.Marshal(ch, jsontext.AllowInvalidUTF8(true))
	if err != nil {
		return err
	}
	return sse.WriteData(cs.st, b)
}

// chunk writes one chunk of one choice.
func (cs *completionStream) chunk(d openai.ChunkDelta, finish *string) error {
	return cs.write(openai.Chunk{Choices: []openai.ChunkChoice{{Delta: d, FinishReason: finish}}})
}

// send writes the chunks one event of the run becomes.
func (cs *completionStream) send(f sse.Frame) (bool, error) {
	ev, err := sse.DecodeFrame(f)
	if err != nil {
		return false, nil
	}
	cr := cs.cr
	cr.remember(ev)
	for _, p := range cr.renderer.Event(ev) {
		var d openai.ChunkDelta
		switch {
		case p.Comment != "":
			if err := sse.WriteComment(cs.st, p.Comment); err != nil {
				return false, err
			}
			continue
		case p.ToolCall != nil:
			d.ToolCalls = []openai.ToolCallDelta{*p.ToolCall}
			cs.toolCalls = true
		case p.Reasoning != "":
			rs := p.Reasoning
			d.ReasoningContent = &rs
		default:
			ct := p.Content
			d.Content = &ct
		}
		if err := cs.chunk(d, nil); err != nil {
			return false, err
		}
	}
	if d, ok := ev.(documents.Done); ok {
		cs.finish(d)
		return true, nil
	}
	return false, nil
}

// lost ends a stream that fell behind its run's log with an error object
// and [DONE]: not a clean stop, the client did not get every chunk.
func (cs *completionStream) lost(he *HTTPError) error {
	if err := writeOpenAIError(cs.st, he); err != nil {
		return err
	}
	return sse.WriteData(cs.st, []byte("[DONE]"))
}

// finish ends the chunk stream: the stop chunk (or an error object when
// the run failed), the usage chunk when asked for, and [DONE].
func (cs *completionStream) finish(d documents.Done) {
	if d.Status == documents.StatusCompleted {
		stop := finishReason(cs.toolCalls)
		if cs.chunk(openai.ChunkDelta{}, &stop) != nil {
			return
		}
	} else if writeOpenAIError(cs.st, cs.cr.failure(d)) != nil {
		return
	}
	if cs.cr.usage {
		u := openai.UsageOf(d.Usage)
		if cs.write(openai.Chunk{Choices: []openai.ChunkChoice{}, Usage: &u}) != nil {
			return
		}
	}
	_ = sse.WriteData(cs.st, []byte("[DONE]"))
}

// writeOpenAIError writes he as an OpenAI error object in a stream.
func writeOpenAIError(w io.Writer, he *HTTPError) error {
	b, _ := json.Marshal(openAIErrorBody{Error: openAIError{Message: he.Message, Type: "server_error", Code: he.Code}}, jsontext.AllowInvalidUTF8(true))
	return sse.WriteData(w, b)
}

// modelCache lists the agent's models, cached, and the configured aliases.
type modelCache struct {
	cli     *agent.Backend
	metrics *metrics.Metrics // its model labels follow the list
	demo    bool
	aliases map[string]openai.ModelAlias
	mu      sync.Mutex
	at      time.Time
	models  []modelInfo
	err     error
}

type modelInfo struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	Name    string `json:"name,omitzero"`
}

// list returns the models, listed again after ten minutes (a minute after a failure).
func (m *modelCache) list(ctx context.Context) ([]modelInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ttl := 10 * time.Minute
	if m.err != nil {
		ttl = time.Minute
	}
	if !m.at.IsZero() && time.Since(m.at) < ttl {
		return m.models, m.err
	}
	owner := "cursor"
	if m.demo {
		owner = "docstream-simulator"
	}
	var out []modelInfo
	add := func(id, name string) {
		if id != "" && !slices.ContainsFunc(out, func(m modelInfo) bool { return m.ID == id }) {
			out = append(out, modelInfo{ID: id, Object: "model", Created: 1767225600, OwnedBy: owner, Name: name})
		}
	}
	var err error
	if m.cli.Ready() == nil {
		// Without the client's cancellation, which would be cached for everyone.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		var b []byte
		b, err = m.cli.Output(ctx, "models")
		for _, line := range strings.Split(string(b), "\n") {
			id, name, ok := strings.Cut(strings.TrimSpace(line), " - ")
			if !ok || !modelPattern.MatchString(id) {
				continue
			}
			name = strings.TrimSpace(strings.NewReplacer("(current, default)", "", "(default)", "", "(current)", "").Replace(name))
			add(id, name)
		}
	}
	add("auto", "Auto")
	names := slices.Sorted(maps.Keys(m.aliases))
	for _, n := range names {
		add(n, "alias of "+cmp.Or(m.aliases[n].Model, "auto"))
	}
	for _, mi := range out {
		m.metrics.KnowModels(mi.ID)
	}
	if len(out) > 1+len(names) {
		err = nil // the agent listed its models
	}
	m.models, m.err, m.at = out, err, time.Now()
	return out, err
}

// endsWithUser refuses a reply after the last user message: the agent
// answers a user message, and what came after it would be dropped.
func endsWithUser(after []openai.Message) error {
	for _, m := range after {
		if m.Role == "assistant" || m.Role == "tool" || m.Role == "function" {
			return errBadRequest("last_message_not_user", "messages must end with a user message; after the last one comes a message of role %q (the agent answers a user message, and client-side tools are not supported)", m.Role)
		}
	}
	return nil
}

// checkModel accepts "auto", aliases and the models the agent lists; when
// the list cannot be read, any well-formed name.
func (s *Server) checkModel(ctx context.Context, model string) error {
	if model == "" || model == "auto" {
		return nil
	}
	if _, ok := s.cfg.OpenAI.Aliases[model]; ok {
		return nil
	}
	models, err := s.models.list(ctx)
	if err != nil || len(models) <= 1 {
		return nil
	}
	var ids []string
	for _, m := range models {
		if m.ID == model {
			return nil
		}
		ids = append(ids, m.ID)
	}
	return errBadRequest("unknown_model", "model %q is not available; available models: %s", model, strings.Join(ids, ", ")).naming("model")
}

// handleModels serves GET /v1/models.
func (s *Server) handleModels(c echo.Context) error {
	models, _ := s.models.list(c.Request().Context())
	if models == nil {
		models = []modelInfo{}
	}
	return writeJSON(c, http.StatusOK, map[string]any{"object": "list", "data": models})
}

// handleModel serves GET /v1/models/{id}.
func (s *Server) handleModel(c echo.Context) error {
	// Model ids may hold '/', which clients send escaped as one segment.
	id, err := url.PathUnescape(c.Param("id"))
	if err != nil {
		id = c.Param("id")
	}
	models, _ := s.models.list(c.Request().Context())
	for _, m := range models {
		if m.ID == id {
			return writeJSON(c, http.StatusOK, m)
		}
	}
	return &HTTPError{Status: http.StatusNotFound, Code: "model_not_found", Message: fmt.Sprintf("the model %q does not exist", openai.Clip(id, 200))}
}

// finishReason is a choice's finish_reason.
func finishReason(toolCalls bool) string {
	if toolCalls {
		return "tool_calls"
	}
	return "stop"
}

// checkTools refuses what a completion request asks of tools that cannot be
// honoured: a tool choice other than auto or none, and an unknown render.
func checkTools(req completionRequest) error {
	switch req.Render {
	case "", openai.RenderMarkdown, openai.RenderTextOnly, openai.RenderToolCalls:
	default:
		return errBadRequest("unsupported_value", "docstream_render %q: want markdown, text-only or tool_calls", req.Render).naming("docstream_render")
	}
	if len(req.ToolChoice) == 0 || req.ToolChoice.Kind() == 'n' {
		return nil
	}
	var choice string
	if req.ToolChoice.Kind() == '"' {
		_ = json.Unmarshal(req.ToolChoice, &choice)
		if choice == "auto" || choice == "none" {
			return nil
		}
	}
	return errBadRequest("unsupported_value", "tool_choice %s: the agent uses its own tools, so only \"auto\" and \"none\" can be honoured", openai.Clip(string(req.ToolChoice), 80)).naming("tool_choice")
}
