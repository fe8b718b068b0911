package simulator

import (
	"path"
	"strings"
	"time"
)

// static returns an args builder that ignores the call id.
func static(args obj) func(string) obj {
	return func(string) obj { return args }
}

// shellSpec describes a scripted shell command.
type shellSpec struct {
	command     string
	description string
	stdout      string
	stderr      string
	exitCode    int
	duration    time.Duration
	rejected    bool
}

// parseCommand splits a command line into the CLI's parsingResult shape:
// simple commands separated by &&, ||, ; or |, each split into words.
func parseCommand(command string) (names []string, executable []any) {
	seps := strings.NewReplacer("&&", "\x00", "||", "\x00", ";", "\x00", "|", "\x00")
	for _, part := range strings.Split(seps.Replace(command), "\x00") {
		words := strings.Fields(part)
		if len(words) == 0 {
			continue
		}
		args := make([]any, 0, len(words)-1)
		for _, w := range words[1:] {
			kind := "word"
			if strings.Trim(w, "0123456789.") == "" {
				kind = "number"
			}
			args = append(args, o("type", kind, "value", w))
		}
		names = append(names, words[0])
		executable = append(executable, o("name", words[0], "args", args, "fullText", strings.Join(words, " ")))
	}
	return names, executable
}

// shell builds a shellToolCall with the full argument set of the current CLI.
func (r *run) shell(s shellSpec) *toolCall {
	names, executable := parseCommand(s.command)
	if names == nil {
		names = []string{}
	}
	redirect := strings.ContainsAny(s.command, "<>")
	args := func(callID string) obj {
		return o(
			"command", s.command,
			"workingDirectory", "",
			"timeout", 30000,
			"toolCallId", callID,
			"simpleCommands", names,
			"hasInputRedirect", strings.Contains(s.command, "<"),
			"hasOutputRedirect", strings.Contains(s.command, ">"),
			"parsingResult", o(
				"parsingFailed", false,
				"executableCommands", executable,
				"hasRedirects", redirect,
				"hasCommandSubstitution", strings.Contains(s.command, "$("),
				"redirects", []any{},
			),
			"fileOutputThresholdBytes", "40000",
			"isBackground", false,
			"skipApproval", false,
			"timeoutBehavior", "TIMEOUT_BEHAVIOR_BACKGROUND",
			"hardTimeout", 86400000,
			"description", s.description,
			"closeStdin", true,
			"conversationId", r.sessionID,
			"adminCommandDenylist", []any{},
			"requestId", r.requestID,
		)
	}
	c := &toolCall{kind: "shellToolCall", args: args, description: s.description, duration: s.duration}
	if s.rejected {
		c.asks, c.approvedOutput = true, s.stdout
		c.resultOnly = true
		c.result = o("rejected", o(
			"command", s.command,
			"workingDirectory", r.cwd,
			"reason", "",
			"isReadonly", false,
		))
		return c
	}
	c.result = o(
		"success", o(
			"command", s.command,
			"workingDirectory", "",
			"exitCode", s.exitCode,
			"signal", "",
			"stdout", s.stdout,
			"stderr", s.stderr,
			"executionTime", s.duration.Milliseconds(),
			"interleavedOutput", s.stdout+s.stderr,
			"localExecutionTimeMs", max(s.duration.Milliseconds()-40, 1),
		),
		"isBackground", false,
	)
	return c
}

// abs joins a workspace-relative path onto the run's working directory.
func (r *run) abs(rel string) string {
	return path.Join(r.cwd, rel)
}

// readFile builds a readToolCall returning content.
func (r *run) readFile(rel, content string, d time.Duration) *toolCall {
	p := r.abs(rel)
	return &toolCall{
		kind: "readToolCall",
		args: static(o("path", p)),
		result: o("success", o(
			"content", content,
			"isEmpty", content == "",
			"exceededLimit", false,
			"totalLines", len(splitLines(content)),
			"fileSize", len(content),
			"path", p,
		)),
		duration: d,
	}
}

// glob builds a globToolCall that finds files (workspace-relative names).
func (r *run) glob(pattern string, files []string, d time.Duration) *toolCall {
	return &toolCall{
		kind: "globToolCall",
		args: static(o("targetDirectory", r.cwd, "globPattern", pattern)),
		result: o("success", o(
			"pattern", pattern,
			"path", r.cwd,
			"files", files,
			"totalFiles", len(files),
			"clientTruncated", false,
			"ripgrepTruncated", false,
		)),
		duration: d,
	}
}

// grepMatch is one matching line of a grep result.
type grepMatch struct {
	file    string
	line    int
	content string
}

// grep builds a grepToolCall with workspace results.
func (r *run) grep(pattern string, matches []grepMatch, d time.Duration) *toolCall {
	var files []any
	byFile := map[string]int{}
	for _, m := range matches {
		lm := o("lineNumber", m.line, "content", m.content)
		if i, ok := byFile[m.file]; ok {
			f := files[i].(obj)
			f[1].val = append(f[1].val.([]any), lm)
			continue
		}
		byFile[m.file] = len(files)
		files = append(files, o("file", m.file, "matches", []any{lm}))
	}
	if files == nil {
		files = []any{}
	}
	return &toolCall{
		kind: "grepToolCall",
		args: static(o(
			"pattern", pattern,
			"path", r.cwd,
			"caseInsensitive", false,
			"multiline", false,
			"offset", 0,
		)),
		result: o("success", o(
			"pattern", pattern,
			"path", r.cwd,
			"outputMode", "content",
			"workspaceResults", o(r.cwd, o("content", o(
				"matches", files,
				"totalLines", len(matches),
				"totalMatchedLines", len(matches),
			))),
		)),
		duration: d,
	}
}

// lsDir describes one directory of an lsToolCall tree.
type lsDir struct {
	rel   string
	files []string
	dirs  []lsDir
}

func (r *run) lsTree(d lsDir) obj {
	files := make([]any, 0, len(d.files))
	for _, f := range d.files {
		files = append(files, o("name", f))
	}
	dirs := make([]any, 0, len(d.dirs))
	n := len(d.files)
	for _, sub := range d.dirs {
		t := r.lsTree(sub)
		dirs = append(dirs, t)
		n += t.get("numFiles").(int)
	}
	return o(
		"absPath", r.abs(d.rel),
		"childrenDirs", dirs,
		"childrenFiles", files,
		"childrenWereProcessed", true,
		"numFiles", n,
	)
}

// ls builds an lsToolCall over a directory tree.
func (r *run) ls(root lsDir, d time.Duration) *toolCall {
	return &toolCall{
		kind:     "lsToolCall",
		args:     static(o("path", r.abs(root.rel), "ignore", []string{})),
		result:   o("success", o("directoryTreeRoot", r.lsTree(root))),
		duration: d,
	}
}

// editCreate builds an editToolCall that creates a file.
func (r *run) editCreate(rel, content string, d time.Duration) *toolCall {
	p := r.abs(rel)
	added, _ := diffStats("", content)
	return &toolCall{
		kind: "editToolCall",
		args: static(o("path", p, "streamContent", content)),
		result: o("success", o(
			"path", p,
			"linesAdded", added,
			"linesRemoved", 0,
			"diffString", unifiedDiff(p, "", content, true),
			"afterFullFileContent", content,
			"message", "Wrote contents to "+p,
		)),
		duration: d,
	}
}

// editModify builds an editToolCall that changes an existing file; region is
// the new text of the edited region (the CLI's streamContent).
func (r *run) editModify(rel, before, after, region string, d time.Duration) *toolCall {
	p := r.abs(rel)
	added, removed := diffStats(before, after)
	return &toolCall{
		kind: "editToolCall",
		args: static(o("path", p, "streamContent", region)),
		result: o("success", o(
			"path", p,
			"linesAdded", added,
			"linesRemoved", removed,
			"diffString", unifiedDiff(p, before, after, false),
			"beforeFullFileContent", before,
			"afterFullFileContent", after,
			"message", "Wrote contents to "+p,
		)),
		duration: d,
	}
}

// deleteFile builds a deleteToolCall.
func (r *run) deleteFile(rel string, size int, d time.Duration) *toolCall {
	p := r.abs(rel)
	return &toolCall{
		kind:     "deleteToolCall",
		args:     static(o("path", p)),
		result:   o("success", o("path", p, "deletedFile", p, "fileSize", size)),
		duration: d,
	}
}

// mcp builds an mcpToolCall on server.tool returning text.
func mcp(server, tool string, args obj, text string, d time.Duration) *toolCall {
	return &toolCall{
		kind: "mcpToolCall",
		args: static(o(
			"name", server+"-"+tool,
			"providerIdentifier", server,
			"toolName", tool,
			"args", args,
		)),
		result: o("success", o(
			"content", []any{o("text", o("text", text))},
			"isError", false,
		)),
		duration: d,
	}
}

// webFetch builds a webFetchToolCall returning markdown.
func webFetch(url, markdown string, d time.Duration) *toolCall {
	return &toolCall{
		kind:     "webFetchToolCall",
		args:     static(o("url", url)),
		result:   o("success", o("url", url, "markdown", markdown)),
		duration: d,
	}
}

// webSearch builds a webSearchToolCall.
func webSearch(query string, hits []obj, d time.Duration) *toolCall {
	refs := make([]any, len(hits))
	for i, h := range hits {
		refs[i] = h
	}
	return &toolCall{
		kind:     "webSearchToolCall",
		args:     static(o("searchTerm", query)),
		result:   o("success", o("references", refs)),
		duration: d,
	}
}

// semSearch builds a semSearchToolCall.
func (r *run) semSearch(query string, hits []grepMatch, d time.Duration) *toolCall {
	results := make([]any, len(hits))
	for i, h := range hits {
		results[i] = o("file", h.file, "startLine", h.line, "endLine", h.line+2, "content", h.content)
	}
	return &toolCall{
		kind: "semSearchToolCall",
		args: static(o("query", query, "targetDirectories", []string{r.cwd}, "explanation", "Find where "+query)),
		result: o("success", o(
			"results", results,
		)),
		duration: d,
	}
}

// readLints builds a readLintsToolCall that finds no problems.
func (r *run) readLints(rels []string, d time.Duration) *toolCall {
	paths := make([]string, len(rels))
	for i, rel := range rels {
		paths[i] = r.abs(rel)
	}
	return &toolCall{
		kind:     "readLintsToolCall",
		args:     static(o("paths", paths)),
		result:   o("success", o("fileDiagnostics", []any{}, "totalDiagnostics", 0)),
		duration: d,
	}
}

// todo is one todo item of a plan or a todo update.
type todo struct {
	id      string
	content string
	status  string // TODO_STATUS_PENDING, _IN_PROGRESS, _COMPLETED, _CANCELLED
	deps    []string
}

// createPlan builds a createPlanToolCall (what --mode plan produces).
func createPlan(name, overview, plan string, todos []todo, d time.Duration) *toolCall {
	items := make([]any, len(todos))
	for i, t := range todos {
		deps := t.deps
		if deps == nil {
			deps = []string{}
		}
		items[i] = o("id", t.id, "content", t.content, "status", t.status, "dependencies", deps)
	}
	return &toolCall{
		kind:     "createPlanToolCall",
		args:     static(o("name", name, "overview", overview, "plan", plan, "todos", items)),
		result:   o("success", o(), "planUri", ""),
		duration: d,
	}
}

// updateTodos builds an updateTodosToolCall that merges status changes.
func updateTodos(todos []todo, d time.Duration) *toolCall {
	items := make([]any, len(todos))
	for i, t := range todos {
		items[i] = o("id", t.id, "content", t.content, "status", t.status)
	}
	return &toolCall{
		kind:     "updateTodosToolCall",
		args:     static(o("todos", items, "merge", true)),
		result:   o("success", o("todos", items)),
		duration: d,
	}
}

// question is one question of an askQuestionToolCall; options are id/label pairs.
type question struct {
	id      string
	prompt  string
	options [][2]string
}

// askQuestion builds an askQuestionToolCall. Print mode cannot wait for an
// answer, so the CLI rejects the questions and the model carries on.
func askQuestion(title string, qs []question, d time.Duration) *toolCall {
	items := make([]any, len(qs))
	for i, q := range qs {
		opts := make([]any, len(q.options))
		for j, op := range q.options {
			opts[j] = o("id", op[0], "label", op[1])
		}
		items[i] = o("id", q.id, "prompt", q.prompt, "options", opts, "allowMultiple", false)
	}
	return &toolCall{
		kind: "askQuestionToolCall",
		args: static(o("title", title, "questions", items)),
		result: o("rejected", o(
			"reason", "Questions skipped by the user, continue with the information you already have",
		)),
		duration: d,
	}
}
