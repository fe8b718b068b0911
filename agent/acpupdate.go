package agent

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/acp"
	"github.com/docstream/docstream/translate"
)

// update handles one session update.
func (s *acpSession) update(u acp.Update) {
	if u.SessionUpdate != "agent_thought_chunk" {
		s.endThinking()
	}
	switch u.SessionUpdate {
	case "agent_message_chunk", "agent_thought_chunk":
		var c acp.ContentBlock
		if json.Unmarshal(u.Content, &c) != nil || c.Type != "text" {
			return
		}
		kind := translate.KindAssistant
		if u.SessionUpdate == "agent_thought_chunk" {
			kind, s.thinking = translate.KindThinkingDelta, true
		}
		s.seg.Feed(translate.Event{Kind: kind, Text: c.Text, HasTimestamp: true})
	case "tool_call", "tool_call_update":
		c := s.call1(u.ToolCall)
		switch {
		case u.Status == "completed" || u.Status == "failed":
			s.open(c)
			s.complete(c)
		case len(c.RawInput) > 2:
			s.open(c)
		}
	case "plan":
		todos := make([]acp.Todo, len(u.Entries))
		for i, e := range u.Entries {
			todos[i] = acp.Todo{ID: fmt.Sprintf("plan-%d", i+1), Content: e.Content, Status: e.Status}
		}
		s.plans++
		kind, params := "updateTodosToolCall", any(acp.TodosParams{Todos: todos})
		if s.plans == 1 {
			kind, params = "createPlanToolCall", acp.PlanParams{Name: "Plan", Todos: todos}
		}
		args, _ := json.Marshal(params)
		s.toolDoc(fmt.Sprintf("acp-plan-%d", s.plans), kind, args)
	case "user_message_chunk", "available_commands_update", "current_mode_update", "config_option_update",
		"session_info_update", "usage_update":
	default:
		s.seg.Feed(translate.Event{Kind: translate.KindUnknown})
	}
}

func (s *acpSession) endThinking() {
	if s.thinking {
		s.thinking = false
		s.seg.Feed(translate.Event{Kind: translate.KindThinkingDone})
	}
}

// toolDoc adds a whole tool document, started and completed at once.
func (s *acpSession) toolDoc(id, kind string, args jsontext.Value) {
	s.seg.Feed(translate.Event{Kind: translate.KindToolStarted, CallID: id, Tool: &translate.ToolCall{Kind: kind, Args: args}})
	s.seg.Feed(translate.Event{Kind: translate.KindToolCompleted, CallID: id, Tool: &translate.ToolCall{Kind: kind, Result: jsontext.Value(`{"success":{}}`)}})
}

// call1 merges a tool call or update into what is known of the call.
func (s *acpSession) call1(u acp.ToolCall) *acpCall {
	c := s.calls[u.ToolCallID]
	if c == nil {
		c = &acpCall{ToolCall: acp.ToolCall{ToolCallID: u.ToolCallID}}
		s.calls[u.ToolCallID] = c
	}
	c.Title, c.Kind, c.Status = cmp.Or(u.Title, c.Title), cmp.Or(u.Kind, c.Kind), cmp.Or(u.Status, c.Status)
	if u.Content != nil {
		c.Content = u.Content
	}
	if u.Locations != nil {
		c.Locations = u.Locations
	}
	if len(u.RawInput) > 2 || c.RawInput == nil {
		c.RawInput = u.RawInput
	}
	if u.RawOutput != nil {
		c.RawOutput = u.RawOutput
	}
	return c
}

// open opens the document of a tool call, once.
func (s *acpSession) open(c *acpCall) {
	if c.opened {
		return
	}
	c.opened = true
	kind, args := printKind(c)
	s.seg.Feed(translate.Event{Kind: translate.KindToolStarted, CallID: c.ToolCallID, TimestampMs: time.Now().UnixMilli(),
		Tool: &translate.ToolCall{Kind: kind, Name: c.Title, Args: args}})
}

// complete ends the document of a tool call with its result.
func (s *acpSession) complete(c *acpCall) {
	kind, args := printKind(c)
	var body any = c.RawOutput
	if c.RawOutput.Kind() != '{' {
		body = map[string]any{}
	}
	var items []acp.ToolCallContent
	_ = json.Unmarshal(c.Content, &items)
	if i := slices.IndexFunc(items, func(d acp.ToolCallContent) bool { return d.Type == "diff" }); i >= 0 {
		d := items[i]
		b := map[string]any{"path": d.Path, "afterFullFileContent": d.NewText}
		if d.OldText != nil {
			b["beforeFullFileContent"] = *d.OldText
			args = withArgs(args, changedLines(*d.OldText, d.NewText))
		}
		body = b
	}
	var res any = map[string]any{"success": body}
	switch {
	case c.rejected != "":
		res = map[string]any{"rejected": map[string]string{"reason": c.rejected}}
	case c.Status == "failed" && c.RawOutput != nil:
		res = map[string]any{"error": c.RawOutput}
	case c.Status == "failed":
		res = map[string]any{"error": map[string]string{"error": contentText(items)}}
	}
	r, _ := json.Marshal(res)
	s.seg.Feed(translate.Event{Kind: translate.KindToolCompleted, CallID: c.ToolCallID, TimestampMs: time.Now().UnixMilli(),
		Tool: &translate.ToolCall{Kind: kind, Args: args, Result: r}})
}

// printKinds names the print-mode tool calls of the ACP kinds read, search
// and fetch by an argument they carry ("" for any).
var printKinds = []struct{ kind, arg, name string }{
	{"read", "ignore", "lsToolCall"}, {"read", "paths", "readLintsToolCall"}, {"read", "", "readToolCall"},
	{"search", "globPattern", "globToolCall"}, {"search", "targetDirectories", "semSearchToolCall"}, {"search", "", "grepToolCall"},
	{"fetch", "url", "webFetchToolCall"}, {"fetch", "", "webSearchToolCall"},
}

// printKind names a tool call as print mode does, from its ACP kind and
// the arguments it carries, and returns its arguments.
func printKind(c *acpCall) (string, jsontext.Value) {
	var in map[string]jsontext.Value
	_ = json.Unmarshal(c.RawInput, &in)
	args := c.RawInput
	if args.Kind() != '{' {
		args = jsontext.Value("{}")
	}
	switch {
	case in["providerIdentifier"] != nil:
		return "mcpToolCall", args
	case c.Kind == "execute":
		if in["command"] == nil {
			args = withArgs(args, map[string]string{"command": strings.Trim(c.Title, "`")})
		}
		return "shellToolCall", args
	case c.Kind == "edit" || c.Kind == "delete" || c.Kind == "move":
		if in["path"] == nil && len(c.Locations) > 0 {
			args = withArgs(args, map[string]string{"path": c.Locations[0].Path})
		}
		if c.Kind == "delete" {
			return "deleteToolCall", args
		}
		return "editToolCall", args
	}
	for _, k := range printKinds {
		if c.Kind == k.kind && (k.arg == "" || in[k.arg] != nil) {
			return k.name, args
		}
	}
	return "function", args
}

// withArgs returns args with the given members set.
func withArgs(args jsontext.Value, set map[string]string) jsontext.Value {
	m := map[string]jsontext.Value{}
	_ = json.Unmarshal(args, &m)
	for k, v := range set {
		m[k], _ = json.Marshal(v)
	}
	b, err := json.Marshal(m, json.Deterministic(true))
	if err != nil {
		return args
	}
	return b
}

// changedLines returns the lines an edit replaced, as old_string and
// new_string: what lies between the lines both texts begin and end with.
func changedLines(before, after string) map[string]string {
	a, b := strings.SplitAfter(before, "\n"), strings.SplitAfter(after, "\n")
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	j := 0
	for j < len(a)-i && j < len(b)-i && a[len(a)-1-j] == b[len(b)-1-j] {
		j++
	}
	return map[string]string{"old_string": strings.Join(a[i:len(a)-j], ""), "new_string": strings.Join(b[i:len(b)-j], "")}
}

func contentText(items []acp.ToolCallContent) string {
	var b strings.Builder
	for _, it := range items {
		if it.Content != nil {
			b.WriteString(it.Content.Text)
		}
	}
	return cmp.Or(b.String(), "the tool failed")
}
