package translate

import (
	"bytes"
	"cmp"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// agentLine holds the members of an agent line that Docstream reads, in
// any dialect; the members of a "payload" object count as the line's own.
type agentLine struct {
	lineIDs
	Text           text // or a payload's "content"
	Message        message
	TimestampMs    number
	CallID         string
	Tool           *ToolCall // from "tool_call" or "toolCall"
	ToolID         string    // the id the tool call object names
	ToolName       string
	ToolCallID     string
	Parameters     jsontext.Value // an object
	Result         jsontext.Value // a string, or a tool's result object
	Error          jsontext.Value // a string or an object
	Details        jsontext.Value
	IsError        bool
	DurationMs     number
	DurationAPIMs  number
	RequestID      string
	Usage          *agentUsage
	Cwd            string
	Workspace      string // the Python API's name for cwd
	Model          string
	PermissionMode string
	APIKeySource   string
	last           *lineIDs // the line before's
	line           []byte   // the line being read
}

// lineIDs are the members a line mostly repeats from the line before:
// they are then taken from it, not copied.
type lineIDs struct{ Type, Subtype, SessionID, ModelCallID string }

// member reads one member; a value of an unexpected kind is left out. A
// later member replaces an earlier one, also those of a payload.
func (w *agentLine) member(dec *jsontext.Decoder, name []byte, inPayload bool) error {
	switch string(name) {
	case "payload":
		if !inPayload && dec.PeekKind() == '{' {
			return eachMember(dec, func(name []byte) error { return w.member(dec, name, true) })
		}
	case "message":
		return w.Message.readFrom(dec)
	case "tool_call", "toolCall":
		if dec.PeekKind() == '{' {
			var err error
			w.Tool, w.ToolID, err = w.readTool(dec)
			return err
		}
	}
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	switch string(name) {
	case "type":
		w.Type = same(v, w.last.Type)
	case "subtype":
		w.Subtype = same(v, w.last.Subtype)
	case "session_id":
		w.SessionID = same(v, w.last.SessionID)
	case "text":
		w.Text.read(v)
	case "content":
		if inPayload && !w.Text.set {
			w.Text.read(v)
		}
	case "model_call_id":
		w.ModelCallID = same(v, w.last.ModelCallID)
	case "timestamp_ms":
		w.TimestampMs.read(v)
	case "call_id":
		w.CallID = str(v)
	case "tool_name":
		w.ToolName = str(v)
	case "tool_call_id":
		w.ToolCallID = str(v)
	case "parameters":
		if v.Kind() == '{' {
			w.Parameters = v.Clone()
		}
	case "result":
		w.Result = v.Clone()
	case "error":
		w.Error = v.Clone()
	case "details":
		w.Details = v.Clone()
	case "is_error":
		w.IsError = v.Kind() == 't'
	case "duration_ms":
		w.DurationMs.read(v)
	case "duration_api_ms":
		w.DurationAPIMs.read(v)
	case "request_id":
		w.RequestID = str(v)
	case "usage":
		if v.Kind() == '{' {
			w.Usage = new(agentUsage)
			return unmarshal(v, w.Usage)
		}
	case "cwd":
		w.Cwd = str(v)
	case "workspace":
		w.Workspace = str(v)
	case "model":
		w.Model = str(v)
	case "permissionMode":
		w.PermissionMode = str(v)
	case "apiKeySource":
		w.APIKeySource = str(v)
	}
	return nil
}

// eachMember reads the object that comes next from dec, calling fn with
// each member's name, unquoted; fn reads the member's value.
func eachMember(dec *jsontext.Decoder, fn func(name []byte) error) error {
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return cmp.Or(err, errNotObject)
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if bytes.IndexByte(name, '\\') < 0 {
			name = name[1 : len(name)-1]
		} else {
			name, _ = jsontext.AppendUnquote(nil, name)
		}
		if err := fn(name); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

var errNotObject = errors.New("not a JSON object")

// agentUsage is the agent's usage object; a member that is not a number is
// left out.
type agentUsage struct {
	InputTokens      *float64 `json:"inputTokens"`
	OutputTokens     *float64 `json:"outputTokens"`
	CacheReadTokens  *float64 `json:"cacheReadTokens"`
	CacheWriteTokens *float64 `json:"cacheWriteTokens"`
}

// toolInner is the object of a tool call's kind. An object with neither
// args nor result is the legacy layout, whose members are the arguments.
type toolInner struct {
	Args        jsontext.Value `json:"args"`
	Result      jsontext.Value `json:"result"`
	Description jsontext.Value `json:"description"`
	Name        jsontext.Value `json:"name"`
}

// functionCall is a generic {name, arguments} call; arguments may be an
// object or a string that holds one.
type functionCall struct {
	Name      jsontext.Value `json:"name"`
	Arguments jsontext.Value `json:"arguments"`
	Result    jsontext.Value `json:"result"`
}

// errorObject is the object of an error member.
type errorObject struct {
	Message string         `json:"message"`
	Error   string         `json:"error"`
	Code    jsontext.Value `json:"code"`
	Details jsontext.Value `json:"details"`
}

// text is agent text, read by textStr so that a character split between
// two pieces of streamed text is kept whole (see join.go).
type text struct {
	s   string
	set bool // the member is a string
}

// read takes a string; other kinds leave t as it is.
func (t *text) read(v jsontext.Value) {
	if v.Kind() == '"' {
		t.s, t.set = textStr(v), true
	}
}

// message is a message member: an object whose content holds the text (a
// string, or blocks of which those of type "text", or of no type, count),
// or the text itself.
type message struct{ text }

// readFrom reads a message member from dec, by tokens as its line is.
func (m *message) readFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() != '{' {
		v, err := dec.ReadValue()
		m.read(v)
		return err
	}
	m.s, m.set = "", true
	return eachMember(dec, func(name []byte) error {
		if string(name) != "content" || dec.PeekKind() != '[' {
			v, err := dec.ReadValue()
			if string(name) == "content" {
				m.s = textStr(v)
			}
			return err
		}
		dec.ReadToken()
		var texts []string
		for dec.PeekKind() != ']' {
			if dec.PeekKind() != '{' {
				if err := dec.SkipValue(); err != nil {
					return err
				}
				continue
			}
			var typ string
			var t text
			if err := eachMember(dec, func(name []byte) error {
				v, err := dec.ReadValue()
				switch string(name) {
				case "type":
					typ = str(v)
				case "text":
					t.read(v)
				}
				return err
			}); err != nil {
				return err
			}
			if t.set && (typ == "text" || typ == "") {
				texts = append(texts, t.s)
			}
		}
		m.s = strings.Join(texts, "")
		_, err := dec.ReadToken()
		return err
	})
}

// number is an integer the agent writes as a number or as a string that
// holds one; a fraction is cut off.
type number struct {
	n   int64
	set bool // the member is present
}

// read takes a number member.
func (n *number) read(v jsontext.Value) {
	n.n, n.set = num(v), true
}

// num returns the integer v holds, as a number or a string; else 0.
func num(v jsontext.Value) int64 {
	s := string(v)
	if v.Kind() == '"' {
		s = str(v)
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i
	} else if f, err := strconv.ParseFloat(s, 64); err == nil {
		return int64(f)
	}
	return 0
}

// UnmarshalJSONFrom reads a number member.
func (n *number) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue()
	if err == nil {
		n.read(v)
	}
	return err
}

var (
	// decodeOpts tolerate what agents emit: repeated member names (the
	// last one counts) and invalid UTF-8.
	decodeOpts = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	// legacyOpts leave out a member of an unexpected kind and read the
	// rest, as json v1 does, rather than stopping at it.
	legacyOpts = jsonv1.ReportErrorsWithLegacySemantics(true)
)

// unmarshalLast is unmarshal for an object that may repeat a member name,
// which jsontext refuses to encode: it returns v without repeats, the last
// member of each name decoded into out.
func unmarshalLast[T any](v jsontext.Value, out *T) jsontext.Value {
	err := json.Unmarshal(v, out, jsontext.AllowInvalidUTF8(true))
	if errors.Is(err, jsontext.ErrDuplicateName) {
		v, *out = dedupe(v), *new(T)
		unmarshal(v, out)
	} else if err != nil {
		unmarshal(v, out)
	}
	return v
}

// unmarshal decodes JSON that the agent wrote into out, leaving out a
// member of an unexpected kind; it reports an error only when v is not
// valid JSON.
func unmarshal(v []byte, out any) error {
	err := json.Unmarshal(v, out, decodeOpts)
	if _, ok := errors.AsType[*json.SemanticError](err); ok {
		if !jsontext.Value(v).IsValid(decodeOpts) {
			return err
		}
		_ = json.Unmarshal(v, out, decodeOpts, legacyOpts)
		return nil
	}
	return err
}

// decode classifies one non-empty line.
func (d *Decoder) decode(line []byte) Event {
	ev := Event{Raw: line, Size: len(line), Kind: KindNotJSON}
	if line[0] != '{' {
		return ev
	}
	w := &agentLine{last: &d.last, line: line}
	if d.read(w) != nil {
		return ev
	}
	d.last = w.lineIDs
	ev.Type, ev.Subtype, ev.SessionID, ev.ModelCallID = w.Type, w.Subtype, w.SessionID, w.ModelCallID
	ev.TimestampMs, ev.HasTimestamp = w.TimestampMs.n, w.TimestampMs.set
	ev.Kind = kinds[lineType{w.Type, w.Subtype}]
	if ev.Kind == KindUnknown {
		ev.Kind = kinds[lineType{w.Type, ""}]
	}
	switch ev.Kind {
	case KindInit:
		ev.Init = &Init{SessionID: w.SessionID, Cwd: cmp.Or(w.Cwd, w.Workspace), Model: w.Model,
			PermissionMode: w.PermissionMode, APIKeySource: w.APIKeySource}
	case KindThinkingDelta:
		ev.Text = w.Text.s
	case KindAssistant:
		ev.Text = w.Message.s
		if w.Text.set {
			ev.Text = w.Text.s
		}
	case KindToolStarted, KindToolCompleted:
		toolEvent(&ev, w)
	case KindResult:
		ev.Result = &Result{Subtype: w.Subtype, IsError: w.IsError || w.Subtype == "error", DurationMs: w.DurationMs.n,
			DurationAPIMs: w.DurationAPIMs.n, Text: str(w.Result), Error: str(w.Error), RequestID: w.RequestID,
			Usage: w.Usage.counts()}
	case KindError:
		msg, details := errorText(w.Error)
		ev.Details = cmp.Or(scalarText(w.Details), details)
		switch {
		case msg != "":
			ev.Text = msg
		case w.Message.set:
			ev.Text = w.Message.s
		default:
			ev.Text = w.Text.s
		}
	}
	return ev
}

// lineType is a line's type and subtype, or its type alone.
type lineType struct{ typ, subtype string }

// kinds are the kinds of the agent's line types, by type and subtype when
// the subtype decides, else by type; others are KindUnknown.
var kinds = map[lineType]Kind{
	{"system", "init"}: KindInit, {"system", ""}: KindInfo, {"user", ""}: KindUser,
	{"thinking", "completed"}: KindThinkingDone, {"thinking", ""}: KindThinkingDelta, {"assistant", ""}: KindAssistant,
	{"tool_call", "started"}: KindToolStarted, {"tool-call-started", ""}: KindToolStarted,
	{"tool_call", "completed"}: KindToolCompleted, {"tool-call-completed", ""}: KindToolCompleted,
	{"result", ""}: KindResult, {"error", ""}: KindError, {"interaction_query", ""}: KindInfo,
	{"connection", "reconnecting"}: KindStatus, {"connection", "reconnected"}: KindStatus, {"connection", ""}: KindInfo,
	{"retry", ""}: KindStatus,
}

// read decodes w's line into w, token by token, and reports an error when
// it is not exactly one JSON object.
func (d *Decoder) read(w *agentLine) error {
	d.in = *bytes.NewBuffer(w.line)
	d.dec.Reset(&d.in, decodeOpts)
	dec := &d.dec
	if err := eachMember(dec, func(name []byte) error { return w.member(dec, name, false) }); err != nil {
		return err
	}
	if _, err := d.dec.ReadToken(); err != io.EOF {
		return cmp.Or(err, errNotObject) // more than one value
	}
	return nil
}

// toolEvent fills in a tool_call event (or a hyphenated tool-call-started
// or -completed one).
func toolEvent(ev *Event, w *agentLine) {
	var result jsontext.Value
	if w.Result.Kind() == '{' {
		result = w.Result
	}
	tc, id := w.Tool, w.ToolID
	if tc == nil {
		tc = &ToolCall{Kind: w.ToolName, Args: w.Parameters, Result: result, DurationMs: w.DurationMs.n}
		id = w.ToolCallID
	}
	if ev.Kind == KindToolCompleted && tc.Result == nil {
		tc.Result = result
	}
	ev.Tool = tc
	ev.CallID = cmp.Or(w.CallID, id)
}

// readTool reads a tool call object: its kind's object ({"shellToolCall":
// {"args": …, "result": …}}), a function call, or else the first object of
// another kind; and its id and times.
func (w *agentLine) readTool(dec *jsontext.Decoder) (tc *ToolCall, id string, err error) {
	tc = &ToolCall{}
	var other ToolCall
	err = eachMember(dec, func(name []byte) error {
		if dec.PeekKind() == '{' {
			switch n := string(name); {
			case n == "function":
				tc.Kind = "function"
				return readFunction(dec, tc)
			case bytes.HasSuffix(name, []byte("ToolCall")):
				tc.Kind = n
				return w.readInner(dec, tc)
			case other.Kind == "" && n != "result" && n != "toolCallId" && n != "id" && n != "startedAtMs" && n != "completedAtMs":
				other.Kind = n
				return w.readInner(dec, &other)
			}
		}
		v, err := dec.ReadValue()
		switch string(name) {
		case "toolCallId", "id":
			id = cmp.Or(id, str(v))
		case "startedAtMs":
			tc.StartedAtMs = num(v)
		case "completedAtMs":
			tc.CompletedAtMs = num(v)
		case "result":
			tc.Result = v.Clone()
		}
		return err
	})
	if tc.Kind == "" && other.Kind != "" {
		tc.Kind, tc.Args, tc.Result, tc.Description, tc.Name = other.Kind, other.Args, other.Result, other.Description, other.Name
	}
	return tc, id, err
}

// readInner fills in tc from the object of a tool call's kind, which
// comes next from dec.
func (w *agentLine) readInner(dec *jsontext.Decoder, tc *ToolCall) error {
	var in toolInner
	start := dec.InputOffset()
	if err := json.UnmarshalDecode(dec, &in); err != nil {
		return err
	}
	tc.Args, tc.Result, tc.Description, tc.Name = in.Args, in.Result, str(in.Description), str(in.Name)
	if in.Args == nil && in.Result == nil {
		// The legacy layout, {"path": …, "contents": …}: the object is the
		// arguments, as written after the name's colon.
		v := w.line[start:dec.InputOffset()]
		tc.Args = jsontext.Value(bytes.TrimLeft(v, " \t\r\n:")).Clone()
	}
	return nil
}

// readFunction fills in tc from a function call that comes next from dec.
func readFunction(dec *jsontext.Decoder, tc *ToolCall) error {
	var f functionCall
	if err := json.UnmarshalDecode(dec, &f); err != nil {
		return err
	}
	tc.Name = str(f.Name)
	if f.Result != nil {
		tc.Result = f.Result
	}
	switch f.Arguments.Kind() {
	case '{':
		tc.Args = f.Arguments
	case '"':
		s := str(f.Arguments)
		if v := jsontext.Value(s); v.IsValid() && v.Kind() == '{' {
			tc.Args = v
		} else {
			tc.Args, _ = json.Marshal(map[string]string{"input": s})
		}
	}
	return nil
}

// maxTokens is the largest token count taken from the agent.
const maxTokens = 1 << 50

// counts returns the agent's usage: a member that is not a token count (a
// whole number from 0 to maxTokens) counts as 0; the usage is nil when no
// member is one.
func (u *agentUsage) counts() *AgentUsage {
	if u == nil {
		return nil
	}
	var a AgentUsage
	found := false
	for _, c := range []struct {
		dst *int64
		v   *float64
	}{{&a.InputTokens, u.InputTokens}, {&a.OutputTokens, u.OutputTokens},
		{&a.CacheReadTokens, u.CacheReadTokens}, {&a.CacheWriteTokens, u.CacheWriteTokens}} {
		if f := c.v; f != nil && *f >= 0 && *f <= maxTokens && *f == math.Trunc(*f) {
			*c.dst, found = int64(*f), true
		}
	}
	if !found {
		return nil
	}
	return &a
}

// errorText extracts a message from an error member, a string or an
// object, and its code or details, if it gives any.
func errorText(v jsontext.Value) (text, details string) {
	if v.Kind() != '{' {
		return str(v), ""
	}
	var e errorObject
	unmarshal(v, &e)
	details = scalarText(e.Details)
	if c := scalarText(e.Code); c != "" {
		details = strings.TrimSpace(c + " " + details)
	}
	return cmp.Or(e.Message, e.Error, string(v)), details
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

// same returns old when v holds it, or one of lineNames, else the string
// v holds.
func same(v jsontext.Value, old string) string {
	if v.Kind() != '"' {
		return ""
	}
	name := v[1 : len(v)-1]
	if string(name) == old {
		return old
	}
	if n, ok := lineNames[string(name)]; ok {
		return n
	}
	return str(v)
}

// lineNames are the types and subtypes of agent lines.
var lineNames = func() map[string]string {
	m := map[string]string{}
	for _, n := range strings.Fields(`system init user thinking delta completed assistant tool_call started
		tool-call-started tool-call-completed result success error connection reconnecting reconnected
		retry starting interaction_query request response`) {
		m[n] = n
	}
	return m
}()

// str returns the string a JSON value holds, or "" when it is no string.
// Invalid UTF-8 becomes U+FFFD.
func str(v jsontext.Value) string {
	switch {
	case v.Kind() != '"' || len(v) < 2:
		return ""
	case bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v):
		return string(v[1 : len(v)-1])
	}
	b, _ := jsontext.AppendUnquote(make([]byte, 0, len(v)), v)
	return unsafe.String(unsafe.SliceData(b), len(b)) // b is not used again: the text is not copied twice
}

// dedupe returns v without repeated member names, keeping the last member
// of each name where it stands; json/v2 either refuses repeated names or
// keeps them all. Without repeats, or when not valid JSON, v is returned as is.
func dedupe(v jsontext.Value) jsontext.Value {
	if v == nil || v.IsValid(jsontext.AllowInvalidUTF8(true)) || !v.IsValid(decodeOpts) {
		return v
	}
	var b bytes.Buffer
	enc := jsontext.NewEncoder(&b, jsontext.AllowInvalidUTF8(true))
	dedupeTo(enc, jsontext.NewDecoder(bytes.NewBuffer(v), decodeOpts))
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// dedupeTo copies the next value from dec to enc, without repeated names.
func dedupeTo(enc *jsontext.Encoder, dec *jsontext.Decoder) {
	switch dec.PeekKind() {
	case '{':
		dec.ReadToken()
		type member struct {
			name  string
			value jsontext.Value
		}
		var ms []member
		last := map[string]int{}
		for dec.PeekKind() == '"' {
			tok, _ := dec.ReadToken()
			name := tok.String()
			value, _ := dec.ReadValue()
			last[name] = len(ms)
			ms = append(ms, member{name, value.Clone()})
		}
		dec.ReadToken()
		enc.WriteToken(jsontext.BeginObject)
		for i, m := range ms {
			if last[m.name] == i {
				enc.WriteToken(jsontext.String(m.name))
				dedupeTo(enc, jsontext.NewDecoder(bytes.NewBuffer(m.value), decodeOpts))
			}
		}
		enc.WriteToken(jsontext.EndObject)
	case '[':
		dec.ReadToken()
		enc.WriteToken(jsontext.BeginArray)
		for dec.PeekKind() != ']' && dec.PeekKind() != 0 {
			dedupeTo(enc, dec)
		}
		dec.ReadToken()
		enc.WriteToken(jsontext.EndArray)
	default:
		v, _ := dec.ReadValue()
		enc.WriteValue(v)
	}
}
