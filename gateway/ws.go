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
	client := s.clientOf(c)
	// The origins not allowed were refused as on any route (corsCheck).
	conn, err := websocket.Accept(c.Response(), c.Request(), &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return nil
	}
	defer conn.CloseNow()
	conn.SetReadLimit(s.cfg.Server.MaxBodyBytes)
	ctx, stop := context.WithCancel(c.Request().Context())
	defer stop()
	out := &wsWriter{s: s, conn: conn}
	if hb := s.cfg.Server.Heartbeat; hb > 0 {
		go s.pingWS(ctx, out, hb)
	}
	chats := 0
	var mu sync.Mutex
	var current wsTurn
	var following chan struct{} // closed when the last turn's events are sent
	// At shutdown the socket closes with "going away" once the turn's events are sent.
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-s.stopping:
		}
		var f chan struct{}
		for g := locked(&mu, &following); g != f; g = locked(&mu, &following) {
			f = g
			select {
			case <-f:
			case <-ctx.Done():
				return
			}
		}
		_ = conn.Close(websocket.StatusGoingAway, "the gateway is shutting down")
	}()
	send := func(m wsMessage) error {
		b, err := json.Marshal(m, jsontext.AllowInvalidUTF8(true))
		if err != nil {
			return err
		}
		return out.write(ctx, b)
	}
	sendErr := func(he *HTTPError) error {
		b, _ := json.Marshal(map[string]any{"code": he.Code, "message": he.Message, "status": he.Status})
		return send(wsMessage{Type: "error", Data: b})
	}
	refuse := func(err error) error { return sendErr(asHTTPError(s.reject(err))) }
	for {
		_, msg, err := conn.Read(ctx)
		if err != nil {
			// The socket is gone: the running turn detaches.
			return nil
		}
		var head struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(msg, &head) != nil {
			if refuse(errBadRequest("bad_json", "send a JSON object with a type")) != nil {
				return nil
			}
			continue
		}
		switch head.Type {
		case "cancel":
			if r := locked(&mu, &current); r != nil {
				r.Cancel(false)
			}
		case "respond":
			m, he := s.wsRespond(ctx, msg, locked(&mu, &current), c.Request().Header)
			if he != nil {
				err = sendErr(he)
			} else {
				err = send(m)
			}
			if err != nil {
				return nil
			}
		case "chat":
			if locked(&mu, &current) != nil {
				if sendErr(&HTTPError{Status: http.StatusConflict, Code: "busy", Message: "a turn is still running on this socket"}) != nil {
					return nil
				}
				continue
			}
			if chats++; chats > 1 {
				if he := s.rateLimit(client, "too many requests"); he != nil {
					if sendErr(he) != nil {
						return nil
					}
					continue
				}
			}
			body := removeMember(msg, "type")
			var req ChatRequest
			if err := decodeStrict(body, &req, chatFields); err != nil {
				if refuse(err) != nil {
					return nil
				}
				continue
			}
			spec, err := s.chatSpec(ctx, &req)
			var run *runs.Run
			if err != nil {
				s.reject(err)
			} else {
				run, err = s.prepare(ctx, spec)
			}
			// A conversation that lives on another replica has its turn relayed.
			var peer *peerTurn
			var peerResp *http.Response
			var stopPeer context.CancelFunc
			if fe, ok := errors.AsType[*forwardError](err); ok {
				peer, peerResp, stopPeer, err = s.startPeerTurn(ctx, fe.to, c.Request().Header, body)
			}
			if err != nil {
				if sendErr(asHTTPError(err)) != nil {
					return nil
				}
				continue
			}
			var turn wsTurn = peer
			id := ""
			if peer != nil {
				id = peer.id
			} else {
				run.Launch()
				turn, id = run, run.ID
			}
			mu.Lock()
			current = turn
			mu.Unlock()
			var conv *string
			if spec.ConversationID != "" {
				conv = &spec.ConversationID
			}
			accepted, _ := json.Marshal(map[string]any{"id": id, "conversationId": conv})
			if send(wsMessage{Type: "accepted", Data: accepted}) != nil {
				return nil
			}
			followed := make(chan struct{})
			mu.Lock()
			following = followed
			mu.Unlock()
			go func() {
				defer close(followed)
				// The turn is over once done goes out, before this returns.
				release := func() {
					mu.Lock()
					if current == turn {
						current = nil
					}
					mu.Unlock()
				}
				defer release()
				if peer != nil {
					s.relayWS(ctx, peer, peerResp, stopPeer, send, release)
					return
				}
				detach := run.Attach()
				defer detach()
				wake, stop := run.Log.Watch()
				defer stop()
				last := 0
				for {
					f, closed, ok := run.Log.Next(last)
					if !ok {
						_ = sendErr(errEventsDropped(run))
						return
					}
					if f.ID != 0 {
						last = f.ID
						if f.Name == documents.EventDone {
							release()
						}
						if send(wsMessage{Type: f.Name, ID: f.ID, Data: f.Data}) != nil {
							return
						}
						continue
					}
					if closed {
						return
					}
					select {
					case <-wake:
					case <-ctx.Done():
						return
					}
				}
			}()
		default:
			if refuse(errBadRequest("bad_type", "type must be chat, cancel or respond")) != nil {
				return nil
			}
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

// quiet reports whether no message has been written for the interval.
func (w *wsWriter) quiet(d time.Duration) bool {
	return w.busy.Load() == 0 && time.Since(time.Unix(0, w.last.Load())) >= d
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
		if !w.quiet(every) {
			continue
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
