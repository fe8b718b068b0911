package runs

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
)

// Redacted replaces a secret in everything a run sends or stores.
const Redacted = "[redacted]"

// Redactor masks secret values (API keys, header values) in a run's events.
// A nil Redactor masks nothing.
type Redactor struct {
	forms []string // longest first
}

// NewRedactor returns a redactor of the given secret values; values shorter
// than four bytes are not secrets. It returns nil when there is none.
func NewRedactor(values ...string) *Redactor {
	forms := secretForms(values)
	if len(forms) == 0 {
		return nil
	}
	return &Redactor{forms: forms}
}

// String masks every secret in s.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	for _, v := range r.forms {
		s = strings.ReplaceAll(s, v, Redacted) // s itself when it holds none
	}
	return s
}

// value masks every secret in a raw JSON value.
func (r *Redactor) value(v jsontext.Value) jsontext.Value {
	if s := r.String(string(v)); s != string(v) {
		return jsontext.Value(s)
	}
	return v
}

// split masks the secrets in s and holds back an end that could begin one.
func (r *Redactor) split(s string) (out, held string) {
	s = r.String(s)
	n := 0
	for _, v := range r.forms {
		for k := min(len(v)-1, len(s)); k > n; k-- {
			if strings.HasSuffix(s, v[:k]) {
				n = k
				break
			}
		}
	}
	return s[:len(s)-n], s[len(s)-n:]
}

// redacting holds back the end of each document's deltas (thinking under "")
// that could begin a secret. A document in held has had its deltas changed.
type redacting struct {
	r    *Redactor
	held map[string]string
}

// each passes ev to step with its secrets masked, holding back the end of a
// delta until the document ends; an event with nothing to mask goes as it is.
func (rd *redacting) each(ev documents.Event, step func(documents.Event)) {
	r := rd.r
	if r == nil {
		step(ev)
		return
	}
	switch e := ev.(type) {
	case documents.ContentDelta:
		out, same := rd.delta(e.DocumentID, e.Delta)
		if out == "" {
			return
		}
		if !same { // else its Content is still what went out
			ev = documents.ContentDelta{DocumentID: e.DocumentID, Delta: out}
		}
	case documents.ThinkingDelta:
		out, same := rd.delta("", e.Delta)
		if out == "" {
			return
		}
		if !same {
			ev = documents.ThinkingDelta{Delta: out}
		}
	case documents.DocumentStart:
		e.Metadata = r.value(e.Metadata)
		ev = e
	case documents.DocumentUpdate:
		e.Metadata = r.value(e.Metadata)
		ev = e
	case documents.ToolCallArguments:
		e.Arguments = r.value(e.Arguments)
		ev = e
	case documents.ToolResultEvent:
		e.Result.Data = r.value(e.Result.Data)
		ev = e
	case documents.AgentEvent:
		e.Payload, e.Raw, e.Data = r.value(e.Payload), r.String(e.Raw), r.String(e.Data)
		ev = e
	case documents.DocumentEnd:
		e.Metadata = r.value(e.Metadata)
		if e.FinalContent != nil {
			e.FinalContent = new(r.String(*e.FinalContent))
		}
		rd.flush(e.DocumentID, step)
		ev = e
	case documents.Done:
		if c := e.Metadata.Cloud; c != nil {
			e.Metadata.Cloud = new(*c)
			e.Metadata.Cloud.Summary = r.String(c.Summary)
		}
		rd.flush("", step)
		ev = e
	}
	step(ev)
}

// delta masks the secrets in a document's next delta and holds back an end
// that could begin one. same reports that the document's deltas, this one
// too, go out as they came.
func (rd *redacting) delta(doc, d string) (out string, same bool) {
	prev, changed := rd.held[doc]
	out, held := rd.r.split(prev + d)
	if !changed && held == "" && out == d {
		return out, true
	}
	if rd.held == nil {
		rd.held = map[string]string{}
	}
	rd.held[doc] = held
	return out, false
}

// flush sends what a document held back, as a delta, when it ends.
func (rd *redacting) flush(doc string, step func(documents.Event)) {
	held := rd.held[doc]
	delete(rd.held, doc)
	switch {
	case held == "":
	case doc == "":
		step(documents.ThinkingDelta{Delta: held})
	default:
		step(documents.ContentDelta{DocumentID: doc, Delta: held})
	}
}

// secretForms are the forms in which output may carry secret values: each
// value and its words, raw and as JSON may escape them, longest first.
func secretForms(values []string) []string {
	var out []string
	add := func(v string) {
		if v = strings.TrimSpace(v); len(v) >= 4 {
			out = append(out, v)
		}
	}
	for _, v := range values {
		forms := []string{v}
		words := strings.Fields(v)
		for i, w := range words {
			// The first of several words made of letters is a scheme
			// (Bearer, Basic), not a secret.
			scheme := i == 0 && len(words) > 1 && strings.IndexFunc(w, func(r rune) bool { return !unicode.IsLetter(r) }) < 0
			if len(w) >= 6 && !scheme {
				forms = append(forms, w)
			}
		}
		for _, f := range forms {
			add(f)
			q, _ := jsontext.AppendQuote(nil, f)
			add(string(q[1 : len(q)-1]))
			add(jsonEscaped(f, false))
			add(jsonEscaped(f, true))
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	return slices.Compact(out)
}

// jsonEscaped writes s as a JSON string's inside with everything beyond ASCII
// escaped, and <, > and & too when html is set.
func jsonEscaped(s string, html bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e || html && (r == '<' || r == '>' || r == '&'):
			for _, u := range utf16.AppendRune(nil, r) {
				fmt.Fprintf(&b, "\\u%04x", u)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Tail is String for a tail of output that may start within a secret.
func (r *Redactor) Tail(s string) string {
	if r == nil {
		return s
	}
	s = r.String(s)
	prefix := ""
	if rest, ok := strings.CutPrefix(s, "…"); ok {
		prefix, s = "…", rest
	}
	for _, v := range r.forms {
		for k := len(v) - 1; k >= 4; k-- {
			if strings.HasPrefix(s, v[len(v)-k:]) {
				s = Redacted + s[k:]
				break
			}
		}
	}
	return prefix + s
}
