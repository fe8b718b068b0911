package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/docstream/docstream/openai"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"
)

// ChatRequest is the body of POST /v1/chat.
type ChatRequest struct {
	Prompt         *string          `json:"prompt"`
	Messages       []openai.Message `json:"messages"`
	ConversationID string           `json:"conversationId"`
	Mode           string           `json:"mode"`
	Model          string           `json:"model"`
	Workspace      string           `json:"workspace"`
	Stream         *bool            `json:"stream"`
	Thinking       bool             `json:"thinking"`
	IncludeRaw     bool             `json:"include_raw"`
	Answers        []Answer         `json:"answers"`
	Backend        string           `json:"backend"`
	Source         jsontext.Value   `json:"source"`
	Target         jsontext.Value   `json:"target"`
	Images         []jsontext.Value `json:"images"`
	Interactive    bool             `json:"interactive"`
}

// checkMessages checks that every message's content is a string, an array
// of content parts (objects) or null.
func checkMessages(msgs []openai.Message) error {
	for i, m := range msgs {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool", "function":
		default:
			return errBadRequest("bad_role", "messages/%d/role %q is not one of system, developer, user, assistant, tool, function", i, m.Role)
		}
		switch m.Content.Kind() {
		case 0, 'n', '"':
			continue
		case '[':
			var parts []jsontext.Value
			if json.Unmarshal(m.Content, &parts) == nil && !slices.ContainsFunc(parts, func(p jsontext.Value) bool { return p.Kind() != '{' }) {
				continue
			}
		}
		return errBadRequest("bad_field", "field messages/%d/content must be a string, an array of content parts (objects) or null", i).
			naming(fmt.Sprintf("messages/%d/content", i))
	}
	return nil
}

// Answer answers one question of a clarification.
type Answer struct {
	QuestionID string `json:"questionId"`
	OptionID   string `json:"optionId"`
}

var chatFields = map[string]bool{"prompt": true, "messages": true, "conversationId": true, "mode": true, "model": true,
	"workspace": true, "stream": true, "thinking": true, "include_raw": true, "answers": true, "backend": true,
	"source": true, "target": true, "images": true, "interactive": true}

// drainLimit bounds how much of a refused body is read so that the client,
// still sending, gets the 413 instead of a reset connection.
const drainLimit = 256 << 20

// readBody reads the request body within the configured limit. A larger
// body is refused with 413 (see refuseBody).
func readBody(c echo.Context, max int64) ([]byte, error) {
	req := c.Request()
	for _, v := range req.Header.Values("Content-Encoding") {
		for ce := range strings.SplitSeq(v, ",") {
			if ce = strings.TrimSpace(ce); ce != "" && !strings.EqualFold(ce, "identity") {
				return nil, &HTTPError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_encoding",
					Message: fmt.Sprintf("Content-Encoding %q is not accepted: send the body uncompressed", ce)}
			}
		}
	}
	if req.ContentLength > max {
		return nil, refuseBody(c, max)
	}
	var b []byte
	var err error
	if n := req.ContentLength; n >= 0 && n <= presizedBody {
		// The server ends a body at its declared length.
		b = make([]byte, n)
		_, err = io.ReadFull(req.Body, b)
	} else {
		b, err = io.ReadAll(io.LimitReader(req.Body, max+1))
	}
	if err == nil && int64(len(b)) > max {
		// Refused before the deadline is lifted, to drain the rest within it.
		return nil, refuseBody(c, max)
	}
	if tb, ok := req.Body.(*trackedBody); ok {
		// The body is in: no read deadline, but at once for one that failed.
		deadline := time.Time{}
		if err != nil {
			deadline = time.Now()
		}
		tb.done = tb.done || err == nil
		_ = http.NewResponseController(c.Response().Writer).SetReadDeadline(deadline)
	}
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.Response().Header().Set("Connection", "close")
			return nil, &HTTPError{Status: http.StatusRequestTimeout, Code: "body_timeout",
				Message: "the request body did not arrive in time (server.read_body_timeout)"}
		}
		return nil, errBadRequest("bad_body", "reading the request body: %v", err)
	}
	c.Set(bodyKey, b) // for a forward to another replica
	return b, nil
}

// presizedBody is the largest declared body length read into a buffer of
// its size at once; a larger one is read as it arrives.
const presizedBody = 64 << 10

// refuseBody returns the 413 for a body over the limit and closes the
// connection after it, draining at most drainLimit of the body first.
func refuseBody(c echo.Context, max int64) error {
	req := c.Request()
	c.Response().Header().Set("Connection", "close") // nothing more is read after the answer
	rc := http.NewResponseController(c.Response().Writer)
	if !strings.EqualFold(strings.TrimSpace(req.Header.Get("Expect")), "100-continue") {
		if _, set := req.Body.(*trackedBody); !set {
			// guard set none (server.read_body_timeout is 0).
			_ = rc.SetReadDeadline(time.Now().Add(30 * time.Second))
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, drainLimit))
	}
	// Nothing more is read, not even by net/http as it closes the body.
	_ = rc.SetReadDeadline(time.Now())
	return &HTTPError{Status: http.StatusRequestEntityTooLarge, Code: "too_large",
		Message: fmt.Sprintf("the request body is larger than the limit of %d bytes (server.max_body_bytes)", max)}
}

// decodeStrict decodes a JSON object body, naming the first unknown field
// (when known is set) and the first malformed part.
func decodeStrict(body []byte, v any, known map[string]bool) error {
	body = bytes.Trim(body, " \t\r\n") // JSON whitespace only
	if len(body) == 0 {
		return errBadRequest("bad_json", "the request body is empty; send a JSON object")
	}
	if body[0] != '{' {
		return errBadRequest("bad_json", "the request body must be a JSON object")
	}
	if err := json.Unmarshal(body, v, json.RejectUnknownMembers(known != nil)); err != nil {
		// An unknown field is named first, wherever it stands.
		if err := unknownField(body, known); err != nil {
			return err
		}
		var se *json.SemanticError
		if errors.As(err, &se) && errors.Is(se.Err, json.ErrUnknownName) {
			name := strings.TrimPrefix(string(se.JSONPointer), "/")
			return errBadRequest("unknown_field", "unknown field %q in the request body", name).naming(name)
		}
		if errors.As(err, &se) && se.JSONPointer != "" {
			name := strings.TrimPrefix(string(se.JSONPointer), "/")
			return errBadRequest("bad_field", "field %s %s", name, wrongType(se)).naming(name)
		}
		return errBadRequest("bad_json", "the request body is not valid JSON: %v", err)
	}
	return nil
}

// unknownField returns the error for the first member of body that known
// (when set) does not list, or for body not being JSON.
func unknownField(body []byte, known map[string]bool) error {
	if known == nil {
		return nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if _, err := dec.ReadToken(); err != nil {
		return errBadRequest("bad_json", "the request body is not valid JSON: %v", err)
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return errBadRequest("bad_json", "the request body is not valid JSON: %v", err)
		}
		if !known[name.String()] {
			return errBadRequest("unknown_field", "unknown field %q in the request body", name.String()).naming(name.String())
		}
		if err := dec.SkipValue(); err != nil {
			return errBadRequest("bad_json", "the request body is not valid JSON: %v", err)
		}
	}
	return nil
}

// wrongType says what was wrong with a field's value, in JSON's terms.
func wrongType(se *json.SemanticError) string {
	msg := "has the wrong type"
	if want := jsonKindOf(se.GoType); want != "" {
		msg += ": it must be " + want
	}
	if got, ok := jsonKinds[se.JSONKind]; ok {
		msg += ", not " + got
	}
	if se.Err != nil {
		msg += " (" + se.Err.Error() + ")"
	}
	return msg
}

// jsonKinds names the kinds of JSON value.
var jsonKinds = map[jsontext.Kind]string{'n': "null", 'f': "a boolean", 't': "a boolean", '"': "a string", '0': "a number", '{': "an object", '[': "an array"}

// jsonKindOf names the JSON values a Go type takes, "" when unknown.
func jsonKindOf(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return ""
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Name() != "" {
			return "" // a raw JSON value or text type: any kind
		}
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return ""
}

// The syntaxes of an id, a model and a workspace name.
var (
	idPattern    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)
	modelPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/=\[\],-]{0,127}$`)
	namePattern  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// MaxArgBytes is the longest single argument execve takes on Linux:
// MAX_ARG_STRLEN is 128 KiB and counts the terminating NUL.
const MaxArgBytes = 128<<10 - 1

// promptLimit is server.max_prompt_bytes, capped at MaxArgBytes: the prompt
// is one argument of the agent's command line.
func promptLimit(configured int) int {
	if configured <= 0 || configured > MaxArgBytes {
		return MaxArgBytes
	}
	return configured
}

// checkText rejects NUL bytes and texts over max bytes.
func checkText(what, s string, max int) *HTTPError {
	if strings.IndexByte(s, 0) >= 0 {
		return errBadRequest("bad_prompt", "%s contains a NUL byte", what)
	}
	if max > 0 && len(s) > max {
		return &HTTPError{Status: http.StatusRequestEntityTooLarge, Code: "prompt_too_large",
			Message: fmt.Sprintf("%s is %d bytes; the limit is %d bytes", what, len(s), max)}
	}
	return nil
}

// validateCommon checks the fields shared by the chat routes.
func validateCommon(mode, model, conv string) error {
	switch mode {
	case "", "agent", "plan", "ask", "debug":
	default:
		return errBadRequest("bad_mode", "mode %q is not one of agent, plan, ask, debug", mode)
	}
	if model != "" && !modelPattern.MatchString(model) {
		return errBadRequest("bad_model", "model %q is not a valid model name", openai.Clip(model, 80)).naming("model")
	}
	if conv != "" && !idPattern.MatchString(conv) {
		return errBadRequest("bad_conversation_id", "conversationId must be 1-128 letters, digits, '_', '.', ':' or '-', and may not start with '-'")
	}
	return nil
}
