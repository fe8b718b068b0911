package gateway

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/runs"
)

// wsMessage is what the server sends: an event name, its id and the same
// data as the SSE event.
type wsMessage struct {
	Type string         `json:"type"`
	ID   int            `json:"id,omitzero"`
	Data jsontext.Value `json:"data"`
}

// handleWS serves GET /v1/chat/ws: the document stream over a WebSocket.
// The client sends {"type":"chat", …the /v1/chat body…}, {"type":"cancel"}
// or {"type":"respond", …} (see wsRespond), one turn after another. Each
// chat is answered with {"type":"accepted","data":{"id","conversationId"}},
// then the run's events; chats after the first count in the rate limit.
func (s *Server) handleWS(c echo.Context) error {
	if err := checkUpgrade(c.Request(), c.Response().Header()); err != nil {
		return err
	}
	// The origins not allowed were refused as on any route (corsCheck).
	conn, err := websocket.Accept(c.Response(), c.Request(), &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return nil
	}
	defer conn.CloseNow()
	conn.SetReadLimit(s.cfg.Server.MaxBodyBytes)
	ctx, stop := context.WithCancel(c.Request().Context())
	defer stop()
	ws := &wsSession{s: s, ctx: ctx, out: &wsWriter{s: s, conn: conn}, header: c.Request().Header, client: s.clientOf(c)}
	if hb := s.cfg.Server.Heartbeat; hb > 0 {
		go s.pingWS(ctx, ws.out, hb)
	}
	go ws.closeAtShutdown(conn)
	for {
		// A socket that is gone or cannot be written to ends: its running turn detaches.
		_, msg, err := conn.Read(ctx)
		if err != nil || ws.take(msg) != nil {
			return nil
		}
	}
}

// wsSession is one socket's state: the turn it runs, one at a time.
type wsSession struct {
	s      *Server
	ctx    context.Context // ends with the socket
	out    *wsWriter
	header http.Header // the handshake's, for turns relayed to another replica
	client string      // the socket's identity in the rate limit
	chats  int

	mu        sync.Mutex
	current   wsTurn        // the running turn, until its done is sent
	following chan struct{} // closed when the last turn's events are sent
}

// closeAtShutdown closes the socket with "going away" at shutdown, once the
// turn's events are sent.
func (ws *wsSession) closeAtShutdown(conn *websocket.Conn) {
	select {
	case <-ws.ctx.Done():
		return
	case <-ws.s.stopping:
	}
	var f chan struct{}
	for g := locked(&ws.mu, &ws.following); g != f; g = locked(&ws.mu, &ws.following) {
		f = g
		select {
		case <-f:
		case <-ws.ctx.Done():
			return
		}
	}
	_ = conn.Close(websocket.StatusGoingAway, "the gateway is shutting down")
}

func (ws *wsSession) send(m wsMessage) error {
	b, err := json.Marshal(m, jsontext.AllowInvalidUTF8(true))
	if err != nil {
		return err
	}
	return ws.out.write(ws.ctx, b)
}

func (ws *wsSession) sendErr(he *HTTPError) error {
	b, _ := json.Marshal(map[string]any{"code": he.Code, "message": he.Message, "status": he.Status})
	return ws.send(wsMessage{Type: "error", Data: b})
}

// refuse counts a message refused for bad input, and says why.
func (ws *wsSession) refuse(err error) error { return ws.sendErr(asHTTPError(ws.s.reject(err))) }

// take answers one message of the client; its error is one of sending.
func (ws *wsSession) take(msg []byte) error {
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(msg, &head) != nil {
		return ws.refuse(errBadRequest("bad_json", "send a JSON object with a type"))
	}
	switch head.Type {
	case "cancel":
		if r := locked(&ws.mu, &ws.current); r != nil {
			r.Cancel(false)
		}
		return nil
	case "respond":
		m, he := ws.s.wsRespond(ws.ctx, msg, locked(&ws.mu, &ws.current), ws.header)
		if he != nil {
			return ws.sendErr(he)
		}
		return ws.send(m)
	case "chat":
		return ws.chat(removeMember(msg, "type"))
	}
	return ws.refuse(errBadRequest("bad_type", "type must be chat, cancel or respond"))
}

// chat starts the turn of a /v1/chat body, here or on its conversation's
// replica, and has its events sent as they come.
func (ws *wsSession) chat(body []byte) error {
	s := ws.s
	if locked(&ws.mu, &ws.current) != nil {
		return ws.sendErr(&HTTPError{Status: http.StatusConflict, Code: "busy", Message: "a turn is still running on this socket"})
	}
	if ws.chats++; ws.chats > 1 {
		if he := s.rateLimit(ws.client, "too many requests"); he != nil {
			return ws.sendErr(he)
		}
	}
	var req ChatRequest
	if err := decodeStrict(body, &req, chatFields); err != nil {
		return ws.refuse(err)
	}
	spec, err := s.chatSpec(ws.ctx, &req)
	var run *runs.Run
	if err != nil {
		s.reject(err)
	} else {
		run, err = s.prepare(ws.ctx, spec)
	}
	// A conversation that lives on another replica has its turn relayed.
	var peer *peerTurn
	if fe, ok := errors.AsType[*forwardError](err); ok {
		peer, err = s.startPeerTurn(ws.ctx, fe.to, ws.header, body)
	}
	if err != nil {
		return ws.sendErr(asHTTPError(err))
	}
	var turn wsTurn = peer
	id := ""
	if peer != nil {
		id = peer.id
	} else {
		run.Launch()
		turn, id = run, run.ID
	}
	followed := make(chan struct{})
	ws.mu.Lock()
	ws.current, ws.following = turn, followed
	ws.mu.Unlock()
	var conv *string
	if spec.ConversationID != "" {
		conv = &spec.ConversationID
	}
	accepted, _ := json.Marshal(map[string]any{"id": id, "conversationId": conv})
	if err := ws.send(wsMessage{Type: "accepted", Data: accepted}); err != nil {
		return err
	}
	go ws.follow(turn, followed)
	return nil
}

// follow sends a turn's events, then closes followed; the turn is over
// once its done goes out, before this returns.
func (ws *wsSession) follow(turn wsTurn, followed chan struct{}) {
	defer close(followed)
	release := func() {
		ws.mu.Lock()
		if ws.current == turn {
			ws.current = nil
		}
		ws.mu.Unlock()
	}
	defer release()
	if peer, ok := turn.(*peerTurn); ok {
		ws.s.relayWS(ws.ctx, peer, ws.send, release)
		return
	}
	run := turn.(*runs.Run)
	detach := run.Attach()
	defer detach()
	wake, stop := run.Log.Watch()
	defer stop()
	last := 0
	for {
		f, closed, ok := run.Log.Next(last)
		switch {
		case !ok:
			_ = ws.sendErr(errEventsDropped(run))
			return
		case f.ID != 0:
			last = f.ID
			if f.Name == documents.EventDone {
				release()
			}
			if ws.send(wsMessage{Type: f.Name, ID: f.ID, Data: f.Data}) != nil {
				return
			}
			continue
		case closed:
			return
		}
		select {
		case <-wake:
		case <-ws.ctx.Done():
			return
		}
	}
}

// checkUpgrade answers, in the gateway's error shape and with the headers
// that say what to send, a request that is not a WebSocket handshake the
// server can accept.
func checkUpgrade(r *http.Request, h http.Header) *HTTPError {
	if !headerHasToken(r.Header, "Connection", "upgrade") || !headerHasToken(r.Header, "Upgrade", "websocket") {
		h.Set("Upgrade", "websocket")
		return &HTTPError{Status: http.StatusUpgradeRequired, Code: "upgrade_required",
			Message: "this route speaks WebSocket: send Connection: Upgrade and Upgrade: websocket"}
	}
	if r.Header.Get("Sec-WebSocket-Version") != "13" {
		h.Set("Sec-WebSocket-Version", "13")
		return &HTTPError{Status: http.StatusBadRequest, Code: "bad_websocket_version", Message: "Sec-WebSocket-Version must be 13"}
	}
	if r.Header.Get("Sec-WebSocket-Key") == "" {
		return &HTTPError{Status: http.StatusBadRequest, Code: "bad_websocket_key", Message: "the WebSocket handshake needs Sec-WebSocket-Key"}
	}
	return nil
}

// headerHasToken reports whether a comma-separated header holds token,
// in any case.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// writeContext bounds a WebSocket write by server.write_timeout (plus
// extra); a write_timeout of 0 sets no deadline, as on SSE streams.
func (s *Server) writeContext(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	if wt := s.cfg.Server.WriteTimeout; wt > 0 {
		return context.WithTimeout(ctx, wt+extra)
	}
	return context.WithCancel(ctx)
}

// wsWriter writes the messages of one socket and knows when it last did.
type wsWriter struct {
	s    *Server
	conn *websocket.Conn
	busy atomic.Int32 // writes under way
	last atomic.Int64 // when the last write ended, in Unix nanoseconds
}

// write sends one text message in frames of at most writePiece bytes, each
// under a fresh write timeout; a socket left with half a message is closed.
func (w *wsWriter) write(ctx context.Context, b []byte) error {
	w.busy.Add(1)
	defer func() {
		w.last.Store(time.Now().UnixNano())
		w.busy.Add(-1)
	}()
	wt := w.s.cfg.Server.WriteTimeout
	if len(b) <= writePiece || wt <= 0 {
		wctx, cancel := w.s.writeContext(ctx, time.Second)
		defer cancel()
		return w.conn.Write(wctx, websocket.MessageText, b)
	}
	// The write ends once one piece waited out the timeout.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timer := time.AfterFunc(wt+time.Second, cancel)
	defer timer.Stop()
	err := w.pieces(wctx, timer, wt+time.Second, b)
	if err != nil {
		w.conn.CloseNow()
	}
	return err
}

// pieces writes b as one message, resetting timer to limit before each
// piece.
func (w *wsWriter) pieces(ctx context.Context, timer *time.Timer, limit time.Duration, b []byte) error {
	mw, err := w.conn.Writer(ctx, websocket.MessageText)
	if err != nil {
		return err
	}
	for len(b) > 0 {
		k := min(len(b), writePiece)
		timer.Reset(limit)
		if _, err := mw.Write(b[:k]); err != nil {
			return err
		}
		b = b[k:]
	}
	timer.Reset(limit)
	return mw.Close()
}

// pingWS pings a socket not written to for an interval, until ctx ends; a
// client that does not answer within the write timeout is disconnected.
func (s *Server) pingWS(ctx context.Context, w *wsWriter, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w.busy.Load() > 0 || time.Since(time.Unix(0, w.last.Load())) < every {
			continue // written to within the interval
		}
		pctx, cancel := s.writeContext(ctx, 0)
		err := w.conn.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				w.conn.CloseNow()
			}
			return
		}
	}
}

// wsTurn is a socket's running turn: a run here, or one on another
// replica.
type wsTurn interface{ Cancel(kill bool) }

// locked returns *v, read under mu.
func locked[T any](mu *sync.Mutex, v *T) T {
	mu.Lock()
	defer mu.Unlock()
	return *v
}

// removeMember returns the JSON object without the named top-level member.
func removeMember(obj []byte, name string) []byte {
	var m map[string]jsontext.Value
	if json.Unmarshal(obj, &m) != nil {
		return obj
	}
	delete(m, name)
	b, err := json.Marshal(m, json.Deterministic(true))
	if err != nil {
		return obj
	}
	return bytes.TrimSpace(b)
}
