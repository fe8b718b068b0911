package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/docstream/docstream/cloud"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/store"
)

// Keys as tenants (auth.isolate_keys): runs, turns and conversations record
// their key's id; while keys are isolated, another key's are answered as unknown.

// ownerCtxKey keys the id of the request's API key in its context.
type ownerCtxKey struct{}

// ownerOf returns the id of the API key a request's context was admitted
// with, or "" while auth is off.
func ownerOf(ctx context.Context) string {
	kid, _ := ctx.Value(ownerCtxKey{}).(string)
	return kid
}

// isolating reports whether each key sees only what it made.
func (s *Server) isolating() bool { return s.cfg.Auth.IsolateKeys && s.auth.enabled() }

// sees reports whether the request's key may see or act on an object the
// key with id owner made.
func (s *Server) sees(ctx context.Context, owner string) bool {
	if !s.isolating() {
		return true
	}
	kid := ownerOf(ctx)
	return kid != "" && owner == kid
}

// visibleRun returns the run of the id when there is one and the
// request's key may see it.
func (s *Server) visibleRun(ctx context.Context, id string) *runs.Run {
	run := s.reg.Get(id)
	if run == nil || !s.sees(ctx, run.Spec.Owner) {
		return nil
	}
	return run
}

// errUnknownConversation answers a follow-up of a conversation not known
// here (or another key's).
func errUnknownConversation(id string) *HTTPError {
	return &HTTPError{Status: http.StatusNotFound, Code: "unknown_conversation",
		Message: fmt.Sprintf("conversation %q is not known here; start a new one without conversationId", id)}
}

// checkOwnConversation answers unknown, while keys are isolated, for a
// conversation the request's key did not make (or whose owner is unknown).
func (s *Server) checkOwnConversation(ctx context.Context, id string, unknown *HTTPError) error {
	if !s.isolating() || id == "" {
		return nil
	}
	if s.store == nil {
		return unknown
	}
	conv, err := s.store.ConversationInfo(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return unknown
	case err != nil:
		return fmt.Errorf("reading conversation %s: %w", id, err)
	case !s.sees(ctx, conv.Owner):
		return unknown
	}
	return nil
}

// historyKey is the key a history's fingerprint is stored under: the
// fingerprint, or, while keys are isolated, one of the request's key's own.
func (s *Server) historyKey(ctx context.Context, fp string) string {
	if !s.isolating() {
		return fp
	}
	h := sha256.Sum256([]byte("docstream-owner\x00" + ownerOf(ctx) + "\x00" + fp))
	return hex.EncodeToString(h[:])
}

// ownCloudAgent answers, while keys are isolated, a cloud agent the
// request's key did not make here as the Cloud Agents API answers an unknown one.
func (s *Server) ownCloudAgent(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.isolating() && s.cloud != nil {
			id := c.Param("id")
			if !s.ownsCloudAgent(c.Request().Context(), id) {
				return &HTTPError{Status: http.StatusNotFound, Code: cloud.CodeNotFound, Message: "no such agent: " + id}
			}
		}
		return next(c)
	}
}

// ownsCloudAgent reports whether the cloud agent id is a conversation the
// request's key made.
func (s *Server) ownsCloudAgent(ctx context.Context, id string) bool {
	if s.store == nil || !idPattern.MatchString(id) {
		return false
	}
	conv, err := s.store.ConversationInfo(ctx, id)
	return err == nil && conv.Backend == "cloud" && s.sees(ctx, conv.Owner)
}

// ownCloudAgents keeps, while keys are isolated, the listed agents the
// request's key made.
func (s *Server) ownCloudAgents(ctx context.Context, l *cloud.AgentList) *cloud.AgentList {
	if !s.isolating() || l == nil {
		return l
	}
	own := *l
	own.Agents = make([]cloud.Agent, 0, len(l.Agents))
	for _, a := range l.Agents {
		if s.ownsCloudAgent(ctx, a.ID) {
			own.Agents = append(own.Agents, a)
		}
	}
	return &own
}
