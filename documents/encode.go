package documents

import (
	"fmt"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// encodeOpts are the options the gateway encodes responses with: agent
// text that is not valid UTF-8 does not fail a response.
var encodeOpts = jsontext.AllowInvalidUTF8(true)

// AppendResponse appends the JSON of r to b: the bytes that json.Marshal
// gives r with jsontext.AllowInvalidUTF8. A response is encoded whole when
// its run ends (and when it is saved), so it is written here field by
// field, without reflection; each document's metadata, already JSON, is
// formatted as json.Marshal formats a jsontext.Value. On an error (metadata
// that is not valid JSON) b is returned as it was.
func AppendResponse(b []byte, r *ChatResponse) ([]byte, error) {
	start := len(b)
	b = append(b, `{"id":`...)
	b = AppendString(b, r.ID)
	b = append(b, `,"conversationId":`...)
	b = appendStringPtr(b, r.ConversationID)
	b = append(b, `,"model":`...)
	b = AppendString(b, r.Model)
	b = append(b, `,"mode":`...)
	b = AppendString(b, r.Mode)
	b = append(b, `,"created":`...)
	b = AppendString(b, r.Created)
	b = append(b, `,"status":`...)
	b = AppendString(b, string(r.Status))
	b = append(b, `,"documents":[`...)
	for i := range r.Documents {
		d := &r.Documents[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = AppendString(b, d.ID)
		b = append(b, `,"type":`...)
		b = AppendString(b, string(d.Type))
		b = append(b, `,"sequence":`...)
		b = strconv.AppendInt(b, int64(d.Sequence), 10)
		b = append(b, `,"content":`...)
		b = appendStringPtr(b, d.Content)
		b = append(b, `,"metadata":`...)
		if d.Metadata == nil {
			b = append(b, "null"...)
		} else {
			var err error
			if b, err = jsontext.AppendFormat(b, d.Metadata, encodeOpts); err != nil {
				return b[:start], fmt.Errorf("document %s: metadata: %w", d.ID, err)
			}
		}
		b = append(b, '}')
	}
	b = append(b, `],"usage":`...)
	b = appendUsage(b, &r.Usage)
	b = append(b, `,"metadata":`...)
	b = appendResponseMetadata(b, &r.Metadata)
	return append(b, '}'), nil
}

// EncodeResponse returns the JSON of r (see AppendResponse), in a buffer
// of about its size.
func EncodeResponse(r *ChatResponse) ([]byte, error) {
	n := 512
	for _, d := range r.Documents {
		n += 96 + len(d.Metadata)
		if d.Content != nil {
			n += len(*d.Content) + len(*d.Content)/16
		}
	}
	return AppendResponse(make([]byte, 0, n), r)
}

func appendUsage(b []byte, u *Usage) []byte {
	b = append(b, `{"promptTokens":`...)
	b = strconv.AppendInt(b, u.PromptTokens, 10)
	b = append(b, `,"completionTokens":`...)
	b = strconv.AppendInt(b, u.CompletionTokens, 10)
	b = append(b, `,"totalTokens":`...)
	b = strconv.AppendInt(b, u.TotalTokens, 10)
	b = appendIntField(b, "cacheReadTokens", u.CacheReadTokens)
	b = appendIntField(b, "cacheWriteTokens", u.CacheWriteTokens)
	b = append(b, `,"reported":`...)
	b = strconv.AppendBool(b, u.Reported)
	return append(b, '}')
}

func appendResponseMetadata(b []byte, m *ResponseMetadata) []byte {
	b = append(b, `{"duration_ms":`...)
	b = strconv.AppendInt(b, m.DurationMs, 10)
	b = append(b, `,"toolCallCount":`...)
	b = strconv.AppendInt(b, int64(m.ToolCallCount), 10)
	b = append(b, `,"turnCount":`...)
	b = strconv.AppendInt(b, int64(m.TurnCount), 10)
	b = appendStringField(b, "stopReason", string(m.StopReason))
	if a := m.Agent; a != nil {
		b = append(b, `,"agent":{`...)
		n := len(b)
		b = appendStringField(b, "sessionId", a.SessionID)
		b = appendStringField(b, "cwd", a.Cwd)
		b = appendStringField(b, "model", a.Model)
		b = appendStringField(b, "permissionMode", a.PermissionMode)
		b = appendStringField(b, "requestId", a.RequestID)
		b = appendIntField(b, "duration_api_ms", a.DurationAPIMs)
		b = closeObject(b, n)
	}
	if c := m.Cloud; c != nil {
		b = append(b, `,"cloud":{`...)
		n := len(b)
		b = appendStringField(b, "agentId", c.AgentID)
		b = appendStringField(b, "status", c.Status)
		b = appendStringField(b, "summary", c.Summary)
		b = appendStringField(b, "branchName", c.BranchName)
		b = appendStringField(b, "prUrl", c.PRURL)
		b = appendStringField(b, "url", c.URL)
		b = appendStringField(b, "repository", c.Repository)
		b = closeObject(b, n)
	}
	b = appendIntField(b, "skippedLines", int64(m.SkippedLines))
	return append(b, '}')
}

// appendStringField appends `,"name":value` unless value is empty (a field
// tagged omitzero).
func appendStringField(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return AppendString(b, value)
}

// appendIntField appends `,"name":value` unless value is 0 (a field tagged
// omitzero).
func appendIntField(b []byte, name string, value int64) []byte {
	if value == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, value, 10)
}

// closeObject ends an object whose members were appended with the
// append…Field functions from b[n:], each led by a comma: the first comma
// goes.
func closeObject(b []byte, n int) []byte {
	if len(b) > n {
		b = append(b[:n], b[n+1:]...)
	}
	return append(b, '}')
}

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return AppendString(b, *s)
}

// AppendString appends s as a JSON string as json.Marshal does with
// jsontext.AllowInvalidUTF8: invalid UTF-8 becomes U+FFFD rather than an
// error.
func AppendString(b []byte, s string) []byte {
	b, _ = jsontext.AppendQuote(b, s)
	return b
}
