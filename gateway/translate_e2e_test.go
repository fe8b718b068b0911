package gateway_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
)

// TestTranslateMarkdownIsTheOpenAIContent checks that `docstream translate
// --format markdown` prints exactly the content the OpenAI route sends for
// the same transcript, replayed by the conformance kit's stand-in agent.
func TestTranslateMarkdownIsTheOpenAIContent(t *testing.T) {
	t.Parallel()
	agent, err := filepath.Abs("../../shared/conformance/agent")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(agent); err != nil {
		t.Skipf("the conformance kit is not beside the checkout: %v", err)
	}
	s := startE2E(t, "DOCSTREAM_AGENT_BINARY="+agent, "DOCSTREAM_AGENT_ARGS_PREFIX=", "DOCSTREAM_AUTH_RATE_PER_MINUTE=0")
	for _, c := range []string{"shell-sequential-with-thinking-deltas", "glob-edit-diff-shell-rejected-and-success-excerpt", "DOCS-SAMPLE-official-read-write-sequence"} {
		want, err := exec.Command(binary, "translate", "--format", "markdown", "../../shared/fixtures/real/"+c+".ndjson").Output()
		if err != nil {
			t.Fatalf("%s: translate: %v", c, err)
		}
		body := readAll(t, s.post(t, "/v1/chat/completions", map[string]any{"model": "auto",
			"messages": []map[string]any{{"role": "user", "content": "replay:" + c}}}))
		var cc struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(body, &cc); err != nil || len(cc.Choices) != 1 {
			t.Fatalf("%s: %v %s", c, err, body)
		}
		if got := cc.Choices[0].Message.Content; got != string(want) {
			t.Errorf("%s: the OpenAI content and the translation differ:\n%s\n----\n%s", c, strings.TrimSpace(got), strings.TrimSpace(string(want)))
		}
	}
}
