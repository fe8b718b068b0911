package documents

import (
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"

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

// AppendEvent appends the JSON data of ev to b, the bytes json.Marshal
// gives it with jsontext.AllowInvalidUTF8, for the events that open and
// close responses and documents (ResponseStart, DocumentStart, DocumentEnd,
// Done); ok is false for other events, which it leaves to json.Marshal. On
// an error (metadata that is not valid JSON) b is returned as it was.
func AppendEvent(b []byte, ev Event) ([]byte, bool, error) {
	start := len(b)
	switch e := ev.(type) {
	case ResponseStart:
		o := OpenObject(b)
		o.Str("id", e.ID)
		o.Key("conversationId")
		o.B = appendStringPtr(o.B, e.ConversationID)
		o.Str("model", e.Model)
		o.Str("mode", e.Mode)
		o.Str("created", e.Created)
		return o.Close(), true, nil
	case DocumentStart:
		o := OpenObject(b)
		o.Str("id", e.ID)
		o.Str("type", string(e.Type))
		o.Int("sequence", int64(e.Sequence))
		return closeDocumentEvent(o, b[:start], e.ID, e.Metadata)
	case DocumentEnd:
		o := OpenObject(b)
		o.Str("documentId", e.DocumentID)
		if e.FinalContent != nil {
			o.Str("finalContent", *e.FinalContent)
		}
		return closeDocumentEvent(o, b[:start], e.DocumentID, e.Metadata)
	case Done:
		o := OpenObject(b)
		o.Str("id", e.ID)
		o.Key("conversationId")
		o.B = appendStringPtr(o.B, e.ConversationID)
		o.Str("status", string(e.Status))
		o.Key("usage")
		o.B = appendUsage(o.B, &e.Usage)
		o.Key("metadata")
		o.B = appendResponseMetadata(o.B, &e.Metadata)
		return o.Close(), true, nil
	}
	return b, false, nil
}

// closeDocumentEvent appends the metadata of document id's event to o and
// closes it; on metadata that is not valid JSON it returns before.
func closeDocumentEvent(o Object, before []byte, id string, meta jsontext.Value) ([]byte, bool, error) {
	if err := o.FormatOmit("metadata", meta); err != nil {
		return before, true, fmt.Errorf("document %s: metadata: %w", id, err)
	}
	return o.Close(), true, nil
}

func appendUsage(b []byte, u *Usage) []byte {
	o := OpenObject(b)
	o.Int("promptTokens", u.PromptTokens)
	o.Int("completionTokens", u.CompletionTokens)
	o.Int("totalTokens", u.TotalTokens)
	o.IntOmit("cacheReadTokens", u.CacheReadTokens)
	o.IntOmit("cacheWriteTokens", u.CacheWriteTokens)
	o.Bool("reported", u.Reported)
	return o.Close()
}

func appendResponseMetadata(b []byte, m *ResponseMetadata) []byte {
	o := OpenObject(b)
	o.Int("duration_ms", m.DurationMs)
	o.Int("toolCallCount", int64(m.ToolCallCount))
	o.Int("turnCount", int64(m.TurnCount))
	o.StrOmit("stopReason", string(m.StopReason))
	if a := m.Agent; a != nil {
		o.Key("agent")
		ao := OpenObject(o.B)
		ao.StrOmit("sessionId", a.SessionID)
		ao.StrOmit("cwd", a.Cwd)
		ao.StrOmit("model", a.Model)
		ao.StrOmit("permissionMode", a.PermissionMode)
		ao.StrOmit("requestId", a.RequestID)
		ao.IntOmit("duration_api_ms", a.DurationAPIMs)
		o.B = ao.Close()
	}
	if c := m.Cloud; c != nil {
		o.Key("cloud")
		co := OpenObject(o.B)
		co.StrOmit("agentId", c.AgentID)
		co.StrOmit("status", c.Status)
		co.StrOmit("summary", c.Summary)
		co.StrOmit("branchName", c.BranchName)
		co.StrOmit("prUrl", c.PRURL)
		co.StrOmit("url", c.URL)
		co.StrOmit("repository", c.Repository)
		o.B = co.Close()
	}
	o.IntOmit("skippedLines", int64(m.SkippedLines))
	return o.Close()
}

// Object appends a JSON object member by member, each member as
// json.Marshal writes the matching struct field with
// jsontext.AllowInvalidUTF8; the …Omit methods leave out a zero value (a
// field tagged omitzero).
type Object struct {
	B     []byte // the buffer appended to
	first int    // len(B) while the object has no member
}

// OpenObject appends the opening brace of an object to b.
func OpenObject(b []byte) Object {
	b = append(b, '{')
	return Object{B: b, first: len(b)}
}

// Key appends the name of the next member, whose value the caller appends
// to o.B.
func (o *Object) Key(k string) {
	if len(o.B) > o.first {
		o.B = append(o.B, ',')
	}
	o.B = append(o.B, '"')
	o.B = append(o.B, k...)
	o.B = append(o.B, '"', ':')
}

// Str appends a string member.
func (o *Object) Str(k, v string) {
	o.Key(k)
	o.B = AppendString(o.B, v)
}

// StrOmit appends a string member unless v is empty.
func (o *Object) StrOmit(k, v string) {
	if v != "" {
		o.Str(k, v)
	}
}

// Int appends an integer member.
func (o *Object) Int(k string, v int64) {
	o.Key(k)
	o.B = strconv.AppendInt(o.B, v, 10)
}

// IntOmit appends an integer member unless v is 0.
func (o *Object) IntOmit(k string, v int64) {
	if v != 0 {
		o.Int(k, v)
	}
}

// IntPtr appends an integer member, null when v is nil.
func (o *Object) IntPtr(k string, v *int) {
	if v == nil {
		o.Key(k)
		o.B = append(o.B, "null"...)
		return
	}
	o.Int(k, int64(*v))
}

// Bool appends a boolean member.
func (o *Object) Bool(k string, v bool) {
	o.Key(k)
	o.B = strconv.AppendBool(o.B, v)
}

// TrueOmit appends a boolean member unless v is false.
func (o *Object) TrueOmit(k string, v bool) {
	if v {
		o.Bool(k, v)
	}
}

// Strs appends a member whose value is an array of strings.
func (o *Object) Strs(k string, v []string) {
	o.Key(k)
	o.B = append(o.B, '[')
	for i, s := range v {
		if i > 0 {
			o.B = append(o.B, ',')
		}
		o.B = AppendString(o.B, s)
	}
	o.B = append(o.B, ']')
}

// Raw appends a member whose value v, valid JSON, is copied as it is; null
// when v is empty.
func (o *Object) Raw(k string, v jsontext.Value) {
	o.Key(k)
	if len(v) == 0 {
		o.B = append(o.B, "null"...)
		return
	}
	o.B = append(o.B, v...)
}

// FormatOmit appends a member whose value v, JSON, is formatted as
// json.Marshal formats a jsontext.Value, unless v is nil (a field tagged
// omitzero). When v is not valid JSON it returns the error, with o.B cut
// anywhere.
func (o *Object) FormatOmit(k string, v jsontext.Value) error {
	if v == nil {
		return nil
	}
	o.Key(k)
	var err error
	o.B, err = jsontext.AppendFormat(o.B, v, encodeOpts)
	return err
}

// Close appends the closing brace and returns the buffer.
func (o *Object) Close() []byte { return append(o.B, '}') }

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return AppendString(b, *s)
}

// AppendString appends s as a JSON string as json.Marshal does with
// jsontext.AllowInvalidUTF8: invalid UTF-8 becomes U+FFFD rather than an
// error. The bytes are those of jsontext.AppendQuote.
func AppendString(b []byte, s string) []byte {
	b = slices.Grow(b, len(s)+2)
	b = append(b, '"')
	i, j := 0, 0 // s[i:j] is written as it is
	for j < len(s) {
		// Eight bytes at a time up to one that needs a look: a quote, a
		// backslash, a control character or a byte beyond ASCII.
		for j+8 <= len(s) {
			w := load64(s, j)
			if m := StringStops(w) | w&highs; m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				break
			}
			j += 8
		}
		if j >= len(s) {
			break
		}
		switch c := s[j]; {
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRuneInString(s[j:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, s[i:j]...)
				b = append(b, "\ufffd"...)
				i = j + 1
			}
			j += n
		case c == '"' || c == '\\':
			b = append(b, s[i:j]...)
			b = append(b, '\\', c)
			j++
			i = j
		case c < ' ':
			b = append(b, s[i:j]...)
			b = appendControl(b, c)
			j++
			i = j
		default:
			j++
		}
	}
	b = append(b, s[i:]...)
	return append(b, '"')
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// StringStops flags, in the high bit of each of eight bytes of a word read
// little-endian, the quotes, backslashes and control characters: the bytes
// that a JSON string does not hold as they are. Borrows can flag a byte
// after a flagged one, never before: the lowest flag is exact.
func StringStops(w uint64) uint64 {
	quote := w ^ (ones * '"')
	bslash := w ^ (ones * '\\')
	return ((quote-ones)&^quote | (bslash-ones)&^bslash | (w-ones*0x20)&^w) & highs
}

// load64 reads the eight bytes of s at i, little-endian.
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// appendControl appends the escape of a control character as jsontext
// writes it.
func appendControl(b []byte, c byte) []byte {
	switch c {
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
}
