package openai

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Config configures the OpenAI-compatible surface (the `openai` section).
type Config struct {
	Render    string                `yaml:"render"`
	Reasoning string                `yaml:"reasoning"`
	Aliases   map[string]ModelAlias `yaml:"aliases"`
}

// ModelAlias names a model for OpenAI clients: the real model, and for the
// cloud backend the repository it works on.
type ModelAlias struct {
	Model      string `yaml:"model"`
	Backend    string `yaml:"backend"`
	Repository string `yaml:"repository"`
	Ref        string `yaml:"ref"`
}

// Message is an OpenAI-style message; content is a string or a list of
// parts of which the text parts count.
type Message struct {
	Role    string         `json:"role"`
	Content jsontext.Value `json:"content"`
	Name    string         `json:"name,omitzero"`
}

// Part is a part of a message's content as far as its text goes.
type Part struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// TextMessage returns a message of one text.
func TextMessage(role, text string) Message {
	b, _ := json.Marshal(text, jsontext.AllowInvalidUTF8(true))
	return Message{Role: role, Content: b}
}

// Text returns the message's text content.
func (m Message) Text() string {
	switch m.Content.Kind() {
	case '"':
		var s string
		_ = json.Unmarshal(m.Content, &s)
		return s
	case '[':
		var parts []Part
		_ = json.Unmarshal(m.Content, &parts)
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" || p.Type == "input_text" || p.Type == "output_text" || p.Type == "" {
				if b.Len() > 0 {
					b.WriteString("\n")
				}
				b.WriteString(p.Text)
			}
		}
		return b.String()
	}
	return ""
}

// LastUserMessage returns the text of the last user message.
func LastUserMessage(msgs []Message) (string, int) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Text(), i
		}
	}
	return "", -1
}

// FlattenHistory folds system messages and earlier turns into the prompt, in
// a bounded format, when the conversation cannot be resumed. The last user
// message always goes through verbatim, last.
func FlattenHistory(msgs []Message, maxBytes int) string {
	last, idx := LastUserMessage(msgs)
	var system, history []string
	for i, m := range msgs {
		if i == idx {
			continue
		}
		t := strings.TrimSpace(m.Text())
		if t == "" {
			continue
		}
		switch m.Role {
		case "system", "developer":
			system = append(system, t)
		case "user", "assistant":
			if i < idx {
				history = append(history, m.Role+": "+t)
			}
		}
	}
	if len(system) == 0 && len(history) == 0 {
		return last
	}
	budget := maxBytes - len(last) - 256
	var b strings.Builder
	if len(system) > 0 {
		b.WriteString("<instructions>\n" + Clip(strings.Join(system, "\n\n"), max(budget/2, 0)) + "\n</instructions>\n\n")
	}
	// Keep the most recent turns that fit.
	rem := budget - b.Len()
	var kept []string
	for i := len(history) - 1; i >= 0 && rem > 0; i-- {
		h := Clip(history[i], rem)
		kept = append([]string{h}, kept...)
		rem -= len(h) + 2
	}
	if len(kept) > 0 {
		b.WriteString("<conversation_so_far>\n" + strings.Join(kept, "\n\n") + "\n</conversation_so_far>\n\n")
	}
	b.WriteString(last)
	return b.String()
}

// Fingerprint hashes an OpenAI message history so that a frontend that
// resends it can be matched to the agent session that produced it.
// Texts are compared without their <think> blocks (a frontend may keep
// or drop the reasoning it was sent inline) and with whitespace collapsed.
func Fingerprint(msgs []Message, reply string, model string) string {
	h := sha256.New()
	h.Write([]byte(model + "\x00"))
	for _, m := range msgs {
		h.Write([]byte(m.Role + "\x00" + fingerprintText(m.Role, m.Text()) + "\x00"))
	}
	if reply != "" {
		h.Write([]byte("assistant\x00" + fingerprintText("assistant", reply) + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// fingerprintText is a message's text as fingerprint compares it.
func fingerprintText(role, text string) string {
	if role == "assistant" {
		text = withoutThink(text)
	}
	return strings.Join(strings.Fields(text), " ")
}

// withoutThink removes the <think>…</think> blocks from an assistant text;
// one left open runs to the end.
func withoutThink(text string) string {
	var b strings.Builder
	for {
		before, after, ok := strings.Cut(text, "<think>")
		b.WriteString(before)
		if !ok {
			return b.String()
		}
		b.WriteByte(' ')
		if _, text, ok = strings.Cut(after, "</think>"); !ok {
			return b.String()
		}
	}
}

// Clip cuts s to at most n bytes, within no character, marked with "…".
func Clip(s string, n int) string { return clip(s, n, "…") }

// clip cuts s to at most n bytes, within no character, followed by mark.
func clip(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + mark
}

// ImagePart returns the first image part of msgs, as its message's and
// part's indexes; ok is false when there is none.
func ImagePart(msgs []Message) (msg, part int, ok bool) {
	for i, m := range msgs {
		var parts []struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(m.Content, &parts)
		for j, p := range parts {
			if p.Type == "image_url" || p.Type == "input_image" || p.Type == "image" {
				return i, j, true
			}
		}
	}
	return 0, 0, false
}
