package translate

import (
	"io"
	"strconv"
	"strings"
)

// NewDecoderSize is NewDecoder with a read buffer of bufSize bytes (at least
// 16), so that tests can send short lines through the long-line path.
func NewDecoderSize(r io.Reader, maxLine, bufSize int) *Decoder {
	return newDecoder(r, maxLine, bufSize, bufSize)
}

// LexChunks feeds one message to the lexer in the given chunks and returns
// what it reports, one entry per sink call: "prose:…", "open:<char><length>
// indent=<n> info=<info>", "code:…", "close" and "end". Adjacent prose and
// code pieces are joined, since how text is split is not part of the result.
func LexChunks(chunks []string) []string {
	rec := &lexRecorder{}
	l := newLexer(rec)
	for _, c := range chunks {
		l.Write(c)
	}
	l.End()
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
func (r *lexRecorder) endMessage()        { r.add("end", "") }

// WalkJSON runs the walkers that read values cut from validated lines over
// b, which may be anything: they must stop, without panicking. It returns
// how many members and elements they reported.
func WalkJSON(b []byte) int {
	n := 0
	var walk func(v []byte, depth int)
	walk = func(v []byte, depth int) {
		if depth > 64 || len(v) == 0 {
			return
		}
		switch v[0] {
		case '{':
			eachMember(v, func(name, val []byte, start, end int) {
				n++
				_ = nameIs(name, "toolCallId")
				_ = v[start:end]
				walk(val, depth+1)
			})
		case '[':
			eachElement(v, func(elem []byte) {
				n++
				walk(elem, depth+1)
			})
		}
	}
	walk(b, 0)
	var tc ToolCall
	parseToolObject(b, &tc)
	classifyResult(b)
	stripToolCallID(b)
	var a toolArgs
	decodeArgs(b, &a)
	var body toolBody
	decodeBody(b, classShell, &body)
	decodeBody(b, classEdit, &body)
	_ = messageText(b)
	_ = contentText(b)
	var ns nameSet
	_ = ns.dedupe(b)
	return n
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

// ScanLine is the validating scan of a line: whether it is one JSON object,
// and whether the scan saw that an object in it may repeat a name.
func ScanLine(line []byte) (object, mayRepeat bool) {
	var ls lineScan
	object = isObjectLine(line, func([]byte, []byte, bool) {}, &ls)
	return object, ls.repeats
}

// LongBufCap is the capacity of the buffer a Decoder keeps for long lines.
func (d *Decoder) LongBufCap() int { return cap(d.buf) }
