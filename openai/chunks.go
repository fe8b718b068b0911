package openai

import (
	"cmp"
	"fmt"
	"strings"
	"unicode"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
)

// Chunk is an OpenAI chat.completion.chunk.
type Chunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	SystemFingerprint *string       `json:"system_fingerprint"`
	Choices           []ChunkChoice `json:"choices"`
	Usage             *OpenAIUsage  `json:"usage,omitzero"`
}

// ChunkChoice is the one choice of a chunk.
type ChunkChoice struct {
	Index        int        `json:"index"`
	Delta        ChunkDelta `json:"delta"`
	Logprobs     *string    `json:"logprobs"`
	FinishReason *string    `json:"finish_reason"`
}

// ChunkDelta is what a chunk adds to the message.
type ChunkDelta struct {
	Role             string          `json:"role,omitzero"`
	Content          *string         `json:"content,omitzero"`
	ReasoningContent *string         `json:"reasoning_content,omitzero"`
	ToolCalls        []ToolCallDelta `json:"tool_calls,omitzero"`
}

// ToolCallDelta is one entry of delta.tool_calls.
type ToolCallDelta struct {
	Index    int          `json:"index"`
	ID       string       `json:"id,omitzero"`
	Type     string       `json:"type,omitzero"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names a function and its JSON arguments.
type FunctionCall struct {
	Name      string `json:"name,omitzero"`
	Arguments string `json:"arguments"`
}

// OpenAIUsage is OpenAI's usage object. prompt_tokens includes cached tokens.
type OpenAIUsage struct {
	PromptTokens        int64          `json:"prompt_tokens"`
	CompletionTokens    int64          `json:"completion_tokens"`
	TotalTokens         int64          `json:"total_tokens"`
	PromptTokensDetails map[string]any `json:"prompt_tokens_details"`
}

// UsageOf maps the document model's usage to OpenAI's meaning:
// prompt_tokens = input + cache read + cache write tokens.
func UsageOf(u documents.Usage) OpenAIUsage {
	p := u.PromptTokens + u.CacheReadTokens + u.CacheWriteTokens
	return OpenAIUsage{PromptTokens: p, CompletionTokens: u.CompletionTokens, TotalTokens: p + u.CompletionTokens,
		PromptTokensDetails: map[string]any{"cached_tokens": u.CacheReadTokens}}
}

// Rendering modes of the OpenAI surface.
const (
	RenderMarkdown  = "markdown"
	RenderToolCalls = "tool_calls"
	RenderTextOnly  = "text-only"

	ReasoningContent = "reasoning_content"
	ReasoningThink   = "think"
	ReasoningOff     = "off"
)

// Piece is one addition to the assistant message, or, with Comment set, a
// word about the run that is not part of it: a stream sends it as an SSE
// comment.
type Piece struct {
	Content   string
	Reasoning string
	ToolCall  *ToolCallDelta
	Comment   string
}

// Renderer turns document events into message pieces: every document
// rendered as markdown readable in a plain chat window (or as tool calls,
// or text only), thinking as reasoning.
type Renderer struct {
	Mode      string
	Reasoning string

	docs      map[string]*renderDoc
	out       strings.Builder // the content so far
	thinking  bool            // a <think> block is open
	thought   bool            // some reasoning was rendered
	gap       bool            // a document came after the last reasoning
	toolIndex int
}

type renderDoc struct {
	typ    documents.Type
	tool   string
	callID string
	args   jsontext.Value
}

// Content returns the whole content rendered so far.
func (r *Renderer) Content() string { return r.out.String() }

// emit adds content s to ps, after closing an open <think> block.
func (r *Renderer) emit(ps []Piece, s string) []Piece {
	if s == "" {
		return ps
	}
	if r.thinking {
		r.thinking = false
		ps = r.write(ps, "\n</think>\n\n")
		// The closing tag already ends the block: no separator on top.
		if s = strings.TrimLeft(s, "\n"); s == "" {
			return ps
		}
	}
	return r.write(ps, s)
}

// write adds s to the content, as a piece of ps.
func (r *Renderer) write(ps []Piece, s string) []Piece {
	r.out.WriteString(s)
	return append(ps, Piece{Content: s})
}

// separate starts a new block: a blank line after what came before.
func (r *Renderer) separate() string {
	s := r.out.String()
	switch {
	case s == "", strings.HasSuffix(s, "\n\n"):
		return ""
	case strings.HasSuffix(s, "\n"):
		return "\n"
	}
	return "\n\n"
}

// Event renders one document event into pieces.
func (r *Renderer) Event(ev documents.Event) []Piece {
	if r.docs == nil {
		r.docs = map[string]*renderDoc{}
	}
	var ps []Piece
	switch e := ev.(type) {
	case documents.ThinkingDelta:
		if e.Delta == "" {
			return nil
		}
		// Thinking that resumes after a document is a new paragraph.
		delta := e.Delta
		if r.gap && (r.Reasoning != ReasoningThink || r.thinking) {
			delta = "\n\n" + delta
		}
		r.thought, r.gap = true, false
		switch r.Reasoning {
		case ReasoningContent, "":
			ps = append(ps, Piece{Reasoning: delta})
		case ReasoningThink:
			if !r.thinking {
				ps = r.write(ps, r.separate()+"<think>\n")
				r.thinking = true
			}
			ps = r.write(ps, delta)
		}
	case documents.StatusEvent:
		// The agent reconnecting is news for the reader, not text of the
		// answer: "reconnecting attempt=2".
		return []Piece{{Comment: fmt.Sprintf("%s attempt=%d", e.State, e.Attempt)}}
	case documents.Done:
		// A <think> block still open at the end is closed.
		if r.thinking {
			r.thinking = false
			ps = r.write(ps, "\n</think>\n")
		}
	case documents.DocumentStart:
		r.gap = r.thought
		r.docs[e.ID] = &renderDoc{typ: e.Type}
		switch e.Type {
		case documents.TypeText:
			ps = r.emit(ps, r.separate())
		case documents.TypeError:
			ps = r.emit(ps, r.separate()+"**Error:** ")
		case documents.TypeCodeBlock:
			m := metaOf[documents.CodeBlockMeta](e.Metadata)
			ps = r.emit(ps, r.separate()+"```"+m.Language+"\n")
		case documents.TypeCodeReference:
			m := metaOf[documents.CodeReferenceMeta](e.Metadata)
			ps = r.emit(ps, fmt.Sprintf("%s`%s:%d-%d`\n```%s\n", r.separate(), m.FilePath, m.StartLine, m.EndLine, m.Language))
		}
	case documents.ContentDelta:
		if r.docs[e.DocumentID] != nil {
			ps = r.emit(ps, e.Delta)
		}
	case documents.ToolCallStart:
		if d := r.docs[e.DocumentID]; d != nil {
			d.tool, d.callID = e.ToolName, e.ToolCallID
		}
	case documents.ToolCallArguments:
		if d := r.docs[e.DocumentID]; d != nil {
			d.args = e.Arguments
		}
	case documents.DocumentEnd:
		d := r.docs[e.DocumentID]
		if d == nil {
			return nil
		}
		delete(r.docs, e.DocumentID)
		switch {
		case d.typ == documents.TypeText:
		case d.typ == documents.TypeError:
			m := metaOf[documents.ErrorMeta](e.Metadata)
			s := fmt.Sprintf(" (%s)", m.ErrorCode)
			if m.Details != "" {
				s += "\n```\n" + strings.TrimRight(clipText(m.Details, 2000), "\n") + "\n```"
			}
			ps = r.emit(ps, s+"\n")
		case d.typ == documents.TypeCodeBlock, d.typ == documents.TypeCodeReference:
			ps = r.emit(ps, "\n```\n")
		// The others are tool-derived, rendered as the mode says.
		case r.Mode == RenderTextOnly:
		case r.Mode == RenderToolCalls:
			ps = append(ps, Piece{ToolCall: &ToolCallDelta{Index: r.toolIndex, ID: CallID(d.callID, r.toolIndex), Type: "function",
				Function: FunctionCall{Name: cmp.Or(d.tool, string(d.typ)), Arguments: cmp.Or(string(d.args), "{}")}}})
			r.toolIndex++
		default:
			ps = r.emit(ps, r.separate()+Markdown(d.typ, deref(e.FinalContent), e.Metadata))
		}
	}
	return ps
}

// Markdown renders a tool-derived document as markdown for a chat window.
func Markdown(t documents.Type, content string, meta jsontext.Value) string {
	var b strings.Builder
	switch t {
	case documents.TypeFileEdit:
		m := metaOf[documents.FileEditMeta](meta)
		verb := cmp.Or(map[string]string{"create": "Created", "edit": "Edited", "delete": "Deleted", "rename": "Renamed"}[m.Operation], "Changed")
		switch {
		case m.Rejected:
			fmt.Fprintf(&b, "**File edit rejected:** `%s` (not applied)", m.FilePath)
		case m.Error != "":
			fmt.Fprintf(&b, "**File edit failed:** `%s`: %s", m.FilePath, m.Error)
		default:
			fmt.Fprintf(&b, "**%s `%s`**", verb, m.FilePath)
			if m.NewPath != "" {
				fmt.Fprintf(&b, " → `%s`", m.NewPath)
			}
			if m.LinesAdded != nil || m.LinesRemoved != nil {
				fmt.Fprintf(&b, " (+%d −%d)", deref(m.LinesAdded), deref(m.LinesRemoved))
			}
			switch {
			case m.UnifiedDiff != "":
				fmt.Fprintf(&b, "\n```diff\n%s\n```", strings.TrimRight(clipText(m.UnifiedDiff, 8000), "\n"))
			case m.Diff != nil:
				fmt.Fprintf(&b, "\n```diff\n-%s\n+%s\n```", strings.ReplaceAll(m.Diff.OldString, "\n", "\n-"), strings.ReplaceAll(m.Diff.NewString, "\n", "\n+"))
			case m.Operation == "create" && content != "":
				fmt.Fprintf(&b, "\n```%s\n%s\n```", m.Language, strings.TrimRight(clipText(content, 8000), "\n"))
			}
		}
	case documents.TypeTerminalCommand:
		m := metaOf[documents.TerminalCommandMeta](meta)
		if m.Rejected {
			fmt.Fprintf(&b, "`$ %s` — rejected, not run", m.Command)
			break
		}
		fmt.Fprintf(&b, "```shell\n$ %s\n", m.Command)
		if out := strings.TrimRight(clipText(m.Output, 8000), "\n"); out != "" {
			b.WriteString(out + "\n")
		}
		b.WriteString("```\n")
		switch {
		case m.ExitCode != nil:
			fmt.Fprintf(&b, "exit code %d", *m.ExitCode)
		case m.Error != "":
			fmt.Fprintf(&b, "failed: %s", m.Error)
		default:
			b.WriteString("did not finish")
		}
		if m.DurationMs > 0 {
			fmt.Fprintf(&b, " · %.1f s", float64(m.DurationMs)/1000)
		}
	case documents.TypePlan:
		m := metaOf[documents.PlanMeta](meta)
		fmt.Fprintf(&b, "### Plan: %s\n", cmp.Or(m.Title, "untitled"))
		if m.Overview != "" {
			b.WriteString(m.Overview + "\n")
		}
		b.WriteString("\n")
		for _, t := range m.Todos {
			fmt.Fprintf(&b, "- %s %s", checkbox(t.Status), t.Content)
			if len(t.Dependencies) > 0 {
				fmt.Fprintf(&b, " (after: %s)", strings.Join(t.Dependencies, ", "))
			}
			b.WriteString("\n")
		}
	case documents.TypeTodoUpdate:
		m := metaOf[documents.TodoUpdateMeta](meta)
		b.WriteString("**Tasks:**\n")
		for _, t := range m.Todos {
			fmt.Fprintf(&b, "- %s %s\n", checkbox(t.Status), cmp.Or(t.Content, t.ID))
		}
	case documents.TypeClarification:
		m := metaOf[documents.ClarificationMeta](meta)
		if content != "" {
			b.WriteString("**" + content + "**\n")
		}
		for i, q := range m.Questions {
			fmt.Fprintf(&b, "%d. %s\n", i+1, q.Text)
			for _, o := range q.Options {
				fmt.Fprintf(&b, "   - `%s` %s\n", o.ID, o.Label)
			}
		}
	case documents.TypeToolCall:
		m := metaOf[documents.ToolCallMeta](meta)
		status := "ok"
		switch {
		case m.Rejected:
			status = "rejected"
		case m.Result != nil && m.Result.Status == "error":
			status = "error"
		}
		fmt.Fprintf(&b, "> `%s`%s — %s", m.ToolName, toolTarget(m.Arguments), status)
	}
	return strings.TrimRight(b.String(), "\n") + "\n\n"
}

// metaOf decodes a document's metadata; what does not decode stays zero.
func metaOf[T any](meta jsontext.Value) T {
	var m T
	_ = json.Unmarshal(meta, &m)
	return m
}

// toolTarget picks the argument that says what a tool worked on.
func toolTarget(args jsontext.Value) string {
	var a map[string]any
	if json.Unmarshal(args, &a) != nil {
		return ""
	}
	for _, k := range []string{"path", "target_file", "globPattern", "pattern", "query", "url", "command", "targetDirectory", "toolName"} {
		if v, ok := a[k].(string); ok && v != "" {
			return " `" + clipText(strings.ReplaceAll(v, "`", "'"), 120) + "`"
		}
	}
	return ""
}

// checkbox is a task's box in a markdown list, with its status.
func checkbox(status string) string {
	return cmp.Or(map[string]string{"completed": "[x]", "in_progress": "[ ] (in progress)", "cancelled": "[ ] ~~cancelled~~"}[status], "[ ]")
}

// clipText cuts a long text to at most n bytes, marked as cut on a line
// of its own.
func clipText(s string, n int) string { return clip(s, n, "\n… (cut)") }

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// CallID is a tool call's id as OpenAI clients take it: the agent's own
// ids hold control characters (a newline between two ids), which become
// "_"; the document's metadata keeps the original. A call without an id
// gets one from its index.
func CallID(id string, index int) string {
	id = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return '_'
		}
		return r
	}, id)
	if id == "" {
		return fmt.Sprintf("call_%d", index)
	}
	return id
}

// ErrorMessage is the message of a failed run: its last error document
// as rendered, in plain text.
func ErrorMessage(content string) string {
	i := strings.LastIndex(content, "**Error:**")
	if i < 0 {
		return "the agent run failed"
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(content[i+len("**Error:**"):]), "\n") {
		if !strings.HasPrefix(l, "```") {
			lines = append(lines, l)
		}
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
