package translate

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/tools/txtar"
)

// The walkers as they were before walkObject, each value found by
// eachMember and then read again: the reference FuzzWalkers compares the
// walkers with.

// refMessageText extracts the text of a message object: its content as a
// string, or its text blocks in order.
func refMessageText(v jsontext.Value) string {
	var content []byte
	eachMember(v, func(name, val []byte, _, _ int) {
		if nameIs(name, "content") {
			content = val
		}
	})
	return refContentText(content)
}

// refContentText reads a message content: a string, or an array of blocks of
// which those of type "text" (or of no type) count.
func refContentText(c jsontext.Value) string {
	switch c.Kind() {
	case '"':
		return textStr(c)
	case '[':
		// Usually one text block: its string is the text, with no joining.
		var first []byte
		var joined *strings.Builder
		eachElement(c, func(elem []byte) {
			var typ, text []byte
			if !eachMember(elem, func(name, val []byte, _, _ int) {
				switch {
				case nameIs(name, "type"):
					typ = val
				case nameIs(name, "text"):
					text = val
				}
			}) {
				return
			}
			if (typ != nil && string(typ) != `"text"` && string(typ) != `""`) || len(text) == 0 || text[0] != '"' {
				return
			}
			switch {
			case first == nil:
				first = text
			case joined == nil:
				joined = &strings.Builder{}
				joined.WriteString(textStr(first))
				fallthrough
			default:
				joined.WriteString(textStr(text))
			}
		})
		if joined != nil {
			return joined.String()
		}
		return textStr(first)
	}
	return ""
}

// refParseToolObject reads a tool_call (or payload toolCall) object in any of
// its layouts into tc and returns the call id it names, if any. raw is owned
// by tc afterwards: its parts are kept without copies.
func refParseToolObject(raw jsontext.Value, tc *ToolCall) (id string) {
	var otherName, other []byte // an object of a kind not named …ToolCall
	eachMember(raw, func(nameQ, v []byte, _, _ int) {
		name := unquoteName(nameQ)
		switch {
		case bytes.HasSuffix(name, []byte("ToolCall")) && v[0] == '{':
			tc.Kind = toolKind(name)
			refParseToolInner(v, tc)
		case string(name) == "function" && v[0] == '{':
			tc.Kind = "function"
			parseFunction(v, tc)
		case string(name) == "toolCallId" || string(name) == "id":
			if id == "" {
				id = str(v)
			}
		case string(name) == "startedAtMs":
			tc.StartedAtMs = num(v)
		case string(name) == "completedAtMs":
			tc.CompletedAtMs = num(v)
		case string(name) == "result":
			tc.Result = v
		case other == nil && len(v) > 0 && v[0] == '{' && hasArgsOrResult(v):
			otherName, other = name, v
		}
	})
	if tc.Kind == "" && other != nil {
		tc.Kind = string(otherName)
		refParseToolInner(other, tc)
	}
	return id
}

// refParseToolInner reads {args, result, description, name} or a legacy inner
// object whose members are the arguments themselves.
func refParseToolInner(raw jsontext.Value, tc *ToolCall) {
	var args, result jsontext.Value
	eachMember(raw, func(name, v []byte, _, _ int) {
		switch {
		case nameIs(name, "args"):
			args = v
		case nameIs(name, "result"):
			result = v
		case nameIs(name, "description"):
			tc.Description = str(v)
		case nameIs(name, "name"):
			tc.Name = str(v)
		}
	})
	tc.Args, tc.Result = args, result
	if tc.Args == nil && tc.Result == nil {
		// Legacy layout: {"path": …, "contents": …} carries the arguments directly.
		tc.Args = raw
	}
}

// FuzzWalkers compares the walkers that read messages and tool calls with
// their reference on every object and array value of a valid JSON line.
func FuzzWalkers(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.txtar")
	for _, name := range files {
		a, err := txtar.ParseFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range a.Files {
			if file.Name == "input.ndjson" {
				for _, line := range bytes.Split(file.Data, []byte("\n")) {
					f.Add(line)
				}
			}
		}
	}
	f.Add([]byte(`{"content":[{"type":"text","text":"a"},7,{"text":"b","type":""},{"type":"image","text":"x"},{"text":1}]}`))
	f.Add([]byte(`{"readToolCall":{"path":"legacy"},"id":"c1","function":{"name":"f","arguments":"{}"},"result":{}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if !jsontext.Value(line).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) {
			return
		}
		var check func(v []byte, depth int)
		check = func(v []byte, depth int) {
			v = bytes.TrimSpace(v)
			if depth > 32 || len(v) == 0 {
				return
			}
			if got, want := contentText(v), refContentText(v); got != want {
				t.Fatalf("contentText(%q) = %q, want %q", v, got, want)
			}
			switch v[0] {
			case '"':
				want, _ := jsontext.AppendUnquote([]byte("x"), v)
				if got := appendUnquote([]byte("x"), v); !bytes.Equal(got, want) {
					t.Fatalf("appendUnquote(%q) = %q, want %q", v, got, want)
				}
			case '{':
				if got, want := messageText(v), refMessageText(v); got != want {
					t.Fatalf("messageText(%q) = %q, want %q", v, got, want)
				}
				var got, want ToolCall
				gotID, wantID := parseToolObject(v, &got), refParseToolObject(v, &want)
				if gotID != wantID || !reflect.DeepEqual(got, want) {
					t.Fatalf("parseToolObject(%q) = %q %+v, want %q %+v", v, gotID, got, wantID, want)
				}
				got, want = ToolCall{}, ToolCall{}
				parseToolInner(v, &got)
				refParseToolInner(v, &want)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("parseToolInner(%q) = %+v, want %+v", v, got, want)
				}
				eachMember(v, func(_, val []byte, _, _ int) { check(val, depth+1) })
			case '[':
				eachElement(v, func(elem []byte) { check(elem, depth+1) })
			}
		}
		check(line, 0)
	})
}

// TestAppendUnquote compares appendUnquote with jsontext.AppendUnquote on
// strings that take each of its paths: runs between escapes, each
// one-character escape, \u escapes and surrogates, and invalid UTF-8 before,
// between and after escapes.
func TestAppendUnquote(t *testing.T) {
	for _, v := range []string{
		`""`, `"plain"`, `"\n"`, `"a\nb"`, `"ends\\"`, `"\"quoted\""`, `"\/\b\f\n\r\t"`,
		`"line 1\nline 2\n\ttabbed é ü 日本"`, `"\u0041"`, `"a\nb\u00e9c"`, `"\ud83d\ude00"`, `"\ud83d"`,
		`"x\udc00y"`, "\"\xff\\n\"", "\"a\\n\xc3\"", "\"a\\nb\xe2\x82\"", "\"\xf0\x9f\x98\x80\\t\"",
	} {
		want, _ := jsontext.AppendUnquote([]byte("pre"), []byte(v))
		if got := appendUnquote([]byte("pre"), []byte(v)); !bytes.Equal(got, want) {
			t.Errorf("appendUnquote(%q) = %q, want %q", v, got, want)
		}
		if got, want := str(jsontext.Value(v)), string(want[3:]); got != want && strings.Contains(v, `\`) {
			t.Errorf("str(%q) = %q, want %q", v, got, want)
		}
	}
}

// TestNameChecks compares plainName and asciiName, which read eight bytes
// at a time, with a byte loop, for a backslash or a byte beyond ASCII at
// each place of names of up to 20 bytes.
func TestNameChecks(t *testing.T) {
	for n := range 21 {
		for at := range n + 1 {
			for _, c := range []byte{'\\', 0x80, 0xff, 'a' - 1, 0x7f, '\\' + 1, 0} {
				name := []byte(strings.Repeat("n", n))
				if at < n {
					name[at] = c
				}
				plain, ascii := true, true
				for _, x := range name {
					plain = plain && x != '\\' && x < 0x80
					ascii = ascii && x < 0x80
				}
				if plainName(name) != plain || asciiName(name) != ascii {
					t.Errorf("%q: plainName %v, asciiName %v; want %v, %v", name, plainName(name), asciiName(name), plain, ascii)
				}
			}
		}
	}
}

// BenchmarkUnquote unquotes a tool's output of some kilobytes (lines with a
// tab and a newline in each), beside jsontext.AppendUnquote.
func BenchmarkUnquote(b *testing.B) {
	v, _ := jsontext.AppendQuote(nil, strings.Repeat("ok  \tgithub.com/x/y/package\t0.012s coverage: 81.2% of statements\n", 64))
	for name, unquote := range map[string]func(dst, v []byte) []byte{
		"appendUnquote": appendUnquote,
		"jsontext": func(dst, v []byte) []byte {
			dst, _ = jsontext.AppendUnquote(dst, v)
			return dst
		},
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(v)))
			buf := make([]byte, 0, len(v))
			for b.Loop() {
				buf = unquote(buf[:0], v)
			}
		})
	}
}

// TestStripToolCallIDEscaped: the toolCallId member goes when its name is
// written with escapes too (it stayed in the arguments).
func TestStripToolCallIDEscaped(t *testing.T) {
	for in, want := range map[string]string{
		`{"path":"a","toolCallId":"c1"}`:      `{"path":"a"}`,
		`{"path":"a","toolCall\u0049d":"c1"}`: `{"path":"a"}`,
		`{"\u0074oolCallId":"c1","path":"a"}`: `{"path":"a"}`,
		`{"path":"a\u00e9","other":"c1"}`:     `{"path":"a\u00e9","other":"c1"}`,
		`{"path":"toolCallId","x":"\u0041"}`:  `{"path":"toolCallId","x":"\u0041"}`,
	} {
		if got := string(stripToolCallID(jsontext.Value(in))); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
