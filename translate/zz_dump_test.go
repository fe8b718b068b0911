package translate_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/docstream/docstream/translate"
)

func TestZZDump(t *testing.T) {
	p := os.Getenv("DUMP")
	if p == "" {
		t.Skip()
	}
	f, _ := os.Open(p)
	defer f.Close()
	evs, err := translateReader(f, translate.Options{ResponseID: testResponseID, Created: testCreated, Thinking: os.Getenv("THINK") != ""}, translate.End{})
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("SSE") != "" {
		os.Stdout.Write(renderSSE(t, evs))
	} else {
		os.Stdout.Write(renderDocuments(t, fold(evs)))
	}
	_ = filepath.Base
}
