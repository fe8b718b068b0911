// Package responses is OpenAI's Responses API: a request's input as chat
// messages, and the encoder that turns a run's document events into
// Responses stream events and the Response object they make.
package responses

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/openai"
)

// Request is the part of a POST /v1/responses body that Docstream reads;
// every other field (tools, tool_choice, include, prompt_cache_key, …) is
// accepted and ignored.
type Request struct {
	Model              string            `json:"model"`
	Input              jsontext.Value    `json:"input"`
	Instructions       string            `json:"instructions"`
	Stream             bool              `json:"stream"`
	PreviousResponseID string            `json:"previous_response_id"`
	Store              *bool             `json:"store"`
	Background         bool              `json:"background"`
	Reasoning          *Reasoning        `json:"reasoning"`
	Metadata           map[string]string `json:"metadata"`
	// Workspace and Mode are Docstream's own, as on chat completions.
	Workspace string `json:"workspace"`
	Mode      string `json:"mode"`
}

// Reasoning is a request's reasoning settings: a summary asks for the
// agent's thinking, as reasoning items.
type Reasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// Thinking reports whether the request asks for the agent's thinking.
func (r *Request) Thinking() bool {
	return r.Reasoning != nil && r.Reasoning.Summary != nil && *r.Reasoning.Summary != "" && *r.Reasoning.Summary != "none"
}

// InputError is a fault of a request's input, naming the parameter.
type InputError struct {
	Code    string
	Param   string
	Message string
}

func (e *InputError) Error() string { return e.Message }

func inputError(code, param, format string, args ...any) *InputError {
	return &InputError{Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
}

// inputItem is one item of an input list; only messages and references
// to them are read.
type inputItem struct {
	Type    string         `json:"type"`
	ID      string         `json:"id"`
	Role    string         `json:"role"`
	Content jsontext.Value `json:"content"`
}

// Messages returns the request's conversation as chat messages: the
// instructions as a system message, then the input's messages. An item
// reference to a message of an earlier response is that response's reply,
// which reply gives by the response's id (false: not known). Other items
// (reasoning, function calls and their outputs) are skipped; an assistant
// reply made of several message items is one message again, its texts
// joined by a blank line. A tool's output after the last message is
// refused: the agent would answer the message before it again.
func (r *Request) Messages(reply func(responseID string) (string, bool)) ([]openai.Message, error) {
	var msgs []openai.Message
	if strings.TrimSpace(r.Instructions) != "" {
		msgs = append(msgs, openai.TextMessage("system", r.Instructions))
	}
	switch r.Input.Kind() {
	case 0, 'n':
		return nil, inputError("missing_input", "input", "input is required: a string or a list of input items")
	case '"':
		var s string
		_ = json.Unmarshal(r.Input, &s)
		return append(msgs, openai.TextMessage("user", s)), nil
	}
	var items []jsontext.Value
	if err := json.Unmarshal(r.Input, &items); err != nil {
		return nil, inputError("bad_field", "input", "input must be a string or a list of input items")
	}
	if len(items) == 0 {
		return nil, inputError("empty_input", "input", "input is an empty list: send at least one message")
	}
	referred := "" // the response the last message referred to
	output := ""   // a tool output item after the last message
	for i, raw := range items {
		var it inputItem
		if raw.Kind() != '{' || json.Unmarshal(raw, &it) != nil {
			return nil, inputError("bad_field", fmt.Sprintf("input/%d", i), "input/%d must be an input item: an object with a type or a role", i)
		}
		if it.Type == "item_reference" {
			resp, ok := itemResponse(it.ID)
			if !ok || resp == referred {
				continue // a reasoning item, or the reply already taken
			}
			text, ok := reply(resp)
			if !ok {
				return nil, inputError("unknown_item", fmt.Sprintf("input/%d/id", i), "input/%d refers to item %q, which is not known here", i, it.ID)
			}
			referred, it.Role = resp, "assistant"
			it.Content, _ = json.Marshal(text)
		} else if it.Type != "" && it.Type != "message" {
			if strings.HasSuffix(it.Type, "_output") {
				output = it.Type
			}
			continue
		} else {
			referred = ""
		}
		output = ""
		if !slices.Contains([]string{"user", "assistant", "system", "developer"}, it.Role) {
			return nil, inputError("bad_role", fmt.Sprintf("input/%d/role", i), "input/%d/role %q is not one of user, assistant, system, developer", i, it.Role)
		}
		text, err := itemText(i, it.Content)
		if err != nil {
			return nil, err
		}
		if n := len(msgs); it.Role == "assistant" && n > 0 && msgs[n-1].Role == "assistant" {
			msgs[n-1] = openai.TextMessage("assistant", strings.TrimSpace(msgs[n-1].Text())+"\n\n"+strings.TrimSpace(text))
			continue
		}
		msgs = append(msgs, openai.TextMessage(it.Role, text))
	}
	if output != "" {
		return nil, inputError("last_message_not_user", "input", "input ends with a %s item: the agent answers a user message, and client-side tools are not supported", output)
	}
	return msgs, nil
}

// itemResponse returns the response a message item's id (msg_…, see
// Encoder) belongs to.
func itemResponse(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, "msg_")
	i := strings.LastIndexByte(rest, '_')
	if !ok || i <= 0 {
		return "", false
	}
	return "resp_" + rest[:i], true
}

// itemText returns the text of input item i's content: a string, or a
// list of text parts. Parts the agent cannot take (images, files, audio)
// are refused.
func itemText(i int, content jsontext.Value) (string, error) {
	param := fmt.Sprintf("input/%d/content", i)
	switch content.Kind() {
	case 0, 'n':
		return "", nil
	case '"':
		var s string
		_ = json.Unmarshal(content, &s)
		return s, nil
	}
	var parts []jsontext.Value
	if json.Unmarshal(content, &parts) != nil {
		return "", inputError("bad_field", param, "%s must be a string or a list of content parts", param)
	}
	var texts []string
	for j, raw := range parts {
		var p openai.Part
		if raw.Kind() != '{' || json.Unmarshal(raw, &p) != nil {
			return "", inputError("bad_field", fmt.Sprintf("%s/%d", param, j), "%s/%d must be a content part object", param, j)
		}
		switch p.Type {
		case "input_text", "output_text", "text":
			texts = append(texts, p.Text)
		case "refusal":
		default:
			return "", inputError("unsupported_content", fmt.Sprintf("%s/%d", param, j),
				"%s/%d is of type %q: the agent takes text only (input_text, output_text)", param, j, p.Type)
		}
	}
	return strings.Join(texts, "\n"), nil
}
