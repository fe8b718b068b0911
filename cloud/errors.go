package cloud

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
)

// Error codes carried by *Error.
const (
	CodeBadRequest   = "bad_request"        // a 400, or a request refused locally
	CodeUnauthorized = "cloud_unauthorized" // a 401, or no API key configured
	CodeForbidden    = "cloud_forbidden"    // a 403
	CodeNotFound     = "not_found"          // a 404 (no such agent)
	CodeConflict     = "conflict"           // a 409, seen on follow-ups to a busy agent
	CodeRateLimited  = "rate_limited"       // a 429, or the local repositories limit
	CodeUnavailable  = "cloud_unavailable"  // a 5xx, a transport failure or an unreadable answer
	CodeUnexpected   = "cloud_error"        // any other status
)

// Error is a failure reported by the Cloud Agents API or found before sending.
// Message never contains the API key.
type Error struct {
	Status     int           // HTTP status; 0 when there was no response
	Code       string        // one of the Code constants
	Message    string        // what went wrong
	RetryAfter time.Duration // when to try again; 0 when unknown

	err error // the transport or decoding error behind it, if any
}

// Error returns "cloud: <message> (HTTP <status>)".
func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("cloud: %s (HTTP %d)", e.Message, e.Status)
	}
	return "cloud: " + e.Message
}

// Unwrap returns the transport error behind the failure, if any.
func (e *Error) Unwrap() error { return e.err }

// Retryable reports whether the same request may succeed later (rate limited
// or unavailable), not whether repeating it is safe.
func (e *Error) Retryable() bool {
	return e.Code == CodeRateLimited || e.Code == CodeUnavailable
}

// badRequest is a local refusal: nothing was sent.
func badRequest(format string, args ...any) *Error {
	return &Error{Code: CodeBadRequest, Message: fmt.Sprintf(format, args...)}
}

// statusError maps an error response and the API's message to an *Error.
func statusError(r *call, status int, upstream string, retryAfter time.Duration) *Error {
	e := &Error{Status: status, RetryAfter: retryAfter}
	switch {
	case status == http.StatusBadRequest:
		e.Code, e.Message = CodeBadRequest, "the Cloud Agents API rejected the "+r.op+" request"
	case status == http.StatusUnauthorized:
		e.Code, e.Message, upstream = CodeUnauthorized, "the Cloud API key is missing or invalid", ""
	case status == http.StatusForbidden:
		e.Code, e.Message = CodeForbidden, "the Cloud API key is not allowed to "+r.op
	case status == http.StatusNotFound && r.agentID != "":
		e.Code, e.Message, upstream = CodeNotFound, "no such agent: "+r.agentID, ""
	case status == http.StatusNotFound:
		e.Code, e.Message = CodeNotFound, "not found: "+r.method+" "+r.path
	case status == http.StatusConflict:
		e.Code, e.Message = CodeConflict, "the agent cannot take the "+r.op+" request now"
	case status == http.StatusTooManyRequests:
		e.Code, e.Message, upstream = CodeRateLimited, "the Cloud Agents API rate limit was reached", ""
		if retryAfter > 0 {
			e.Message += "; it can be called again in " + retryAfter.String()
		}
	case status >= 500:
		e.Code, e.Message, upstream = CodeUnavailable, "the Cloud Agents API failed the "+r.op+" request"+r.unsureNote(), ""
	default:
		e.Code, e.Message = CodeUnexpected, "unexpected answer from the Cloud Agents API to "+r.op
	}
	if upstream != "" { // the API's own words, where they add to ours
		e.Message += ": " + upstream
	}
	return e
}

// upstreamMessage extracts a short, printable message from an error body.
func upstreamMessage(body []byte) string {
	var v map[string]any
	if json.Unmarshal(body, &v) == nil {
		if m, ok := v["message"].(string); ok && m != "" {
			return clean(m)
		}
		switch errv := v["error"].(type) {
		case string:
			return clean(errv)
		case map[string]any:
			if m, ok := errv["message"].(string); ok {
				return clean(m)
			}
		}
		return ""
	}
	return clean(string(body))
}

// clean keeps a message on one printable line of at most 300 runes.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || r == '\r' {
			return ' '
		}
		if !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "…"
	}
	return s
}
