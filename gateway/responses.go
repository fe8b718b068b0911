package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/labstack/echo/v4"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/openai"
	"github.com/docstream/docstream/responses"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/sse"
	"github.com/docstream/docstream/store"
)

// handleResponses serves POST /v1/responses.
func (s *Server) handleResponses(c echo.Context) error {
	var req responses.Request
	if err := s.decodeBody(c, &req, nil); err != nil {
		return err
	}
	ctx := c.Request().Context()
	stored := req.Store == nil || *req.Store
	if req.Background && !stored {
		return errBadRequest("unsupported_value", "background needs store: a response that is not stored cannot be polled").naming("background")
	}
	msgs, err := req.Messages(func(id string) (string, bool) {
		_, cr, err := s.findResponse(ctx, id, s.responseRun(ctx, id))
		return responses.Reply(cr), err == nil
	})
	var ie *responses.InputError
	if errors.As(err, &ie) {
		return errBadRequest(ie.Code, "%s", ie.Message).naming(ie.Param)
	}
	model := cmp.Or(req.Model, "auto")
	turn := openAITurn{model: model, msgs: msgs, param: "input", workspace: req.Workspace, mode: req.Mode, thinking: req.Thinking()}
	if req.PreviousResponseID != "" {
		if turn.conv, err = s.previousConversation(ctx, req.PreviousResponseID); err != nil {
			return err
		}
		turn.unknown = errUnknownResponse(req.PreviousResponseID).naming("previous_response_id")
	}
	spec, thread, err := s.openAISpec(ctx, turn)
	if err != nil {
		return err
	}
	meta := responses.Meta{ID: "resp_" + strings.TrimPrefix(spec.ResponseID, "chat_"), Model: model, CreatedAt: time.Now().Unix(), Instructions: req.Instructions,
		PreviousResponseID: req.PreviousResponseID, Background: req.Background, Store: stored, Reasoning: req.Reasoning, Metadata: req.Metadata}
	spec.Surface = meta
	run, err := s.prepare(ctx, spec)
	if err != nil {
		return err
	}
	rs := &responseStream{enc: responses.NewEncoder(meta), after: -1}
	// A streaming client gets the end after the fingerprint is stored.
	remember := s.rememberReply(ctx, thread, model, openai.RenderMarkdown)
	if req.Stream && !req.Background {
		rs.remember = remember
	} else {
		run.Observe(remember)
	}
	if !stored {
		go s.forgetResponse(run)
	}
	switch {
	case req.Stream:
		return s.streamReply(c, run, 0, !req.Background, rs)
	case req.Background:
		// The run goes on detached: GET /v1/responses/{id} polls it.
		run.Launch()
		c.Response().Header().Set("X-Docstream-Response-Id", run.ID)
		return writeJSON(c, http.StatusOK, rs.enc.Response())
	}
	return waitResponse(c, run, meta)
}

// waitResponse answers a run as one Response once it is done.
func waitResponse(c echo.Context, run *runs.Run, meta responses.Meta) error {
	enc := responses.NewEncoder(meta)
	run.Observe(func(ev documents.Event) { enc.Event(ev) })
	return await(c, run, func() error {
		resp := enc.Response()
		c.Response().Header().Set("X-Docstream-Response-Id", run.ID)
		if resp.Error != nil {
			return agentFailed(c, &HTTPError{Status: http.StatusBadGateway, Code: resp.Error.Code, Message: resp.Error.Message})
		}
		return writeJSON(c, http.StatusOK, resp)
	})
}

// responseStream writes a run's Responses events with sequence numbers
// after after (-1: all), live until the response ends.
type responseStream struct {
	st       *streamer
	enc      *responses.Encoder
	after    int
	remember func(documents.Event) // nil when the run's observer sees the events
}

func (rs *responseStream) start(st *streamer) error {
	rs.st = st
	return rs.write(rs.enc.Start())
}

func (rs *responseStream) send(f sse.Frame) (bool, error) {
	ev, err := sse.DecodeFrame(f)
	if err != nil {
		return false, nil
	}
	if rs.remember != nil {
		rs.remember(ev)
	}
	_, done := ev.(documents.Done)
	return done, rs.write(rs.enc.Event(ev))
}

func (rs *responseStream) lost(he *HTTPError) error {
	return rs.write(rs.enc.Error(he.Code, he.Message))
}

// write writes the events past after, and the comments.
func (rs *responseStream) write(evs []responses.Event) error {
	for _, ev := range evs {
		var err error
		switch {
		case ev.Comment != "":
			err = sse.WriteComment(rs.st, ev.Comment)
		case ev.Sequence > rs.after:
			err = sse.WriteEvent(rs.st, ev.Type, ev.Data)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// handleGetResponse serves GET /v1/responses/{id}: the Response, or with
// ?stream=true its events after ?starting_after, live while it runs.
func (s *Server) handleGetResponse(c echo.Context) error {
	stream := false
	if q := c.QueryParam("stream"); q != "" {
		v, err := strconv.ParseBool(q)
		if err != nil {
			return errBadRequest("bad_query", "stream=%q: use true or false", openai.Clip(q, 40)).naming("stream")
		}
		stream = v && c.Request().Method != http.MethodHead // HEAD has no body to stream
	}
	after := -1
	if q := c.QueryParam("starting_after"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 0 {
			return errBadRequest("bad_query", "starting_after=%q: use a sequence number", openai.Clip(q, 40)).naming("starting_after")
		}
		after = n
	}
	id := c.Param("id")
	run := s.responseRun(c.Request().Context(), id)
	if stream && run != nil && run.Log.Keeps(0) {
		meta := metaOf(run, id)
		return s.streamReply(c, run, 0, !meta.Background, &responseStream{enc: responses.NewEncoder(meta), after: after})
	}
	meta, cr, err := s.findResponse(c.Request().Context(), id, run)
	if err != nil {
		return err
	}
	evs, resp := responses.FromChat(meta, cr)
	if !stream {
		return writeJSON(c, http.StatusOK, resp)
	}
	if resp.Status == responses.StatusInProgress {
		return &HTTPError{Status: http.StatusGone, Code: "events_dropped",
			Message: fmt.Sprintf("the run's event log no longer holds this response's first events; GET /v1/responses/%s has it as it stands", id)}
	}
	// A finished response no longer held: events made from its documents.
	h := c.Response().Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	c.Response().WriteHeader(http.StatusOK)
	for _, ev := range evs {
		if ev.Comment == "" && ev.Sequence > after {
			if err := sse.WriteEvent(c.Response(), ev.Type, ev.Data); err != nil {
				return nil
			}
		}
	}
	return nil
}

// handleCancelResponse serves POST /v1/responses/{id}/cancel: the response,
// once its run, if any, ended.
func (s *Server) handleCancelResponse(c echo.Context) error {
	id, ctx := c.Param("id"), c.Request().Context()
	if run := s.responseRun(ctx, id); run != nil {
		run.Cancel(false)
		if !waitDone(ctx, run) {
			return nil
		}
	}
	meta, cr, err := s.findResponse(ctx, id, s.responseRun(ctx, id))
	if err != nil {
		return err
	}
	_, resp := responses.FromChat(meta, cr)
	return writeJSON(c, http.StatusOK, resp)
}

// handleDeleteResponse serves DELETE /v1/responses/{id}.
func (s *Server) handleDeleteResponse(c echo.Context) error {
	id, ctx := c.Param("id"), c.Request().Context()
	if _, _, err := s.findResponse(ctx, id, s.responseRun(ctx, id)); err != nil {
		return err
	}
	rid, _ := runID(id)
	switch err := s.deleteResponse(ctx, rid); {
	case errors.Is(err, runs.ErrRunning):
		return &HTTPError{Status: http.StatusConflict, Code: "response_running", Param: "response_id",
			Message: fmt.Sprintf("response %s is still running: cancel it first (POST /v1/responses/%s/cancel)", id, id)}
	case errors.Is(err, store.ErrNotFound):
		return errUnknownResponse(id)
	case err != nil:
		return err
	}
	return writeJSON(c, http.StatusOK, map[string]any{"id": id, "object": "response", "deleted": true})
}

// forgetResponse deletes a response asked for with store: false once it ended.
func (s *Server) forgetResponse(run *runs.Run) {
	<-run.Done()
	if err := s.deleteResponse(context.Background(), run.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn().Err(err).Str("response_id", run.ID).Msg("deleting a response asked for with store: false")
	}
}

// deleteResponse deletes the response of run id from the registry and the
// store.
func (s *Server) deleteResponse(ctx context.Context, id string) error {
	return s.reg.DeleteResponse(id, func() error {
		if s.store == nil {
			return nil
		}
		return s.store.DeleteTurn(ctx, id)
	})
}

// previousConversation returns the conversation of previous_response_id.
func (s *Server) previousConversation(ctx context.Context, id string) (string, error) {
	_, cr, err := s.findResponse(ctx, id, s.responseRun(ctx, id))
	var he *HTTPError
	if errors.As(err, &he) && he.Status == http.StatusNotFound {
		return "", he.naming("previous_response_id")
	}
	if err != nil {
		return "", err
	}
	if cr.ConversationID == nil || *cr.ConversationID == "" {
		return "", errBadRequest("no_session", "response %s has no agent session to continue: it ended before the agent started one", id).naming("previous_response_id")
	}
	return *cr.ConversationID, nil
}

// responseRun returns the visible run of a response id, if any.
func (s *Server) responseRun(ctx context.Context, id string) *runs.Run {
	if rid, ok := runID(id); ok {
		return s.visibleRun(ctx, rid)
	}
	return nil
}

// findResponse returns a response's request fields and ChatResponse.
func (s *Server) findResponse(ctx context.Context, id string, run *runs.Run) (responses.Meta, documents.ChatResponse, error) {
	if run != nil {
		return metaOf(run, id), run.Response(), nil
	}
	rid, ok := runID(id)
	if ok && s.store != nil {
		t, err := s.store.Turn(ctx, rid)
		switch {
		case err == nil && s.sees(ctx, t.Owner):
			var cr documents.ChatResponse
			if err := json.Unmarshal(t.Response, &cr); err != nil {
				return responses.Meta{}, cr, fmt.Errorf("reading response %s: %w", id, err)
			}
			return responses.Meta{ID: id, Store: true}, cr, nil
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return responses.Meta{}, documents.ChatResponse{}, err
		}
	}
	return responses.Meta{}, documents.ChatResponse{}, errUnknownResponse(id)
}

// metaOf returns the request fields a run of the Responses API keeps.
func metaOf(run *runs.Run, id string) responses.Meta {
	m, ok := run.Spec.Surface.(responses.Meta)
	if !ok {
		m = responses.Meta{ID: id, Store: true}
	}
	return m
}

// errUnknownResponse answers a response not known here (or another key's).
func errUnknownResponse(id string) *HTTPError {
	return &HTTPError{Status: http.StatusNotFound, Code: "response_not_found", Param: "response_id",
		Message: fmt.Sprintf("response %q is not known here", openai.Clip(id, 80))}
}

// runID is the run id of a response id.
func runID(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, "resp_")
	if !ok || !idPattern.MatchString(rest) {
		return "", false
	}
	return "chat_" + rest, true
}
