package agent

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf16"

	"github.com/go-json-experiment/json/jsontext"
)

// agentSecrets are the values the gateway hands the agent that its output
// must not pass on to clients: the API key and the header values, each
// also as its words (a token after "Bearer") and as JSON writes it: with
// escapes, with what is beyond ASCII escaped (in UTF-16), and HTML-safe.
// The longest come first, so that a secret that begins another does not
// leave the other's rest.
func agentSecrets(cfg Config) []string {
	seen := map[string]bool{}
	var out []string
	add := func(v string) {
		if v = strings.TrimSpace(v); len(v) >= 4 && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	addValue := func(v string) {
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
	addValue(cfg.APIKey)
	for _, h := range cfg.Headers {
		if _, v, ok := strings.Cut(h, ":"); ok {
			addValue(v)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// jsonEscaped writes s as a JSON string's inside that escapes everything
// beyond ASCII (as UTF-16 units, \ud83d\udd11 for one emoji), and also
// <, > and & when html is set.
func jsonEscaped(s string, html bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e || html && (r == '<' || r == '>' || r == '&'):
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(&b, "\\u%04x\\u%04x", r1, r2)
			} else {
				fmt.Fprintf(&b, "\\u%04x", r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// redact replaces every secret in s, and the end of one that s begins
// with: a tail of the agent's stderr may start within a secret (after the
// "…" that says so).
func redact(s string, secrets []string) string {
	for _, v := range secrets {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	prefix := ""
	if rest, ok := strings.CutPrefix(s, "…"); ok {
		prefix, s = "…", rest
	}
	for _, v := range secrets {
		for k := len(v) - 1; k >= 4; k-- {
			if strings.HasPrefix(s, v[len(v)-k:]) {
				s = "[redacted]" + s[k:]
				break
			}
		}
	}
	return prefix + s
}
