// Package anthropic is Anthropic's Messages API over Docstream's runs: a
// request read as a thread of OpenAI-style messages, and a run's rendered
// pieces encoded as Messages events and a Message.
package anthropic

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/openai"
)

// Request is the body of POST /v1/messages. Model, Messages, System, Stream
// and Thinking are read; the typed fields after them are checked and
// ignored (the agent has its own tools, limits and sampling), and so is
// every other field.
type Request struct {
	Model    string         `json:"model"`
	Messages []MessageParam `json:"messages"`
	System   jsontext.Value `json:"system"`
	Stream   bool           `json:"stream"`
	Thinking *Thinking      `json:"thinking"`

	MaxTokens     int64            `json:"max_tokens"`
	Tools         []jsontext.Value `json:"tools"`
	ToolChoice    *ToolChoice      `json:"tool_choice"`
	Metadata      map[string]any   `json:"metadata"`
	Temperature   float64          `json:"temperature"`
	TopP          float64          `json:"top_p"`
	TopK          int64            `json:"top_k"`
	StopSequences []string         `json:"stop_sequences"`
}

// MessageParam is one message of a request: content is a string or a list of
// content blocks.
type MessageParam struct {
	Role    string         `json:"role"`
	Content jsontext.Value `json:"content"`
}

// Thinking is the thinking configuration: type enabled, adaptive or
// disabled; display summarized or omitted.
type Thinking struct {
	Type         string `json:"type"`
	BudgetTokens int64  `json:"budget_tokens"`
	Display      string `json:"display"`
}

// ToolChoice says how the model is to use the client's tools.
type ToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// InvalidError is a request that cannot be run; Param names the field at
// fault.
type InvalidError struct {
	Param   string
	Message string
}

func (e *InvalidError) Error() string { return e.Param + ": " + e.Message }

func invalid(param, format string, args ...any) *InvalidError {
	return &InvalidError{Param: param, Message: fmt.Sprintf(format, args...)}
}

// ThinkingOn reports whether the request asks for thinking blocks.
func (r *Request) ThinkingOn() bool {
	return r.Thinking != nil && r.Thinking.Type != "disabled" && r.Thinking.Display != "omitted"
}

// Thread checks the request and returns it as OpenAI-style messages: the
// system text (the system field, then every system message) apart, and the
// user and assistant turns, each as its text. An assistant turn's text
// blocks are joined as they were streamed, a user turn's by newlines; the
// other blocks of earlier turns (thinking, tool use and results, images,
// documents) are not kept. The last user message may hold text blocks only.
func (r *Request) Thread() (system, turns []openai.Message, err error) {
	if err := r.checkOptions(); err != nil {
		return nil, nil, err
	}
	if len(r.Messages) == 0 {
		return nil, nil, invalid("messages", "must hold at least one message")
	}
	if len(r.System) > 0 && r.System.Kind() != 'n' {
		text, err := blocksText("system", r.System, "\n", false)
		if err != nil {
			return nil, nil, err
		}
		system = append(system, openai.TextMessage("system", text))
	}
	last := -1
	for i, m := range r.Messages {
		if m.Role == "user" {
			last = i
		}
	}
	for i, m := range r.Messages {
		at := fmt.Sprintf("messages/%d", i)
		sep := "\n"
		switch m.Role {
		case "user", "system":
		case "assistant":
			sep = ""
		default:
			return nil, nil, invalid(at+"/role", "%q is not one of user, assistant, system", m.Role)
		}
		text, err := blocksText(at+"/content", m.Content, sep, i == last)
		if err != nil {
			return nil, nil, err
		}
		if m.Role == "system" {
			system = append(system, openai.TextMessage("system", text))
			continue
		}
		turns = append(turns, openai.TextMessage(m.Role, text))
	}
	return system, turns, nil
}

// checkOptions refuses the options that cannot be honoured.
func (r *Request) checkOptions() error {
	if t := r.Thinking; t != nil {
		if !slices.Contains([]string{"enabled", "adaptive", "disabled"}, t.Type) {
			return invalid("thinking/type", "%q is not one of enabled, adaptive, disabled", t.Type)
		}
		if !slices.Contains([]string{"", "summarized", "omitted"}, t.Display) {
			return invalid("thinking/display", "%q is not one of summarized, omitted", t.Display)
		}
	}
	if tc := r.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto", "none":
		case "any", "tool":
			return invalid("tool_choice", "type %q cannot be honoured: the agent uses its own tools, so only \"auto\" and \"none\" are accepted", tc.Type)
		default:
			return invalid("tool_choice/type", "%q is not one of auto, none, any, tool", tc.Type)
		}
	}
	return nil
}

// blocksText returns the text of content, a string or a list of content
// blocks: its text blocks joined by sep. With textOnly, any other block is
// refused: the message is the one the agent answers, and it takes text.
func blocksText(at string, content jsontext.Value, sep string, textOnly bool) (string, error) {
	switch content.Kind() {
	case '"':
		var s string
		if err := json.Unmarshal(content, &s); err != nil {
			return "", invalid(at, "not a valid string: %v", err)
		}
		return s, nil
	case '[':
		var raw []jsontext.Value
		if err := json.Unmarshal(content, &raw); err != nil {
			return "", invalid(at, "not a valid list: %v", err)
		}
		var texts []string
		for j, v := range raw {
			var b openai.Part
			switch {
			case v.Kind() != '{' || json.Unmarshal(v, &b) != nil || b.Type == "":
				return "", invalid(fmt.Sprintf("%s/%d", at, j), "a content block must be an object with a string type (and a text block a string text)")
			case b.Type == "text":
				texts = append(texts, b.Text)
			case textOnly:
				return "", invalid(fmt.Sprintf("%s/%d", at, j), "a block of type %q cannot be given to the agent, which takes text blocks only", b.Type)
			}
		}
		return strings.Join(texts, sep), nil
	}
	return "", invalid(at, "must be a string or a list of content blocks")
}
