package translate_test

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/sse"
	"github.com/docstream/docstream/translate"
)

// fenceTexts are assistant texts that stress the fence rules.
var fenceTexts = []string{
	"Intro\n```go\nfunc f() {}\n```\nOutro",
	"```12:14:src/main.py\ndef main():\n    pass\n```",
	"~~~\n```\nstill code\n~~~~\nafter",
	"  ```yaml\n  a: 1\n    b: 2\n ```\n",
	"``` not`a fence\n```\nunterminated",
	"\n\n  \n```\n\n```\n  text  \n\n",
	"````md\n```go\nx\n```\n````\n",
	"```js title=\"x\"\r\ncode\r\n```\r\n\r\nend\r\n",
	"a\n    ```\n    not a fence\n    ```\n",
	"```\n\n\nx\n\n```",
	"text ``` inline\n`` two\n```",
}

// goldenInputs returns the input.ndjson of every golden case, and the
// assistant text of each, for fuzz seeds.
func goldenInputs(f *testing.F) (inputs [][]byte, texts []string) {
	f.Helper()
	for _, c := range loadGolden(f) {
		inputs = append(inputs, c.input)
		dec := translate.NewDecoder(bytes.NewReader(c.input), 0)
		var text strings.Builder
		for {
			ev, err := dec.Next()
			if err != nil {
				break
			}
			if ev.Kind == translate.KindAssistant {
				text.WriteString(ev.Text)
			}
		}
		if text.Len() > 0 {
			texts = append(texts, text.String())
		}
	}
	return inputs, texts
}

// rng is a small xorshift generator for reproducible chunking.
type rng uint64

func (r *rng) next() uint64 {
	x := uint64(*r)
	if x == 0 {
		x = 0x9e3779b97f4a7c15
	}
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	*r = rng(x)
	return x
}

// chunks splits s into pieces of 1 to 16 bytes chosen by seed.
func chunks(s string, seed uint64) []string {
	r := rng(seed)
	var out []string
	for len(s) > 0 {
		n := min(int(r.next()%16)+1, len(s))
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// expectedLine is what the Decoder must report for one input line.
type expectedLine struct {
	raw      []byte
	size     int
	oversize bool
}

// expectedLines splits input the way the Decoder's documentation says:
// lines end at '\n'; spaces, tabs and CRs around a line are trimmed; blank
// lines are skipped; a line longer than max is reported by its size only.
func expectedLines(input []byte, max int) (lines []expectedLine) {
	rest := input
	for len(rest) > 0 {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if len(line) > max {
			lines = append(lines, expectedLine{size: len(line), oversize: true})
			continue
		}
		t := bytes.Trim(line, " \t\r")
		if len(t) > 0 {
			lines = append(lines, expectedLine{raw: t, size: len(t)})
		}
	}
	return lines
}

var jsonOpts = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// FuzzDecoder feeds arbitrary bytes to the Decoder through a normal reader
// and through a 16-byte buffer read in odd pieces: it must not panic, must
// report exactly the input's lines (Raw is the trimmed line itself), and a
// line is not_json exactly when it is not one JSON object.
func FuzzDecoder(f *testing.F) {
	inputs, _ := goldenInputs(f)
	for _, in := range inputs {
		f.Add(in, uint16(0))
		f.Add(in, uint16(200))
	}
	f.Add([]byte("{\"type\":\"assistant\"} x\n{}\n[1]\n\r\n  \t\n{\"a\":1,\"a\":2}\n\xff{\n"), uint16(8))
	f.Fuzz(func(t *testing.T, input []byte, max uint16) {
		maxLine := int(max)
		if maxLine == 0 {
			maxLine = translate.DefaultMaxLine
		}
		want := expectedLines(input, maxLine)
		readers := map[string]*translate.Decoder{
			"plain":         translate.NewDecoder(bytes.NewReader(input), maxLine),
			"16-byte split": translate.NewDecoderSize(iotest.HalfReader(bytes.NewReader(input)), maxLine, 16),
		}
		// The readers of tool JSON must survive anything.
		translate.ReadJSON(input)
		for how, dec := range readers {
			i := 0
			for {
				ev, err := dec.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("%s: %v", how, err)
				}
				if i == len(want) {
					t.Fatalf("%s: event %d (%s) beyond the %d lines", how, i+1, ev.Kind, len(want))
				}
				w := want[i]
				i++
				if w.oversize {
					if ev.Kind != translate.KindOversize || ev.Size != w.size || ev.Raw != nil {
						t.Fatalf("%s: event %d is %s of size %d, want oversize of size %d", how, i, ev.Kind, ev.Size, w.size)
					}
					continue
				}
				if !bytes.Equal(ev.Raw, w.raw) || ev.Size != w.size {
					t.Fatalf("%s: event %d has Raw %q (size %d), want %q", how, i, ev.Raw, ev.Size, w.raw)
				}
				isObject := w.raw[0] == '{' && jsontext.Value(w.raw).IsValid(jsonOpts...)
				if (ev.Kind == translate.KindNotJSON) == isObject {
					t.Fatalf("%s: event %d is %s for %q", how, i, ev.Kind, w.raw)
				}
			}
			if i != len(want) {
				t.Fatalf("%s: %d events, want %d", how, i, len(want))
			}
		}
	})
}

// FuzzSegmenter runs arbitrary bytes two ways. As agent output, the stream
// contract must hold. As assistant text fed in deltas of 1 to 16 bytes, the
// documents must equal those that refDocs computes from the whole text by
// the documented rules; refDocs itself checks that its documents and fence
// lines hold every non-whitespace byte of the text, in order.
func FuzzSegmenter(f *testing.F) {
	inputs, texts := goldenInputs(f)
	for i, in := range inputs {
		f.Add(in, uint64(i))
	}
	for i, s := range append(texts, fenceTexts...) {
		f.Add([]byte(s), uint64(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		opts := translate.Options{ResponseID: "chat_fuzz", Created: testCreated,
			Thinking: seed&1 != 0, IncludeRaw: seed&2 != 0, MaxLine: 4096}
		if seed&4 != 0 {
			opts.Mode = "ask"
		}
		evs, err := translateReader(bytes.NewReader(data), opts, translate.End{})
		if err != nil {
			t.Fatal(err)
		}
		if err := checkStream(evs, opts); err != nil {
			t.Fatalf("as agent output: %v", err)
		}
		for i, ev := range evs {
			if _, err := sse.NewFrame(i+1, ev); err != nil {
				t.Fatalf("as agent output: event %d (%s) cannot be sent: %v", i+1, ev.Name(), err)
			}
		}
		if _, err := json.Marshal(fold(evs), jsontext.AllowInvalidUTF8(true)); err != nil {
			t.Fatalf("as agent output: encoding the response: %v", err)
		}

		text := string(data)
		want, err := refDocs(translate.PairSurrogates(text), opts.Mode)
		if err != nil {
			t.Fatal(err)
		}
		for _, how := range []string{"deltas", "snapshot"} {
			var evs []documents.Event
			seg := translate.NewSegmenter(opts, func(ev documents.Event) { evs = append(evs, ev) })
			if how == "deltas" {
				for _, c := range chunks(text, seed) {
					seg.Feed(translate.Event{Kind: translate.KindAssistant, Text: c, HasTimestamp: true, TimestampMs: 1})
				}
			} else {
				seg.Feed(translate.Event{Kind: translate.KindAssistant, Text: text})
			}
			seg.Feed(translate.Event{Kind: translate.KindResult, Result: &translate.Result{Subtype: "success"}})
			if err := checkStream(evs, opts); err != nil {
				t.Fatalf("as text in %s: %v", how, err)
			}
			got := fold(evs).Documents
			if len(got) != len(want) {
				t.Fatalf("as text in %s: %d documents %s, want %d %s", how, len(got), docsString(got), len(want), docsString(want))
			}
			for i := range got {
				g, w := got[i], want[i]
				if g.Type != w.Type || *g.Content != *w.Content || !bytes.Equal(g.Metadata, w.Metadata) {
					t.Fatalf("as text in %s: document %d is %s %q %s, want %s %q %s", how, i+1,
						g.Type, *g.Content, g.Metadata, w.Type, *w.Content, w.Metadata)
				}
			}
		}
	})
}

func docsString(ds []documents.Document) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(" " + string(d.Type) + ":" + strconv.Quote(deref(d.Content)))
	}
	return b.String()
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// refFence is an open fence of the reference splitter.
type refFence struct {
	char   byte
	length int
	indent int
	list   int
	info   string
}

// refDocs splits one whole assistant message into text, code_block and
// code_reference documents by the documented rules, line by line, without
// streaming:
//   - a fence opens on a line of up to 3 spaces and 3 or more ` or ~; a
//     backtick fence's info string holds no backtick; in a list item (see
//     ListState) it may instead be indented from the content column of the
//     innermost item it is indented into to 3 spaces past it, and a list
//     item may open with one ("1. ```bash"): the markers are prose;
//   - it closes on a line of as many spaces as it could open with and at
//     least as many of the same character, then only spaces, tabs or CRs;
//     or at the end of the text;
//   - code content is its lines, each without up to the opener's indent in
//     spaces, and the line breaks between them ("\n" or "\r\n"), not the
//     last line's; a block that is empty or only whitespace makes no
//     document;
//   - prose between fences is one text document unless it is only
//     whitespace; blank lines before it and whitespace at its end drop.
//
// It also checks that the documents and the fence lines hold every
// non-whitespace byte of msg, in order.
func refDocs(msg, mode string) ([]documents.Document, error) {
	var docs []documents.Document
	var covered strings.Builder
	add := func(typ documents.Type, content string, meta any) {
		b, err := json.Marshal(meta, jsontext.AllowInvalidUTF8(true))
		if err != nil {
			panic(err)
		}
		docs = append(docs, documents.Document{Type: typ, Content: &content, Metadata: b})
		covered.WriteString(content)
	}
	var prose strings.Builder
	flushProse := func() {
		t := prose.String()
		prose.Reset()
		i := 0
		for i < len(t) && isASCIISpace(t[i]) {
			i++
		}
		if i == len(t) {
			return
		}
		if j := strings.LastIndexByte(t[:i], '\n'); j >= 0 {
			t = t[j+1:]
		}
		add(documents.TypeText, strings.TrimRight(t, " \t\n\r\v\f"), documents.TextMeta{Format: "markdown"})
	}
	var open *refFence
	var code []string // each line with the break that ends it
	flushCode := func() {
		content := ""
		if n := len(code); n > 0 {
			last := strings.TrimSuffix(code[n-1], "\n")
			if last != code[n-1] {
				last = strings.TrimSuffix(last, "\r")
			}
			content = strings.Join(code[:n-1], "") + last
		}
		code = nil
		if nonSpace(content) == "" {
			return
		}
		if file, start, end, ok := refInfo(open.info); ok {
			add(documents.TypeCodeReference, content, documents.CodeReferenceMeta{FilePath: file, StartLine: start, EndLine: end, Language: translate.LanguageOf(file)})
			return
		}
		lang := open.info
		if i := strings.IndexAny(lang, " \t{"); i >= 0 {
			lang = lang[:i]
		}
		lang = strings.ToLower(lang)
		purpose := "new_code"
		switch {
		case mode == "ask" || mode == "plan":
			purpose = "suggestion"
		case slices.Contains([]string{"", "console", "output", "text", "plaintext", "txt", "log", "shell-session"}, lang):
			purpose = "example"
		}
		add(documents.TypeCodeBlock, content, documents.CodeBlockMeta{Language: lang, Purpose: purpose})
	}
	var list translate.ListState
	for _, ln := range strings.SplitAfter(msg, "\n") {
		if ln == "" {
			continue
		}
		body := strings.TrimSuffix(ln, "\n")
		if open == nil {
			if f, ok := refOpen(body, 3+list.Col()); ok && list.FenceAt(f.indent) {
				flushProse()
				covered.WriteString(body)
				list = list.FenceOpened(f.indent)
				f.list = list.Col()
				open = &f
				continue
			}
			if next, at := list.ItemFence(body); at > 0 {
				if f, ok := refOpen(body[at:], 0); ok {
					prose.WriteString(body[:at])
					flushProse()
					covered.WriteString(body[at:])
					list = next.FenceOpened(at)
					f.indent, f.list = at, list.Col()
					open = &f
					continue
				}
			}
			prose.WriteString(ln)
			list = list.After(body)
			continue
		}
		if refCloses(body, open) {
			flushCode()
			covered.WriteString(body)
			open = nil
			continue
		}
		strip := 0
		for strip < open.indent && strip < len(body) && body[strip] == ' ' {
			strip++
		}
		code = append(code, ln[strip:])
	}
	if open != nil {
		flushCode()
	}
	flushProse()
	if a, b := nonSpace(msg), nonSpace(covered.String()); a != b {
		return nil, errors.New("refDocs lost text: the documents and fence lines hold " + strconv.Quote(b) + ", the message " + strconv.Quote(a))
	}
	return docs, nil
}

func refOpen(line string, maxIndent int) (refFence, bool) {
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
	}
	if i > maxIndent || i == len(line) || (line[i] != '`' && line[i] != '~') {
		return refFence{}, false
	}
	c := line[i]
	j := i
	for j < len(line) && line[j] == c {
		j++
	}
	info := strings.TrimSpace(line[j:])
	if j-i < 3 || (c == '`' && strings.Contains(info, "`")) {
		return refFence{}, false
	}
	return refFence{char: c, length: j - i, indent: i, info: info}, true
}

func refCloses(line string, f *refFence) bool {
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
	}
	if i > 3+f.list {
		return false
	}
	j := i
	for j < len(line) && line[j] == f.char {
		j++
	}
	return j-i >= f.length && strings.Trim(line[j:], " \t\r") == ""
}

// refInfo reads a start:end:path info string.
func refInfo(info string) (file string, start, end int, ok bool) {
	a, rest, ok1 := strings.Cut(info, ":")
	b, p, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || p == "" {
		return "", 0, 0, false
	}
	s, err1 := strconv.Atoi(a)
	e, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || s < 0 || e < s {
		return "", 0, 0, false
	}
	return strings.TrimSpace(p), s, e, true
}

func isASCIISpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func nonSpace(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if !isASCIISpace(s[i]) {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// FuzzLexer checks that how a message is split into writes does not change
// what the lexer finds, and that its report is well formed: fences open and
// close in pairs and the message ends once, last.
func FuzzLexer(f *testing.F) {
	_, texts := goldenInputs(f)
	for i, s := range append(texts, fenceTexts...) {
		f.Add(s, uint64(i))
	}
	f.Fuzz(func(t *testing.T, text string, seed uint64) {
		whole := translate.LexChunks([]string{text})
		split := translate.LexChunks(chunks(text, seed))
		if !slices.Equal(whole, split) {
			t.Fatalf("written whole: %q\nwritten in pieces: %q", whole, split)
		}
		open := false
		for i, c := range whole {
			switch {
			case strings.HasPrefix(c, "open:"):
				if open {
					t.Fatalf("call %d opens a fence inside a fence: %q", i+1, whole)
				}
				open = true
			case c == "close":
				if !open {
					t.Fatalf("call %d closes no fence: %q", i+1, whole)
				}
				open = false
			case strings.HasPrefix(c, "code:") && !open:
				t.Fatalf("call %d is code outside a fence: %q", i+1, whole)
			case strings.HasPrefix(c, "prose:") && open:
				t.Fatalf("call %d is prose inside a fence: %q", i+1, whole)
			case c == "end" && i != len(whole)-1:
				t.Fatalf("end is not last: %q", whole)
			}
		}
		if open || len(whole) == 0 || whole[len(whole)-1] != "end" {
			t.Fatalf("the message does not end cleanly: %q", whole)
		}
	})
}
