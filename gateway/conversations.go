package gateway

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/store"
)

// Listing conversations: GET /v1/conversations pages through them, the
// most recently active first.
const (
	listDefaultLimit = 20
	listMaxLimit     = 100
)

// conversationList is the body of GET /v1/conversations. NextCursor, set
// when HasMore is, is the ?cursor= of the next page.
type conversationList struct {
	Conversations []store.Conversation `json:"conversations"`
	HasMore       bool                 `json:"hasMore"`
	NextCursor    *string              `json:"nextCursor"`
}

// encodeCursor makes the cursor of the page that follows conversation c:
// its last activity and id, opaque to clients.
func encodeCursor(c store.Conversation) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.Updated.UTC().Format(time.RFC3339Nano) + "\n" + c.ID))
}

// decodeCursor reads a cursor encodeCursor made.
func decodeCursor(s string) (*store.Cursor, error) {
	bad := errBadRequest("bad_cursor", "cursor is not one a page of GET /v1/conversations gave (its nextCursor)").naming("cursor")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	at, id, ok := strings.Cut(string(b), "\n")
	if !ok || !idPattern.MatchString(id) {
		return nil, bad
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return nil, bad
	}
	return &store.Cursor{Updated: t, ID: id}, nil
}

// handleConversations serves GET /v1/conversations: a page of conversations
// without their turns, the most recently active first.
func (s *Server) handleConversations(c echo.Context) error {
	q := store.ListQuery{Limit: listDefaultLimit}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > listMaxLimit {
			return errBadRequest("bad_limit", "limit must be a whole number from 1 to %d", listMaxLimit).naming("limit")
		}
		q.Limit = n
	}
	if v := c.QueryParam("cursor"); v != "" {
		after, err := decodeCursor(v)
		if err != nil {
			return err
		}
		q.After = after
	}
	if v := c.QueryParam("workspace"); v != "" {
		if !namePattern.MatchString(v) {
			return errBadRequest("bad_workspace", "workspace must be a workspace name, not a path").naming("workspace")
		}
		q.Workspace = v
	}
	ans := conversationList{Conversations: []store.Conversation{}}
	ctx := c.Request().Context()
	if s.isolating() {
		q.Owner = ownerOf(ctx)
	}
	if s.store == nil || s.isolating() && q.Owner == "" { // no key's: none to see
		return writeJSON(c, http.StatusOK, ans)
	}
	limit := q.Limit
	q.Limit++ // one more tells whether a next page has any
	page, err := s.store.Conversations(ctx, q)
	if err != nil {
		return fmt.Errorf("listing conversations: %w", err)
	}
	if len(page) > limit {
		page = page[:limit]
		next := encodeCursor(page[limit-1])
		ans.HasMore, ans.NextCursor = true, &next
	}
	ans.Conversations = append(ans.Conversations, page...)
	return writeJSON(c, http.StatusOK, ans)
}

// errNoConversation answers a conversation not known here (or another key's).
func errNoConversation() *HTTPError {
	return &HTTPError{Status: http.StatusNotFound, Code: "not_found", Message: "no conversation with this id"}
}

// handleDeleteConversation serves DELETE /v1/conversations/{id}: the
// conversation, its turns and fingerprints go; a running turn is a 409.
func (s *Server) handleDeleteConversation(c echo.Context) error {
	id, ctx := c.Param("id"), c.Request().Context()
	if s.store == nil || !idPattern.MatchString(id) {
		return errNoConversation()
	}
	conv, err := s.store.ConversationInfo(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && !s.sees(ctx, conv.Owner) {
		return errNoConversation()
	}
	if err != nil {
		return err
	}
	err = s.reg.DeleteConversation(id, func() error {
		if err := s.runningElsewhere(ctx, id); err != nil {
			return err
		}
		return s.store.DeleteConversation(ctx, id)
	})
	var busy *runs.BusyError
	switch {
	case errors.As(err, &busy):
		which := ""
		if busy.ID != "" {
			which = " (" + busy.ID + ")"
		}
		return &HTTPError{Status: http.StatusConflict, Code: "conversation_busy",
			Message: "a turn of this conversation is running" + which + ": cancel it or wait for its done, then delete the conversation"}
	case errors.Is(err, store.ErrNotFound):
		return errNoConversation()
	case err != nil:
		return fmt.Errorf("deleting conversation %s: %w", id, err)
	}
	s.log.Info().Str("conversation_id", id).Msg("conversation deleted")
	return c.NoContent(http.StatusNoContent)
}
