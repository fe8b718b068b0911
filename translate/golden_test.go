package translate_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/tools/txtar"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/sse"
	"github.com/docstream/docstream/translate"
)

// Use go test -run TestGolden -update to create or update the expected
// sections of testdata/*.txtar.
var update = flag.Bool("update", false, "rewrite the expected sections of testdata/*.txtar")

// Fixed identity of every golden response, so that outputs are stable.
const (
	testResponseID = "chat_test"
	testCreated    = "2026-01-01T00:00:00Z"
)

// caseOptions is the optional options.json section of a golden case.
type caseOptions struct {
	Thinking       bool   `json:"thinking"`
	IncludeRaw     bool   `json:"includeRaw"`
	Mode           string `json:"mode"`
	Model          string `json:"model"`
	Workspace      string `json:"workspace"`
	ConversationID string `json:"conversationId"`
	MaxLine        int    `json:"maxLine"`
	End            struct {
		Reason   string `json:"reason"`
		Message  string `json:"message"`
		Exited   bool   `json:"exited"`
		ExitCode int    `json:"exitCode"`
		Signal   string `json:"signal"`
		Stderr   string `json:"stderr"`
		Elapsed  int64  `json:"elapsed"`
	} `json:"end"`
}

// goldenCase is one testdata/*.txtar file.
type goldenCase struct {
	name    string
	path    string
	archive *txtar.Archive
	input   []byte
	opts    caseOptions
}

func (c *goldenCase) section(name string) ([]byte, bool) {
	for _, f := range c.archive.Files {
		if f.Name == name {
			return f.Data, true
		}
	}
	return nil, false
}

func (c *goldenCase) setSection(name string, data []byte) {
	for i, f := range c.archive.Files {
		if f.Name == name {
			c.archive.Files[i].Data = data
			return
		}
	}
	c.archive.Files = append(c.archive.Files, txtar.File{Name: name, Data: data})
}

// segmenterOptions returns the Segmenter options of the case.
func (c *goldenCase) segmenterOptions() translate.Options {
	return translate.Options{
		ResponseID: testResponseID, Created: testCreated, ConversationID: c.opts.ConversationID,
		Model: c.opts.Model, Mode: c.opts.Mode, Workspace: c.opts.Workspace,
		Thinking: c.opts.Thinking, IncludeRaw: c.opts.IncludeRaw, MaxLine: c.opts.MaxLine,
	}
}

// end returns how the agent's output ended, for a case without a result.
func (c *goldenCase) end() translate.End {
	e := c.opts.End
	return translate.End{Reason: documents.StopReason(e.Reason), Message: e.Message, Exited: e.Exited, ExitCode: e.ExitCode,
		Signal: e.Signal, Stderr: e.Stderr, Elapsed: e.Elapsed}
}

// translateCase runs the case's input, read through r, as the gateway does.
func (c *goldenCase) translate(tb testing.TB, r io.Reader) []documents.Event {
	tb.Helper()
	evs, err := translateReader(r, c.segmenterOptions(), c.end())
	if err != nil {
		tb.Fatalf("translating %s: %v", c.name, err)
	}
	return evs
}

// translateReader feeds a transcript through a Decoder and a Segmenter and
// ends the response the way the gateway does when the agent exits.
func translateReader(r io.Reader, opts translate.Options, end translate.End) ([]documents.Event, error) {
	var evs []documents.Event
	seg := translate.NewSegmenter(opts, func(ev documents.Event) { evs = append(evs, ev) })
	seg.Start()
	if err := translate.Pump(translate.NewDecoder(r, opts.MaxLine), seg); err != nil {
		return evs, fmt.Errorf("pumping the transcript: %w", err)
	}
	seg.Close(end)
	return evs, nil
}

func loadGolden(tb testing.TB) []*goldenCase {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.txtar"))
	if err != nil {
		tb.Fatal(err)
	}
	if len(paths) == 0 {
		tb.Fatal("no testdata/*.txtar files")
	}
	cases := make([]*goldenCase, 0, len(paths))
	for _, p := range paths {
		a, err := txtar.ParseFile(p)
		if err != nil {
			tb.Fatalf("reading %s: %v", p, err)
		}
		c := &goldenCase{name: strings.TrimSuffix(filepath.Base(p), ".txtar"), path: p, archive: a}
		in, ok := c.section("input.ndjson")
		if !ok {
			tb.Fatalf("%s: no input.ndjson section", p)
		}
		c.input = in
		if o, ok := c.section("options.json"); ok {
			if err := json.Unmarshal(o, &c.opts, json.RejectUnknownMembers(true)); err != nil {
				tb.Fatalf("%s: options.json: %v", p, err)
			}
		}
		cases = append(cases, c)
	}
	return cases
}

// fold folds a document stream into the response it describes.
func fold(evs []documents.Event) documents.ChatResponse {
	var b documents.Builder
	for _, ev := range evs {
		b.Add(ev)
	}
	return b.Response()
}

// renderDocuments encodes a response as pretty JSON with a final newline.
func renderDocuments(tb testing.TB, r documents.ChatResponse) []byte {
	tb.Helper()
	b, err := json.Marshal(r, jsontext.AllowInvalidUTF8(true), jsontext.Multiline(true), jsontext.WithIndent("  "))
	if err != nil {
		tb.Fatalf("encoding the response: %v", err)
	}
	return append(b, '\n')
}

// renderSSE writes the stream as the gateway sends it, with ids 1..n.
func renderSSE(tb testing.TB, evs []documents.Event) []byte {
	tb.Helper()
	var buf bytes.Buffer
	for i, ev := range evs {
		f, err := sse.NewFrame(i+1, ev)
		if err != nil {
			tb.Fatalf("encoding event %d (%s): %v", i+1, ev.Name(), err)
		}
		if _, err := f.WriteTo(&buf); err != nil {
			tb.Fatal(err)
		}
	}
	return buf.Bytes()
}

// firstDiff describes the first line where got and want differ, or returns
// "" when they are equal.
func firstDiff(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		switch {
		case i >= len(g):
			return fmt.Sprintf("line %d: got end of output, want %q", i+1, wl)
		case i >= len(w):
			return fmt.Sprintf("line %d: got %q, want end of output", i+1, gl)
		case gl != wl:
			return fmt.Sprintf("line %d:\n\tgot  %q\n\twant %q", i+1, gl, wl)
		}
	}
	return "outputs differ in their line endings"
}

func TestGolden(t *testing.T) {
	for _, c := range loadGolden(t) {
		t.Run(c.name, func(t *testing.T) {
			if !*update {
				t.Parallel()
			}
			evs := c.translate(t, bytes.NewReader(c.input))
			got := map[string][]byte{
				"documents.json": renderDocuments(t, fold(evs)),
				"sse.txt":        renderSSE(t, evs),
			}
			if *update {
				c.setSection("documents.json", got["documents.json"])
				c.setSection("sse.txt", got["sse.txt"])
				if err := os.WriteFile(c.path, txtar.Format(c.archive), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, name := range []string{"documents.json", "sse.txt"} {
				want, ok := c.section(name)
				if !ok {
					t.Errorf("%s: no %s section (run go test -run TestGolden -update)", c.path, name)
					continue
				}
				if d := firstDiff(got[name], want); d != "" {
					t.Errorf("%s: %s differs at %s", c.path, name, d)
				}
			}
		})
	}
}

// TestFirstDiff checks the failure report of the golden tests.
func TestFirstDiff(t *testing.T) {
	tests := []struct{ got, want, report string }{
		{"a\nb\n", "a\nb\n", ""},
		{"a\nb\n", "a\nc\n", "line 2:\n\tgot  \"b\"\n\twant \"c\""},
		{"a\n", "a\nb\n", "line 2:\n\tgot  \"\"\n\twant \"b\""},
		{"a", "a\nb", `line 2: got end of output, want "b"`},
		{"a\nb\nc", "a\nb", `line 3: got "c", want end of output`},
	}
	for _, tt := range tests {
		if got := firstDiff([]byte(tt.got), []byte(tt.want)); got != tt.report {
			t.Errorf("firstDiff(%q, %q) = %q, want %q", tt.got, tt.want, got, tt.report)
		}
	}
}
