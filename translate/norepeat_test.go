package translate_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/openai"
	"github.com/docstream/docstream/sse"
	"github.com/docstream/docstream/translate"
)

// The dialects of agent lines a generated turn is written in.
const (
	dialectCurrent    = iota // tool_call/started, message objects, timestamp_ms on deltas
	dialectHyphenated        // tool-call-started, "text" on deltas
	dialectPayload           // every member inside "payload"
	dialects
)

// The shapes of the complete assistant message that ends a generated turn.
const (
	shapeNone      = iota
	shapeSegment   // the segment since the last tool call
	shapeWhole     // the whole turn's text so far, across tool calls
	shapeDifferent // the turn with a sentence reworded, and one more
	shapes
)

var shapeNames = [...]string{"none", "segment", "whole", "different"}

// genTurn is a generated agent turn and the sentences its deltas streamed.
type genTurn struct {
	input     string
	sentences []string
}

// lineWriter writes agent lines of one dialect.
type lineWriter struct {
	dialect int
	b       strings.Builder
	ts      int64
}

func (w *lineWriter) line(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	w.b.Write(b)
	w.b.WriteByte('\n')
}

type obj = map[string]any

func textMessage(t string) obj {
	return obj{"role": "assistant", "content": []obj{{"type": "text", "text": t}}}
}

// delta writes a text delta.
func (w *lineWriter) delta(t string) {
	w.ts++
	switch w.dialect {
	case dialectCurrent:
		w.line(obj{"type": "assistant", "message": textMessage(t), "session_id": "s-1", "timestamp_ms": w.ts})
	case dialectHyphenated:
		w.line(obj{"type": "assistant", "text": t, "timestamp_ms": w.ts})
	case dialectPayload:
		w.line(obj{"type": "assistant", "payload": obj{"message": obj{"content": []obj{{"type": "text", "text": t}}}, "timestamp_ms": w.ts}})
	}
}

// message writes a complete assistant message (no timestamp_ms); in the
// current dialect, with mcid, it is the flush before a tool call.
func (w *lineWriter) message(t, mcid string) {
	switch w.dialect {
	case dialectCurrent:
		m := obj{"type": "assistant", "message": textMessage(t), "session_id": "s-1"}
		if mcid != "" {
			w.ts++
			m["model_call_id"], m["timestamp_ms"] = mcid, w.ts
		}
		w.line(m)
	case dialectHyphenated:
		w.line(obj{"type": "assistant", "message": textMessage(t)})
	case dialectPayload:
		w.line(obj{"type": "assistant", "payload": obj{"message": obj{"content": t}}})
	}
}

// tool writes a shell call, started and completed.
func (w *lineWriter) tool(id string) {
	switch w.dialect {
	case dialectCurrent:
		w.line(obj{"type": "tool_call", "subtype": "started", "call_id": id, "tool_call": obj{"shellToolCall": obj{"args": obj{"command": "make"}}}})
		w.line(obj{"type": "tool_call", "subtype": "completed", "call_id": id, "tool_call": obj{"shellToolCall": obj{"args": obj{"command": "make"},
			"result": obj{"success": obj{"exitCode": 0, "stdout": "ok\n", "stderr": ""}}}}})
	case dialectHyphenated:
		w.line(obj{"type": "tool-call-started", "tool_name": "Shell", "tool_call_id": id, "parameters": obj{"command": "make"}})
		w.line(obj{"type": "tool-call-completed", "tool_name": "Shell", "tool_call_id": id, "result": obj{"success": true, "output": "ok", "exit_code": 0}})
	case dialectPayload:
		w.line(obj{"type": "tool_call", "subtype": "started", "payload": obj{"toolCall": obj{"id": id, "shellToolCall": obj{"args": obj{"command": "make"}}}}})
		w.line(obj{"type": "tool_call", "subtype": "completed", "payload": obj{"toolCall": obj{"id": id, "result": obj{"exitCode": 0, "stdout": "ok\n", "stderr": ""}}}})
	}
}

// result writes the result line.
func (w *lineWriter) result(t string) {
	switch w.dialect {
	case dialectPayload:
		w.line(obj{"type": "result", "subtype": "success", "payload": obj{"is_error": false, "result": t}})
	default:
		w.line(obj{"type": "result", "subtype": "success", "is_error": false, "result": t, "session_id": "s-1"})
	}
}

var words = []string{"cart", "checkout", "invoice", "parser", "router", "cache", "schema", "worker", "queue", "ledger"}

// generateTurn makes a turn of text segments streamed as deltas, tool calls
// between them, complete messages of the given shape, and a result.
func generateTurn(seed uint64, dialect, shape int) genTurn {
	r := rand.New(rand.NewPCG(seed, uint64(dialect)<<8|uint64(shape)))
	w := &lineWriter{dialect: dialect}
	w.line(obj{"type": "system", "subtype": "init", "session_id": "s-1", "model": "m", "cwd": "/w"})
	var g genTurn
	var segs []string
	nseg := 1 + r.IntN(4)
	joiner := []string{"", "\n\n", " "}[r.IntN(3)]
	whole := func() string { return strings.Join(segs, joiner) }
	for i := range nseg {
		if i > 0 {
			w.tool(fmt.Sprintf("call-%d", i))
		}
		var sb strings.Builder
		for k := range 1 + r.IntN(3) {
			if k > 0 {
				sb.WriteString([]string{" ", "\n", "\n\n"}[r.IntN(3)])
			}
			s := fmt.Sprintf("Step s%dn%d checks the %s and the %s.", i, k, words[r.IntN(len(words))], words[r.IntN(len(words))])
			g.sentences = append(g.sentences, s)
			sb.WriteString(s)
		}
		seg := sb.String()
		segs = append(segs, seg)
		for rest := seg; rest != ""; {
			n := min(len(rest), 1+r.IntN(12))
			w.delta(rest[:n])
			rest = rest[n:]
		}
		// Before a tool call the agent may flush the segment, or the
		// turn so far; both are repeats.
		if i < nseg-1 && r.IntN(2) == 0 {
			flush := seg
			if r.IntN(2) == 0 {
				flush = whole()
			}
			w.message(flush, fmt.Sprintf("m-%d", i))
		}
	}
	switch shape {
	case shapeSegment:
		w.message(segs[len(segs)-1], "")
	case shapeWhole:
		w.message(whole(), "")
	case shapeDifferent:
		all := strings.Join(segs, " ")
		old := g.sentences[r.IntN(len(g.sentences))]
		all = strings.Replace(all, old, strings.Replace(old, "checks", "rechecks", 1), 1)
		w.message(all+" Finally the build is green again.", "")
	}
	switch r.IntN(3) {
	case 0:
		w.result(strings.Join(segs, "")) // what the agent reports: every segment, joined
	case 1:
		w.result(whole() + " And one more thing was added here.")
	default:
		w.result("")
	}
	g.input = w.b.String()
	return g
}

// surfaces returns the text a client reads on each surface: the documents
// of the ChatResponse, the deltas of the SSE frames, the OpenAI markdown.
func surfaces(tb testing.TB, evs []documents.Event) map[string]string {
	tb.Helper()
	var docs []string
	for _, d := range fold(evs).Documents {
		if d.Content != nil && d.Type != documents.TypeError {
			docs = append(docs, *d.Content)
		}
	}
	var frames strings.Builder
	r := &openai.Renderer{Mode: openai.RenderMarkdown, Reasoning: openai.ReasoningOff}
	var md strings.Builder
	for i, ev := range evs {
		f, err := sse.NewFrame(i+1, ev)
		if err != nil {
			tb.Fatalf("event %d: %v", i+1, err)
		}
		back, err := sse.DecodeFrame(f)
		if err != nil {
			tb.Fatalf("frame %d: %v", i+1, err)
		}
		if d, ok := back.(documents.ContentDelta); ok {
			frames.WriteString(d.Delta)
		}
		if e, ok := back.(documents.DocumentEnd); ok {
			_ = e
			frames.WriteString("\x00")
		}
		for _, p := range r.Event(back) {
			md.WriteString(p.Content)
		}
	}
	return map[string]string{"documents": strings.Join(docs, "\x00"), "sse": frames.String(), "openai": md.String()}
}

// checkNoRepeat translates a generated turn and checks that each sentence
// its deltas streamed is on every surface exactly once.
func checkNoRepeat(t *testing.T, g genTurn) {
	t.Helper()
	opts := translate.Options{ResponseID: testResponseID, Created: testCreated}
	evs, err := translateReader(strings.NewReader(g.input), opts, translate.End{})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkStream(evs, opts); err != nil {
		t.Fatalf("stream: %v\n%s", err, g.input)
	}
	for name, text := range surfaces(t, evs) {
		for _, s := range g.sentences {
			if n := strings.Count(text, s); n != 1 {
				t.Fatalf("%s: %q is there %d times, want once:\n%s\ninput:\n%s", name, s, n, text, g.input)
			}
		}
	}
}

// TestNeverRepeatText generates turns in every dialect with each shape of
// final message and checks that no sentence of the deltas is said twice,
// nor lost, on any surface.
func TestNeverRepeatText(t *testing.T) {
	n := 300
	if testing.Short() {
		n = 50
	}
	for dialect := range dialects {
		for shape := range shapes {
			t.Run(fmt.Sprintf("dialect%d/%s", dialect, shapeNames[shape]), func(t *testing.T) {
				t.Parallel()
				for seed := range uint64(n) {
					checkNoRepeat(t, generateTurn(seed, dialect, shape))
				}
			})
		}
	}
}

// FuzzNeverRepeatText is TestNeverRepeatText with the fuzzer choosing the
// turn; the generated turns are its seeds.
func FuzzNeverRepeatText(f *testing.F) {
	for seed := range uint64(8) {
		for dialect := range dialects {
			for shape := range shapes {
				f.Add(seed, uint8(dialect), uint8(shape))
			}
		}
	}
	f.Fuzz(func(t *testing.T, seed uint64, dialect, shape uint8) {
		checkNoRepeat(t, generateTurn(seed, int(dialect%dialects), int(shape%shapes)))
	})
}
