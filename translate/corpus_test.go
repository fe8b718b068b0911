package translate_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/translate"
)

// The real cursor-agent captures and their expectations live beside the
// project, in the shared folder; they are read, never copied.
const (
	realDir          = "../../shared/fixtures/real"
	expectationsPath = "../../shared/conformance/expectations.json"
)

// expectations mirrors the per-capture part of expectations.json.
type expectations struct {
	Cases map[string]caseExpectation `json:"cases"`
}

type caseExpectation struct {
	Status           documents.Status `json:"status"`
	Docs             []docExpectation `json:"docs"`
	DocsHas          []docExpectation `json:"docs_has"`
	DocsPrefix       []docExpectation `json:"docs_unordered_prefix"`
	DocsTail         []docExpectation `json:"docs_tail"`
	DocsExactTypes   []string         `json:"docs_exact_types"`
	Usage            map[string]int64 `json:"usage"`
	ToolCallCountMin *int             `json:"toolCallCount_min"`
	Once             []string         `json:"once"`
}

// docExpectation is one document pattern: its type and the fields that
// check.py's match() knows.
type docExpectation map[string]jsontext.Value

// realCapture is one real transcript with how its agent exited.
type realCapture struct {
	name  string
	input []byte
	end   translate.End
}

func loadRealCaptures(tb testing.TB) []realCapture {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join(realDir, "*.ndjson"))
	if err != nil {
		tb.Fatal(err)
	}
	if len(paths) == 0 {
		if _, err := os.Stat(realDir); errors.Is(err, fs.ErrNotExist) {
			tb.Skipf("%s is absent", realDir)
		}
		tb.Fatalf("no captures in %s", realDir)
	}
	var out []realCapture
	for _, p := range paths {
		in, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		c := realCapture{name: strings.TrimSuffix(filepath.Base(p), ".ndjson"), input: in}
		if meta, err := os.ReadFile(strings.TrimSuffix(p, ".ndjson") + ".meta.json"); err == nil {
			var m struct {
				Exit   *int   `json:"exit"`
				Stderr string `json:"stderr"`
			}
			if err := json.Unmarshal(meta, &m); err != nil {
				tb.Fatalf("%s: %v", p, err)
			}
			if m.Exit != nil {
				c.end.Exited, c.end.ExitCode = true, *m.Exit
			}
			c.end.Stderr = m.Stderr
		}
		out = append(out, c)
	}
	return out
}

func realOptions() translate.Options {
	return translate.Options{ResponseID: testResponseID, Created: testCreated, Thinking: true}
}

// TestRealCorpus translates every real capture and checks it against the
// shared expectations, the stream contract, and the no-repeat rule.
func TestRealCorpus(t *testing.T) {
	captures := loadRealCaptures(t)
	var exp expectations
	raw, err := os.ReadFile(expectationsPath)
	if err != nil {
		t.Fatalf("reading the expectations: %v", err)
	}
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatalf("%s: %v", expectationsPath, err)
	}
	seen := map[string]bool{}
	for _, c := range captures {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			evs, err := translateReader(bytes.NewReader(c.input), realOptions(), c.end)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkStream(evs, realOptions()); err != nil {
				t.Errorf("stream: %v", err)
			}
			resp := fold(evs)
			if err := checkNoRepeatedSentence(resp); err != nil {
				t.Error(err)
			}
			if err := checkUsage(c.input, resp.Usage); err != nil {
				t.Error(err)
			}
			byteWise, err := translateReader(iotest.OneByteReader(bytes.NewReader(c.input)), realOptions(), c.end)
			if err != nil {
				t.Fatal(err)
			}
			if d := firstDiff(renderSSE(t, byteWise), renderSSE(t, evs)); d != "" {
				t.Errorf("read one byte at a time, the stream differs at %s", d)
			}
			e, ok := exp.Cases[c.name]
			if !ok {
				return
			}
			for _, msg := range checkExpectation(resp, e) {
				t.Error(msg)
			}
		})
		seen[c.name] = true
	}
	for name := range exp.Cases {
		if !seen[name] {
			t.Errorf("expectations.json names %s, which has no capture", name)
		}
	}
}

// checkExpectation applies the checks of the conformance kit's
// check_response to a folded response and returns what fails.
func checkExpectation(resp documents.ChatResponse, e caseExpectation) []string {
	var fails []string
	failf := func(format string, args ...any) { fails = append(fails, fmt.Sprintf(format, args...)) }
	docs := realDocs(resp)
	types := make([]string, len(docs))
	for i, d := range docs {
		types[i] = string(d.Type)
	}
	if resp.Status != e.Status {
		failf("status %q, want %q", resp.Status, e.Status)
	}
	if e.Docs != nil {
		if len(docs) != len(e.Docs) {
			failf("%d documents %v, want %d", len(docs), types, len(e.Docs))
		} else {
			for i, x := range e.Docs {
				if err := matchDoc(docs[i], x); err != nil {
					failf("document %d (%s): %v", i+1, docs[i].Type, err)
				}
			}
		}
	}
	j := 0
	for _, x := range e.DocsHas {
		for j < len(docs) && matchDoc(docs[j], x) != nil {
			j++
		}
		if j == len(docs) {
			failf("no document (in order) matches %v; types %v", x, types)
			break
		}
		j++
	}
	if n := len(e.DocsPrefix); n > 0 {
		pre := docs[:min(n, len(docs))]
		for _, x := range e.DocsPrefix {
			found := false
			for _, d := range pre {
				found = found || matchDoc(d, x) == nil
			}
			if !found {
				failf("none of the first %d documents matches %v", n, x)
			}
		}
	}
	if n := len(e.DocsTail); n > 0 {
		if len(docs) < n {
			failf("%d documents, want a tail of %d", len(docs), n)
		} else {
			for i, x := range e.DocsTail {
				if err := matchDoc(docs[len(docs)-n+i], x); err != nil {
					failf("tail document %d: %v", i+1, err)
				}
			}
		}
	}
	if e.DocsExactTypes != nil && strings.Join(types, ",") != strings.Join(e.DocsExactTypes, ",") {
		failf("types %v, want %v", types, e.DocsExactTypes)
	}
	usage := map[string]int64{"promptTokens": resp.Usage.PromptTokens, "completionTokens": resp.Usage.CompletionTokens,
		"totalTokens": resp.Usage.TotalTokens, "cacheReadTokens": resp.Usage.CacheReadTokens, "cacheWriteTokens": resp.Usage.CacheWriteTokens}
	for k, v := range e.Usage {
		if usage[k] != v {
			failf("usage.%s = %d, want %d", k, usage[k], v)
		}
	}
	if e.ToolCallCountMin != nil && resp.Metadata.ToolCallCount < *e.ToolCallCountMin {
		failf("toolCallCount %d, want at least %d", resp.Metadata.ToolCallCount, *e.ToolCallCountMin)
	}
	var all strings.Builder
	for _, d := range resp.Documents {
		if d.Content != nil {
			all.WriteString(*d.Content)
		}
		all.WriteByte('\n')
	}
	for _, s := range e.Once {
		if n := strings.Count(all.String(), s); n != 1 {
			failf("%q appears %d times in the documents, want once", s, n)
		}
	}
	for i := 1; i < len(resp.Documents); i++ {
		if resp.Documents[i].Sequence <= resp.Documents[i-1].Sequence {
			failf("sequences are not increasing at document %d", i+1)
		}
	}
	return fails
}

// realDocs drops text documents with only whitespace, as the kit does.
func realDocs(resp documents.ChatResponse) []documents.Document {
	var out []documents.Document
	for _, d := range resp.Documents {
		if d.Type == documents.TypeText && (d.Content == nil || strings.TrimSpace(*d.Content) == "") {
			continue
		}
		out = append(out, d)
	}
	return out
}

// docMeta holds the metadata fields the expectations look at.
type docMeta struct {
	FilePath  string `json:"filePath"`
	Operation string `json:"operation"`
	Language  string `json:"language"`
	Command   string `json:"command"`
	ExitCode  *int   `json:"exitCode"`
	Output    string `json:"output"`
	ToolName  string `json:"toolName"`
	Rejected  bool   `json:"rejected"`
	Title     string `json:"title"`
	StartLine *int   `json:"startLine"`
	EndLine   *int   `json:"endLine"`
	Diff      *struct {
		OldString string `json:"oldString"`
	} `json:"diff"`
	Result *struct {
		Status string `json:"status"`
	} `json:"result"`
}

// matchDoc is check.py's match(): nil when d has x's type and every field
// x names matches.
func matchDoc(d documents.Document, x docExpectation) error {
	var typ string
	if err := json.Unmarshal(x["type"], &typ); err != nil {
		return fmt.Errorf("the expectation has no type: %w", err)
	}
	if string(d.Type) != typ {
		return fmt.Errorf("type %s, want %s", d.Type, typ)
	}
	var m docMeta
	if err := json.Unmarshal(d.Metadata, &m); err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	content := ""
	if d.Content != nil {
		content = *d.Content
	}
	for k, raw := range x {
		var s string
		var n *int
		var b bool
		switch k {
		case "exitCode", "startLine", "endLine":
			if err := json.Unmarshal(raw, &n); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		case "rejected", "has_diff":
			if err := json.Unmarshal(raw, &b); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		default:
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("the expectation's %s is not supported here", k)
			}
		}
		ok := true
		switch k {
		case "type":
		case "contains":
			ok = strings.Contains(content, s)
		case "content":
			ok = strings.TrimRight(content, "\n") == s
		case "language":
			ok = m.Language == s
		case "operation":
			ok = m.Operation == s
		case "title":
			ok = m.Title == s
		case "filePath", "filePath_endswith":
			ok = strings.HasSuffix(m.FilePath, s)
		case "command":
			ok = m.Command == s
		case "output_contains":
			ok = strings.Contains(m.Output, s)
		case "toolName_contains":
			ok = strings.Contains(strings.ToLower(m.ToolName), s)
		case "exitCode":
			ok = equalIntPtr(m.ExitCode, n)
		case "startLine":
			ok = equalIntPtr(m.StartLine, n)
		case "endLine":
			ok = equalIntPtr(m.EndLine, n)
		case "rejected":
			rejected := m.Rejected
			if d.Type == documents.TypeToolCall && rejected {
				rejected = m.Result != nil && m.Result.Status == "error"
			}
			ok = rejected == b
		case "has_diff":
			ok = (m.Diff != nil) == b
		default:
			return fmt.Errorf("the expectation's %s is not supported here", k)
		}
		if !ok {
			return fmt.Errorf("%s does not match %s (content %q, metadata %s)", k, raw, clipString(content, 120), clipString(string(d.Metadata), 300))
		}
	}
	return nil
}

func equalIntPtr(a, b *int) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// sentenceEnd splits text into sentences: after . ! ? : or a line break.
var sentenceEnd = regexp.MustCompile(`[.!?:]\s+|\n+`)

// checkNoRepeatedSentence fails when a sentence of the text and code
// documents appears in two places: the agent's repeated flushes and
// result.result must never duplicate text.
func checkNoRepeatedSentence(resp documents.ChatResponse) error {
	where := map[string]string{}
	for _, d := range resp.Documents {
		if !d.Type.IsText() || d.Type == documents.TypeError || d.Content == nil {
			continue
		}
		for _, s := range sentenceEnd.Split(*d.Content, -1) {
			s = strings.TrimRight(strings.TrimSpace(s), ".!?:")
			if len(s) < 12 {
				continue
			}
			if prev, ok := where[s]; ok {
				return fmt.Errorf("%q is in %s and again in %s", s, prev, d.ID)
			}
			where[s] = d.ID
		}
	}
	return nil
}

// checkUsage compares the response usage with the usage of the capture's
// result line: reported with the same counts, or zeros and not reported.
func checkUsage(input []byte, got documents.Usage) error {
	var want *struct {
		InputTokens      int64 `json:"inputTokens"`
		OutputTokens     int64 `json:"outputTokens"`
		CacheReadTokens  int64 `json:"cacheReadTokens"`
		CacheWriteTokens int64 `json:"cacheWriteTokens"`
	}
	for line := range bytes.Lines(input) {
		var r struct {
			Type  string         `json:"type"`
			Usage jsontext.Value `json:"usage"`
		}
		if json.Unmarshal(line, &r) != nil || r.Type != "result" || r.Usage == nil {
			continue
		}
		if err := json.Unmarshal(r.Usage, &want); err != nil {
			return fmt.Errorf("the capture's usage: %w", err)
		}
	}
	if want == nil {
		if got != (documents.Usage{}) {
			return fmt.Errorf("usage %+v for a capture that reports none, want zeros and reported false", got)
		}
		return nil
	}
	w := documents.Usage{PromptTokens: want.InputTokens, CompletionTokens: want.OutputTokens,
		TotalTokens: want.InputTokens + want.OutputTokens, CacheReadTokens: want.CacheReadTokens,
		CacheWriteTokens: want.CacheWriteTokens, Reported: true}
	if got != w {
		return fmt.Errorf("usage %+v, want %+v", got, w)
	}
	return nil
}

// TestCorpusChecksCanFail makes sure the corpus checks report what they
// should: a wrong expectation and a repeated sentence.
func TestCorpusChecksCanFail(t *testing.T) {
	text := func(id string, seq int, s string) documents.Document {
		return documents.Document{ID: id, Type: documents.TypeText, Sequence: seq, Content: &s, Metadata: jsontext.Value(`{"format":"markdown"}`)}
	}
	resp := documents.ChatResponse{Status: documents.StatusCompleted, Documents: []documents.Document{
		text("doc_001", 1, "I'll run that command and report the exact output."),
		text("doc_002", 2, "I'll run that command and report the exact output. Done."),
	}}
	if err := checkNoRepeatedSentence(resp); err == nil {
		t.Error("checkNoRepeatedSentence found no repeat")
	}
	var e caseExpectation
	if err := json.Unmarshal([]byte(`{"status":"error","docs":[{"type":"text","contains":"nowhere"},{"type":"code_block"}],
		"once":["I'll run that command"],"usage":{"promptTokens":1}}`), &e); err != nil {
		t.Fatal(err)
	}
	fails := checkExpectation(resp, e)
	for _, want := range []string{"status", "document 1", "document 2", "appears 2 times", "usage.promptTokens"} {
		found := false
		for _, f := range fails {
			found = found || strings.Contains(f, want)
		}
		if !found {
			t.Errorf("no failure mentions %q; got %q", want, fails)
		}
	}
}
