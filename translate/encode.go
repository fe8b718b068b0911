package translate

import (
	"strconv"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
)

// object appends a JSON object member by member, byte for byte as
// json.Marshal writes the matching struct. It encodes the metadata written
// for every tool call without reflection, and copies raw agent JSON as it
// is instead of encoding it again.
type object struct{ b []byte }

func newObject(size int) object { return object{b: append(make([]byte, 0, size), '{')} }

func (o *object) key(k string) {
	if len(o.b) > 1 {
		o.b = append(o.b, ',')
	}
	o.b = append(o.b, '"')
	o.b = append(o.b, k...)
	o.b = append(o.b, '"', ':')
}

func (o *object) str(k, v string) {
	o.key(k)
	o.b, _ = jsontext.AppendQuote(o.b, v) // invalid UTF-8 becomes U+FFFD, as in marshal
}

func (o *object) strOmit(k, v string) {
	if v != "" {
		o.str(k, v)
	}
}

func (o *object) int(k string, v int64) {
	o.key(k)
	o.b = strconv.AppendInt(o.b, v, 10)
}

func (o *object) intPtr(k string, v *int) {
	if v == nil {
		o.key(k)
		o.b = append(o.b, "null"...)
		return
	}
	o.int(k, int64(*v))
}

func (o *object) trueOmit(k string, v bool) {
	if v {
		o.key(k)
		o.b = append(o.b, "true"...)
	}
}

func (o *object) strs(k string, v []string) {
	o.key(k)
	o.b = append(o.b, '[')
	for i, s := range v {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.b, _ = jsontext.AppendQuote(o.b, s)
	}
	o.b = append(o.b, ']')
}

// raw appends v, JSON from an already validated agent line, as it is.
func (o *object) raw(k string, v jsontext.Value) {
	o.key(k)
	if len(v) == 0 {
		o.b = append(o.b, "null"...)
		return
	}
	o.b = append(o.b, v...)
}

func (o *object) end() jsontext.Value { return append(o.b, '}') }

// startMetaJSON is the metadata known when a tool call starts: what its
// started event tells, in the field order of the full metadata. workspace
// is the directory a command runs in when it names none.
func startMetaJSON(st *toolState, a *toolArgs, workspace string) jsontext.Value {
	o := newObject(128)
	switch st.class {
	case classShell:
		o.str("command", a.Command)
		o.str("workingDirectory", firstNonEmpty(a.WorkingDirectory, a.WorkingDirSnake, a.Cwd, workspace))
	case classEdit, classWrite, classDelete, classPatch:
		// An edit or a write may turn out to create the file: only its
		// result tells, and only a delete or a patch's header says it now.
		p, op := a.path(), ""
		switch st.class {
		case classPatch:
			p, op, _ = patchTarget(firstNonEmpty(a.Patch, a.Input))
		case classDelete:
			op = fileOperation(st.class)
		}
		o.str("filePath", p)
		o.strOmit("operation", op)
		o.str("language", LanguageOf(p))
	case classPlan:
		o.str("title", firstNonEmpty(a.Name, a.Title))
		o.str("overview", a.Overview)
	case classAsk:
		o.strOmit("title", a.Title)
	case classTodos:
	default:
		o.str("toolName", st.toolName)
		o.str("toolCallId", st.callID)
	}
	return o.end()
}

// terminalMetaJSON encodes m as json.Marshal does.
func terminalMetaJSON(m *documents.TerminalCommandMeta) jsontext.Value {
	o := newObject(128 + len(m.Command) + len(m.Output))
	o.str("command", m.Command)
	o.str("workingDirectory", m.WorkingDirectory)
	o.intPtr("exitCode", m.ExitCode)
	o.str("output", m.Output)
	o.int("duration_ms", m.DurationMs)
	o.strs("permissions", m.Permissions)
	o.strOmit("toolCallId", m.ToolCallID)
	o.strOmit("signal", m.Signal)
	o.trueOmit("isBackground", m.Background)
	o.trueOmit("rejected", m.Rejected)
	o.strOmit("reason", m.Reason)
	o.strOmit("error", m.Error)
	return o.end()
}

// toolCallMetaJSON encodes m as json.Marshal does, with the raw arguments
// and result data copied as they are: they are large, and valid.
func toolCallMetaJSON(m *documents.ToolCallMeta) jsontext.Value {
	size := 160 + len(m.Arguments) + len(m.ToolCallID) + len(m.Reason)
	if m.Result != nil {
		size += len(m.Result.Data)
	}
	o := newObject(size)
	o.str("toolName", m.ToolName)
	o.str("toolCallId", m.ToolCallID)
	o.raw("arguments", m.Arguments)
	if m.Result == nil {
		o.raw("result", nil)
	} else {
		o.key("result")
		o.b = append(o.b, `{"status":`...)
		o.b, _ = jsontext.AppendQuote(o.b, m.Result.Status)
		o.b = append(o.b, `,"data":`...)
		if len(m.Result.Data) == 0 {
			o.b = append(o.b, "null"...)
		}
		o.b = append(o.b, m.Result.Data...)
		o.b = append(o.b, '}')
	}
	o.int("duration_ms", m.DurationMs)
	o.strOmit("rawKind", m.RawKind)
	o.trueOmit("rejected", m.Rejected)
	o.strOmit("reason", m.Reason)
	return o.end()
}
