package gateway

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"

	"github.com/docstream/docstream/runs"
	"github.com/labstack/echo/v4"
)

// HTTPError is the one error shape the gateway answers with before a stream
// starts: {"error":{"code","message"}} with Status as the HTTP status.
type HTTPError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// RetryAfter, in seconds, is sent as the Retry-After header when set.
	RetryAfter int `json:"-"`
	// Param names the request parameter at fault in OpenAI's error object.
	Param string `json:"-"`
	Err   error  `json:"-"`
}

func (e *HTTPError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return e.Code + ": " + e.Message
}

func (e *HTTPError) Unwrap() error { return e.Err }

func errBadRequest(code, format string, args ...any) *HTTPError {
	return &HTTPError{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

// naming sets the request parameter e is about and returns e.
func (e *HTTPError) naming(param string) *HTTPError {
	e.Param = param
	return e
}

// errorBody is the JSON body of an error answer.
type errorBody struct {
	Error *HTTPError `json:"error"`
}

// openAIErrorBody is an error answer in OpenAI's shape.
type openAIErrorBody struct {
	Error openAIError `json:"error"`
}

type openAIError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// handleError writes every error as the gateway's JSON error shape (or
// OpenAI's on the OpenAI routes), and nothing once a response is committed.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if fe, ok := errors.AsType[*forwardError](err); ok {
		s.forward(c, fe.to)
		return
	}
	he := asHTTPError(err)
	if he.Status >= 500 && he.Code != "overloaded" {
		// An overload sheds load on purpose; its request line says so.
		s.log.Error().Err(err).Str("path", c.Path()).Msg("request failed")
	}
	if he.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", fmt.Sprint(he.RetryAfter))
	}
	if b, ok := c.Request().Body.(*trackedBody); ok && !b.done {
		// Answer now rather than after reading a body nobody wants.
		c.Response().Header().Set("Connection", "close")
	}
	var body any = errorBody{Error: he}
	if isOpenAIRoute(c.Request().URL.Path) {
		typ := "invalid_request_error"
		switch {
		case he.Status == 401:
			typ = "authentication_error"
		case he.Status == 429:
			typ = "rate_limit_error"
		case he.Status >= 500:
			typ = "server_error"
		}
		var param *string
		if he.Param != "" {
			param = &he.Param
		}
		body = openAIErrorBody{Error: openAIError{Message: he.Message, Type: typ, Param: param, Code: he.Code}}
	}
	status := he.Status
	if isAnthropicRoute(c.Request().URL.Path) {
		status, body = anthropicError(c, he)
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	_ = c.JSON(status, body)
}

// asHTTPError maps any error to an HTTPError.
func asHTTPError(err error) *HTTPError {
	var he *HTTPError
	if errors.As(err, &he) {
		return he
	}
	var busy *runs.BusyError
	var unknown *runs.UnknownBackendError
	switch {
	case errors.Is(err, runs.ErrOverloaded):
		return &HTTPError{Status: http.StatusServiceUnavailable, Code: "overloaded", Message: err.Error(), RetryAfter: 5}
	case errors.Is(err, runs.ErrShuttingDown):
		return &HTTPError{Status: http.StatusServiceUnavailable, Code: "shutting_down", Message: err.Error(), RetryAfter: 5}
	case errors.As(err, &busy):
		return &HTTPError{Status: http.StatusConflict, Code: "conversation_busy", Message: err.Error()}
	case errors.As(err, &unknown):
		return errBadRequest("unknown_backend", "%s", err.Error())
	}
	var ee *echo.HTTPError
	if errors.As(err, &ee) {
		code := cmp.Or(map[int]string{404: "not_found", 405: "method_not_allowed", 413: "too_large", 401: "unauthorized", 429: "rate_limited"}[ee.Code], "error")
		msg := fmt.Sprint(ee.Message)
		if ee.Code == http.StatusNotFound {
			msg = "no such route"
		}
		if ee.Code == http.StatusRequestEntityTooLarge {
			msg = "the request body is too large"
		}
		return &HTTPError{Status: ee.Code, Code: code, Message: msg, Err: ee.Internal}
	}
	return &HTTPError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error", Err: err}
}
