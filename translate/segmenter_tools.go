package translate

import (
	"bytes"
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
)

// reasonUnfinished is the reason given for tool calls still open at the end.
const reasonUnfinished = "the agent ended before the tool finished"

// openTool opens the document of a tool call from its started (or orphan
// completed) event.
func (s *Segmenter) openTool(ev Event) *toolState {
	tc := ev.Tool
	if tc == nil {
		tc = &ToolCall{}
	}
	st := &toolState{rawArgs: tc.Args, rawKind: cmp.Or(tc.Kind, tc.Name), callID: ev.CallID,
		startedAt: tc.StartedAtMs, startTS: ev.TimestampMs}
	st.class, st.toolName = classify(tc.Kind, tc.Name)
	st.args = readArgs(&s.argDec, tc.Args, &st.decoded)
	if tc.Kind == "mcpToolCall" {
		st.toolName = mcpName(st.decoded)
	}
	st.docID = s.openDoc(docTypes[st.class], marshal(startMeta(st, s.workspaceDir())))
	if st.callID != "" {
		if s.tools == nil {
			s.tools = map[string]*toolState{}
		}
		s.tools[st.callID] = st
	}
	s.toolOrder = append(s.toolOrder, st)
	s.emit(documents.ToolCallStart{DocumentID: st.docID, ToolName: st.toolName, ToolCallID: st.callID})
	s.emit(documents.ToolCallArguments{DocumentID: st.docID, Arguments: st.args})
	return st
}

// startMeta is the metadata known when a tool call starts: what its
// started event tells, in the field order of the full metadata. workspace
// is the directory a command runs in when it names none.
func startMeta(st *toolState, workspace string) any {
	a := &st.decoded
	switch st.class {
	case classShell:
		return struct {
			Command          string `json:"command"`
			WorkingDirectory string `json:"workingDirectory"`
		}{a.Command, cmp.Or(a.WorkingDirectory, a.WorkingDirSnake, a.Cwd, workspace)}
	case classEdit, classWrite, classDelete, classPatch:
		// An edit or a write may turn out to create the file: only its
		// result tells, and only a delete or a patch's header says it now.
		p, op := a.path(), ""
		switch st.class {
		case classPatch:
			p, op, _ = patchTarget(cmp.Or(a.Patch, a.Input))
		case classDelete:
			op = "delete"
		}
		return struct {
			FilePath  string `json:"filePath"`
			Operation string `json:"operation,omitzero"`
			Language  string `json:"language"`
		}{p, op, LanguageOf(p)}
	case classPlan:
		return struct {
			Title    string `json:"title"`
			Overview string `json:"overview"`
		}{cmp.Or(a.Name, a.Title), a.Overview}
	case classAsk:
		return struct {
			Title string `json:"title,omitzero"`
		}{a.Title}
	case classTodos:
		return struct{}{}
	}
	return struct {
		ToolName   string `json:"toolName"`
		ToolCallID string `json:"toolCallId"`
	}{st.toolName, st.callID}
}

func mcpName(a toolArgs) string {
	server := cmp.Or(a.Provider, a.Server)
	tool := cmp.Or(a.ToolName, a.Name)
	if server != "" && tool != "" {
		if rest, ok := strings.CutPrefix(tool, server+"-"); ok && a.ToolName == "" {
			tool = rest
		}
		return "mcp__" + strings.NewReplacer(" ", "_", "-", "_").Replace(server) + "__" + tool
	}
	return "mcp__" + cmp.Or(tool, "unknown")
}

// finishTool ends a tool call's document with its result. tc is nil when
// the call is closed unfinished.
func (s *Segmenter) finishTool(st *toolState, tc *ToolCall, ts int64) {
	st.ended = true
	// The completed event usually repeats the started arguments: they are
	// decoded again only when they differ.
	args, a := st.args, &st.decoded
	out, body, background := outcomePending, jsontext.Value(nil), false
	var dur int64
	if tc != nil {
		if tc.Args != nil && !bytes.Equal(tc.Args, st.rawArgs) {
			a = &toolArgs{}
			args = readArgs(&s.argDec, tc.Args, a)
		}
		start := cmp.Or(tc.StartedAtMs, st.startedAt)
		switch {
		case tc.CompletedAtMs != 0 && start != 0:
			dur = tc.CompletedAtMs - start
		case ts != 0 && st.startTS != 0:
			dur = ts - st.startTS
		default:
			dur = tc.DurationMs
		}
		out, body, background = classifyResult(tc.Result)
		if out == outcomePending {
			out = outcomeSuccess
		}
	}
	dur = max(dur, 0)
	var b toolBody
	if body.Kind() == '{' {
		unmarshal(body, &b)
	} else if body.Kind() == '"' && st.class == classShell {
		b.Output = str(body) // a function call's result: the command's output
	}
	reason := ""
	switch out {
	case outcomePending:
		reason = reasonUnfinished
	case outcomeRejected:
		reason = cmp.Or(b.Reason, b.Message, "the tool call was rejected")
	case outcomeFailed:
		reason = cmp.Or(b.Error, b.Message, b.Reason, errText(body))
	}
	status := "success"
	if out != outcomeSuccess || b.IsError {
		status = "error"
	}
	data := body
	if data == nil {
		if reason != "" {
			data = marshal(map[string]string{"reason": reason})
		} else {
			data = jsontext.Value("null")
		}
	}
	s.emit(documents.ToolResultEvent{DocumentID: st.docID, Result: documents.ToolResult{Status: status, Data: data}})

	var content *string
	var meta any
	switch st.class {
	case classShell:
		meta = s.shellMeta(st, a, &b, out, reason, dur, background)
	case classEdit, classWrite, classDelete, classPatch:
		content, meta = fileEditMeta(st, a, &b, out, reason, dur)
	case classPlan:
		todos := slices.Clone(a.Todos)
		for i := range todos {
			todos[i].Status = todoStatus(todos[i].Status)
		}
		if a.Plan != "" {
			content = new(a.Plan)
		}
		meta = documents.PlanMeta{Title: cmp.Or(a.Name, a.Title), Overview: a.Overview, Todos: todos, Format: "markdown", ToolCallID: st.callID}
	case classTodos:
		todos := make([]documents.TodoStatus, 0, len(a.Todos))
		for _, t := range a.Todos {
			todos = append(todos, documents.TodoStatus{ID: t.ID, Status: todoStatus(t.Status), Content: t.Content})
		}
		meta = documents.TodoUpdateMeta{Todos: todos, Merge: a.Merge, ToolCallID: st.callID}
	case classAsk:
		st.awaiting = false
		content, meta = clarificationMeta(st, a, out, reason)
	default:
		meta = documents.ToolCallMeta{ToolName: st.toolName, ToolCallID: st.callID, Arguments: args,
			Result: &documents.ToolResult{Status: status, Data: data}, DurationMs: dur, RawKind: st.rawKind,
			Rejected: out == outcomeRejected, Reason: reason, Approval: st.approval}
	}
	s.emit(documents.DocumentEnd{DocumentID: st.docID, FinalContent: content, Metadata: marshal(meta)})
}

// errText is the reason a failed tool's result gives when it names none of
// the known members: the result as a string, else the string member whose
// name says message (errorMessage, …), else its first string member, else
// a stock reason.
func errText(v jsontext.Value) string {
	switch v.Kind() {
	case '"':
		return str(v)
	case '{':
		// The members are read in order, which no Go type keeps.
		first, message := "", ""
		dec := jsontext.NewDecoder(bytes.NewBuffer(v), decodeOpts)
		eachMember(dec, func(name []byte) error {
			val, err := dec.ReadValue()
			if t := str(val); strings.TrimSpace(t) != "" {
				first = cmp.Or(first, t)
				if message == "" && strings.Contains(strings.ToLower(string(name)), "message") {
					message = t
				}
			}
			return err
		})
		if t := cmp.Or(message, first); t != "" {
			return t
		}
	}
	return "the tool failed"
}

// workspaceDir is the directory the agent runs in: the configured
// workspace, else the one its init reported.
func (s *Segmenter) workspaceDir() string {
	if s.opts.Workspace == "" && s.init != nil {
		return s.init.Cwd
	}
	return s.opts.Workspace
}

func (s *Segmenter) shellMeta(st *toolState, a *toolArgs, b *toolBody, out outcome, reason string, dur int64, bg bool) documents.TerminalCommandMeta {
	wd := cmp.Or(b.WorkingDirectory, a.WorkingDirectory, a.WorkingDirSnake, a.Cwd, s.workspaceDir())
	m := documents.TerminalCommandMeta{
		Command: cmp.Or(a.Command, b.Command), WorkingDirectory: wd, Permissions: []string{},
		ToolCallID: st.callID, Signal: b.Signal, Background: bg || a.IsBackground, Approval: st.approval,
	}
	if a.Sandbox != nil {
		if a.Sandbox.NetworkAccess {
			m.Permissions = append(m.Permissions, "network")
		}
		if a.Sandbox.Type == "TYPE_INSECURE_NONE" {
			m.Permissions = append(m.Permissions, "unsandboxed")
		}
	}
	switch out {
	case outcomeSuccess:
		m.ExitCode = cmp.Or(b.exitCode(), new(0))
		m.Output = b.shellOutput()
	case outcomeRejected:
		m.Rejected, m.Reason = true, reason
	case outcomeFailed:
		m.Output, m.Error, m.Reason = b.shellOutput(), reason, reason
		// A failure that names an exit code is a command that ran: the
		// error is only what it says.
		if m.ExitCode = b.exitCode(); m.ExitCode != nil {
			msg := cmp.Or(b.Error, b.Message, b.Reason)
			m.Error, m.Reason = msg, msg
		}
	case outcomePending:
		m.Reason = reason
	}
	m.DurationMs = cmp.Or(b.ExecutionTime.n, dur)
	return m
}

// fileEditMeta builds a file_edit document's content and metadata.
func fileEditMeta(st *toolState, a *toolArgs, b *toolBody, out outcome, reason string, dur int64) (*string, documents.FileEditMeta) {
	m := documents.FileEditMeta{FilePath: cmp.Or(a.path(), b.Path), ToolCallID: st.callID, DurationMs: dur, Approval: st.approval}
	var content *string
	set := func(s string) { content = &s }
	switch st.class {
	case classDelete:
		m.Operation = "delete"
	case classWrite:
		m.Operation = "create"
		text := cmp.Or(a.FileText, a.Contents, str(a.Content))
		if b.AfterFullContent != nil && text == "" {
			text = *b.AfterFullContent
		}
		set(text)
	case classPatch:
		p, op, np := patchTarget(cmp.Or(a.Patch, a.Input))
		m.FilePath, m.Operation, m.NewPath = cmp.Or(m.FilePath, p), op, np
		m.UnifiedDiff = cmp.Or(a.Patch, a.Input)
	default:
		m.Operation = "edit"
		oldS, newS := cmp.Or(a.OldString, a.OldStringCamel), cmp.Or(a.NewString, a.NewStringCamel)
		if b.DiffString != "" {
			create, del, h, added, removed := parseDiff(b.DiffString)
			m.UnifiedDiff = b.DiffString
			b.LinesAdded, b.LinesRemoved = cmp.Or(b.LinesAdded, &added), cmp.Or(b.LinesRemoved, &removed)
			switch {
			case create:
				m.Operation = "create"
				set(cmp.Or(deref(b.AfterFullContent), a.StreamContent, h.newText))
			case del:
				m.Operation = "delete"
			case h.found:
				end := max(h.oldStart, h.oldStart+h.oldLines-1)
				m.Diff = &documents.Diff{OldString: h.oldText, NewString: h.newText, StartLine: h.oldStart, EndLine: end}
				set(h.newText)
			}
		} else if oldS != "" || newS != "" {
			start, end := lineRange(deref(b.BeforeFullContent), oldS)
			m.Diff = &documents.Diff{OldString: oldS, NewString: newS, StartLine: start, EndLine: end}
			set(newS)
		} else if b.BeforeFullContent == nil && (b.AfterFullContent != nil || a.StreamContent != "") && out == outcomeSuccess {
			m.Operation = "create"
			set(cmp.Or(deref(b.AfterFullContent), a.StreamContent))
		} else if t := cmp.Or(a.StreamContent, a.CodeEdit); t != "" {
			set(t)
		}
		m.LinesAdded, m.LinesRemoved = b.LinesAdded, b.LinesRemoved
	}
	m.Language = LanguageOf(m.FilePath)
	switch out {
	case outcomeRejected:
		m.Rejected, m.Reason = true, reason
	case outcomeFailed, outcomePending:
		m.Error, m.Reason = reason, reason
	}
	return content, m
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// lineRange finds the lines old occupies in before (1-based), or 0, 0.
func lineRange(before, old string) (int, int) {
	if before == "" || old == "" {
		return 0, 0
	}
	i := strings.Index(before, old)
	if i < 0 {
		return 0, 0
	}
	start := strings.Count(before[:i], "\n") + 1
	return start, start + strings.Count(strings.TrimSuffix(old, "\n"), "\n")
}

// SetApproval records the approval state of tool call id's open document,
// which its final metadata keeps, and emits document_update with its
// metadata so far.
func (s *Segmenter) SetApproval(id string, a documents.Approval) {
	st := s.tools[id]
	if s.done || st == nil || st.ended {
		return
	}
	st.approval = a
	m := map[string]jsontext.Value{}
	unmarshal(marshal(startMeta(st, s.workspaceDir())), &m)
	unmarshal(marshal(a), &m)
	m["toolCallId"] = marshal(st.callID)
	if b, err := json.Marshal(m, json.Deterministic(true)); err == nil {
		s.emit(documents.DocumentUpdate{DocumentID: st.docID, Metadata: b})
	}
}

// SetAnswers records the state of clarification id's open document: still
// awaiting answers, or the answers given; its final metadata keeps them.
func (s *Segmenter) SetAnswers(id string, awaiting bool, answers []documents.QuestionAnswer) {
	st := s.tools[id]
	if s.done || st == nil || st.ended {
		return
	}
	st.awaiting, st.answers = awaiting, answers
	_, meta := clarificationMeta(st, &st.decoded, outcomePending, "")
	s.emit(documents.DocumentUpdate{DocumentID: st.docID, Metadata: marshal(meta)})
}

// clarificationMeta builds a clarification document's content and
// metadata.
func clarificationMeta(st *toolState, a *toolArgs, out outcome, reason string) (*string, documents.ClarificationMeta) {
	qs := make([]documents.Question, 0, len(a.Questions))
	for i, q := range a.Questions {
		opts := make([]documents.Option, 0, len(q.Options))
		for j, o := range q.Options {
			opts = append(opts, documents.Option{ID: cmp.Or(o.ID, strconv.Itoa(j+1)), Label: cmp.Or(o.Label, o.Text, o.ID)})
		}
		qs = append(qs, documents.Question{ID: cmp.Or(q.ID, "q"+strconv.Itoa(i+1)), Text: cmp.Or(q.Prompt, q.Text, q.Question), Options: opts, AllowMultiple: q.Multiple})
	}
	var content *string
	if a.Title != "" {
		content = new(a.Title)
	}
	m := documents.ClarificationMeta{Questions: qs, ToolCallID: st.callID, Awaiting: st.awaiting, Answers: st.answers}
	if out == outcomeRejected {
		m.Rejected, m.Reason = true, reason
	}
	return content, m
}
