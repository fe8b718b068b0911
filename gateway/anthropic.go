package gateway

import (
	"cmp"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"

	"github.com/docstream/docstream/anthropic"
	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/openai"
	"github.com/docstream/docstream/sse"
)

// handleMessages serves POST /v1/messages: Anthropic's Messages API, a run
// prepared as a chat completion's is and answered as a Message.
func (s *Server) handleMessages(c echo.Context) error {
	var req anthropic.Request
	if err := s.decodeBody(c, &req, nil); err != nil {
		return err
	}
	system, turns, err := req.Thread()
	if err != nil {
		var ie *anthropic.InvalidError
		if !errors.As(err, &ie) {
			return err
		}
		return s.reject(errBadRequest("invalid_request", "%s: %s", ie.Param, ie.Message).naming(ie.Param))
	}
	if err := checkMessages(turns); err != nil {
		return err
	}
	ctx := c.Request().Context()
	model := cmp.Or(req.Model, "auto")
	spec, thread, err := s.openAISpec(ctx, openAITurn{model: model, msgs: turns, system: system, param: "messages", thinking: req.ThinkingOn()})
	if err != nil {
		return err
	}
	run, err := s.prepare(ctx, spec)
	if err != nil {
		return err
	}
	cr := &completionRun{run: run, renderer: &openai.Renderer{Mode: openai.RenderMarkdown, Reasoning: openai.ReasoningContent},
		remember: s.rememberReply(ctx, thread, model, openai.RenderMarkdown), id: "msg_" + strings.TrimPrefix(run.ID, "chat_"),
		created: time.Now().Unix(), model: model, codeInMessage: true}
	if req.Stream {
		return s.streamReply(c, run, 0, true, &messageStream{cr: cr})
	}
	return waitMessage(c, cr)
}

// handleCountTokens serves POST /v1/messages/count_tokens, refused: tokens
// are counted by the agent as it runs, never guessed.
func (s *Server) handleCountTokens(c echo.Context) error {
	return errBadRequest("unsupported", "token counting is not supported here: the agent counts the tokens of a run as it runs, and Docstream never guesses them; a message's usage is in its message_delta event, or its usage field")
}

// waitMessage answers a run as one Message once it is done.
func waitMessage(c echo.Context, cr *completionRun) error {
	msg := anthropic.NewMessage(cr.id, cr.model)
	var blocks anthropic.Blocks
	return cr.await(c, func(p openai.Piece) {
		for _, e := range blocks.Add(p) {
			msg.Apply(e)
		}
	}, func(done documents.Done) error {
		stop := anthropic.EndTurn
		msg.StopReason, msg.Usage = &stop, anthropic.UsageOf(done.Usage)
		return writeJSON(c, http.StatusOK, msg)
	})
}

// pingFrame is the heartbeat of a Messages stream.
var pingFrame = written(func(w io.Writer) error { return writeEvent(w, anthropic.NewPing()) })

// messageStream writes a run as Messages events: message_start, the content
// blocks, then message_delta and message_stop, or an error event.
type messageStream struct {
	cr     *completionRun
	st     *streamer
	blocks anthropic.Blocks
}

func (ms *messageStream) start(st *streamer) error {
	ms.st, st.ping = st, pingFrame
	return writeEvent(st, anthropic.Start(anthropic.NewMessage(ms.cr.id, ms.cr.model)))
}

func (ms *messageStream) lost(he *HTTPError) error {
	return writeEvent(ms.st, anthropic.NewError(http.StatusInternalServerError, he.Message))
}

// writeEvent writes one event, named by its type.
func writeEvent(w io.Writer, ev anthropic.Event) error {
	b, err := json.Marshal(ev, jsontext.AllowInvalidUTF8(true))
	if err != nil {
		return err
	}
	return sse.WriteEvent(w, ev.Type, b)
}

// send writes the Messages events one event of the run becomes.
func (ms *messageStream) send(f sse.Frame) (bool, error) {
	ev, err := sse.DecodeFrame(f)
	if err != nil {
		return false, nil
	}
	cr := ms.cr
	cr.remember(ev)
	var evs []anthropic.Event
	for _, p := range cr.renderer.Event(ev) {
		if p.Comment != "" {
			if err := sse.WriteComment(ms.st, p.Comment); err != nil {
				return false, err
			}
			continue
		}
		evs = append(evs, ms.blocks.Add(p)...)
	}
	d, done := ev.(documents.Done)
	if done {
		evs = append(evs, ms.blocks.Close()...)
		if d.Status == documents.StatusCompleted {
			evs = append(evs, anthropic.End(d.Usage)...)
		} else {
			he := cr.failure(d)
			evs = append(evs, anthropic.NewError(he.Status, he.Message))
		}
	}
	for _, e := range evs {
		if err := writeEvent(ms.st, e); err != nil {
			return false, err
		}
	}
	return done, nil
}

// isAnthropicRoute reports whether a path answers errors in Anthropic's shape.
func isAnthropicRoute(path string) bool {
	return path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/")
}

// anthropicError is an error answer in Anthropic's shape, with its status:
// Anthropic's 529 for a gateway that sheds load.
func anthropicError(c echo.Context, he *HTTPError) (int, anthropic.Event) {
	status := he.Status
	if status == http.StatusServiceUnavailable {
		status = anthropic.StatusOverloaded
	}
	body := anthropic.NewError(status, he.Message)
	body.RequestID = c.Response().Header().Get("X-Request-Id")
	return status, body
}
