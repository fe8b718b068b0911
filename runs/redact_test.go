package runs

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
)

// TestRedactSecrets: every form in which output can carry a secret is
// masked: a key that begins a longer header value,
// a token after "Bearer", JSON escapes, and the end of a secret where the
// kept tail of stderr begins within it.
func TestRedactSecrets(t *testing.T) {
	t.Parallel()
	r := NewRedactor(`sk-abc.def*+?`, " sk-abc.def*+?-LONGER-SUFFIX", " Bearer zzz-bearer-123",
		` tok(\d)[x]$`, " clé-secrète-1", " pässwörd-🔑key", " a<b>&c-secretvalue", " Bearer abc123")
	for in, want := range map[string]string{
		"k1 sk-abc.def*+? | h1 sk-abc.def*+?-LONGER-SUFFIX | end": "k1 [redacted] | h1 [redacted] | end",
		"+?-LONGER-SUFFIXBBBB":                  "[redacted]BBBB",
		"auth failed for zzz-bearer-123":        "auth failed for [redacted]",
		`{"header":"tok(\\d)[x]$"}`:             `{"header":"[redacted]"}`,
		`{"h":"cl\u00e9-secr\u00e8te-1"}`:       `{"h":"[redacted]"}`,
		"plain clé-secrète-1 too":               "plain [redacted] too",
		"nothing secret here, just Bearer text": "nothing secret here, just Bearer text",
		"…+?-LONGER-SUFFIXZZZ":                  "…[redacted]ZZZ",
		`"p\u00e4ssw\u00f6rd-\ud83d\udd11key"`:  `"[redacted]"`,
		`"a\u003cb\u003e\u0026c-secretvalue"`:   `"[redacted]"`,
		"token abc123 rejected":                 "token [redacted] rejected",
	} {
		if got := r.Tail(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRedactSplitDeltas cuts texts holding secrets into two or three deltas
// at every byte offset: what goes out is the text masked as a whole, and no
// delta holds a secret.
func TestRedactSplitDeltas(t *testing.T) {
	t.Parallel()
	r := NewRedactor("sk-live-0123456789", "hdr-värde-42")
	for _, text := range []string{
		"key sk-live-0123456789 and hdr-värde-42.",
		"sk-live-0123456789sk-live-0123456789",
		"almost sk-live-012345678 but not; ",
		"```\nexport KEY=sk-live-0123456789\n```\n",
		"tail sk-live-0",
	} {
		want := r.String(text)
		for i := 0; i <= len(text); i++ {
			for j := i; j <= len(text); j += max(1, len(text)/7) {
				rd := redacting{r: r}
				var got strings.Builder
				step := func(ev documents.Event) {
					d, ok := ev.(documents.ContentDelta)
					if !ok {
						return
					}
					for _, f := range r.forms {
						if strings.Contains(d.Delta, f) {
							t.Fatalf("%q cut at %d, %d: a delta holds a secret: %q", text, i, j, d.Delta)
						}
					}
					got.WriteString(d.Delta)
					// A delta that keeps its producer's content says what went out.
					if d.Content != "" && d.Content != got.String() {
						t.Fatalf("%q cut at %d, %d: content %q after %q went out", text, i, j, d.Content, got.String())
					}
				}
				for k, part := range []string{text[:i], text[i:j], text[j:]} {
					all := text[:[]int{i, j, len(text)}[k]]
					rd.each(documents.ContentDelta{DocumentID: "d", Delta: part, Content: all}, step)
				}
				rd.each(documents.DocumentEnd{DocumentID: "d"}, step)
				if got.String() != want {
					t.Fatalf("%q cut at %d, %d: %q, want %q", text, i, j, got.String(), want)
				}
			}
		}
	}
}

// TestRedactMetadata: the metadata of every event that carries one is
// masked, a tool call's update while it waits for approval included.
func TestRedactMetadata(t *testing.T) {
	t.Parallel()
	rd := redacting{r: NewRedactor("sk-live-0123456789")}
	meta := []byte(`{"command":"curl -H 'Authorization: sk-live-0123456789'"}`)
	for _, ev := range []documents.Event{
		documents.DocumentStart{ID: "d", Metadata: meta},
		documents.DocumentUpdate{DocumentID: "d", Metadata: meta},
		documents.DocumentEnd{DocumentID: "d", Metadata: meta},
	} {
		rd.each(ev, func(out documents.Event) {
			if b, err := json.Marshal(out); err != nil || strings.Contains(string(b), "sk-live") {
				t.Errorf("%s: %s (%v)", out.Name(), b, err)
			}
		})
	}
}
