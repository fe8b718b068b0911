package gateway

import (
	"bufio"
	"bytes"
	"cmp"
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

// Replicas (see package cluster): a request about another live replica's
// run or agent session is forwarded there and its answer relayed.

// forwardError has the error handler forward the request to another replica.
type forwardError struct{ to cluster.Replica }

func (e *forwardError) Error() string { return "served by replica " + e.to.ID }

// hopCtxKey marks a request forwarded by another replica.
type hopCtxKey struct{}

// bodyKey keeps a request's body in its echo context, for a forward.
const bodyKey = "docstream.body"

// forwarded reports whether the request came from another replica.
func forwarded(ctx context.Context) bool { return ctx.Value(hopCtxKey{}) != nil }

// runElsewhere returns a forwardError for another live replica's run, or nil.
func (s *Server) runElsewhere(ctx context.Context, id string) error {
	if s.cluster == nil || forwarded(ctx) || !idPattern.MatchString(id) {
		return nil
	}
	to, ok, err := s.cluster.RunOwner(ctx, id)
	if err != nil {
		return errStoreAway(err)
	}
	if !ok {
		return nil
	}
	return &forwardError{to: to}
}

// liveRun returns the visible run of id, else a forwardError for another
// live replica's, else a 404.
func (s *Server) liveRun(ctx context.Context, id string) (*runs.Run, error) {
	if run := s.visibleRun(ctx, id); run != nil {
		return run, nil
	}
	if err := s.runElsewhere(ctx, id); err != nil {
		return nil, err
	}
	return nil, &HTTPError{Status: http.StatusNotFound, Code: "not_found", Message: "no running response with this id"}
}

// runningElsewhere refuses, as busy, what cannot be done while another
// replica runs a turn of the conversation.
func (s *Server) runningElsewhere(ctx context.Context, conv string) error {
	if s.cluster == nil {
		return nil
	}
	r, running, err := s.cluster.RunningTurn(ctx, conv)
	switch {
	case err != nil:
		return errStoreAway(err)
	case running && r.ID != s.cluster.ID:
		return &runs.BusyError{}
	}
	return nil
}

// routeTurn decides where a follow-up turn runs: on the live replica that
// holds its agent session (a forwardError when not this one), or here, in a
// new session given the history when that replica is gone.
func (s *Server) routeTurn(ctx context.Context, spec *runs.Spec) error {
	conv := spec.ConversationID
	if s.cluster == nil || conv == "" || spec.Backend != "cli" {
		return nil
	}
	sess, ok, err := s.cluster.Session(ctx, conv)
	switch {
	case err != nil:
		return errStoreAway(err)
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

// errStoreAway answers what needs the shared store while it is away.
func errStoreAway(err error) *HTTPError {
	return &HTTPError{Status: http.StatusServiceUnavailable, Code: "store_unavailable", RetryAfter: 5, Err: err,
		Message: "the shared store does not answer, so the replica that runs this cannot be found; try again shortly"}
}

// foldHistory returns the prompt after the conversation's earlier turns,
// folded as an OpenAI history is.
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
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Content-Length", "Accept-Encoding", "Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Extensions", "Sec-Websocket-Protocol"}

// copyHeaders copies the headers of src that are passed on to dst.
func copyHeaders(dst, src http.Header) {
	for k, v := range src {
		if !slices.ContainsFunc(hopHeaders, func(h string) bool { return strings.EqualFold(h, k) }) {
			dst[k] = v
		}
	}
}

// toPeer sends a request to another replica with the client's headers and
// the cluster's secret, until the replica stops beating or ctx ends; stop
// must be called once the answer is read.
func (s *Server) toPeer(ctx context.Context, to cluster.Replica, method, uri string, header http.Header, body []byte) (resp *http.Response, stop context.CancelFunc, err error) {
	ctx, stop = context.WithCancel(ctx)
	go s.watchReplica(ctx, stop, to.ID)
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(to.URL, "/")+uri, bytes.NewReader(body))
	if err == nil {
		copyHeaders(req.Header, header)
		s.cluster.Sign(req.Header)
		resp, err = s.peers.Do(req)
	}
	if err != nil {
		stop()
		if ctx.Err() == nil {
			s.log.Warn().Err(err).Str("replica", to.ID).Msg("forwarding to a replica")
		}
		return nil, nil, &HTTPError{Status: http.StatusBadGateway, Code: "replica_unreachable", RetryAfter: int(s.cluster.OwnerTimeout().Seconds()),
			Message: fmt.Sprintf("replica %s, which runs this, does not answer; once it has been silent for cluster.owner_timeout (%s) another replica takes over", to.ID, s.cluster.OwnerTimeout())}
	}
	return resp, stop, nil
}

// forward relays the request to the replica, and its answer as it comes; a
// document stream the replica drops ends with an error document and done.
func (s *Server) forward(c echo.Context, to cluster.Replica) {
	r := c.Request()
	body, read := c.Get(bodyKey).([]byte)
	if !read && r.ContentLength != 0 {
		var err error
		if body, err = readBody(c, s.cfg.Server.MaxBodyBytes); err != nil {
			c.Error(err)
			return
		}
	}
	resp, stop, err := s.toPeer(r.Context(), to, r.Method, r.URL.RequestURI(), r.Header, body)
	if err != nil {
		if r.Context().Err() == nil {
			c.Error(err)
		}
		return
	}
	defer stop()
	defer resp.Body.Close()
	copyHeaders(c.Response().Header(), resp.Header)
	c.Response().WriteHeader(resp.StatusCode)
	st := &streamer{s: s, w: c.Response(), rc: http.NewResponseController(c.Response().Writer)}
	st.deadline()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		_, _ = io.Copy(st, resp.Body)
		return
	}
	var tail streamTail
	complete := s.readPeerStream(resp.Body, stop, func(line []byte, _ *sse.Frame) bool {
		_, err := st.Write(line)
		return err == nil && (len(bytes.TrimSpace(line)) > 0 || st.rc.Flush() == nil)
	}, &tail)
	if complete || r.Context().Err() != nil || c.Path() != "/v1/chat" && c.Path() != "/v1/chat/:id/stream" {
		return
	}
	for _, f := range s.tailFrames(r.Context(), &tail, cmp.Or(resp.Header.Get("X-Docstream-Response-Id"), c.Param("id"))) {
		if _, err := f.WriteTo(st); err != nil {
			return
		}
	}
	_ = st.rc.Flush()
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

// readPeerStream gives take each line of a replica's SSE stream, and the
// event a line ends, until take returns false, the stream ends or falls
// silent (then stop ends it); it reports whether done was read.
func (s *Server) readPeerStream(body io.Reader, stop context.CancelFunc, take func(line []byte, ev *sse.Frame) bool, tail *streamTail) bool {
	idle := 2*s.heartbeat() + s.cluster.OwnerTimeout()
	timer := time.AfterFunc(idle, stop)
	defer timer.Stop()
	br := bufio.NewReaderSize(body, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		timer.Reset(idle)
		if len(line) > 0 {
			ev := tail.read(line)
			if !take(line, ev) || ev != nil && ev.Name == documents.EventDone {
				return ev != nil && ev.Name == documents.EventDone
			}
		}
		if err != nil {
			return false
		}
	}
}

// streamTail follows a relayed document stream, to end it when its
// replica stops answering.
type streamTail struct {
	ev   sse.Frame // the event being read
	seq  int
	conv *string
	open []string // documents started and not ended
}

// read takes one line of the stream and returns the event it ends, if any.
func (t *streamTail) read(line []byte) *sse.Frame {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) > 0 {
		k, v, _ := bytes.Cut(line, []byte(":"))
		v = bytes.TrimPrefix(v, []byte(" "))
		switch string(k) {
		case "id":
			t.ev.ID, _ = strconv.Atoi(string(v))
		case "event":
			t.ev.Name = string(v)
		case "data":
			t.ev.Data = append(t.ev.Data, v...)
		}
		return nil
	}
	if t.ev.Name == "" {
		return nil // a comment's end
	}
	ev := t.ev
	t.ev = sse.Frame{ID: ev.ID}
	if ev.Name != documents.EventResponseStart && ev.Name != documents.EventDocumentStart && ev.Name != documents.EventDocumentEnd {
		return &ev
	}
	switch e, _ := sse.DecodeFrame(ev); e := e.(type) {
	case documents.ResponseStart:
		t.conv = e.ConversationID
	case documents.DocumentStart:
		t.seq = max(t.seq, e.Sequence)
		t.open = append(t.open, e.ID)
	case documents.DocumentEnd:
		t.open = slices.DeleteFunc(t.open, func(id string) bool { return id == e.DocumentID })
	}
	return &ev
}

// tailFrames are the frames that end a relayed stream whose replica
// stopped answering: its open documents closed, an error document, done.
func (s *Server) tailFrames(ctx context.Context, t *streamTail, responseID string) []sse.Frame {
	// The stored response counts the documents a re-attach has not seen.
	if tu, err := s.store.Turn(ctx, responseID); err == nil {
		var resp documents.ChatResponse
		if json.Unmarshal(tu.Response, &resp) == nil {
			t.seq = max(t.seq, len(resp.Documents))
		}
	}
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
	var out []sse.Frame
	last := t.ev.ID
	for _, ev := range evs {
		last++
		if f, err := sse.NewFrame(last, ev); err == nil {
			out = append(out, f)
		}
	}
	return out
}

// peerTurn is a WebSocket turn relayed from another replica.
type peerTurn struct {
	s      *Server
	to     cluster.Replica
	id     string
	header http.Header
	resp   *http.Response     // the replica's stream
	stop   context.CancelFunc // ends the relay
}

// Cancel asks the replica to cancel the turn.
func (p *peerTurn) Cancel(kill bool) {
	body, _ := json.Marshal(map[string]string{"signal": map[bool]string{true: "KILL", false: "TERM"}[kill]})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), p.s.cluster.OwnerTimeout())
		defer cancel()
		if resp, stop, err := p.s.toPeer(ctx, p.to, http.MethodPost, "/v1/chat/"+p.id+"/cancel", p.header, body); err == nil {
			resp.Body.Close()
			stop()
		}
	}()
}

// startPeerTurn starts a WebSocket chat turn on its conversation's replica.
func (s *Server) startPeerTurn(ctx context.Context, to cluster.Replica, header http.Header, body []byte) (*peerTurn, error) {
	h := header.Clone()
	h.Set("Content-Type", "application/json")
	resp, stop, err := s.toPeer(ctx, to, http.MethodPost, "/v1/chat?stream=true", h, body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer stop()
		defer resp.Body.Close()
		he := &HTTPError{Status: resp.StatusCode, Code: "replica_error", Message: "the replica of this conversation refused the turn"}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		_ = json.Unmarshal(b, &errorBody{Error: he})
		return nil, he
	}
	return &peerTurn{s: s, to: to, id: resp.Header.Get("X-Docstream-Response-Id"), header: h, resp: resp, stop: stop}, nil
}

// relayWS sends a relayed turn's events to the socket, ending with an error
// document and done when its replica stops answering; release precedes done.
func (s *Server) relayWS(ctx context.Context, p *peerTurn, send func(wsMessage) error, release func()) {
	defer p.stop()
	defer p.resp.Body.Close()
	var tail streamTail
	sent := true
	relay := func(f sse.Frame) bool {
		if f.Name == documents.EventDone {
			release()
		}
		sent = send(wsMessage{Type: f.Name, ID: f.ID, Data: f.Data}) == nil
		return sent
	}
	complete := s.readPeerStream(p.resp.Body, p.stop, func(_ []byte, ev *sse.Frame) bool { return ev == nil || relay(*ev) }, &tail)
	if complete || !sent || ctx.Err() != nil {
		return
	}
	for _, f := range s.tailFrames(ctx, &tail, p.id) {
		if !relay(f) {
			return
		}
	}
}
