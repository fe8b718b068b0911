package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/labstack/echo/v4"

	"github.com/docstream/docstream/cluster"
	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/openai"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/sse"
)

// Replicas on one PostgreSQL store (see package cluster). A request about
// a live run that another replica runs (a re-attach, a cancel) and a turn
// of a conversation whose agent session lives on another live replica are
// forwarded there, and the answer relayed as it comes. A turn of a
// conversation whose replica is gone runs here, in a new agent session
// that is given the conversation so far.

// forwardError asks the error handler to forward the request to the
// replica that owns what it is about.
type forwardError struct{ to cluster.Replica }

func (e *forwardError) Error() string { return "served by replica " + e.to.ID }

// hopCtxKey marks a request forwarded by another replica: it is served
// here, never forwarded again.
type hopCtxKey struct{}

// bodyKey keeps a request's body in its echo context, for a forward.
const bodyKey = "docstream.body"

// forwarded reports whether the request came from another replica.
func forwarded(ctx context.Context) bool { return ctx.Value(hopCtxKey{}) != nil }

// admitHop marks a request that carries the cluster's secret as forwarded,
// and reports whether it is.
func (s *Server) admitHop(c echo.Context) bool {
	r := c.Request()
	if s.cluster == nil || !s.cluster.Authentic(r) {
		return false
	}
	c.SetRequest(r.WithContext(context.WithValue(r.Context(), hopCtxKey{}, true)))
	return true
}

// runElsewhere returns a forwardError for a run that another live replica
// runs, or nil.
func (s *Server) runElsewhere(ctx context.Context, id string) error {
	if s.cluster == nil || forwarded(ctx) || !idPattern.MatchString(id) {
		return nil
	}
	to, ok, err := s.cluster.RunOwner(ctx, id)
	if err != nil {
		return fmt.Errorf("finding the replica of run %s: %w", id, err)
	}
	if !ok {
		return nil
	}
	return &forwardError{to: to}
}

// routeTurn decides where a follow-up turn runs: on the replica that holds
// its conversation's agent session (a forwardError when that is another
// live one), or here, resuming this replica's session, or, when the
// session's replica is gone, in a new session given the history.
func (s *Server) routeTurn(ctx context.Context, spec *runs.Spec) error {
	conv := spec.ConversationID
	if s.cluster == nil || conv == "" || spec.Backend != "cli" {
		return nil
	}
	sess, ok, err := s.cluster.Session(ctx, conv)
	switch {
	case err != nil:
		return err
	case !ok:
		return nil // a conversation from before the cluster: resumed as it was
	case sess.Here || sess.Alive && forwarded(ctx):
		spec.SessionID = sess.SessionID
		return nil
	case sess.Alive:
		return &forwardError{to: sess.Replica}
	}
	prompt, err := s.foldHistory(ctx, conv, spec.Prompt)
	if err != nil {
		return err
	}
	s.log.Info().Str("conversation_id", conv).Str("from", sess.ID).Msg("the conversation's replica is gone: its history goes to a new agent session here")
	spec.Prompt, spec.SessionID = prompt, ""
	return nil
}

// foldHistory returns the prompt with the conversation's earlier turns
// before it, as an OpenAI history is folded for an agent that cannot
// resume it.
func (s *Server) foldHistory(ctx context.Context, conv, prompt string) (string, error) {
	_, turns, err := s.store.Conversation(ctx, conv)
	if err != nil {
		return "", fmt.Errorf("reading conversation %s: %w", conv, err)
	}
	var msgs []openai.Message
	say := func(role, text string) {
		if b, err := json.Marshal(text); err == nil && strings.TrimSpace(text) != "" {
			msgs = append(msgs, openai.Message{Role: role, Content: b})
		}
	}
	for _, t := range turns {
		var resp documents.ChatResponse
		if json.Unmarshal(t.Response, &resp) != nil {
			continue
		}
		var reply []string
		for _, d := range resp.Documents {
			content := ""
			if d.Content != nil {
				content = *d.Content
			}
			switch d.Type {
			case documents.TypeText:
				reply = append(reply, content)
			case documents.TypeError:
			default:
				reply = append(reply, openai.Markdown(d.Type, content, d.Metadata))
			}
		}
		say("user", t.Prompt)
		say("assistant", strings.Join(reply, "\n\n"))
	}
	say("user", prompt)
	return openai.FlattenHistory(msgs, promptLimit(s.cfg.Server.MaxPromptBytes)), nil
}

// hopHeaders are not passed on by a forward.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length", "Accept-Encoding"}

// forward sends the request to the replica and relays its answer as it
// comes; a document stream the replica stops answering mid-way ends with
// an error document and done.
func (s *Server) forward(c echo.Context, to cluster.Replica) {
	r := c.Request()
	body, _ := c.Get(bodyKey).([]byte)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go s.watchReplica(ctx, cancel, to.ID)
	req, err := http.NewRequestWithContext(ctx, r.Method, strings.TrimSuffix(to.URL, "/")+r.URL.RequestURI(), bytes.NewReader(body))
	if err == nil {
		req.Header = r.Header.Clone()
		for _, h := range hopHeaders {
			req.Header.Del(h)
		}
		s.cluster.Sign(req.Header)
		var resp *http.Response
		if resp, err = s.peers.Do(req); err == nil {
			defer resp.Body.Close()
			s.relay(c, resp, cancel)
			return
		}
	}
	if r.Context().Err() != nil {
		return
	}
	s.log.Warn().Err(err).Str("replica", to.ID).Msg("forwarding to a replica")
	c.Error(&HTTPError{Status: http.StatusBadGateway, Code: "replica_unreachable", RetryAfter: int(s.cluster.OwnerTimeout().Seconds()),
		Message: fmt.Sprintf("replica %s, which runs this, does not answer; once it has been silent for cluster.owner_timeout (%s) another replica takes over", to.ID, s.cluster.OwnerTimeout())})
}

// watchReplica cancels a forward once its replica stops beating.
func (s *Server) watchReplica(ctx context.Context, cancel context.CancelFunc, id string) {
	t := time.NewTicker(max(s.cluster.OwnerTimeout()/4, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if alive, err := s.cluster.Alive(ctx, id); err == nil && !alive {
			cancel()
			return
		}
	}
}

// relay writes the replica's answer: its status, headers and body, each
// event of a stream flushed as it comes.
func (s *Server) relay(c echo.Context, resp *http.Response, cancel context.CancelFunc) {
	h := c.Response().Header()
	for k, v := range resp.Header {
		if !slices.ContainsFunc(hopHeaders, func(h string) bool { return strings.EqualFold(h, k) }) {
			h[k] = v
		}
	}
	c.Response().WriteHeader(resp.StatusCode)
	st := &streamer{s: s, w: c.Response(), rc: http.NewResponseController(c.Response().Writer)}
	st.deadline()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		_, _ = io.Copy(st, resp.Body)
		return
	}
	// A stream is silent at most a heartbeat; a replica silent for longer
	// than two, and the cluster's timeout, has stopped answering.
	idle := 2*s.heartbeat() + s.cluster.OwnerTimeout()
	timer := time.AfterFunc(idle, cancel)
	defer timer.Stop()
	var tail streamTail
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		timer.Reset(idle)
		if len(line) > 0 {
			if _, werr := st.Write(line); werr != nil {
				return
			}
			if tail.read(line) && (st.rc.Flush() != nil || tail.done) {
				return
			}
		}
		if err != nil {
			break
		}
	}
	if c.Request().Context().Err() != nil || !isDocumentStream(c.Path()) {
		return
	}
	id := resp.Header.Get("X-Docstream-Response-Id")
	if id == "" {
		id = c.Param("id")
	}
	// A re-attach has not seen the documents before its Last-Event-ID:
	// the stored response counts them.
	if t, err := s.store.Turn(c.Request().Context(), id); err == nil {
		var resp documents.ChatResponse
		if json.Unmarshal(t.Response, &resp) == nil {
			tail.seq = max(tail.seq, len(resp.Documents))
		}
	}
	tail.end(st, id)
}

// isDocumentStream reports whether a route streams document events.
func isDocumentStream(route string) bool {
	return route == "/v1/chat" || route == "/v1/chat/:id/stream"
}

// streamTail follows a relayed document stream, to end it as the owner
// would have when the owner stops answering.
type streamTail struct {
	last, seq int
	event     string
	conv      *string
	open      []string // documents started and not ended
	done      bool
}

// read takes one line of the stream and reports whether it ended an
// event.
func (t *streamTail) read(line []byte) bool {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) == 0 {
		t.event = ""
		return true
	}
	k, v, _ := bytes.Cut(line, []byte(":"))
	v = bytes.TrimPrefix(v, []byte(" "))
	switch string(k) {
	case "id":
		t.last, _ = strconv.Atoi(string(v))
	case "event":
		t.event = string(v)
		t.done = t.done || t.event == documents.EventDone
	case "data":
		switch t.event {
		case "response_start":
			var e documents.ResponseStart
			if json.Unmarshal(v, &e) == nil {
				t.conv = e.ConversationID
			}
		case "document_start":
			var e documents.DocumentStart
			if json.Unmarshal(v, &e) == nil {
				t.seq = max(t.seq, e.Sequence)
				t.open = append(t.open, e.ID)
			}
		case "document_end":
			var e documents.DocumentEnd
			if json.Unmarshal(v, &e) == nil {
				t.open = slices.DeleteFunc(t.open, func(id string) bool { return id == e.DocumentID })
			}
		}
	}
	return false
}

// end closes the open documents and writes an error document and done.
func (t *streamTail) end(st *streamer, responseID string) {
	msg := "the replica that runs this response stopped answering"
	meta, _ := json.Marshal(documents.ErrorMeta{ErrorCode: documents.CodeInterrupted, Source: "gateway",
		Details: "the stream was relayed from another replica, which stopped answering; GET /v1/chat/" + responseID + " has what was stored"})
	var evs []documents.Event
	for _, id := range t.open {
		evs = append(evs, documents.DocumentEnd{DocumentID: id})
	}
	id := documents.DocID(t.seq + 1)
	evs = append(evs, documents.DocumentStart{ID: id, Type: documents.TypeError, Sequence: t.seq + 1},
		documents.ContentDelta{DocumentID: id, Delta: msg},
		documents.DocumentEnd{DocumentID: id, FinalContent: &msg, Metadata: meta},
		documents.Done{ID: responseID, ConversationID: t.conv, Status: documents.StatusError,
			Metadata: documents.ResponseMetadata{StopReason: documents.StopInterrupted}})
	for _, ev := range evs {
		t.last++
		f, err := sse.NewFrame(t.last, ev)
		if err != nil {
			return
		}
		if _, err := f.WriteTo(st); err != nil {
			return
		}
	}
	_ = st.rc.Flush()
}
