package translate

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
)

// checkMetaJSON checks that an encoder of metadata wrote json.Marshal's
// bytes for v.
func checkMetaJSON(t *testing.T, v any, got jsontext.Value) {
	t.Helper()
	want, err := json.Marshal(v, jsontext.AllowInvalidUTF8(true))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%#v:\n got %s\nwant %s", v, got, want)
	}
}

// checkMetas checks every metadata encoder with the fields set from s, u
// and n, and pointers set or not by set.
func checkMetas(t *testing.T, s, u string, n int, set bool) {
	t.Helper()
	var p *int
	if set {
		p = &n
	}
	fe := documents.FileEditMeta{FilePath: s, Operation: u, Language: s, UnifiedDiff: u, LinesAdded: p, LinesRemoved: p,
		NewPath: s, ToolCallID: u, DurationMs: int64(n), Rejected: set, Reason: s, Error: u}
	checkMetaJSON(t, fe, fileEditMetaJSON(&fe))
	fe.Diff = &documents.Diff{OldString: s, NewString: u, StartLine: n, EndLine: -n}
	checkMetaJSON(t, fe, fileEditMetaJSON(&fe))
	var zero documents.FileEditMeta
	checkMetaJSON(t, zero, fileEditMetaJSON(&zero))
	cb := documents.CodeBlockMeta{Language: s, Purpose: u}
	checkMetaJSON(t, cb, codeBlockMetaJSON(&cb))
	cr := documents.CodeReferenceMeta{FilePath: s, StartLine: n, EndLine: -n, Language: u}
	checkMetaJSON(t, cr, codeReferenceMetaJSON(&cr))
	tc := documents.TerminalCommandMeta{Command: s, WorkingDirectory: u, ExitCode: p, Output: u, DurationMs: int64(n),
		Permissions: []string{s, u}, ToolCallID: s, Signal: u, Background: set, Rejected: set, Reason: s, Error: u}
	checkMetaJSON(t, tc, terminalMetaJSON(&tc))
	if !set {
		tc.Permissions = nil
		checkMetaJSON(t, tc, terminalMetaJSON(&tc))
	}
}

var metaStrings = []string{"", "main.go", "a\"b\\c\n\t<&>", "\u2028 é 日本", "\xff\xc3", "\x00\x1f"}

func TestMetaJSONMatchesMarshal(t *testing.T) {
	for _, s := range metaStrings {
		for _, u := range metaStrings {
			for _, n := range []int{0, 1, -7, 1 << 40} {
				checkMetas(t, s, u, n, true)
				checkMetas(t, s, u, n, false)
			}
		}
	}
}

// TestMetaJSONFields guards the encoders against a field added to a type
// they write.
func TestMetaJSONFields(t *testing.T) {
	for typ, n := range map[reflect.Type]int{
		reflect.TypeFor[documents.FileEditMeta]():        13,
		reflect.TypeFor[documents.Diff]():                4,
		reflect.TypeFor[documents.CodeBlockMeta]():       2,
		reflect.TypeFor[documents.CodeReferenceMeta]():   4,
		reflect.TypeFor[documents.TerminalCommandMeta](): 12,
	} {
		if typ.NumField() != n {
			t.Errorf("%s has %d fields; its encoder writes %d", typ, typ.NumField(), n)
		}
	}
}

func FuzzMetaJSON(f *testing.F) {
	for i, s := range metaStrings {
		f.Add(s, metaStrings[len(metaStrings)-1-i], i*1000-3, i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, s, u string, n int, set bool) {
		checkMetas(t, s, u, n, set)
	})
}
