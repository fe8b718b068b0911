package gateway

import (
	"bytes"
	"context"

	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"

	"github.com/docstream/docstream/documents"
)

// wsMessage is what the server sends: an event name, its id and the same
// data as the SSE event.
type wsMessage struct {
	Type string         `json:"type"`
	ID   int            `json:"id,omitzero"`
	Data jsontext.Value `json:"data"`
}

// handleWS serves GET /v1/chat/ws: the document stream over a WebSocket.
// The client sends {"type":"chat", …the /v1/chat body…} or
// {"type":"cancel"}; several turns may follow one another on one socket.
func (s *Server) handleWS(c echo.Context) error {
	opts := &websocket.AcceptOptions{}
	for _, o := range s.cfg.Server.CORSOrigins {
		if o == "*" {
			opts.InsecureSkipVerify = true
		} else {
			opts.OriginPatterns = append(opts.OriginPatterns, o)
		}
	}
	conn, err := websocket.Accept(c.Response(), c.Request(), opts)
	if err != nil {
		return nil
	}
	defer conn.CloseNow()
	conn.SetReadLimit(s.cfg.Server.MaxBodyBytes)
	ctx := c.Request().Context()
	var mu sync.Mutex
	var current *Run
	send := func(m wsMessage) error {
		b, err := json.Marshal(m, jsontext.AllowInvalidUTF8(true))
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, s.cfg.Server.WriteTimeout+time.Second)
		defer cancel()
		return conn.Write(wctx, websocket.MessageText, b)
	}
	sendErr := func(he *HTTPError) error {
		b, _ := json.Marshal(map[string]any{"code": he.Code, "message": he.Message, "status": he.Status})
		return send(wsMessage{Type: "error", Data: b})
	}
	for {
		_, msg, err := conn.Read(ctx)
		if err != nil {
			// The socket is gone: the running turn, if any, detaches and
			// follows the detach grace.
			return nil
		}
		var head struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(msg, &head) != nil {
			if sendErr(errBadRequest("bad_json", "send a JSON object with a type")) != nil {
				return nil
			}
			continue
		}
		switch head.Type {
		case "cancel":
			if r := currentRun(&mu, &current); r != nil {
				r.Cancel(false)
			}
		case "chat":
			if currentRun(&mu, &current) != nil {
				if sendErr(&HTTPError{Status: http.StatusConflict, Code: "busy", Message: "a turn is still running on this socket"}) != nil {
					return nil
				}
				continue
			}
			body := removeMember(msg, "type")
			var req ChatRequest
			if err := decodeStrict(body, &req, chatFields); err != nil {
				if sendErr(asHTTPError(err)) != nil {
					return nil
				}
				continue
			}
			spec, err := s.chatSpec(ctx, &req)
			var run *Run
			if err == nil {
				run, err = s.prepare(spec)
			}
			if err != nil {
				if sendErr(asHTTPError(err)) != nil {
					return nil
				}
				continue
			}
			run.Launch()
			mu.Lock()
			current = run
			mu.Unlock()
			go func() {
				// The turn is over once done goes out: the client may send
				// the next chat before this goroutine returns.
				release := func() {
					mu.Lock()
					if current == run {
						current = nil
					}
					mu.Unlock()
				}
				defer release()
				detach := run.Attach()
				defer detach()
				last := 0
				for {
					frames, closed, more, ok := run.Log.Since(last)
					if !ok {
						_ = sendErr(errEventsDropped(run))
						return
					}
					for _, f := range frames {
						last = f.ID
						if f.Name == documents.EventDone {
							release()
						}
						if send(wsMessage{Type: f.Name, ID: f.ID, Data: f.Data}) != nil {
							return
						}
					}
					if len(frames) == 0 && closed {
						return
					}
					if len(frames) > 0 {
						continue
					}
					select {
					case <-more:
					case <-ctx.Done():
						return
					}
				}
			}()
		default:
			if sendErr(errBadRequest("bad_type", "type must be chat or cancel")) != nil {
				return nil
			}
		}
	}
}

func currentRun(mu *sync.Mutex, r **Run) *Run {
	mu.Lock()
	defer mu.Unlock()
	return *r
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
