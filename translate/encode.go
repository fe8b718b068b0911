package translate

import (
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
)

// newObject starts the JSON of metadata in a buffer of size bytes. The
// metadata of every tool call is written member by member without
// reflection, and raw agent JSON is copied as it is instead of being
// encoded again.
func newObject(size int) documents.Object { return documents.OpenObject(make([]byte, 0, size)) }

// startMetaJSON is the metadata known when a tool call starts: what its
// started event tells, in the field order of the full metadata. workspace
// is the directory a command runs in when it names none.
func startMetaJSON(st *toolState, a *toolArgs, workspace string) jsontext.Value {
	o := newObject(128)
	switch st.class {
	case classShell:
		o.Str("command", a.Command)
		o.Str("workingDirectory", firstNonEmpty(a.WorkingDirectory, a.WorkingDirSnake, a.Cwd, workspace))
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
		o.Str("filePath", p)
		o.StrOmit("operation", op)
		o.Str("language", LanguageOf(p))
	case classPlan:
		o.Str("title", firstNonEmpty(a.Name, a.Title))
		o.Str("overview", a.Overview)
	case classAsk:
		o.StrOmit("title", a.Title)
	case classTodos:
	default:
		o.Str("toolName", st.toolName)
		o.Str("toolCallId", st.callID)
	}
	return o.Close()
}

// terminalMetaJSON encodes m as json.Marshal does.
func terminalMetaJSON(m *documents.TerminalCommandMeta) jsontext.Value {
	o := newObject(128 + len(m.Command) + len(m.Output))
	o.Str("command", m.Command)
	o.Str("workingDirectory", m.WorkingDirectory)
	o.IntPtr("exitCode", m.ExitCode)
	o.Str("output", m.Output)
	o.Int("duration_ms", m.DurationMs)
	o.Strs("permissions", m.Permissions)
	o.StrOmit("toolCallId", m.ToolCallID)
	o.StrOmit("signal", m.Signal)
	o.TrueOmit("isBackground", m.Background)
	o.TrueOmit("rejected", m.Rejected)
	o.StrOmit("reason", m.Reason)
	o.StrOmit("error", m.Error)
	return o.Close()
}

// toolCallMetaJSON encodes m as json.Marshal does, with the raw arguments
// and result data copied as they are: they are large, and valid.
func toolCallMetaJSON(m *documents.ToolCallMeta) jsontext.Value {
	size := 160 + len(m.Arguments) + len(m.ToolCallID) + len(m.Reason)
	if m.Result != nil {
		size += len(m.Result.Data)
	}
	o := newObject(size)
	o.Str("toolName", m.ToolName)
	o.Str("toolCallId", m.ToolCallID)
	o.Raw("arguments", m.Arguments)
	if m.Result == nil {
		o.Raw("result", nil)
	} else {
		o.Key("result")
		r := documents.OpenObject(o.B)
		r.Str("status", m.Result.Status)
		r.Raw("data", m.Result.Data)
		o.B = r.Close()
	}
	o.Int("duration_ms", m.DurationMs)
	o.StrOmit("rawKind", m.RawKind)
	o.TrueOmit("rejected", m.Rejected)
	o.StrOmit("reason", m.Reason)
	return o.Close()
}

// fileEditMetaJSON encodes m as json.Marshal does.
func fileEditMetaJSON(m *documents.FileEditMeta) jsontext.Value {
	size := 192 + len(m.FilePath) + len(m.UnifiedDiff) + len(m.NewPath) + len(m.Reason) + len(m.Error)
	if m.Diff != nil {
		size += len(m.Diff.OldString) + len(m.Diff.NewString)
	}
	o := newObject(size)
	o.Str("filePath", m.FilePath)
	o.Str("operation", m.Operation)
	o.Str("language", m.Language)
	if d := m.Diff; d == nil {
		o.Raw("diff", nil)
	} else {
		o.Key("diff")
		do := documents.OpenObject(o.B)
		do.Str("oldString", d.OldString)
		do.Str("newString", d.NewString)
		do.Int("startLine", int64(d.StartLine))
		do.Int("endLine", int64(d.EndLine))
		o.B = do.Close()
	}
	o.StrOmit("unifiedDiff", m.UnifiedDiff)
	if m.LinesAdded != nil {
		o.Int("linesAdded", int64(*m.LinesAdded))
	}
	if m.LinesRemoved != nil {
		o.Int("linesRemoved", int64(*m.LinesRemoved))
	}
	o.StrOmit("newPath", m.NewPath)
	o.StrOmit("toolCallId", m.ToolCallID)
	o.IntOmit("duration_ms", m.DurationMs)
	o.TrueOmit("rejected", m.Rejected)
	o.StrOmit("reason", m.Reason)
	o.StrOmit("error", m.Error)
	return o.Close()
}

// codeBlockMetaJSON encodes m as json.Marshal does.
func codeBlockMetaJSON(m *documents.CodeBlockMeta) jsontext.Value {
	o := newObject(40 + len(m.Language) + len(m.Purpose))
	o.Str("language", m.Language)
	o.Str("purpose", m.Purpose)
	return o.Close()
}

// codeReferenceMetaJSON encodes m as json.Marshal does.
func codeReferenceMetaJSON(m *documents.CodeReferenceMeta) jsontext.Value {
	o := newObject(72 + len(m.FilePath) + len(m.Language))
	o.Str("filePath", m.FilePath)
	o.Int("startLine", int64(m.StartLine))
	o.Int("endLine", int64(m.EndLine))
	o.Str("language", m.Language)
	return o.Close()
}
