package translate

import (
	"bytes"
	"cmp"
	"strconv"
	"strings"
	"unicode"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
)

// toolArgs is the union of the argument fields Docstream reads from any
// tool in any dialect. readArgs fills it; the tags name the members.
type toolArgs struct {
	Path             string               `json:"path"`
	FilePath         string               `json:"file_path"`
	FilePathCamel    string               `json:"filePath"`
	TargetFile       string               `json:"target_file"`
	Command          string               `json:"command"`
	WorkingDirectory string               `json:"workingDirectory"`
	WorkingDirSnake  string               `json:"working_directory"`
	Cwd              string               `json:"cwd"`
	IsBackground     bool                 `json:"isBackground"`
	Sandbox          *sandboxPolicy       `json:"requestedSandboxPolicy"`
	StreamContent    string               `json:"streamContent"`
	OldString        string               `json:"old_string"`
	NewString        string               `json:"new_string"`
	OldStringCamel   string               `json:"oldString"`
	NewStringCamel   string               `json:"newString"`
	Patch            string               `json:"patch"`
	Input            string               `json:"input"`
	FileText         string               `json:"fileText"`
	Contents         string               `json:"contents"`
	CodeEdit         string               `json:"code_edit"` // the spec's §7 edit_file: the edited region
	Content          jsontext.Value       `json:"content"`
	Name             string               `json:"name"`
	Title            string               `json:"title"`
	Overview         string               `json:"overview"`
	Plan             string               `json:"plan"`
	Todos            []documents.PlanTodo `json:"todos"`
	Merge            bool                 `json:"merge"`
	Questions        []rawQuestion        `json:"questions"`
	ToolName         string               `json:"toolName"`
	Provider         string               `json:"providerIdentifier"`
	Server           string               `json:"server"`
}

type sandboxPolicy struct {
	Type          string `json:"type"`
	NetworkAccess bool   `json:"networkAccess"`
}

type rawQuestion struct {
	ID       string      `json:"id"`
	Prompt   string      `json:"prompt"`
	Text     string      `json:"text"`
	Question string      `json:"question"`
	Options  []rawOption `json:"options"`
	Multiple bool        `json:"allowMultiple"`
}

type rawOption struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	Text  string `json:"text"`
}

func (a *toolArgs) path() string {
	return cmp.Or(a.Path, a.FilePath, a.FilePathCamel, a.TargetFile)
}

// toolBody is the union of result fields Docstream reads; the tags name
// the members.
type toolBody struct {
	Path              string  `json:"path"`
	Command           string  `json:"command"`
	WorkingDirectory  string  `json:"workingDirectory"`
	ExitCode          *int    `json:"exitCode"`
	ExitCodeSnake     *int    `json:"exit_code"`
	Signal            string  `json:"signal"`
	Stdout            string  `json:"stdout"`
	Stderr            string  `json:"stderr"`
	Interleaved       string  `json:"interleavedOutput"`
	Output            string  `json:"output"`
	ExecutionTime     number  `json:"executionTime"`
	Reason            string  `json:"reason"`
	Error             string  `json:"error"`
	Message           string  `json:"message"`
	DiffString        string  `json:"diffString"`
	LinesAdded        *int    `json:"linesAdded"`
	LinesRemoved      *int    `json:"linesRemoved"`
	BeforeFullContent *string `json:"beforeFullFileContent"`
	AfterFullContent  *string `json:"afterFullFileContent"`
	IsError           bool    `json:"isError"`
}

// exitCode is the exit code the result names, or nil.
func (b *toolBody) exitCode() *int {
	return cmp.Or(b.ExitCode, b.ExitCodeSnake)
}

// shellOutput is a command's output: interleaved when the result has it,
// else stdout then stderr, else the output member.
func (b *toolBody) shellOutput() string {
	return cmp.Or(b.Interleaved, b.Stdout+b.Stderr, b.Output)
}

// outcome is how a tool call ended.
type outcome uint8

const (
	outcomePending outcome = iota
	outcomeSuccess
	outcomeRejected
	outcomeFailed
)

// resultLayout is a tool result in any of its layouts: {"success":{…}},
// {"rejected":{…}}, {"error":{…}}, {"spawnError":{…}}, a legacy
// {"success":true,…}, or a bare result object.
type resultLayout struct {
	Success    jsontext.Value `json:"success"`
	Rejected   jsontext.Value `json:"rejected"`
	Error      jsontext.Value `json:"error"`
	SpawnError jsontext.Value `json:"spawnError"`
	Failure    jsontext.Value `json:"failure"`
	Timeout    jsontext.Value `json:"timeout"`
	Denied     jsontext.Value `json:"permissionDenied"`
	Background bool           `json:"isBackground"`
}

// classifyResult reads a tool result: how the call ended, the object that
// tells more, and whether the command went on in the background. The
// objects it returns repeat no member name.
func classifyResult(raw jsontext.Value) (outcome, jsontext.Value, bool) {
	if raw.Kind() != '{' {
		if len(raw) == 0 {
			return outcomePending, nil, false
		}
		return outcomeSuccess, dedupe(raw), false
	}
	var r resultLayout
	raw = unmarshalLast(raw, &r)
	switch {
	case r.Success.Kind() == '{':
		return outcomeSuccess, r.Success, r.Background
	case r.Rejected != nil:
		return outcomeRejected, r.Rejected, false
	case r.Denied != nil:
		return outcomeRejected, r.Denied, false
	case r.SpawnError != nil:
		return outcomeFailed, r.SpawnError, false
	case r.Failure != nil:
		return outcomeFailed, r.Failure, false
	case r.Timeout != nil:
		return outcomeFailed, r.Timeout, false
	case r.Success.Kind() == 'f':
		return outcomeFailed, raw, false
	case r.Success.Kind() == 't':
		return outcomeSuccess, raw, r.Background
	case r.Error.Kind() == '{':
		return outcomeFailed, r.Error, false
	case r.Error != nil && r.Error.Kind() != 'n':
		return outcomeFailed, raw, false
	}
	return outcomeSuccess, raw, r.Background
}

// toolClass is what a tool call becomes.
type toolClass uint8

const (
	classTool toolClass = iota
	classShell
	classEdit
	classWrite
	classDelete
	classPatch
	classPlan
	classTodos
	classAsk
)

// toolNames maps the kinds, hyphenated names and function names of the
// tools Docstream knows to their class and snake_case tool name.
var toolNames = func() map[string]toolName {
	m := map[string]toolName{}
	for _, t := range []struct {
		class toolClass
		names string // the tool name first
	}{
		{classShell, "run_terminal_cmd shellToolCall Shell shell Bash bash"},
		{classEdit, "edit_file editToolCall StrReplace search_replace Edit MultiEdit str_replace"},
		{classWrite, "write writeToolCall writeFileToolCall Write write_file create_file"},
		{classDelete, "delete_file deleteToolCall Delete delete"},
		{classPatch, "apply_patch applyPatchToolCall ApplyPatch"},
		{classPlan, "create_plan createPlanToolCall CreatePlan"},
		{classTodos, "todo_write updateTodosToolCall TodoWrite updateTodos"},
		{classAsk, "ask_question askQuestionToolCall AskQuestion"},
		{classTool, "read_file readToolCall Read"},
		{classTool, "glob_file_search globToolCall Glob"},
		{classTool, "grep grepToolCall Grep"},
		{classTool, "list_dir lsToolCall LS"},
		{classTool, "codebase_search semSearchToolCall SemanticSearch"},
		{classTool, "web_fetch webFetchToolCall WebFetch"},
		{classTool, "web_search webSearchToolCall WebSearch"},
		{classTool, "read_lints readLintsToolCall ReadLints"},
	} {
		names := strings.Fields(t.names)
		for _, n := range names {
			m[n] = toolName{t.class, names[0]}
		}
	}
	return m
}()

type toolName struct {
	class toolClass
	name  string
}

// classify maps a tool's kind (or hyphenated name, or function name) to its
// document class and its snake_case tool name.
func classify(kind, name string) (toolClass, string) {
	key := kind
	if kind == "function" && name != "" {
		key = name
	}
	if t, ok := toolNames[key]; ok {
		return t.class, t.name
	}
	if kind == "function" {
		return classTool, cmp.Or(name, "function")
	}
	return classTool, snake(strings.TrimSuffix(key, "ToolCall"))
}

// docTypes are the document types of the classes.
var docTypes = [...]documents.Type{
	classTool: documents.TypeToolCall, classShell: documents.TypeTerminalCommand, classEdit: documents.TypeFileEdit,
	classWrite: documents.TypeFileEdit, classDelete: documents.TypeFileEdit, classPatch: documents.TypeFileEdit,
	classPlan: documents.TypePlan, classTodos: documents.TypeTodoUpdate, classAsk: documents.TypeClarification,
}

// snake turns a camelCase or PascalCase name into snake_case.
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		if r == '-' || r == ' ' || r == '.' {
			b.WriteByte('_')
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// todoStatus normalizes TODO_STATUS_* and other spellings.
func todoStatus(s string) string {
	t := strings.ToLower(strings.TrimPrefix(strings.ToUpper(s), "TODO_STATUS_"))
	switch t {
	case "pending", "todo", "not_started", "open", "unspecified", "":
		return "pending"
	case "in_progress", "inprogress", "in-progress", "active", "running":
		return "in_progress"
	case "completed", "complete", "done", "finished":
		return "completed"
	case "cancelled", "canceled", "skipped":
		return "cancelled"
	}
	return t
}

// hunk is the first hunk of a unified diff.
type hunk struct {
	oldStart, oldLines int
	oldText, newText   string
	found              bool
}

// parseDiff reads a unified diff: whether it creates or deletes the file,
// its first hunk, and how many lines it adds and removes in all. "--- " and
// "+++ " lines are file headers only outside a hunk: inside one they are a
// removed "-- …" or an added "++ …" line.
func parseDiff(d string) (create, del bool, first hunk, added, removed int) {
	var oldSide, newSide []string // the first hunk's
	inFirst := false
	remOld, remNew := 0, 0 // lines of the current hunk still to come
	for ln := range strings.SplitSeq(d, "\n") {
		inHunk := remOld > 0 || remNew > 0
		switch {
		case !inHunk && strings.HasPrefix(ln, "--- "):
			create = create || strings.TrimSpace(ln[4:]) == "/dev/null"
		case !inHunk && strings.HasPrefix(ln, "+++ "):
			del = del || strings.TrimSpace(ln[4:]) == "/dev/null"
		case strings.HasPrefix(ln, "@@"):
			a, b, n := parseHunkHeader(ln)
			remOld, remNew = b, n
			if inFirst = !first.found; inFirst {
				first = hunk{oldStart: a, oldLines: b, found: true}
			}
		case ln == "":
		case ln[0] == '+':
			added++
			remNew--
			if inFirst {
				newSide = append(newSide, ln[1:])
			}
		case ln[0] == '-':
			removed++
			remOld--
			if inFirst {
				oldSide = append(oldSide, ln[1:])
			}
		case ln[0] == ' ':
			remOld--
			remNew--
			if inFirst {
				oldSide, newSide = append(oldSide, ln[1:]), append(newSide, ln[1:])
			}
		}
	}
	first.oldText, first.newText = strings.Join(oldSide, "\n"), strings.Join(newSide, "\n")
	return
}

// parseHunkHeader reads a, b and d of "@@ -a,b +c,d @@ heading".
func parseHunkHeader(ln string) (a, b, d int) {
	b, d = 1, 1
	ranges, _, _ := strings.Cut(strings.TrimPrefix(ln, "@@"), "@@")
	for p := range strings.FieldsSeq(ranges) {
		if len(p) < 2 {
			continue
		}
		switch p[0] {
		case '-':
			a, b = rangeOf(p[1:])
		case '+':
			_, d = rangeOf(p[1:])
		}
	}
	return
}

func rangeOf(s string) (start, n int) {
	n = 1
	x, y, ok := strings.Cut(s, ",")
	start, _ = strconv.Atoi(x)
	if ok {
		n, _ = strconv.Atoi(y)
	}
	return
}

// patchTarget reads the first file operation of an apply-patch text.
func patchTarget(p string) (path, op, newPath string) {
	for _, ln := range strings.Split(p, "\n") {
		ln = strings.TrimSpace(ln)
		for _, h := range [...]struct{ prefix, op string }{
			{"*** Add File: ", "create"}, {"*** Delete File: ", "delete"}, {"*** Update File: ", "edit"}, {"*** Move to: ", "rename"},
		} {
			p, ok := strings.CutPrefix(ln, h.prefix)
			switch {
			case ok && h.op == "rename" && newPath == "":
				newPath, op = p, h.op
			case ok && h.op != "rename" && path == "":
				path, op = p, h.op
			}
		}
	}
	return path, cmp.Or(op, "edit"), newPath
}

// readArgs decodes a tool's arguments object into a (a member of an
// unexpected type is left out) and returns it as written, but for its
// toolCallId member and repeated member names; dec reads its members.
func readArgs(dec *jsontext.Decoder, raw jsontext.Value, a *toolArgs) jsontext.Value {
	if raw.Kind() != '{' {
		return jsontext.Value("{}")
	}
	raw = unmarshalLast(raw, a)
	out := append(make(jsontext.Value, 0, len(raw)), '{')
	dec.Reset(bytes.NewBuffer(raw), decodeOpts)
	prev, found := int64(bytes.IndexByte(raw, '{')+1), false
	err := eachMember(dec, func(name []byte) error {
		err := dec.SkipValue()
		member := bytes.TrimLeft(raw[prev:dec.InputOffset()], " \t\r\n,")
		prev = dec.InputOffset()
		switch {
		case string(name) == "toolCallId":
			found = true
		case len(out) > 1:
			out = append(append(out, ','), member...)
		default:
			out = append(out, member...)
		}
		return err
	})
	if err != nil || !found {
		return raw
	}
	return append(out, '}')
}
