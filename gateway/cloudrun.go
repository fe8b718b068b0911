package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/labstack/echo/v4"

	"github.com/docstream/docstream/cloud"
	"github.com/docstream/docstream/runs"
)

// cloudSpec launches a cloud agent, or sends a follow-up to the one named by
// conversationId, before the response starts: upstream refusals are HTTP errors.
func (s *Server) cloudSpec(ctx context.Context, spec *runs.Spec, req *ChatRequest) (*runs.Spec, error) {
	if s.cloud == nil {
		return nil, errNoCloud
	}
	// A request the registry refuses must not launch an agent or deliver a follow-up.
	if err := s.reg.Admit(); err != nil {
		return nil, err
	}
	if id, busy := s.reg.RunningTurn(spec.ConversationID); spec.ConversationID != "" && busy {
		return nil, &runs.BusyError{ID: id}
	}
	if len(req.Images) > cloud.MaxImages {
		return nil, errBadRequest("too_many_images", "at most %d images are allowed", cloud.MaxImages)
	}
	var images []cloud.Image
	for i, raw := range req.Images {
		var im cloud.Image
		if err := json.Unmarshal(raw, &im); err != nil || im.Data == "" {
			return nil, errBadRequest("bad_image", "images[%d] must be {\"data\": base64, \"dimension\": {\"width\", \"height\"}}", i)
		}
		images = append(images, im)
	}
	spec.Mode = "agent"
	cs := &cloud.RunSpec{}
	prompt := cloud.Prompt{Text: spec.Prompt, Images: images}
	ctx, cancel := s.cloudContext(ctx)
	defer cancel()
	if spec.ConversationID != "" {
		conv, err := s.cloud.Conversation(ctx, spec.ConversationID)
		if err != nil {
			return nil, cloudFailure(ctx, err, "")
		}
		cs.Known = conv.Messages
		if err := s.cloud.FollowUp(ctx, spec.ConversationID, prompt); err != nil {
			return nil, cloudFailure(ctx, err, "; the follow-up may have been delivered: read the conversation before sending it again")
		}
		cs.AgentID, cs.FollowUp = spec.ConversationID, true
	} else {
		var src cloud.Source
		if req.Source != nil {
			if err := json.Unmarshal(req.Source, &src); err != nil {
				return nil, errBadRequest("bad_source", "source must be {\"repository\", \"ref\"} or {\"prUrl\"}: %v", err)
			}
		}
		if src.Repository == "" && src.PRURL == "" {
			return nil, errBadRequest("no_source", "a cloud run needs source.repository (or source.prUrl)")
		}
		var tgt cloud.Target
		if req.Target != nil {
			if err := json.Unmarshal(req.Target, &tgt); err != nil {
				return nil, errBadRequest("bad_target", "target: %v", err)
			}
		}
		model := spec.Model
		if model == "auto" {
			model = ""
		}
		a, err := s.cloud.Launch(ctx, cloud.LaunchRequest{Prompt: prompt, Source: src, Target: tgt, Model: model})
		if err != nil {
			return nil, cloudFailure(ctx, err, "; an agent may have been started: list agents before launching again")
		}
		cs.AgentID, cs.Repository = a.ID, cmp.Or(src.Repository, src.PRURL)
		spec.ConversationID = a.ID
	}
	spec.SessionID = cs.AgentID
	spec.Backend, spec.Cloud = "cloud", cs
	return spec, nil
}

// cloudTimeout is the cause of a context that ran out of cloud.request_timeout.
type cloudTimeout struct{ d time.Duration }

func (t cloudTimeout) Error() string {
	return fmt.Sprintf("the Cloud Agents API did not answer within %s (cloud.request_timeout)", t.d)
}

// cloudContext bounds a request's upstream calls by cloud.request_timeout.
func (s *Server) cloudContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if d := s.cfg.CloudRequestTimeout; d > 0 {
		return context.WithTimeoutCause(ctx, d, cloudTimeout{d})
	}
	return context.WithCancel(ctx)
}

// cloudFailure maps an upstream call's error to the gateway's answer: a 504
// cloud_timeout (with note) when ctx ran out. An upstream 401/403 is never
// shown as the gateway's own auth failure.
func cloudFailure(ctx context.Context, err error, note string) error {
	var t cloudTimeout
	if errors.Is(err, context.DeadlineExceeded) && errors.As(context.Cause(ctx), &t) {
		return &HTTPError{Status: http.StatusGatewayTimeout, Code: "cloud_timeout", Message: t.Error() + note, Err: err}
	}
	var ce *cloud.Error
	if !errors.As(err, &ce) {
		return &HTTPError{Status: http.StatusBadGateway, Code: "cloud_unavailable", Message: "the Cloud Agents API could not be reached", Err: err}
	}
	he := &HTTPError{Status: http.StatusBadGateway, Code: ce.Code, Message: ce.Message, Err: err}
	switch {
	case ce.Code == cloud.CodeUnavailable:
		// Which address did not answer is the gateway's business.
		if ce.Status == 0 {
			he.Message = "the Cloud Agents API could not be reached"
		}
	case ce.Status == 0 && ce.Code != "rate_limited":
		he.Status = http.StatusBadRequest
	case ce.Status == 400:
		he.Status = http.StatusBadRequest
	case ce.Status == 404:
		he.Status = http.StatusNotFound
	case ce.Code == "rate_limited":
		he.Status = http.StatusTooManyRequests
		he.RetryAfter = max(int(math.Ceil(ce.RetryAfter.Seconds())), 1)
	case ce.Status == 401:
		he.Code = "cloud_unauthorized"
	case ce.Status == 403:
		he.Code = "cloud_forbidden"
	}
	return he
}

// cloudCall answers a pass-through call about the path's id, if any, with
// its result as JSON.
func cloudCall[T any](s *Server, call func(ctx context.Context, id string) (T, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.cloud == nil {
			return errNoCloud
		}
		ctx, cancel := s.cloudContext(c.Request().Context())
		defer cancel()
		v, err := call(ctx, c.Param("id"))
		if err != nil {
			return cloudFailure(ctx, err, "")
		}
		return writeJSON(c, http.StatusOK, v)
	}
}

func (s *Server) handleCloudList(c echo.Context) error {
	limit := 0
	if q := c.QueryParam("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 {
			return errBadRequest("bad_limit", "limit must be a whole number from 1 to 100")
		}
		limit = n
	}
	return cloudCall(s, func(ctx context.Context, _ string) (*cloud.AgentList, error) {
		l, err := s.cloud.ListAgents(ctx, cloud.ListOptions{Limit: limit, Cursor: c.QueryParam("cursor"), PRURL: c.QueryParam("prUrl")})
		return s.ownCloudAgents(ctx, l), err
	})(c)
}

func (s *Server) cloudStop(ctx context.Context, id string) (map[string]string, error) {
	return map[string]string{"id": id, "status": "stopping"}, s.cloud.Stop(ctx, id)
}

func (s *Server) cloudDelete(ctx context.Context, id string) (map[string]string, error) {
	return map[string]string{"id": id, "status": "deleted"}, s.cloud.Delete(ctx, id)
}

func (s *Server) cloudMe(ctx context.Context, _ string) (*cloud.APIKeyInfo, error) {
	return s.cloud.Me(ctx)
}

func (s *Server) cloudModels(ctx context.Context, _ string) (map[string]any, error) {
	m, err := s.cloud.Models(ctx)
	return map[string]any{"models": m}, err
}

func (s *Server) cloudRepositories(ctx context.Context, _ string) (map[string]any, error) {
	r, err := s.cloud.Repositories(ctx)
	return map[string]any{"repositories": r}, err
}
