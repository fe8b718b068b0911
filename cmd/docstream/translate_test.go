package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
)

// corpus is where the real cursor-agent captures live; tests read them
// from ../shared beside the checkout.
const corpus = "../../../shared/fixtures/real"

func translateArgs(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"translate"}, args...), func(string) string { return "" },
		strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

// TestTranslateFormats translates a real capture, named as a file and on
// standard input, in each format.
func TestTranslateFormats(t *testing.T) {
	file := filepath.Join(corpus, "shell-sequential-with-thinking-deltas.ndjson")
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Skipf("the real captures are not beside the checkout: %v", err)
	}
	js, _, err := translateArgs(t, "", file)
	if err != nil {
		t.Fatal(err)
	}
	var cr documents.ChatResponse
	if err := json.Unmarshal([]byte(js), &cr); err != nil || cr.Status != documents.StatusCompleted || len(cr.Documents) == 0 {
		t.Fatalf("json: %v %s %d documents", err, cr.Status, len(cr.Documents))
	}
	fromStdin, _, err := translateArgs(t, string(raw), "--format", "json", "-")
	if err != nil || len(fromStdin) != len(js) {
		t.Errorf("stdin: %v, %d bytes against %d", err, len(fromStdin), len(js))
	}
	stream, _, err := translateArgs(t, "", "--format", "sse", file)
	if err != nil || !strings.HasPrefix(stream, "id: 1\r\nevent: response_start\r\n") || !strings.Contains(stream, "event: done\r\n") {
		t.Errorf("sse: %v %q", err, stream[:min(len(stream), 200)])
	}
	md, _, err := translateArgs(t, "", "--format", "markdown", file)
	if err != nil || !strings.Contains(md, "```") || strings.Contains(md, `"documentId"`) {
		t.Errorf("markdown: %v %q", err, md)
	}
	two, _, err := translateArgs(t, "", file, file)
	if err != nil || strings.Count(two, `"status": "completed"`) != 2 {
		t.Errorf("two files: %v, %d responses", err, strings.Count(two, `"status": "completed"`))
	}
}

// TestTranslateRefusesNonTranscripts checks that an input holding no agent
// event is an error that says so (exit 1), not an empty response.
func TestTranslateRefusesNonTranscripts(t *testing.T) {
	for name, in := range map[string]string{"empty": "", "plain text": "hello\nworld\n", "other JSON": `{"hello":"world"}` + "\n"} {
		out, _, err := translateArgs(t, in)
		if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "holds no cursor-agent stream-json event") || out != "" {
			t.Errorf("%s: %v (exit %d), printed %q", name, err, exitCode(err), out)
		}
		if strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%s: the message is not one line: %q", name, err)
		}
	}
	if _, _, err := translateArgs(t, "", "--format", "html"); exitCode(err) != 2 {
		t.Errorf("--format html: %v, want exit 2", err)
	}
}
