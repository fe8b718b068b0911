package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/go-json-experiment/json"
	"github.com/labstack/echo/v4"

	"github.com/docstream/docstream/agent"
	"github.com/docstream/docstream/cluster"
	"github.com/docstream/docstream/runs"
)

// RespondRequest is the body of POST /v1/chat/{id}/respond: the answer to a
// question or to a permission request.
type RespondRequest struct {
	QuestionID string   `json:"questionId"`
	OptionIDs  []string `json:"optionIds"`
	Text       string   `json:"text"`
	ToolCallID string   `json:"toolCallId"`
	OptionID   string   `json:"optionId"`
}

var respondFields = map[string]bool{"questionId": true, "optionIds": true, "text": true, "toolCallId": true, "optionId": true}

// respondAnswer is what a respond is answered with.
type respondAnswer struct {
	ID         string `json:"id"`
	QuestionID string `json:"questionId,omitzero"`
	ToolCallID string `json:"toolCallId,omitzero"`
	Status     string `json:"status"` // answered, approved or rejected
}

// handleRespond serves POST /v1/chat/{id}/respond.
func (s *Server) handleRespond(c echo.Context) error {
	ctx := c.Request().Context()
	if _, err := s.liveRun(ctx, c.Param("id")); err != nil {
		return err
	}
	var req RespondRequest
	if err := s.decodeBody(c, &req, respondFields); err != nil {
		return err
	}
	ans, err := s.respond(ctx, c.Param("id"), &req)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, ans)
}

// respond checks an answer and gives it to run id.
func (s *Server) respond(ctx context.Context, id string, req *RespondRequest) (*respondAnswer, error) {
	if _, err := s.liveRun(ctx, id); err != nil {
		return nil, err
	}
	switch {
	case (req.QuestionID == "") == (req.ToolCallID == ""):
		return nil, errBadRequest("bad_answer", "send questionId (with optionIds or text) or toolCallId (with optionId)")
	case req.ToolCallID != "" && (req.OptionID == "" || req.OptionIDs != nil || req.Text != ""):
		return nil, errBadRequest("bad_answer", "a permission is answered with toolCallId and optionId alone")
	case req.QuestionID != "" && req.OptionID != "":
		return nil, errBadRequest("bad_answer", "a question is answered with optionIds (a list) and or text")
	}
	if err := checkText("an answer", req.Text, 64<<10); err != nil {
		return nil, err
	}
	status, err := s.cli.Respond(id, agent.Answer{ToolCallID: req.ToolCallID, OptionID: req.OptionID,
		QuestionID: req.QuestionID, OptionIDs: req.OptionIDs, Text: req.Text})
	var bad *agent.BadAnswerError
	switch {
	case errors.As(err, &bad):
		return nil, errBadRequest("unknown_option", "%s", bad.Msg)
	case errors.Is(err, agent.ErrNothingPending):
		what := fmt.Sprintf("tool call %q", req.ToolCallID)
		if req.QuestionID != "" {
			what = fmt.Sprintf("question %q", req.QuestionID)
		}
		return nil, &HTTPError{Status: http.StatusConflict, Code: "not_pending",
			Message: fmt.Sprintf("the run waits for no answer to %s: it was answered, it timed out, or it was never asked", what)}
	case err != nil:
		return nil, err
	}
	return &respondAnswer{ID: id, QuestionID: req.QuestionID, ToolCallID: req.ToolCallID, Status: status}, nil
}

// wsRespond answers {"type":"respond", "id"?, …the respond body…} on a
// WebSocket (the run is id, else the socket's turn) as "responded".
func (s *Server) wsRespond(ctx context.Context, msg []byte, current wsTurn, header http.Header) (wsMessage, *HTTPError) {
	var head struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(msg, &head)
	id := head.ID
	switch t := current.(type) {
	case *runs.Run:
		id = cmp.Or(id, t.ID)
	case *peerTurn:
		id = cmp.Or(id, t.id)
	}
	body := removeMember(removeMember(msg, "type"), "id")
	var req RespondRequest
	if err := decodeStrict(body, &req, respondFields); err != nil {
		return wsMessage{}, asHTTPError(s.reject(err))
	}
	ans, err := s.respond(ctx, id, &req)
	if fe, ok := errors.AsType[*forwardError](err); ok {
		return s.peerRespond(ctx, fe.to, id, header, body)
	}
	if err != nil {
		return wsMessage{}, asHTTPError(err)
	}
	b, err := json.Marshal(ans)
	if err != nil {
		return wsMessage{}, asHTTPError(err)
	}
	return wsMessage{Type: "responded", Data: b}, nil
}

// peerRespond gives an answer to a run that another replica runs, and
// relays that replica's answer.
func (s *Server) peerRespond(ctx context.Context, to cluster.Replica, id string, header http.Header, body []byte) (wsMessage, *HTTPError) {
	resp, stop, err := s.toPeer(ctx, to, http.MethodPost, "/v1/chat/"+id+"/respond", header, body)
	if err != nil {
		return wsMessage{}, asHTTPError(err)
	}
	defer stop()
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return wsMessage{}, asHTTPError(err)
	}
	if resp.StatusCode != http.StatusOK {
		he := &HTTPError{Status: resp.StatusCode}
		_ = json.Unmarshal(b, &errorBody{Error: he})
		return wsMessage{}, he
	}
	return wsMessage{Type: "responded", Data: b}, nil
}
