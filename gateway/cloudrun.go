package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/labstack/echo/v4"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/gateway/cloud"
	"github.com/docstream/docstream/translate"
)

// CloudSpec is the cloud part of a run: the agent it watches.
type CloudSpec struct {
	AgentID    string
	Known      []cloud.Message
	FollowUp   bool
	Repository string
}

// cloudSpec launches a cloud agent (or sends a follow-up to the one named by
// conversationId) before the response starts, so that upstream refusals are
// answered as HTTP errors; the run then watches it.
func (s *Server) cloudSpec(ctx context.Context, spec *RunSpec, req *ChatRequest) (*RunSpec, error) {
	if s.cloud == nil {
		return nil, errNoCloud
	}
	// What the registry would refuse is refused before anything is sent
	// upstream: a refused request must not launch an agent or deliver a
	// follow-up.
	if err := s.reg.Admit(); err != nil {
		return nil, err
	}
	if id, busy := s.reg.RunningTurn(spec.ConversationID); spec.ConversationID != "" && busy {
		return nil, errConversationBusy(id)
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
	cs := &CloudSpec{}
	prompt := cloud.Prompt{Text: spec.Prompt, Images: images}
	if spec.ConversationID != "" {
		conv, err := s.cloud.Conversation(ctx, spec.ConversationID)
		if err != nil {
			return nil, cloudHTTPError(err)
		}
		cs.Known = conv.Messages
		if err := s.cloud.FollowUp(ctx, spec.ConversationID, prompt); err != nil {
			return nil, cloudHTTPError(err)
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
			return nil, cloudHTTPError(err)
		}
		cs.AgentID, cs.Repository = a.ID, firstNonEmpty(src.Repository, src.PRURL)
		spec.ConversationID = a.ID
	}
	spec.SessionID = cs.AgentID
	spec.Backend, spec.Cloud = "cloud", cs
	return spec, nil
}

// cloudHTTPError maps an upstream error to the gateway's answer. An upstream
// 401/403 is never shown as the gateway's own auth failure.
func cloudHTTPError(err error) error {
	var ce *cloud.Error
	if !errors.As(err, &ce) {
		return &HTTPError{Status: http.StatusBadGateway, Code: "cloud_unavailable", Message: "the Cloud Agents API could not be reached", Err: err}
	}
	he := &HTTPError{Status: http.StatusBadGateway, Code: ce.Code, Message: ce.Message, Err: err}
	switch {
	case ce.Code == cloud.CodeUnavailable:
		// The API did not answer, or answered a 5xx or nonsense: which
		// address was tried is the gateway's business, not the client's.
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

// CloudBackend watches a launched cloud agent and streams its messages
// through the segmenter.
type CloudBackend struct {
	client   *cloud.Client
	interval time.Duration
	// runTimeout and idleTimeout are agent.run_timeout and
	// agent.idle_timeout: a run that takes longer, or whose agent says
	// nothing new for longer, is stopped (0: no limit).
	runTimeout, idleTimeout time.Duration
}

// Run watches the agent until it reaches a terminal status, the run's
// time limit, or the agent's silence limit.
func (b *CloudBackend) Run(ctx context.Context, spec *RunSpec, seg *translate.Segmenter) translate.End {
	start := time.Now()
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	if d := b.runTimeout; d > 0 {
		t := time.AfterFunc(d, func() {
			stop(&stopError{reason: documents.StopTimeout, msg: fmt.Sprintf("the run exceeded its time limit of %s", d)})
		})
		defer t.Stop()
	}
	var idle *time.Timer
	if d := b.idleTimeout; d > 0 {
		idle = time.AfterFunc(d, func() {
			stop(&stopError{reason: documents.StopTimeout, msg: fmt.Sprintf("the cloud agent said nothing new for %s", d)})
		})
		defer idle.Stop()
	}
	cs := spec.Cloud
	info := documents.CloudInfo{AgentID: cs.AgentID, Repository: cs.Repository}
	seg.SetConversation(cs.AgentID)
	seg.SetCloud(info)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	updates := b.client.Watch(wctx, cs.AgentID, cloud.WatchOptions{Interval: b.interval, Known: cs.Known, FollowUp: cs.FollowUp})
	msgs := cloudMessages{seg: seg, sent: map[string]string{}}
	for {
		select {
		case <-ctx.Done():
			r, msg, _ := stopCause(ctx)
			stopCtx, c2 := context.WithTimeout(context.Background(), 10*time.Second)
			_ = b.client.Stop(stopCtx, cs.AgentID)
			c2()
			return translate.End{Reason: r, Message: msg, Elapsed: time.Since(start).Milliseconds()}
		case u, ok := <-updates:
			if !ok {
				return translate.End{Reason: documents.StopAgentError, Code: documents.CodeCloudAPIError, Source: "cloud-agents",
					Message: "the cloud agent watch ended early", Elapsed: time.Since(start).Milliseconds()}
			}
			if idle != nil && u.Kind != cloud.UpdateStatus {
				idle.Reset(b.idleTimeout)
			}
			switch u.Kind {
			case cloud.UpdateMessage, cloud.UpdateMessageGrew:
				msgs.take(u.Message)
			case cloud.UpdateStatus:
				info.Status = string(u.Agent.Status)
			case cloud.UpdateDone:
				a := u.Agent
				seg.EndSegment()
				info.Status, info.Summary, info.BranchName, info.PRURL, info.URL = string(a.Status), a.Summary, a.Target.BranchName, a.Target.PRURL, a.Target.URL
				seg.SetCloud(info)
				el := time.Since(start).Milliseconds()
				switch a.Status {
				case cloud.StatusFinished:
					seg.Complete(el)
					return translate.End{}
				case cloud.StatusStopped:
					return translate.End{Reason: documents.StopCancelled, Message: "the cloud agent was stopped", Elapsed: el}
				default:
					return translate.End{Reason: documents.StopAgentError, Code: documents.CodeCloudAPIError, Source: "cloud-agents",
						Message: fmt.Sprintf("the cloud agent ended with status %s", a.Status), Stderr: a.Summary, Elapsed: el}
				}
			case cloud.UpdateError:
				return translate.End{Reason: documents.StopAgentError, Code: documents.CodeCloudAPIError, Source: "cloud-agents",
					Message: "the Cloud Agents API failed: " + u.Err.Error(), Elapsed: time.Since(start).Milliseconds()}
			}
		}
	}
}

// cloudMessages streams a cloud agent's messages as the segmenter's text,
// and counts them as the response's turns. Messages are tracked by id: the
// one last written to grows its segment; an earlier one that grows after
// another was written adds only what is new, in a segment of its own,
// since its documents are already closed.
type cloudMessages struct {
	seg     *translate.Segmenter
	current string            // the message the open segment holds
	base    int               // bytes of current's text sent in earlier segments
	sent    map[string]string // each message's text as streamed so far
}

// take streams what is new in m.
func (c *cloudMessages) take(m *cloud.Message) {
	if m.Type != cloud.AssistantMessage {
		c.seg.EndSegment()
		c.current = ""
		return
	}
	prev, seen := c.sent[m.ID]
	if m.ID != c.current {
		c.seg.EndSegment()
		c.current, c.base = m.ID, 0
		if seen && strings.HasPrefix(m.Text, prev) {
			c.base = len(prev)
		}
	} else if !strings.HasPrefix(m.Text, prev[:c.base]) {
		// Rewritten rather than grown: the segmenter sees a new text.
		c.base = 0
	}
	c.seg.Snapshot(m.Text[c.base:])
	c.sent[m.ID] = m.Text
	c.seg.SetTurnCount(len(c.sent)) // DESIGN §8: a cloud turn's steps are its assistant messages
}

// cloudCall runs a pass-through call and answers its result as JSON.
func (s *Server) cloudCall(c echo.Context, f func(ctx context.Context) (any, error)) error {
	if s.cloud == nil {
		return errNoCloud
	}
	v, err := f(c.Request().Context())
	if err != nil {
		return cloudHTTPError(err)
	}
	if v == nil {
		return c.NoContent(http.StatusNoContent)
	}
	return writeJSON(c, http.StatusOK, v)
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
	return s.cloudCall(c, func(ctx context.Context) (any, error) {
		return s.cloud.ListAgents(ctx, cloud.ListOptions{Limit: limit, Cursor: c.QueryParam("cursor"), PRURL: c.QueryParam("prUrl")})
	})
}

func (s *Server) handleCloudAgent(c echo.Context) error {
	return s.cloudCall(c, func(ctx context.Context) (any, error) { return s.cloud.Agent(ctx, c.Param("id")) })
}

func (s *Server) handleCloudConversation(c echo.Context) error {
	return s.cloudCall(c, func(ctx context.Context) (any, error) { return s.cloud.Conversation(ctx, c.Param("id")) })
}

func (s *Server) handleCloudStop(c echo.Context) error {
	return s.cloudCall(c, func(ctx context.Context) (any, error) {
		return map[string]string{"id": c.Param("id"), "status": "stopping"}, s.cloud.Stop(ctx, c.Param("id"))
	})
}

func (s *Server) handleCloudDelete(c echo.Context) error {
	return s.cloudCall(c, func(ctx context.Context) (any, error) {
		return map[string]string{"id": c.Param("id"), "status": "deleted"}, s.cloud.Delete(ctx, c.Param("id"))
	})
}

func (s *Server) handleCloudMe(c echo.Context) error {
	return s.cloudCall(c, func(ctx context.Context) (any, error) { return s.cloud.Me(ctx) })
}

func (s *Server) handleCloudModels(c echo.Context) error {
	return s.cloudCall(c, func(ctx context.Context) (any, error) {
		m, err := s.cloud.Models(ctx)
		return map[string]any{"models": m}, err
	})
}

func (s *Server) handleCloudRepositories(c echo.Context) error {
	return s.cloudCall(c, func(ctx context.Context) (any, error) {
		r, err := s.cloud.Repositories(ctx)
		return map[string]any{"repositories": r}, err
	})
}
