package translate

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// NewDecoderSize is NewDecoder with a read buffer of bufSize bytes (at least
// 16), so that tests can send short lines through the long-line path.
func NewDecoderSize(r io.Reader, maxLine, bufSize int) *Decoder {
	d := NewDecoder(r, maxLine)
	d.br = bufio.NewReaderSize(r, bufSize)
	return d
}

// LexChunks feeds one message to the lexer in the given chunks and returns
// what it reports, one entry per sink call: "prose:…", "open:<char><length>
// indent=<n> info=<info>", "code:…", "close" and "end". Adjacent prose and
// code pieces are joined, since how text is split is not part of the result.
func LexChunks(chunks []string) []string {
	rec := &lexRecorder{}
	l := &lexer{sink: rec, state: lexLineStart}
	for _, c := range chunks {
		l.Write(c)
	}
	l.End()
	rec.add("end", "")
	return rec.calls
}

type lexRecorder struct{ calls []string }

func (r *lexRecorder) add(kind, s string) {
	if n := len(r.calls); n > 0 && (kind == "prose:" || kind == "code:") && strings.HasPrefix(r.calls[n-1], kind) {
		r.calls[n-1] += s
		return
	}
	r.calls = append(r.calls, kind+s)
}

func (r *lexRecorder) proseText(s string) { r.add("prose:", s) }
func (r *lexRecorder) openFence(f fence) {
	r.add("open:", strings.Repeat(string(f.char), f.length)+" indent="+strconv.Itoa(f.indent)+" info="+f.info)
}
func (r *lexRecorder) fenceText(s string) { r.add("code:", s) }
func (r *lexRecorder) closeFence()        { r.add("close", "") }

// ReadJSON runs the readers of tool calls and their arguments and results
// over b, which may be anything: they must not panic.
func ReadJSON(b []byte) {
	if jsontext.Value(b).Kind() == '{' && jsontext.Value(b).IsValid(decodeOpts) {
		w := agentLine{line: b}
		w.readTool(jsontext.NewDecoder(bytes.NewReader(b), decodeOpts))
		w.readInner(jsontext.NewDecoder(bytes.NewReader(b), decodeOpts), &ToolCall{})
		readFunction(jsontext.NewDecoder(bytes.NewReader(b), decodeOpts), &ToolCall{})
	}
	classifyResult(b)
	var a toolArgs
	readArgs(new(jsontext.Decoder), b, &a)
	var body toolBody
	unmarshal(b, &body)
	_ = errText(b)
	_, _ = errorText(b)
	if jsontext.Value(b).IsValid(decodeOpts) {
		_ = dedupe(b)
	}
}

// PairSurrogates is pairSurrogates: what the Segmenter makes of surrogates
// in WTF-8 in a text it gets whole.
func PairSurrogates(t string) string { return pairSurrogates(t) }

// ListState is listState, for the fuzz target's reference model.
type ListState struct{ s listState }

// After is listState.after, for a whole prose line without its "\n".
func (l ListState) After(line string) ListState {
	head := line[:min(len(line), 32)]
	return ListState{l.s.after([]byte(head), len(line) > len(head))}
}

// Col is the content column of the innermost open list item (0: none).
func (l ListState) Col() int { return l.s.top() }

// ItemFence is listState.itemFence, for a whole line.
func (l ListState) ItemFence(line string) (ListState, int) {
	s, at, _ := l.s.itemFence([]byte(line), true)
	return ListState{s}, at
}

// FenceAt is listState.fenceAt.
func (l ListState) FenceAt(indent int) bool { return l.s.fenceAt(indent) }

// FenceOpened is listState.fenceOpened.
func (l ListState) FenceOpened(indent int) ListState { return ListState{l.s.fenceOpened(indent)} }
