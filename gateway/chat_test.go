package gateway_test

import (
	"strings"
	"testing"

	"github.com/docstream/docstream/documents"
)

// TestTourEveryDocumentType streams the simulator's tour over a real
// listener and checks every document type arrives and the fold equals the
// JSON answer of the same scenario.
func TestTourEveryDocumentType(t *testing.T) {
	s := startServer(t)
	resp, evs := s.chatStream(t, map[string]any{"prompt": "tour"})
	if resp.Header.Get("X-Docstream-Response-Id") == "" {
		t.Errorf("no X-Docstream-Response-Id header")
	}
	got := fold(t, evs)
	if got.Status != documents.StatusCompleted {
		t.Fatalf("status %s", got.Status)
	}
	seen := map[documents.Type]int{}
	for _, d := range got.Documents {
		seen[d.Type]++
	}
	for _, typ := range documents.Types {
		if typ == documents.TypeError {
			continue
		}
		if seen[typ] == 0 {
			t.Errorf("no %s document in the tour; got %v", typ, seen)
		}
	}
	full := s.chatJSON(t, map[string]any{"prompt": "tour"})
	if len(full.Documents) != len(got.Documents) {
		t.Fatalf("JSON answer has %d documents, the stream %d", len(full.Documents), len(got.Documents))
	}
	for i := range full.Documents {
		a, b := full.Documents[i], got.Documents[i]
		if a.Type != b.Type || str(a.Content) != str(b.Content) {
			t.Errorf("document %d: JSON %s %q, stream %s %q", i, a.Type, clip(str(a.Content)), b.Type, clip(str(b.Content)))
		}
	}
	s.waitNoAgents(t, 10e9)
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return strings.ReplaceAll(s, "\n", `\n`)
}
