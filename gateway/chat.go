package gateway

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"

	"github.com/docstream/docstream/cloud"
	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/openai"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/sse"
	"github.com/docstream/docstream/store"
)

// handleChat serves POST /v1/chat: the SSE document stream, or the whole
// ChatResponse as JSON.
func (s *Server) handleChat(c echo.Context) error {
	var req ChatRequest
	if err := s.decodeBody(c, &req, chatFields); err != nil {
		return err
	}
	// ?stream= overrides the body's stream.
	stream := req.Stream != nil && *req.Stream
	if q := c.QueryParam("stream"); q != "" {
		v, err := strconv.ParseBool(q)
		if err != nil {
			return s.reject(errBadRequest("bad_query", "?stream=%q: use true or false", q))
		}
		stream = v
	}
	spec, err := s.chatSpec(c.Request().Context(), &req)
	if err != nil {
		return s.reject(err)
	}
	run, err := s.prepare(c.Request().Context(), spec)
	if err != nil {
		return err
	}
	if stream {
		return s.streamReply(c, run, 0, true, &docStream{id: run.ID}) // launches the run once the stream's headers are out
	}
	return await(c, run, func() error {
		resp := run.Response()
		setRunHeaders(c, run.ID, resp.ConversationID)
		return writeResponse(c, &resp)
	})
}

// prepare admits and registers a run, or answers a forwardError for a turn
// that runs on another replica; a refused run's cloud agent is stopped.
func (s *Server) prepare(ctx context.Context, spec *runs.Spec) (*runs.Run, error) {
	if err := s.routeTurn(ctx, spec); err != nil {
		return nil, err
	}
	run, err := s.reg.Prepare(spec)
	if err == nil && s.cluster != nil {
		s.cluster.Track(run)
	}
	if cs, ok := spec.Cloud.(*cloud.RunSpec); err != nil && ok && !cs.FollowUp && s.cloud != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if serr := s.cloud.Stop(ctx, cs.AgentID); serr != nil {
			s.log.Warn().Err(serr).Str("agent", cs.AgentID).Msg("stopping a cloud agent whose run was refused")
		}
	}
	return run, err
}

// decodeBody strictly decodes the request body into v, counting a refusal.
func (s *Server) decodeBody(c echo.Context, v any, known map[string]bool) error {
	body, err := readBody(c, s.cfg.Server.MaxBodyBytes)
	if err == nil {
		err = decodeStrict(body, v, known)
	}
	if err != nil {
		return s.reject(err)
	}
	return nil
}

// reject counts a request refused for bad input, and returns its error.
func (s *Server) reject(err error) error {
	he := asHTTPError(err)
	reason := "bad_request"
	if he.Status == http.StatusRequestEntityTooLarge {
		reason = "too_large"
	}
	s.metrics.Rejected.WithLabelValues(reason).Inc()
	return err
}

// chatSpec validates a /v1/chat request and turns it into a RunSpec.
func (s *Server) chatSpec(ctx context.Context, req *ChatRequest) (*runs.Spec, error) {
	alias, isAlias := s.cfg.OpenAI.Aliases[req.Model]
	if isAlias {
		// An alias gives its model, backend and repository, unless the request does.
		req.Model = cmp.Or(alias.Model, "auto")
		if req.Backend == "" {
			req.Backend = cmp.Or(alias.Backend, "cli")
		}
		if alias.Backend == "cloud" && req.Backend == "cloud" && req.Source == nil && alias.Repository != "" {
			req.Source, _ = json.Marshal(map[string]string{"repository": alias.Repository, "ref": alias.Ref})
		}
	}
	if err := validateCommon(req.Mode, req.Model, req.ConversationID); err != nil {
		return nil, err
	}
	// Another key's conversation is unknown, before anything else is checked.
	if err := s.checkOwnConversation(ctx, req.ConversationID, errUnknownConversation(req.ConversationID)); err != nil {
		return nil, err
	}
	prompt := ""
	switch {
	case req.Prompt != nil && len(req.Messages) > 0:
		return nil, errBadRequest("prompt_and_messages", "send prompt or messages, not both")
	case req.Prompt != nil:
		prompt = *req.Prompt
	case len(req.Messages) > 0:
		if err := checkMessages(req.Messages); err != nil {
			return nil, err
		}
		last, idx := openai.LastUserMessage(req.Messages)
		if idx < 0 {
			return nil, errBadRequest("no_user_message", "messages has no user message")
		}
		if err := endsWithUser(req.Messages[idx+1:]); err != nil {
			return nil, err
		}
		if req.ConversationID != "" {
			prompt = last
		} else {
			prompt = openai.FlattenHistory(req.Messages, promptLimit(s.cfg.Server.MaxPromptBytes))
		}
	case len(req.Answers) > 0:
	default:
		return nil, errBadRequest("no_prompt", "send a prompt (or messages)")
	}
	if len(req.Answers) > 0 {
		if req.ConversationID == "" {
			return nil, errBadRequest("no_conversation", "answers need the conversationId of the clarification")
		}
		a, err := s.answerPrompt(ctx, req.ConversationID, req.Answers)
		if err != nil {
			return nil, err
		}
		prompt = strings.TrimSpace(a + "\n\n" + prompt)
	}
	if strings.TrimSpace(prompt) == "" {
		return nil, errBadRequest("empty_prompt", "the prompt is empty")
	}
	if err := checkText("the prompt", prompt, promptLimit(s.cfg.Server.MaxPromptBytes)); err != nil {
		return nil, err
	}
	backend := req.Backend
	switch backend {
	case "":
		backend = "cli"
		if s.cfg.CloudDefault && s.cloud != nil {
			backend = "cloud"
		}
	case "cli", "cursor-agent", "cursor":
		backend = "cli"
	case "cloud":
	default:
		return nil, errBadRequest("bad_backend", "backend %q is not one of cli, cloud", req.Backend)
	}
	// What ACP mode cannot do, and what only it can.
	switch acp := s.cfg.Agent.Protocol == "acp"; {
	case req.Interactive && (backend != "cli" || !acp):
		return nil, errBadRequest("not_interactive", "interactive runs need the cli backend with agent.protocol: acp")
	case req.IncludeRaw && acp && backend == "cli":
		return nil, errBadRequest("no_raw_events", "include_raw needs agent.protocol: print")
	}
	spec := &runs.Spec{
		ResponseID: runs.NewResponseID(), Created: runs.Now(), Prompt: prompt, UserPrompt: prompt,
		ConversationID: req.ConversationID, SessionID: req.ConversationID,
		Mode: cmp.Or(req.Mode, "agent"), Model: cmp.Or(req.Model, "auto"), Interactive: req.Interactive,
		Backend: backend, Thinking: req.Thinking, IncludeRaw: req.IncludeRaw, Owner: ownerOf(ctx),
	}
	if backend == "cloud" {
		return s.cloudSpec(ctx, spec, req)
	}
	if len(req.Images) > 0 || req.Source != nil || req.Target != nil {
		return nil, errBadRequest("cloud_only", "images, source and target are for backend \"cloud\"")
	}
	var conv store.Conversation
	if req.ConversationID != "" && s.store != nil {
		c, err := s.store.ConversationInfo(ctx, req.ConversationID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, errUnknownConversation(req.ConversationID)
		case err == nil && c.Backend == "cloud":
			return nil, errBadRequest("cloud_conversation", "conversation %s belongs to the cloud backend; send backend \"cloud\"", req.ConversationID)
		case err == nil:
			conv = c
		}
	}
	if err := s.placeRun(ctx, spec, req.Workspace, conv, isAlias); err != nil {
		return nil, err
	}
	return spec, nil
}

// placeRun gives a cli run its workspace (the one named, else its
// conversation's, else the default) and checks its model, which an alias
// leaves to the operator, and its mode.
func (s *Server) placeRun(ctx context.Context, spec *runs.Spec, workspace string, conv store.Conversation,
	alias bool) error {
	name := workspace
	if _, ok := s.workspaces[conv.Workspace]; name == "" && ok {
		name = conv.Workspace
	}
	name = cmp.Or(name, s.defaultWorkspace)
	switch dir, ok := s.workspaces[name]; {
	case name == "":
		return errBadRequest("workspace_required", "name a workspace: this gateway has several (%s) and no agent.default_workspace",
			strings.Join(s.workspaceNames(), ", "))
	case !namePattern.MatchString(name):
		return errBadRequest("bad_workspace", "workspace must be a configured workspace name, not a path")
	case !ok:
		return errBadRequest("unknown_workspace", "workspace %q is not configured", name)
	default:
		spec.Workspace, spec.WorkspaceName = dir, name
	}
	if !alias {
		if err := s.checkModel(ctx, spec.Model); err != nil {
			return err
		}
	}
	if spec.Mode == "debug" && !s.cli.SupportsDebug(ctx) {
		return errBadRequest("unsupported_mode", "the installed cursor-agent does not offer --mode debug")
	}
	return nil
}

// answerPrompt turns clarification answers into a follow-up prompt.
func (s *Server) answerPrompt(ctx context.Context, conv string, answers []Answer) (string, error) {
	var qs []documents.Question
	known := false // the store holds the conversation: answers are checked
	if s.store != nil {
		if _, turns, err := s.store.Conversation(ctx, conv); err == nil {
			known = true
			for i := len(turns) - 1; i >= 0 && qs == nil; i-- {
				var resp documents.ChatResponse
				if json.Unmarshal(turns[i].Response, &resp) != nil {
					continue
				}
				for _, d := range resp.Documents {
					if d.Type == documents.TypeClarification {
						var m documents.ClarificationMeta
						if json.Unmarshal(d.Metadata, &m) == nil {
							qs = append(qs, m.Questions...)
						}
					}
				}
			}
		}
	}
	if known && qs == nil {
		return "", errBadRequest("unknown_answer", "this conversation has asked no question to answer")
	}
	var b strings.Builder
	b.WriteString("Answers to your questions:\n")
	for _, a := range answers {
		if a.QuestionID == "" || a.OptionID == "" {
			return "", errBadRequest("bad_answer", "every answer needs questionId and optionId")
		}
		if err := checkText("an answer", a.QuestionID+a.OptionID, 1024); err != nil {
			return "", err
		}
		qText, label := a.QuestionID, a.OptionID
		found := qs == nil
		for _, q := range qs {
			if q.ID != a.QuestionID {
				continue
			}
			qText = q.Text
			for _, o := range q.Options {
				if o.ID == a.OptionID {
					label, found = o.Label, true
				}
			}
		}
		if !found {
			return "", errBadRequest("unknown_answer", "question %q has no option %q in this conversation", a.QuestionID, a.OptionID)
		}
		fmt.Fprintf(&b, "- %s: %s\n", qText, label)
	}
	return b.String(), nil
}

// streamer writes one SSE response: its headers, write deadlines that a
// stalled reader runs into, flushes and heartbeats. Everything the stream
// says goes through its Write.
type streamer struct {
	s     *Server
	w     *echo.Response
	rc    *http.ResponseController
	armed time.Time
	// ping is the heartbeat written on idle intervals.
	ping []byte
}

// errEventsDropped is the error of a stream that fell behind its run's
// log bounds, or of a re-attach after events the log no longer holds.
func errEventsDropped(run *runs.Run) *HTTPError {
	return &HTTPError{Status: http.StatusGone, Code: "events_dropped",
		Message: fmt.Sprintf("the run's event log (runs.log_max_events, runs.log_max_bytes) no longer holds the events this stream needs; GET /v1/chat/%s has the whole response", run.ID)}
}

// startStream writes the SSE response headers for a run and commits the
// response.
func (s *Server) startStream(c echo.Context, run *runs.Run) *streamer {
	h := c.Response().Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Docstream-Response-Id", run.ID)
	if conv := run.ConversationID(); conv != "" {
		h.Set("X-Docstream-Conversation-Id", conv)
	}
	c.Response().WriteHeader(http.StatusOK)
	st := &streamer{s: s, w: c.Response(), rc: http.NewResponseController(c.Response().Writer), ping: keepaliveComment}
	st.deadline()
	return st
}

// writePiece is the most written to a client under one write deadline.
const writePiece = 64 << 10

// Write writes p in pieces of at most writePiece bytes, each under a fresh
// write deadline, so that the timeout measures a stall.
func (st *streamer) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), writePiece)
		st.deadline()
		m, err := st.w.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// deadline gives the next writes the write timeout, unless it was set
// less than 1/64 of it ago.
func (st *streamer) deadline() {
	if wt := st.s.cfg.Server.WriteTimeout; wt > 0 {
		if now := time.Now(); now.Sub(st.armed) >= wt/64 {
			st.armed = now
			_ = st.rc.SetWriteDeadline(now.Add(wt))
		}
	}
}

// follow sends the run's frames after the given id as they come, flushing
// once nothing more is waiting and writing the heartbeat on idle intervals,
// until send says the stream is complete, the log closes, ctx ends or a
// write fails. It reports whether the stream fell so far behind that the
// run's log dropped events it had not sent.
func (st *streamer) follow(ctx context.Context, run *runs.Run, after int,
	send func(sse.Frame) (complete bool, err error)) (lost bool) {
	ticker := time.NewTicker(st.s.heartbeat())
	defer ticker.Stop()
	wake, stop := run.Log.Watch()
	defer stop()
	last, unflushed := after, false
	for {
		f, closed, ok := run.Log.Next(last)
		switch {
		case !ok:
			return true
		case f.ID != 0:
			last = f.ID
			complete, err := send(f)
			if err != nil {
				return
			}
			if complete {
				_ = st.rc.Flush()
				return
			}
			unflushed = true
			continue
		}
		if unflushed {
			// What comes in meanwhile is not missed: wake has a value for it.
			if st.rc.Flush() != nil {
				return
			}
			unflushed = false
		}
		if closed {
			return
		}
		select {
		case <-wake:
		case <-ticker.C:
			if _, err := st.Write(st.ping); err != nil || st.rc.Flush() != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// replyStream writes a run's stream in the shape of one API.
type replyStream interface {
	// start writes what comes before the run's events.
	start(st *streamer) error
	// send writes what one frame of the run's log becomes, reporting whether
	// the stream is complete.
	send(f sse.Frame) (complete bool, err error)
	// lost ends a stream that fell behind its run's log with he.
	lost(he *HTTPError) error
}

// streamReply streams a run's events after the given id as rs writes them,
// live until the stream is complete. A run the stream does not attach to
// goes on when the client leaves.
func (s *Server) streamReply(c echo.Context, run *runs.Run, after int, attach bool, rs replyStream) error {
	if attach {
		detach := run.Attach()
		defer detach()
	}
	defer run.Launch() // a prepared run starts in any case
	st := s.startStream(c, run)
	if rs.start(st) != nil || st.rc.Flush() != nil {
		return nil
	}
	run.Launch()
	if st.follow(c.Request().Context(), run, after, rs.send) && rs.lost(errEventsDropped(run)) == nil {
		_ = st.rc.Flush()
	}
	return nil
}

// docStream writes a run's document stream: its frames as they are logged.
type docStream struct {
	id string // the run's
	st *streamer
}

func (ds *docStream) start(st *streamer) error {
	ds.st, st.ping = st, pingComment
	return sse.WriteComment(st, "docstream "+ds.id)
}

func (ds *docStream) send(f sse.Frame) (bool, error) {
	_, err := f.WriteTo(ds.st)
	return false, err
}

// lost ends the stream with an error event that says why, in place of done.
func (ds *docStream) lost(he *HTTPError) error {
	b, _ := json.Marshal(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{he.Code, he.Message})
	return sse.WriteEvent(ds.st, "error", b)
}

// The heartbeats of the document stream and of the OpenAI streams.
var pingComment, keepaliveComment = written(func(w io.Writer) error { return sse.WriteComment(w, "ping") }),
	written(func(w io.Writer) error { return sse.WriteComment(w, "keepalive") })

// written returns what write writes.
func written(write func(w io.Writer) error) []byte {
	var b bytes.Buffer
	_ = write(&b)
	return b.Bytes()
}

func (s *Server) heartbeat() time.Duration {
	if s.cfg.Server.Heartbeat > 0 {
		return s.cfg.Server.Heartbeat
	}
	return 15 * time.Second
}

// await launches the run, waits attached for its done, and then answers;
// a client that left first gets nothing.
func await(c echo.Context, run *runs.Run, answer func() error) error {
	run.Launch()
	detach := run.Attach()
	defer detach()
	if !waitDone(c.Request().Context(), run) {
		return nil
	}
	return answer()
}

// waitDone waits for the run's done, reporting false when ctx ends first.
func waitDone(ctx context.Context, run *runs.Run) bool {
	select {
	case <-run.Done():
		return true
	case <-ctx.Done():
		return false
	}
}

// setRunHeaders names a finished run's response and conversation.
func setRunHeaders(c echo.Context, id string, conv *string) {
	h := c.Response().Header()
	h.Set("X-Docstream-Response-Id", id)
	if conv != nil {
		h.Set("X-Docstream-Conversation-Id", *conv)
	}
}

// agentFailed answers a run's failure, telling the client not to retry
// what already ran.
func agentFailed(c echo.Context, he *HTTPError) error {
	c.Response().Header().Set("X-Should-Retry", "false")
	return he
}

// writeResponse answers a ChatResponse as JSON.
func writeResponse(c echo.Context, resp *documents.ChatResponse) error {
	b, err := documents.EncodeResponse(resp)
	if err != nil {
		return fmt.Errorf("encoding the answer: %w", err)
	}
	return c.JSONBlob(http.StatusOK, b)
}

// writeJSON answers v as JSON with the v2 encoder.
func writeJSON(c echo.Context, status int, v any) error {
	b, err := json.Marshal(v, jsontext.AllowInvalidUTF8(true))
	if err != nil {
		return fmt.Errorf("encoding the answer: %w", err)
	}
	return c.JSONBlob(status, b)
}

// handleGetChat serves GET /v1/chat/{id}.
func (s *Server) handleGetChat(c echo.Context) error {
	id, ctx := c.Param("id"), c.Request().Context()
	if run := s.visibleRun(ctx, id); run != nil && !run.Released() {
		resp := run.Response()
		return writeResponse(c, &resp)
	}
	if s.store != nil && idPattern.MatchString(id) {
		t, err := s.store.Turn(ctx, id)
		switch {
		case err == nil && s.sees(ctx, t.Owner):
			return c.JSONBlob(http.StatusOK, t.Response)
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return err
		}
	}
	return &HTTPError{Status: http.StatusNotFound, Code: "not_found", Message: "no response with this id"}
}

// handleStream serves GET /v1/chat/{id}/stream: a replay from Last-Event-ID
// (or ?lastEventId=), then the live stream; 204 for an unknown run.
func (s *Server) handleStream(c echo.Context) error {
	run := s.visibleRun(c.Request().Context(), c.Param("id"))
	if run == nil {
		if err := s.runElsewhere(c.Request().Context(), c.Param("id")); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
	after := 0
	if last := cmp.Or(c.Request().Header.Get("Last-Event-ID"), c.QueryParam("lastEventId")); last != "" {
		n, err := strconv.Atoi(strings.TrimSpace(last))
		if err != nil || n < 0 {
			return errBadRequest("bad_last_event_id", "Last-Event-ID must be an event id (a number)")
		}
		after = n
		// No client can have seen an event the run has not sent.
		if last := run.Log.Last(); after > last {
			return errBadRequest("bad_last_event_id", "event %d is past this run's last event (%d)", after, last)
		}
	}
	if !run.Log.Keeps(after) {
		return errEventsDropped(run)
	}
	return s.streamReply(c, run, after, true, &docStream{id: run.ID})
}

// handleCancel serves POST /v1/chat/{id}/cancel.
func (s *Server) handleCancel(c echo.Context) error {
	run, err := s.liveRun(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	body, err := readBody(c, 4096)
	if err != nil {
		return err
	}
	var req struct {
		Signal string `json:"signal"`
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := decodeStrict(body, &req, map[string]bool{"signal": true}); err != nil {
			return err
		}
	}
	kill := false
	switch strings.ToUpper(req.Signal) {
	case "", "TERM", "SIGTERM":
	case "KILL", "SIGKILL":
		kill = true
	default:
		return errBadRequest("bad_signal", "signal must be TERM or KILL")
	}
	if run.Ended() {
		return &HTTPError{Status: http.StatusConflict, Code: "not_running",
			Message: fmt.Sprintf("the run already ended (%s); GET /v1/chat/%s has its response", run.Response().Status, run.ID)}
	}
	run.Cancel(kill)
	select {
	case <-run.Done():
		// It may have finished on its own just before.
		status := "cancelled"
		if resp := run.Response(); resp.Metadata.StopReason != documents.StopCancelled {
			status = string(resp.Status)
		}
		return writeJSON(c, http.StatusOK, map[string]string{"id": run.ID, "status": status})
	default:
		return writeJSON(c, http.StatusAccepted, map[string]string{"id": run.ID, "status": "cancelling"})
	}
}

// conversationAnswer is the body of GET /v1/conversations/{id}.
type conversationAnswer struct {
	store.Conversation
	Turns []turnAnswer `json:"turns"`
}

type turnAnswer struct {
	ResponseID string         `json:"responseId"`
	Prompt     string         `json:"prompt"`
	Created    time.Time      `json:"created"`
	Status     string         `json:"status"`
	Response   jsontext.Value `json:"response"`
}

// handleConversation serves GET /v1/conversations/{id}.
func (s *Server) handleConversation(c echo.Context) error {
	id := c.Param("id")
	if s.store == nil || !idPattern.MatchString(id) {
		return errNoConversation()
	}
	ctx := c.Request().Context()
	conv, turns, err := s.store.Conversation(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && !s.sees(ctx, conv.Owner) {
		return errNoConversation()
	}
	if err != nil {
		return err
	}
	ans := conversationAnswer{Conversation: conv, Turns: []turnAnswer{}}
	for _, t := range turns {
		if !s.sees(ctx, t.Owner) {
			continue // another key's turn, sent while keys were not isolated
		}
		resp := jsontext.Value(t.Response)
		if run := s.reg.Get(t.ResponseID); run != nil && !run.Released() {
			if b, err := json.Marshal(run.Response()); err == nil {
				resp = b
			}
		}
		ans.Turns = append(ans.Turns, turnAnswer{ResponseID: t.ResponseID, Prompt: t.Prompt, Created: t.Created, Status: t.Status, Response: resp})
	}
	return writeJSON(c, http.StatusOK, ans)
}
