package translate

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// wire collects the members of one agent line, from the top level and from
// a "payload" object, before the line is classified.
type wire struct {
	typ, sub        string
	session         string
	text            string
	hasText         bool
	msgText         string
	hasMsg          bool
	modelCallID     string
	ts              int64
	hasTS           bool
	callID          string
	tool            jsontext.Value
	toolName        string
	toolCallID      string
	params          jsontext.Value
	resultText      string
	resultObj       jsontext.Value
	errText         string
	errDetails      string // an error's code or details
	isError         bool
	durationMs      int64
	durationAPIMs   int64
	requestID       string
	usage           *AgentUsage
	cwd, model      string
	permissionMode  string
	apiKeySource    string
	payloadIsObject bool
	// scan is what validating the line learnt; its buffer is kept from
	// line to line.
	scan lineScan
}

// reset clears w for the next line, keeping its buffers.
func (w *wire) reset() {
	names := w.scan.names
	*w = wire{scan: lineScan{names: names[:0]}}
}

// decodeOpts tolerates what agents emit: duplicate names and invalid UTF-8.
var decodeOpts = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// wires keeps the scratch of idle Decoders.
var wires = sync.Pool{New: func() any { return new(wire) }}

// decode classifies one non-empty line.
func (d *Decoder) decode(line []byte) Event {
	ev := Event{Raw: line, Size: len(line)}
	if line[0] != '{' {
		ev.Kind = KindNotJSON
		return ev
	}
	if d.w == nil {
		d.w = wires.Get().(*wire)
	}
	d.w.reset()
	if !d.members(line, 0) {
		ev.Kind = KindNotJSON
		return ev
	}
	w := d.w
	ev.unique = !w.scan.repeats
	ev.Type, ev.Subtype = w.typ, w.sub
	ev.SessionID = w.session
	ev.ModelCallID = w.modelCallID
	ev.TimestampMs, ev.HasTimestamp = w.ts, w.hasTS
	switch w.typ {
	case "system":
		if w.sub == "init" {
			ev.Kind = KindInit
			ev.Init = &Init{SessionID: w.session, Cwd: w.cwd, Model: w.model, PermissionMode: w.permissionMode, APIKeySource: w.apiKeySource}
		} else {
			ev.Kind = KindInfo
		}
	case "user":
		ev.Kind = KindUser
	case "thinking":
		if w.sub == "completed" {
			ev.Kind = KindThinkingDone
		} else {
			ev.Kind = KindThinkingDelta
			ev.Text = w.text
		}
	case "assistant":
		ev.Kind = KindAssistant
		if w.hasText {
			ev.Text = w.text
		} else {
			ev.Text = w.msgText
		}
	case "tool_call", "tool-call-started", "tool-call-completed":
		d.toolEvent(&ev)
	case "result":
		ev.Kind = KindResult
		ev.Result = &Result{Subtype: w.sub, IsError: w.isError || w.sub == "error", DurationMs: w.durationMs,
			DurationAPIMs: w.durationAPIMs, Text: w.resultText, Error: w.errText, RequestID: w.requestID, Usage: w.usage}
	case "error":
		ev.Kind = KindError
		ev.Details = w.errDetails
		switch {
		case w.errText != "":
			ev.Text = w.errText
		case w.hasMsg:
			ev.Text = w.msgText
		default:
			ev.Text = w.text
		}
	case "interaction_query", "connection", "retry":
		ev.Kind = KindInfo
	default:
		ev.Kind = KindUnknown
	}
	return ev
}

func (d *Decoder) toolEvent(ev *Event) {
	w := d.w
	switch {
	case w.typ == "tool-call-started" || (w.typ == "tool_call" && w.sub == "started"):
		ev.Kind = KindToolStarted
	case w.typ == "tool-call-completed" || (w.typ == "tool_call" && w.sub == "completed"):
		ev.Kind = KindToolCompleted
	default:
		ev.Kind = KindUnknown
		return
	}
	tc := &ToolCall{}
	var id string
	if w.tool != nil {
		id = parseToolObject(w.tool, tc)
	} else {
		tc.Kind = w.toolName
		tc.Args = w.params
		tc.Result = w.resultObj
		tc.DurationMs = w.durationMs
		id = w.toolCallID
	}
	if ev.Kind == KindToolCompleted && tc.Result == nil && w.resultObj != nil {
		tc.Result = w.resultObj
	}
	// Repeated names would make the events unencodable downstream.
	if w.scan.repeats {
		tc.Args, tc.Result = d.names.dedupe(tc.Args), d.names.dedupe(tc.Result)
	}
	ev.Tool = tc
	ev.CallID = w.callID
	if ev.CallID == "" {
		ev.CallID = id
	}
}

// members scans the members of the object in val, reporting whether val
// is exactly one JSON object; depth 1 is a payload.
func (d *Decoder) members(val []byte, depth int) bool {
	if depth == 0 {
		return isObjectLine(val, func(name, v []byte, escaped bool) {
			if escaped {
				name = unquoteName(name)
			} else {
				name = name[1 : len(name)-1]
			}
			d.member(name, v, depth)
		}, &d.w.scan)
	}
	return eachMember(val, func(name, v []byte, _, _ int) { d.member(unquoteName(name), v, depth) })
}

// member records one member of the line or of its payload.
func (d *Decoder) member(name []byte, v jsontext.Value, depth int) {
	w := d.w
	switch string(name) {
	case "type":
		w.typ = internType(v)
	case "subtype":
		w.sub = internType(v)
	case "session_id":
		if !bytes.Equal(v, d.sessRaw) {
			d.sessRaw = append(d.sessRaw[:0], v...)
			d.session = str(v)
		}
		w.session = d.session
	case "text":
		if v.Kind() == '"' {
			w.text, w.hasText = textStr(v), true
		}
	case "content":
		if depth > 0 && v.Kind() == '"' && !w.hasText {
			w.text, w.hasText = textStr(v), true
		}
	case "message":
		switch v.Kind() {
		case '{':
			w.msgText, w.hasMsg = messageText(v), true
		case '"':
			w.msgText, w.hasMsg = textStr(v), true
		}
	case "model_call_id":
		w.modelCallID = d.intern(v)
	case "timestamp_ms":
		w.ts, w.hasTS = num(v), true
	case "call_id":
		w.callID = str(v)
	case "tool_call", "toolCall":
		if v.Kind() == '{' {
			w.tool = v.Clone()
		}
	case "tool_name":
		w.toolName = str(v)
	case "tool_call_id":
		w.toolCallID = str(v)
	case "parameters":
		if v.Kind() == '{' {
			w.params = v.Clone()
		}
	case "result":
		switch v.Kind() {
		case '"':
			w.resultText = str(v)
		case '{':
			w.resultObj = v.Clone()
		}
	case "error":
		switch v.Kind() {
		case '"':
			w.errText = str(v)
		case '{':
			w.errText, w.errDetails = errorText(v)
		}
	case "details":
		if d := scalarText(v); d != "" {
			w.errDetails = d
		}
	case "is_error":
		w.isError = v.Kind() == 't'
	case "duration_ms":
		w.durationMs = num(v)
	case "duration_api_ms":
		w.durationAPIMs = num(v)
	case "request_id":
		w.requestID = str(v)
	case "usage":
		if v.Kind() == '{' {
			w.usage = usageOf(v)
		}
	case "cwd":
		w.cwd = str(v)
	case "workspace":
		// The Python API's init names the working directory "workspace".
		if w.cwd == "" {
			w.cwd = str(v)
		}
	case "model":
		w.model = str(v)
	case "permissionMode":
		w.permissionMode = str(v)
	case "apiKeySource":
		w.apiKeySource = str(v)
	case "payload":
		if depth == 0 && v.Kind() == '{' {
			w.payloadIsObject = true
			d.members(v, 1)
		}
	}
}

// intern returns a shared string for a repeated model_call_id.
func (d *Decoder) intern(v jsontext.Value) string {
	if v.Kind() != '"' {
		return ""
	}
	if s, ok := d.mcid[string(v)]; ok {
		return s
	}
	if d.mcid == nil {
		d.mcid = make(map[string]string)
	}
	s := str(v)
	if len(d.mcid) < 1024 {
		d.mcid[string(v)] = s
	}
	return s
}

// internType maps the common type and subtype values to constants.
func internType(v jsontext.Value) string {
	switch string(v) {
	case `"assistant"`:
		return "assistant"
	case `"thinking"`:
		return "thinking"
	case `"delta"`:
		return "delta"
	case `"completed"`:
		return "completed"
	case `"started"`:
		return "started"
	case `"tool_call"`:
		return "tool_call"
	case `"system"`:
		return "system"
	case `"init"`:
		return "init"
	case `"user"`:
		return "user"
	case `"result"`:
		return "result"
	case `"success"`:
		return "success"
	case `"error"`:
		return "error"
	case `"connection"`:
		return "connection"
	case `"retry"`:
		return "retry"
	case `"interaction_query"`:
		return "interaction_query"
	case `"request"`:
		return "request"
	case `"response"`:
		return "response"
	}
	return str(v)
}

// unquoteName returns a member name without quotes, unescaping if needed.
// Invalid UTF-8 becomes U+FFFD, byte by byte, as jsontext compares names.
func unquoteName(name jsontext.Value) []byte {
	if len(name) >= 2 && plainName(name) {
		return name[1 : len(name)-1]
	}
	b, _ := jsontext.AppendUnquote(nil, name)
	return b
}

// plainName reports whether a name has neither escapes nor bytes beyond
// ASCII, so that it reads as it is written.
func plainName(name []byte) bool {
	return asciiName(name) && bytes.IndexByte(name, '\\') < 0
}

// str returns the string a JSON value holds, or "" when it is no string.
func str(v jsontext.Value) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1])
	}
	// Unquoted, a string is seldom longer than quoted (only invalid UTF-8
	// grows, into U+FFFD), and the buffer is the string's own: one
	// allocation rather than a grown buffer and its copy.
	b := appendUnquote(make([]byte, 0, len(v)), v)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// appendUnquote appends the string that v, a valid JSON string, holds, as
// jsontext.AppendUnquote does. Text between escapes is copied in runs, and
// the one-character escapes are read here; a string with a \u escape or
// with invalid UTF-8 is left to jsontext, which replaces what is invalid
// with U+FFFD.
func appendUnquote(dst []byte, v []byte) []byte {
	n := len(dst)
	s := v[1 : len(v)-1]
	if !utf8.Valid(s) {
		return appendUnquoteSlow(dst, v)
	}
	for len(s) > 0 {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			i = len(s)
		}
		dst = append(dst, s[:i]...)
		if i == len(s) {
			return dst
		}
		if i+1 >= len(s) {
			break
		}
		c := byte(0)
		switch s[i+1] {
		case '"', '\\', '/':
			c = s[i+1]
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		}
		if c == 0 {
			break // \u, or not valid
		}
		dst = append(dst, c)
		s = s[i+2:]
	}
	if len(s) == 0 {
		return dst
	}
	return appendUnquoteSlow(dst[:n], v)
}

func appendUnquoteSlow(dst []byte, v []byte) []byte {
	b, _ := jsontext.AppendUnquote(dst, v)
	return b
}

// maxTokens is the largest token count taken from the agent.
const maxTokens = 1 << 50

// usageOf reads the agent's usage object. A member that is not a token
// count (a whole number from 0 to maxTokens) counts as 0; the usage is nil
// when no member is one.
func usageOf(obj jsontext.Value) *AgentUsage {
	var u AgentUsage
	found := false
	eachMember(obj, func(name, v []byte, _, _ int) {
		n, ok := tokenCount(v)
		if !ok {
			return
		}
		switch {
		case nameIs(name, "inputTokens"):
			u.InputTokens = n
		case nameIs(name, "outputTokens"):
			u.OutputTokens = n
		case nameIs(name, "cacheReadTokens"):
			u.CacheReadTokens = n
		case nameIs(name, "cacheWriteTokens"):
			u.CacheWriteTokens = n
		default:
			return
		}
		found = true
	})
	if !found {
		return nil
	}
	return &u
}

// tokenCount returns the token count a JSON number holds: a whole number
// from 0 to maxTokens, written as an integer or not (5.0, 1e3).
func tokenCount(v []byte) (int64, bool) {
	if len(v) == 0 || v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f < 0 || f > maxTokens || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}

// num returns the integer a JSON number or numeric string holds.
func num(v jsontext.Value) int64 {
	s := v
	if len(s) >= 2 && s[0] == '"' {
		s = s[1 : len(s)-1]
	}
	// Timestamps and durations are plain digits: read them directly.
	if len(s) > 0 && len(s) <= 18 {
		n := int64(0)
		for _, c := range s {
			if c < '0' || c > '9' {
				goto general
			}
			n = n*10 + int64(c-'0')
		}
		return n
	}
general:
	if n, err := strconv.ParseInt(string(s), 10, 64); err == nil {
		return n
	}
	if f, err := strconv.ParseFloat(string(s), 64); err == nil {
		return int64(f)
	}
	return 0
}

// messageText extracts the text of a message object: its content as a
// string, or its text blocks in order.
func messageText(v jsontext.Value) string {
	text := ""
	walkObject(v, 0, func(name []byte, vs int) int {
		if nameIs(name, "content") {
			t, end := contentAt(v, vs)
			text = t
			return end
		}
		return skipFast(v, vs)
	})
	return text
}

// contentText reads a message content: a string, or an array of blocks of
// which those of type "text" (or of no type) count.
func contentText(c jsontext.Value) string {
	if len(c) == 0 {
		return ""
	}
	t, _ := contentAt(c, 0)
	return t
}

// contentAt reads the message content whose value starts at b[i] (see
// contentText) and returns its text and where the value ends, or -1.
func contentAt(b []byte, i int) (string, int) {
	if i >= len(b) {
		return "", -1
	}
	switch b[i] {
	case '"':
		end := skipStringFast(b, i)
		if end < 0 {
			return "", -1
		}
		return textStr(b[i:end]), end
	case '[':
	default:
		return "", skipFast(b, i)
	}
	// Usually one text block: its string is the text, with no joining.
	var first []byte
	var joined *strings.Builder
	text := func() string {
		if joined != nil {
			return joined.String()
		}
		return textStr(first)
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return "", i + 1
	}
	for i < len(b) {
		start := i
		var end int
		if b[i] != '{' {
			end = skipFast(b, i)
		} else {
			var typ, txt []byte
			end = walkObject(b, i, func(name []byte, vs int) int {
				e := skipFast(b, vs)
				if e > vs {
					switch {
					case nameIs(name, "type"):
						typ = b[vs:e]
					case nameIs(name, "text"):
						txt = b[vs:e]
					}
				}
				return e
			})
			if end > start && (typ == nil || string(typ) == `"text"` || string(typ) == `""`) && len(txt) > 0 && txt[0] == '"' {
				switch {
				case first == nil:
					first = txt
				case joined == nil:
					joined = &strings.Builder{}
					joined.WriteString(textStr(first))
					fallthrough
				default:
					joined.WriteString(textStr(txt))
				}
			}
		}
		if end <= start {
			return text(), -1
		}
		if i = skipWS(b, end); i >= len(b) {
			return text(), -1
		}
		switch b[i] {
		case ']':
			return text(), i + 1
		case ',':
			i = skipWS(b, i+1)
		default:
			return text(), -1
		}
	}
	return text(), -1
}

// errorText extracts a message from an error object.
// errorText extracts a message from an error object, and its code or
// details, if it gives any.
func errorText(v jsontext.Value) (text, details string) {
	var e struct {
		Message string         `json:"message"`
		Error   string         `json:"error"`
		Code    jsontext.Value `json:"code"`
		Details jsontext.Value `json:"details"`
	}
	_ = json.Unmarshal(v, &e, decodeOpts)
	details = scalarText(e.Details)
	if c := scalarText(e.Code); c != "" {
		details = strings.TrimSpace(c + " " + details)
	}
	switch {
	case e.Message != "":
		return e.Message, details
	case e.Error != "":
		return e.Error, details
	}
	return string(v), details
}

// scalarText is a string's text or a number as written, else "".
func scalarText(v jsontext.Value) string {
	switch v.Kind() {
	case '"':
		return str(v)
	case '0':
		return string(v)
	}
	return ""
}

// parseToolObject reads a tool_call (or payload toolCall) object in any of
// its layouts into tc and returns the call id it names, if any. raw is owned
// by tc afterwards: its parts are kept without copies.
func parseToolObject(raw jsontext.Value, tc *ToolCall) (id string) {
	var otherName, other []byte // an object of a kind not named …ToolCall
	walkObject(raw, 0, func(nameQ []byte, vs int) int {
		name := unquoteName(nameQ)
		if raw[vs] == '{' && bytes.HasSuffix(name, []byte("ToolCall")) {
			tc.Kind = toolKind(name)
			return parseToolInnerAt(raw, vs, tc)
		}
		end := skipFast(raw, vs)
		if end <= vs {
			return end
		}
		v := raw[vs:end]
		switch {
		case string(name) == "function" && v[0] == '{':
			tc.Kind = "function"
			parseFunction(v, tc)
		case string(name) == "toolCallId" || string(name) == "id":
			if id == "" {
				id = str(v)
			}
		case string(name) == "startedAtMs":
			tc.StartedAtMs = num(v)
		case string(name) == "completedAtMs":
			tc.CompletedAtMs = num(v)
		case string(name) == "result":
			tc.Result = v
		case other == nil && v[0] == '{' && hasArgsOrResult(v):
			otherName, other = name, v
		}
		return end
	})
	if tc.Kind == "" && other != nil {
		tc.Kind = string(otherName)
		parseToolInner(other, tc)
	}
	return id
}

// hasArgsOrResult reports whether the object v has an args or a result
// member, as a tool call's inner object does.
func hasArgsOrResult(v []byte) bool {
	found := false
	eachMember(v, func(name, _ []byte, _, _ int) {
		found = found || nameIs(name, "args") || nameIs(name, "result")
	})
	return found
}

// toolKind returns the kind key of a tool call, without allocating for the
// common ones.
func toolKind(name []byte) string {
	switch string(name) {
	case "shellToolCall":
		return "shellToolCall"
	case "readToolCall":
		return "readToolCall"
	case "editToolCall":
		return "editToolCall"
	case "grepToolCall":
		return "grepToolCall"
	case "globToolCall":
		return "globToolCall"
	case "lsToolCall":
		return "lsToolCall"
	}
	return string(name)
}

// parseToolInner reads {args, result, description, name} or a legacy inner
// object whose members are the arguments themselves.
func parseToolInner(raw jsontext.Value, tc *ToolCall) {
	if len(raw) > 0 {
		parseToolInnerAt(raw, 0, tc)
	}
}

// parseToolInnerAt is parseToolInner for the object whose '{' is b[i]; it
// returns where the object ends, or -1.
func parseToolInnerAt(b []byte, i int, tc *ToolCall) int {
	var args, result jsontext.Value
	end := walkObject(b, i, func(name []byte, vs int) int {
		e := skipFast(b, vs)
		if e <= vs {
			return e
		}
		v := b[vs:e]
		switch {
		case nameIs(name, "args"):
			args = v
		case nameIs(name, "result"):
			result = v
		case nameIs(name, "description"):
			tc.Description = str(v)
		case nameIs(name, "name"):
			tc.Name = str(v)
		}
		return e
	})
	tc.Args, tc.Result = args, result
	if tc.Args == nil && tc.Result == nil && end > i {
		// Legacy layout: {"path": …, "contents": …} carries the arguments directly.
		tc.Args = b[i:end]
	}
	return end
}

// parseFunction reads a generic {name, arguments} call; arguments may be an
// object or a string holding JSON.
func parseFunction(raw jsontext.Value, tc *ToolCall) {
	var arguments jsontext.Value
	eachMember(raw, func(name, v []byte, _, _ int) {
		switch {
		case nameIs(name, "name"):
			tc.Name = str(v)
		case nameIs(name, "arguments"):
			arguments = v
		case nameIs(name, "result"):
			tc.Result = v
		}
	})
	switch arguments.Kind() {
	case '{':
		tc.Args = arguments
	case '"':
		s := str(arguments)
		if v := jsontext.Value(s); v.IsValid() && v.Kind() == '{' {
			tc.Args = v
		} else {
			b, _ := json.Marshal(map[string]string{"input": s})
			tc.Args = b
		}
	}
}
